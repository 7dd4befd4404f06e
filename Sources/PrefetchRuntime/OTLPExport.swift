public import Metrics
public import ServiceLifecycle
public import Tracing

#if OTLP
import OTel
#endif

/// Traces and metrics over OTLP/HTTP (protobuf), through swift-otel, for `prefetch serve --otlp`: where operators
/// already collect them. Where it sends is the OpenTelemetry SDK's own environment, read by swift-otel:
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (default `http://localhost:4318`; `/v1/traces` and `/v1/metrics` are appended),
/// or per signal `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, headers, timeouts,
/// `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_SERVICE_NAME` and the rest. Logs stay on stderr.
///
/// Only in a build with the package's `OTLP` trait (`swift build --traits OTLP`; the Docker image and
/// scripts/test.sh build it): swift-otel's exporter brings AsyncHTTPClient, NIOSSL and protobuf, which a first
/// build of the demo does without. Without the trait ``isAvailable`` is false and `--otlp` is refused at startup
/// (``requireAvailable(_:)``).
public struct OTLPExport: Sendable {
    /// Whether this build can export (it was built with the `OTLP` trait).
    #if OTLP
    public static let isAvailable = true
    #else
    public static let isAvailable = false
    #endif

    /// What `--otlp` (or `PREFETCH_OTLP=1`) gets from a build without the trait.
    public static let unavailableMessage =
        "--otlp (or PREFETCH_OTLP=1) asks for OTLP export, but this build of prefetch has no OTLP export (built without the OTLP trait); build one with `swift build --traits OTLP` (the Docker image has it)"

    /// Refuses `--otlp` in a build without the trait (`available` is ``isAvailable`` but for tests).
    /// - Throws: ``OTLPExportUnavailable`` naming the flag and how to build with export.
    public static func requireAvailable(_ available: Bool = isAvailable) throws(OTLPExportUnavailable) {
        guard available else { throw OTLPExportUnavailable() }
    }

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
        #if OTLP
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.logs.enabled = false
        let (tracer, tracing) = try OTel.makeTracingBackend(configuration: configuration)
        let (metrics, exporting) = try OTel.makeMetricsBackend(configuration: configuration)
        return OTLPExport(tracer: tracer, metrics: metrics, services: [tracing, exporting])
        #else
        throw OTLPExportUnavailable()
        #endif
    }
}

/// `--otlp` in a build without the `OTLP` trait (see ``OTLPExport``).
public struct OTLPExportUnavailable: Error, CustomStringConvertible {
    public init() {}
    public var description: String { OTLPExport.unavailableMessage }
}
