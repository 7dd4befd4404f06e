import ArgumentParser
import Foundation
import PrefetchEngine
import PrefetchRuntime
import PrefetchService
import ServiceTestSupport
import Telemetry
import Testing

@testable import prefetch

/// `prefetch serve`'s options and environment, parsed into the settings the composition root takes, without
/// starting anything: what a flag or a variable sets, which wins, and the message a bad value gets.
@Suite struct ServeSettingsTests {
    let key = String(repeating: "k", count: 32)

    func settings(_ arguments: [String], _ variables: [String: String] = [:]) throws -> ServiceSettings {
        try Prefetch.Serve.parse(["--config", "configs/prefetch.json"] + arguments).settings(environment: Environment(variables: variables))
    }

    @Test func flagsAndVariablesSetTheListenersAndTheStore() throws {
        let given = try settings(
            ["--port", "9000", "--store", "redis://127.0.0.1:6390", "--identity-key", key],
            ["PREFETCH_HOST": "0.0.0.0", "PREFETCH_PORT": "1234"])
        #expect(given.listeners.host == "0.0.0.0", "a variable sets what no flag does")
        #expect(given.listeners.port == 9000, "a flag wins over its variable")
        #expect(given.store.url == "redis://127.0.0.1:6390")
        #expect(given.configPath == "configs/prefetch.json")
        let defaults = try settings([])
        #expect(defaults.listeners.host == "127.0.0.1" && defaults.listeners.port == 8080 && defaults.store.url == nil)
    }

    /// `PREFETCH_FAST_HANDOFF` turned off a page pipeline that no longer exists: a deployment that still sets it is
    /// warned at start, and the help lists it no more.
    @Test func aVariableNothingReadsAnyMoreIsWarnedOfAndNotListed() throws {
        #expect(Prefetch.Serve.ignoredVariables(Environment(variables: [:])).isEmpty)
        #expect(Prefetch.Serve.ignoredVariables(Environment(variables: ["PREFETCH_PORT": "8080"])).isEmpty)
        let warnings = Prefetch.Serve.ignoredVariables(Environment(variables: ["PREFETCH_FAST_HANDOFF": "0"]))
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("PREFETCH_FAST_HANDOFF=0 is ignored") == true)
        _ = try settings([], ["PREFETCH_FAST_HANDOFF": "0"])  // a warning, not a refusal
        #expect(!Prefetch.Serve.helpMessage().contains("PREFETCH_FAST_HANDOFF"))
        #expect(Prefetch.Serve.helpMessage().contains("PREFETCH_IDLE_TIMEOUT"))
    }

    @Test func theOTLPExportIsOffUnlessAskedFor() throws {
        #expect(try settings([]).otlp == nil)
        #expect(
            try settings([], ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"]).otlp == nil, "an endpoint alone turns nothing on")
        #expect(try settings(["--otlp"]).otlp?.traces.url == "http://localhost:4318/v1/traces")
        let asked = try settings([], ["PREFETCH_OTLP": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"])
        #expect(asked.otlp?.metrics.url == "http://127.0.0.1:4318/v1/metrics")
        #expect(asked.otlp?.serviceName == "prefetch")
    }

    /// Every build exports: `--otlp` is refused only for an OpenTelemetry variable it cannot use, naming the flag,
    /// the variable and what is wrong with it (exit 64 before anything listens).
    @Test func anOTLPVariableThatCannotBeUsedRefusesTheFlagNamingTheVariable() throws {
        let bad: [([String: String], String)] = [
            (["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], "OTEL_EXPORTER_OTLP_PROTOCOL: \"grpc\" is not supported"),
            (["OTEL_BSP_MAX_QUEUE_SIZE": "0"], "OTEL_BSP_MAX_QUEUE_SIZE: \"0\" is not a positive integer"),
            (["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: not an http(s) URL"),
        ]
        for (variables, message) in bad {
            #expect {
                try settings(["--otlp"], variables)
            } throws: { error in
                error is ValidationError && String(describing: error).hasPrefix("--otlp: \(message)")
            }
        }
        #expect(try settings([], ["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"]).otlp == nil, "nothing is read without --otlp")
    }

    @Test func aSharedStoreWithoutAnIdentityKeyIsRefusedNamingTheOption() throws {
        #expect {
            try settings(["--store", "redis://127.0.0.1:6390"])
        } throws: { error in
            String(describing: error).contains("--identity-key")
        }
        // The same key from the environment is taken.
        #expect(try settings(["--store", "redis://127.0.0.1:6390"], ["PREFETCH_IDENTITY_KEY": key]).store.url != nil)
        // Sentinel is a shared store too.
        let sentinel = "redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/prefetch"
        #expect(throws: (any Error).self) { try settings(["--store", sentinel]) }
        #expect(try settings(["--store", sentinel, "--identity-key", key]).store.url == sentinel)
        // Anything else is refused without echoing it (it may carry a password).
        #expect {
            try settings(["--store", "rediss://user:hunter2@host/0", "--identity-key", key])
        } throws: { error in
            String(describing: error).contains("redis-sentinel://") && !String(describing: error).contains("hunter2")
        }
    }

    @Test func aStoreURLIsCheckedByTheStoresOwnParserBeforeTheServiceStarts() throws {
        // A URL of a known scheme that breaks its rules is refused at once, saying what is wrong, password masked
        // (it used to pass the option's prefix check and fail only when the service built its store).
        #expect {
            try settings(["--store", "redis://app:hunter2@cache:99999/0", "--identity-key", key])
        } throws: { error in
            let text = String(describing: error)
            return text.contains("'redis://app:***@cache:99999/0'") && text.contains("99999") && !text.contains("hunter2")
        }
        #expect {
            try settings(["--store", "redis-cluster://app:hunter2@a:1/3", "--identity-key", key])
        } throws: { error in
            String(describing: error).contains("only database 0") && !String(describing: error).contains("hunter2")
        }
        // The scheme is matched in any case, as the store matches it (the option's own check refused this one).
        #expect(try settings(["--store", "REDIS://127.0.0.1:6390", "--identity-key", key]).store.url == "REDIS://127.0.0.1:6390")
    }

    @Test func aBadNumberInTheEnvironmentNamesTheVariable() throws {
        #expect {
            try settings([], ["PREFETCH_CONFIG_INTERVAL": "soon"])
        } throws: { error in
            String(describing: error).contains("PREFETCH_CONFIG_INTERVAL=soon is not a whole number")
        }
        #expect {
            try settings(["--config-interval", "0"])
        } throws: { error in
            String(describing: error).contains("--config-interval 0 must be at least 1 second")
        }
    }

    /// Every bounded number, from its flag or its variable, is checked against its bounds by the one rule, and the
    /// message names the flag, the value and the bounds; a value within them is taken.
    @Test func everyBoundedNumberIsCheckedAndNamedTheSameWay() throws {
        let cases: [(flag: String, variable: String, bad: String, message: String, good: String)] = [
            ("--port", "PREFETCH_PORT", "70000", "--port 70000 must be between 0 and 65535", "9000"),
            ("--admin-port", "PREFETCH_ADMIN_PORT", "-1", "--admin-port -1 must be between 0 and 65535", "9001"),
            ("--idle-timeout", "PREFETCH_IDLE_TIMEOUT", "0", "--idle-timeout 0 must be between 1 and 3600 seconds", "5"),
            ("--body-timeout", "PREFETCH_BODY_TIMEOUT", "3601", "--body-timeout 3601 must be between 1 and 3600 seconds", "5"),
            ("--max-connections", "PREFETCH_MAX_CONNECTIONS", "0", "--max-connections 0 must be between 1 and 1000000", "10"),
            ("--trigger-burst", "PREFETCH_TRIGGER_BURST", "0", "--trigger-burst 0 must be at least 1", "3"),
            ("--ticket-bytes", "PREFETCH_TICKET_BYTES", "5", "--ticket-bytes 5 must be at least 65536", "65536"),
            (
                "--request-body-bytes", "PREFETCH_REQUEST_BODY_BYTES", "1000",
                "--request-body-bytes 1000 must be at least 262144 (one request body's cap)", "1048576"
            ),
            ("--negative-ttl", "PREFETCH_NEGATIVE_TTL", "0", "--negative-ttl 0 must be between 1 and 3600 seconds", "7"),
            ("--max-transfers", "PREFETCH_MAX_TRANSFERS", "0", "--max-transfers 0 must be between 1 and 100000", "8"),
            ("--store-connections", "PREFETCH_STORE_CONNECTIONS", "65", "--store-connections 65 must be between 1 and 64", "4"),
            ("--store-bytes", "PREFETCH_STORE_BYTES", "1024", "--store-bytes 1024 must be at least 1048576", "2097152"),
            ("--config-fatigue", "PREFETCH_CONFIG_FATIGUE", "-1", "--config-fatigue -1 must be at least 0", "0"),
        ]
        for item in cases {
            #expect(throws: (any Error).self, "\(item.flag)") { try settings(["\(item.flag)=\(item.bad)"]) }
            #expect {
                try settings([], [item.variable: item.bad])
            } throws: { error in
                String(describing: error).contains(item.message)
            }
            #expect(throws: Never.self, "\(item.flag)") { try settings(["\(item.flag)=\(item.good)"]) }
            #expect(throws: Never.self, "\(item.variable)") { try settings([], [item.variable: item.good]) }
        }
        #expect(try settings(["--port", "9000"]).listeners.port == 9000)
        #expect(try settings([], ["PREFETCH_STORE_BYTES": "2097152"]).store.bytes == 2_097_152)
        #expect(try settings([], ["PREFETCH_NEGATIVE_TTL": "7"]).engine.negativeTTL == .seconds(7))
    }
}
