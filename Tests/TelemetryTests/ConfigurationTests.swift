import Foundation
import HTTPTypes
import Testing

@testable import Telemetry

/// The OpenTelemetry environment as `prefetch serve --otlp` reads it: the defaults, the specification's rules for
/// endpoints and per-signal variables, and a bad value refused naming its variable.
@Suite struct ConfigurationTests {
    func configuration(_ environment: [String: String]) throws -> OTLPConfiguration {
        try OTLPConfiguration(environment: environment)
    }

    /// The error `environment` gets (failing the test when it is accepted).
    func refusal(_ environment: [String: String], sourceLocation: SourceLocation = #_sourceLocation) -> OTLPConfigurationError? {
        do {
            _ = try OTLPConfiguration(environment: environment)
            Issue.record("\(environment) was accepted", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }

    @Test func theDefaultsAreTheSpecificationsAndTheServicesName() throws {
        let defaults = try configuration([:])
        #expect(defaults.traces.url == "http://localhost:4318/v1/traces")
        #expect(defaults.metrics.url == "http://localhost:4318/v1/metrics")
        #expect(defaults.traces.isEnabled && defaults.metrics.isEnabled)
        #expect(defaults.traces.timeout == .seconds(10) && defaults.traces.headers.isEmpty)
        #expect(defaults.scheduleDelay == .seconds(5) && defaults.maxQueueSize == 2048 && defaults.maxExportBatchSize == 512)
        #expect(defaults.metricExportInterval == .seconds(60))
        #expect(defaults.sampler == .parentBased(root: .alwaysOn))
        #expect(defaults.serviceName == "prefetch")
        #expect(defaults.certificatePath == nil)
    }

    @Test func theSharedEndpointGetsEachSignalsPathAndAPerSignalOneIsUsedAsIs() throws {
        let shared = try configuration(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"])
        #expect(shared.traces.url == "http://collector:4318/v1/traces" && shared.metrics.url == "http://collector:4318/v1/metrics")
        let slash = try configuration(["OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example/otlp/"])
        #expect(slash.traces.url == "https://collector.example/otlp/v1/traces")
        let specific = try configuration([
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:9999/ingest",
        ])
        #expect(specific.traces.url == "http://traces:9999/ingest")
        #expect(specific.metrics.url == "http://collector:4318/v1/metrics")
        #expect(try configuration(["OTEL_EXPORTER_OTLP_ENDPOINT": ""]).traces.url == "http://localhost:4318/v1/traces", "empty is unset")
    }

    @Test func headersAreKeyValuePairsPercentDecodedAndPerSignalOnesReplaceTheShared() throws {
        let given = try configuration([
            "OTEL_EXPORTER_OTLP_HEADERS": "api-key = secret1 ,Authorization=Basic%20dXNlcjpwdw%3D%3D",
            "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "x-tenant=7",
        ])
        #expect(given.traces.headers[HTTPField.Name("api-key")!] == "secret1")
        #expect(given.traces.headers[.authorization] == "Basic dXNlcjpwdw==")
        #expect(given.metrics.headers == HTTPFields([HTTPField(name: HTTPField.Name("x-tenant")!, value: "7")]))
    }

    @Test func timeoutsServiceNameResourceAndBatchingAreRead() throws {
        let given = try configuration([
            "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "700", "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_BSP_MAX_QUEUE_SIZE": "64", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "16", "OTEL_METRIC_EXPORT_INTERVAL": "500",
            "OTEL_SERVICE_NAME": "prefetch-eu",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.name=ignored,team=web%2Fh5",
        ])
        #expect(given.traces.timeout == .milliseconds(2500) && given.metrics.timeout == .milliseconds(700))
        #expect(given.scheduleDelay == .milliseconds(100) && given.maxQueueSize == 64 && given.maxExportBatchSize == 16)
        #expect(given.metricExportInterval == .milliseconds(500))
        #expect(given.serviceName == "prefetch-eu", "OTEL_SERVICE_NAME wins over the resource attribute")
        let resource = Dictionary(given.resource.map { ($0.key, $0.value) }, uniquingKeysWith: { $1 })
        #expect(resource["deployment.environment"] == "prod" && resource["team"] == "web/h5")
        #expect(given.resource.filter { $0.key == "service.name" }.count == 1)
        #expect(try configuration(["OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes"]).serviceName == "from-attributes")
        #expect(try configuration(["OTEL_BSP_MAX_QUEUE_SIZE": "100"]).maxExportBatchSize == 100, "the batch is at most the queue")
    }

    @Test func samplersAndExportersAreChosenByName() throws {
        #expect(try configuration(["OTEL_TRACES_SAMPLER": "always_off"]).sampler == .alwaysOff)
        #expect(
            try configuration(["OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"]).sampler
                == .parentBased(root: .traceIDRatio(0.25)))
        let metricsOnly = try configuration(["OTEL_TRACES_EXPORTER": "none"])
        #expect(!metricsOnly.traces.isEnabled && metricsOnly.metrics.isEnabled)
        let off = try configuration(["OTEL_SDK_DISABLED": "TRUE"])
        #expect(!off.traces.isEnabled && !off.metrics.isEnabled)
    }

    @Test func aBadValueIsRefusedNamingItsVariableAndWhatIsWrong() throws {
        let cases: [([String: String], variable: String, mentions: String)] = [
            (["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            (["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"], "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"], "OTEL_EXPORTER_OTLP_ENDPOINT", "URL"),
            (["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "ftp://collector/"], "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "URL"),
            (["OTEL_EXPORTER_OTLP_TIMEOUT": "10s"], "OTEL_EXPORTER_OTLP_TIMEOUT", "milliseconds"),
            (["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "0"], "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "milliseconds"),
            (["OTEL_BSP_SCHEDULE_DELAY": "-5"], "OTEL_BSP_SCHEDULE_DELAY", "milliseconds"),
            (["OTEL_BSP_MAX_QUEUE_SIZE": "lots"], "OTEL_BSP_MAX_QUEUE_SIZE", "positive integer"),
            (["OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "20"], "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "queue"),
            (["OTEL_METRIC_EXPORT_INTERVAL": "1.5"], "OTEL_METRIC_EXPORT_INTERVAL", "milliseconds"),
            (["OTEL_RESOURCE_ATTRIBUTES": "team"], "OTEL_RESOURCE_ATTRIBUTES", "key=value"),
            (["OTEL_RESOURCE_ATTRIBUTES": "a=%zz"], "OTEL_RESOURCE_ATTRIBUTES", "percent"),
            (["OTEL_TRACES_SAMPLER": "jaeger_remote"], "OTEL_TRACES_SAMPLER", "parentbased_always_on"),
            (["OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"], "OTEL_TRACES_SAMPLER_ARG", "0 to 1"),
            (["OTEL_METRICS_EXPORTER": "prometheus"], "OTEL_METRICS_EXPORTER", "otlp or none"),
            (["OTEL_SDK_DISABLED": "yes"], "OTEL_SDK_DISABLED", "true or false"),
            (["OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"], "OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"),
        ]
        for (environment, variable, mentions) in cases {
            let error = refusal(environment)
            #expect(error?.variable == variable, "\(environment): \(String(describing: error))")
            #expect(error?.description.hasPrefix("\(variable): ") == true)
            #expect(error?.description.contains(mentions) == true, "\(environment): \(String(describing: error))")
        }
    }

    /// Header values are often credentials: a refusal names the variable and the entry, never a value.
    @Test func aBadHeaderIsRefusedWithoutRepeatingAnyValue() throws {
        let noEquals = refusal(["OTEL_EXPORTER_OTLP_HEADERS": "api-key=fine,Bearer hunter2"])
        #expect(noEquals?.variable == "OTEL_EXPORTER_OTLP_HEADERS")
        #expect(noEquals?.description.contains("entry 2") == true)
        #expect(noEquals?.description.contains("hunter2") == false, "\(String(describing: noEquals))")
        let badName = refusal(["OTEL_EXPORTER_OTLP_TRACES_HEADERS": "bad name=hunter2"])
        #expect(badName?.variable == "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        #expect(badName?.description.contains("hunter2") == false)
        let badValue = refusal(["OTEL_EXPORTER_OTLP_HEADERS": "api-key=line%0Abreak"])
        #expect(badValue?.description.contains("api-key") == true && badValue?.description.contains("break") == false)
    }

    @Test func aCertificateFileIsTheCollectorsCABundle() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("otlp-ca-\(UUID().uuidString).pem").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data("pem".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try configuration(["OTEL_EXPORTER_OTLP_CERTIFICATE": path]).certificatePath == path)
        #expect(
            try configuration(["OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": path, "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE": path])
                .certificatePath == path)
        let split = refusal(["OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": path])
        #expect(split?.variable == "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "one signal's own bundle, the other's the system's")
    }
}
