public import Logging
public import Metrics
import PrefetchFetcher
public import ServiceLifecycle
public import Telemetry
public import Tracing

/// Traces and metrics over OTLP/HTTP (protobuf) for `prefetch serve --otlp`: where operators already collect them.
/// Where it sends is the OpenTelemetry SDK's own environment (``Telemetry/OTLPConfiguration``):
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (default `http://localhost:4318`; `/v1/traces` and `/v1/metrics` are appended), or
/// per signal `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, headers, timeouts,
/// `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_SERVICE_NAME` and the rest. Logs stay on stderr.
///
/// The exporter is the package's own (`Telemetry`): spans and metrics encoded in protobuf by hand and POSTed by a
/// libcurl fetcher of its own (thread `prefetch-otlp`), so every build has it and it adds no TLS or HTTP stack.
public struct OTLPExport: Sendable {
    /// The tracer whose spans are exported (the page open's spans, see `Orchestrator`).
    public let tracer: any Tracer
    /// The factory of the exported metrics: the same series `/metrics` shows, next to the Prometheus one.
    public let metrics: any MetricsFactory
    /// The exporters' background work (the fetcher they send through first, then the span and metric exporters):
    /// run before the application starts and stopped after it, so what the last requests made is flushed.
    public let services: [any Service]

    /// The export configuration `environment` gives for the service `serviceName` (unless `OTEL_SERVICE_NAME` says
    /// otherwise).
    /// - Throws: ``Telemetry/OTLPConfigurationError`` naming the variable whose value cannot be used.
    public static func configuration(
        environment: [String: String], serviceName: String = "prefetch"
    ) throws(OTLPConfigurationError)
        -> OTLPConfiguration
    {
        try OTLPConfiguration(environment: environment, serviceName: serviceName)
    }

    /// The exporters `configuration` describes. A signal switched off (`OTEL_TRACES_EXPORTER=none`,
    /// `OTEL_SDK_DISABLED=true`) gets the no-op tracer or metrics factory.
    public static func make(configuration: OTLPConfiguration, logger: Logger) -> OTLPExport {
        guard configuration.traces.isEnabled || configuration.metrics.isEnabled else {
            return OTLPExport(tracer: NoOpTracer(), metrics: NOOPMetricsHandler.instance, services: [])
        }
        // A handful of transfers: one export request per signal is in flight at a time.
        let fetcher = Fetcher(
            configuration: FetcherConfiguration(
                maxTransfers: 4, caBundlePath: configuration.certificatePath, userAgent: "prefetch-otlp/1", threadName: "prefetch-otlp"),
            logger: logger)
        let sender = FetcherSender(fetcher: fetcher, configuration: configuration)
        var services: [any Service] = [fetcher]
        var tracer: any Tracer = NoOpTracer()
        if configuration.traces.isEnabled {
            let exported = OTLPTracer(
                sampler: configuration.sampler, maxQueueSize: configuration.maxQueueSize,
                maxExportBatchSize: configuration.maxExportBatchSize)
            services.append(
                SpanExporter(
                    tracer: exported, resource: configuration.resource, scheduleDelay: configuration.scheduleDelay, sender: sender,
                    logger: logger))
            tracer = exported
        }
        var metrics: any MetricsFactory = NOOPMetricsHandler.instance
        if configuration.metrics.isEnabled {
            let factory = OTLPMetricsFactory()
            services.append(
                MetricExporter(
                    factory: factory, resource: configuration.resource, interval: configuration.metricExportInterval, sender: sender,
                    logger: logger))
            metrics = factory
        }
        return OTLPExport(tracer: tracer, metrics: metrics, services: services)
    }
}
