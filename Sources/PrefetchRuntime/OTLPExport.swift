public import Metrics
import OTel
public import ServiceLifecycle
public import Tracing

/// Traces and metrics over OTLP/HTTP (protobuf), through swift-otel, for `prefetch serve --otlp`: where operators
/// already collect them. Where it sends is the OpenTelemetry SDK's own environment, read by swift-otel:
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (default `http://localhost:4318`; `/v1/traces` and `/v1/metrics` are appended),
/// or per signal `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, headers, timeouts,
/// `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_SERVICE_NAME` and the rest. Logs stay on stderr.
public struct OTLPExport: Sendable {
    /// The tracer whose spans are exported (the page open's spans, see `Orchestrator`).
    public let tracer: any Tracer
    /// The factory of the exported metrics: the same series `/metrics` shows, next to the Prometheus one.
    public let metrics: any MetricsFactory
    /// The exporters' background work: run before the application starts and stopped after it, so what the last
    /// requests made is flushed.
    public let services: [any Service]

    /// The exporters for `serviceName`, configured by the environment (see the type).
    /// - Throws: swift-otel's configuration errors (an environment value it cannot use).
    public static func make(serviceName: String = "prefetch") throws -> OTLPExport {
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.logs.enabled = false
        let (tracer, tracing) = try OTel.makeTracingBackend(configuration: configuration)
        let (metrics, exporting) = try OTel.makeMetricsBackend(configuration: configuration)
        return OTLPExport(tracer: tracer, metrics: metrics, services: [tracing, exporting])
    }
}
