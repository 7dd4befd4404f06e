import Foundation
public import HTTPTypes
import PrefetchCore

/// Where and how traces and metrics are exported over OTLP/HTTP (protobuf), read from the standard OpenTelemetry
/// SDK environment (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/). Every value
/// is checked when it is read: a bad one is an ``OTLPConfigurationError`` naming the variable and what is wrong, so
/// a service refuses to start rather than export nothing. An empty variable counts as unset, as the specification
/// says.
///
/// Read: `OTEL_SDK_DISABLED`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`,
/// `OTEL_TRACES_SAMPLER_ARG`, `OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER` (`otlp` or `none`),
/// `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`,
/// `OTEL_METRIC_EXPORT_INTERVAL`, and `OTEL_EXPORTER_OTLP_` `ENDPOINT`, `HEADERS`, `TIMEOUT`, `PROTOCOL` (only
/// `http/protobuf`) and `CERTIFICATE`, each also per signal (`OTEL_EXPORTER_OTLP_TRACES_...`,
/// `OTEL_EXPORTER_OTLP_METRICS_...`), which wins over the shared one. Not read: compression (bodies go
/// uncompressed) and client certificates.
public struct OTLPConfiguration: Sendable {
    /// Where one signal goes.
    public struct Destination: Sendable, Equatable {
        /// Whether the signal is exported at all (`OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER`).
        public var isEnabled: Bool
        /// The URL an export request is POSTed to.
        public var url: String
        /// Headers added to every export request (`OTEL_EXPORTER_OTLP_HEADERS`).
        public var headers: HTTPFields
        /// How long one export request may take, connecting included (`OTEL_EXPORTER_OTLP_TIMEOUT`).
        public var timeout: Duration

        /// A destination of these parts.
        public init(isEnabled: Bool = true, url: String, headers: HTTPFields = [:], timeout: Duration = .seconds(10)) {
            self.isEnabled = isEnabled
            self.url = url
            self.headers = headers
            self.timeout = timeout
        }
    }

    /// Which spans are recorded and exported (`OTEL_TRACES_SAMPLER`): the specification's samplers but the remote
    /// ones.
    public indirect enum Sampler: Sendable, Equatable {
        /// Every span.
        case alwaysOn
        /// No span (contexts still propagate).
        case alwaysOff
        /// A fixed share of traces, decided by the trace id alone, so every service of a trace agrees.
        case traceIDRatio(Double)
        /// A span with a parent follows the parent's sampled flag; a root is decided by `root`.
        case parentBased(root: Sampler)
    }

    /// Traces.
    public var traces: Destination
    /// Metrics.
    public var metrics: Destination
    /// The CA bundle (PEM) export connections verify the collector with (`OTEL_EXPORTER_OTLP_CERTIFICATE`); nil
    /// for the system's. Verification itself is never switched off.
    public var certificatePath: String?
    /// The resource every span and metric is exported with: `service.name` and `OTEL_RESOURCE_ATTRIBUTES`, in order.
    public var resource: [(key: String, value: String)]
    /// The sampler (default: parent-based, roots always sampled).
    public var sampler: Sampler
    /// How long a finished span may wait before its batch is exported (`OTEL_BSP_SCHEDULE_DELAY`, default 5 s).
    public var scheduleDelay: Duration
    /// Finished spans kept while waiting for export; past it new spans are dropped and counted
    /// (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048).
    public var maxQueueSize: Int
    /// Spans per export request (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, default 512, at most the queue size).
    public var maxExportBatchSize: Int
    /// Time between two metric exports (`OTEL_METRIC_EXPORT_INTERVAL`, default 60 s).
    public var metricExportInterval: Duration

    /// The service name the resource carries.
    public var serviceName: String {
        resource.first { $0.key == "service.name" }?.value ?? ""
    }

    /// The defaults: both signals to `http://localhost:4318`, the service named `serviceName`.
    public init(serviceName: String = "prefetch") {
        traces = Destination(url: "http://localhost:4318/v1/traces")
        metrics = Destination(url: "http://localhost:4318/v1/metrics")
        resource = Self.resource(serviceName: serviceName, attributes: [])
        sampler = .parentBased(root: .alwaysOn)
        scheduleDelay = .seconds(5)
        maxQueueSize = 2048
        maxExportBatchSize = 512
        metricExportInterval = .seconds(60)
    }

    /// The configuration `environment` gives, every value checked; `serviceName` unless `OTEL_SERVICE_NAME` (or
    /// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) names the service.
    /// - Throws: ``OTLPConfigurationError`` naming the first variable whose value cannot be used.
    public init(environment: [String: String], serviceName: String = "prefetch") throws(OTLPConfigurationError) {
        self.init(serviceName: serviceName)
        let variables = Variables(values: environment)
        let disabled = try variables.bool("OTEL_SDK_DISABLED") ?? false

        let attributes = try variables.keyValueList("OTEL_RESOURCE_ATTRIBUTES", secret: false) ?? []
        let name = variables["OTEL_SERVICE_NAME"] ?? attributes.last { $0.key == "service.name" }?.value ?? serviceName
        resource = Self.resource(serviceName: name, attributes: attributes)

        sampler = try variables.sampler()
        if let delay = try variables.milliseconds("OTEL_BSP_SCHEDULE_DELAY") { scheduleDelay = delay }
        if let size = try variables.positiveInteger("OTEL_BSP_MAX_QUEUE_SIZE") { maxQueueSize = size }
        if let size = try variables.positiveInteger("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") {
            guard size <= maxQueueSize else {
                throw OTLPConfigurationError(
                    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "\(size) is larger than the queue (OTEL_BSP_MAX_QUEUE_SIZE, \(maxQueueSize))")
            }
            maxExportBatchSize = size
        } else {
            maxExportBatchSize = min(maxExportBatchSize, maxQueueSize)
        }
        if let interval = try variables.milliseconds("OTEL_METRIC_EXPORT_INTERVAL") { metricExportInterval = interval }

        traces = try variables.destination(signal: "TRACES", path: "v1/traces", exporter: "OTEL_TRACES_EXPORTER", disabled: disabled)
        metrics = try variables.destination(signal: "METRICS", path: "v1/metrics", exporter: "OTEL_METRICS_EXPORTER", disabled: disabled)
        certificatePath = try variables.certificate()
    }

    private static func resource(serviceName: String, attributes: [(key: String, value: String)]) -> [(key: String, value: String)] {
        var resource: [(key: String, value: String)] = [
            ("service.name", serviceName), ("telemetry.sdk.name", "prefetch"), ("telemetry.sdk.language", "swift"),
        ]
        for (key, value) in attributes {
            if let index = resource.firstIndex(where: { $0.key == key }) {
                if key != "service.name" { resource[index].value = value }
            } else {
                resource.append((key, value))
            }
        }
        return resource
    }
}

/// An OpenTelemetry environment variable whose value cannot be used: which one, and what is wrong with it (a
/// header's value is never repeated: it may be a credential).
public struct OTLPConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The variable, e.g. `OTEL_BSP_MAX_QUEUE_SIZE`.
    public var variable: String
    /// What is wrong with its value.
    public var problem: String

    /// The error for `variable`.
    public init(_ variable: String, _ problem: String) {
        self.variable = variable
        self.problem = problem
    }

    /// "VARIABLE: problem".
    public var description: String { "\(variable): \(problem)" }
}

/// The environment, with the specification's value types.
private struct Variables {
    let values: [String: String]

    /// A set, non-empty value.
    subscript(name: String) -> String? {
        guard let value = values[name], !value.isEmpty else { return nil }
        return value
    }

    /// The per-signal variable when set, else the shared one: its name and value.
    func signal(_ signal: String, _ suffix: String) -> (name: String, value: String)? {
        for name in ["OTEL_EXPORTER_OTLP_\(signal)_\(suffix)", "OTEL_EXPORTER_OTLP_\(suffix)"] {
            if let value = self[name] { return (name, value) }
        }
        return nil
    }

    func bool(_ name: String) throws(OTLPConfigurationError) -> Bool? {
        guard let value = self[name] else { return nil }
        switch value.lowercased() {
        case "true": return true
        case "false": return false
        default: throw OTLPConfigurationError(name, "\"\(value)\" is not true or false")
        }
    }

    func positiveInteger(_ name: String) throws(OTLPConfigurationError) -> Int? {
        guard let value = self[name] else { return nil }
        guard let number = Int(value.trimmingCharacters(in: .whitespaces)), number > 0 else {
            throw OTLPConfigurationError(name, "\"\(value)\" is not a positive integer")
        }
        return number
    }

    func milliseconds(_ name: String, value given: String? = nil) throws(OTLPConfigurationError) -> Duration? {
        guard let value = given ?? self[name] else { return nil }
        guard let number = Int(value.trimmingCharacters(in: .whitespaces)), number > 0 else {
            throw OTLPConfigurationError(name, "\"\(value)\" is not a positive whole number of milliseconds")
        }
        return .milliseconds(number)
    }

    /// A comma-separated `key=value` list (W3C Baggage's shape, as `OTEL_EXPORTER_OTLP_HEADERS` and
    /// `OTEL_RESOURCE_ATTRIBUTES` are): keys and values trimmed, values percent-decoded. A `secret` list's values
    /// never appear in an error.
    func keyValueList(
        _ name: String, value given: String? = nil, secret: Bool
    ) throws(OTLPConfigurationError) -> [(
        key: String, value: String
    )]? {
        guard let text = given ?? self[name] else { return nil }
        var pairs: [(key: String, value: String)] = []
        for (index, entry) in text.split(separator: ",", omittingEmptySubsequences: false).enumerated() {
            let entry = entry.trimmingCharacters(in: .whitespaces)
            if entry.isEmpty { continue }
            let position = "entry \(index + 1)"
            guard let equals = entry.firstIndex(of: "=") else {
                throw OTLPConfigurationError(name, "\(position) \(secret ? "" : "\"\(entry)\" ")is not key=value")
            }
            let key = entry[..<equals].trimmingCharacters(in: .whitespaces)
            let raw = entry[entry.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty else { throw OTLPConfigurationError(name, "\(position) has no key before \"=\"") }
            guard let value = raw.removingPercentEncoding else {
                throw OTLPConfigurationError(name, "\(position) (\(key)) has a value with a malformed percent-encoding")
            }
            pairs.append((key, value))
        }
        return pairs
    }

    func sampler() throws(OTLPConfigurationError) -> OTLPConfiguration.Sampler {
        let name = "OTEL_TRACES_SAMPLER"
        let choice = self[name] ?? "parentbased_always_on"
        func ratio() throws(OTLPConfigurationError) -> Double {
            guard let text = self["OTEL_TRACES_SAMPLER_ARG"] else { return 1 }
            guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value >= 0, value <= 1 else {
                throw OTLPConfigurationError("OTEL_TRACES_SAMPLER_ARG", "\"\(text)\" is not a sampling probability from 0 to 1")
            }
            return value
        }
        switch choice {
        case "always_on": return .alwaysOn
        case "always_off": return .alwaysOff
        case "traceidratio": return .traceIDRatio(try ratio())
        case "parentbased_always_on": return .parentBased(root: .alwaysOn)
        case "parentbased_always_off": return .parentBased(root: .alwaysOff)
        case "parentbased_traceidratio": return .parentBased(root: .traceIDRatio(try ratio()))
        default:
            throw OTLPConfigurationError(
                name,
                "\"\(choice)\" is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
            )
        }
    }

    func destination(
        signal: String, path: String, exporter: String, disabled: Bool
    ) throws(OTLPConfigurationError)
        -> OTLPConfiguration.Destination
    {
        var enabled = !disabled
        if let value = self[exporter] {
            switch value {
            case "otlp": break
            case "none": enabled = false
            default: throw OTLPConfigurationError(exporter, "\"\(value)\" is not otlp or none (the only exporters of this service)")
            }
        }
        if case let (name, value)? = self.signal(signal, "PROTOCOL"), value != "http/protobuf" {
            throw OTLPConfigurationError(name, "\"\(value)\" is not supported: this service exports OTLP over http/protobuf only")
        }
        let url: String
        if let value = self["OTEL_EXPORTER_OTLP_\(signal)_ENDPOINT"] {
            try Self.checkURL(value, variable: "OTEL_EXPORTER_OTLP_\(signal)_ENDPOINT")
            url = value
        } else {
            let base = self["OTEL_EXPORTER_OTLP_ENDPOINT"] ?? "http://localhost:4318"
            try Self.checkURL(base, variable: "OTEL_EXPORTER_OTLP_ENDPOINT")
            url = base.hasSuffix("/") ? base + path : base + "/" + path
        }
        var headers = HTTPFields()
        if case let (name, value)? = self.signal(signal, "HEADERS") {
            for (key, headerValue) in try keyValueList(name, value: value, secret: true) ?? [] {
                guard let field = HTTPField.Name(key) else {
                    throw OTLPConfigurationError(name, "\"\(key)\" is not a valid header name")
                }
                guard HTTPField.isValidValue(headerValue) else {
                    throw OTLPConfigurationError(name, "the value of \(key) is not a valid header value")
                }
                headers.append(HTTPField(name: field, value: headerValue))
            }
        }
        var timeout = Duration.seconds(10)
        if case let (name, value)? = self.signal(signal, "TIMEOUT"), let given = try milliseconds(name, value: value) { timeout = given }
        return OTLPConfiguration.Destination(isEnabled: enabled, url: url, headers: headers, timeout: timeout)
    }

    func certificate() throws(OTLPConfigurationError) -> String? {
        let given = ["TRACES_", "METRICS_", ""].compactMap { prefix in
            self["OTEL_EXPORTER_OTLP_\(prefix)CERTIFICATE"].map { (name: "OTEL_EXPORTER_OTLP_\(prefix)CERTIFICATE", path: $0) }
        }
        guard let first = given.first else { return nil }
        let shared = self["OTEL_EXPORTER_OTLP_CERTIFICATE"]
        let traces = self["OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"] ?? shared
        let metrics = self["OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE"] ?? shared
        guard traces == metrics else {
            throw OTLPConfigurationError(
                first.name,
                "differs from the other signal's CA bundle; both signals share one connection pool here, so set OTEL_EXPORTER_OTLP_CERTIFICATE alone"
            )
        }
        guard FileManager.default.isReadableFile(atPath: first.path) else {
            throw OTLPConfigurationError(first.name, "\(first.path) is not a readable file")
        }
        return first.path
    }

    static func checkURL(_ text: String, variable: String) throws(OTLPConfigurationError) {
        do {
            _ = try HTTPURL(parsing: text)
        } catch {
            throw OTLPConfigurationError(variable, "not an http(s) URL: \(error)")
        }
    }
}
