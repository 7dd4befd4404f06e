import ArgumentParser
import Foundation
import PrefetchEngine
import PrefetchRuntime
import PrefetchService
import ServiceTestSupport
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

    @Test func theOTLPExportIsOffUnlessAskedFor() throws {
        #expect(try settings([]).otlp == false)
        #expect(
            try settings([], ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"]).otlp == false, "an endpoint alone turns nothing on")
        if OTLPExport.isAvailable {
            #expect(try settings(["--otlp"]).otlp)
            #expect(try settings([], ["PREFETCH_OTLP": "1"]).otlp)
        } else {
            #expect(throws: ValidationError.self) { try settings(["--otlp"]) }
            #expect(throws: ValidationError.self) { try settings([], ["PREFETCH_OTLP": "1"]) }
        }
    }

    /// A build without the OTLP trait refuses `--otlp` at startup, naming the flag, what the build lacks and how to
    /// build one with export (scripts/test.sh builds with the trait, so the refusal itself is checked here).
    @Test func withoutTheOTLPTraitTheFlagIsRefusedSayingHowToBuildWithExport() throws {
        try OTLPExport.requireAvailable(true)
        #expect {
            try OTLPExport.requireAvailable(false)
        } throws: { error in
            let message = String(describing: error)
            return message.contains("--otlp") && message.contains("PREFETCH_OTLP=1") && message.contains("no OTLP export")
                && message.contains("swift build --traits OTLP")
        }
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
}
