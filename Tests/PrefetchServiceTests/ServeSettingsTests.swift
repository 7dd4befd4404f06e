import ArgumentParser
import Foundation
import PrefetchEngine
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
        #expect(given.host == "0.0.0.0", "a variable sets what no flag does")
        #expect(given.port == 9000, "a flag wins over its variable")
        #expect(given.storeURL == "redis://127.0.0.1:6390")
        #expect(given.configPath == "configs/prefetch.json")
        let defaults = try settings([])
        #expect(defaults.host == "127.0.0.1" && defaults.port == 8080 && defaults.storeURL == nil)
    }

    @Test func aSharedStoreWithoutAnIdentityKeyIsRefusedNamingTheOption() throws {
        #expect {
            try settings(["--store", "redis://127.0.0.1:6390"])
        } throws: { error in
            String(describing: error).contains("--identity-key")
        }
        // The same key from the environment is taken.
        #expect(try settings(["--store", "redis://127.0.0.1:6390"], ["PREFETCH_IDENTITY_KEY": key]).storeURL != nil)
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
