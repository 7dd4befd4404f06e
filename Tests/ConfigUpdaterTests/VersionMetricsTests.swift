import ConfigUpdater
import Foundation
import MetricsTestKit
import PrefetchTestSupport
import Testing

/// The served versions as metrics: a number where the version is one, a fingerprint of its text always, never a
/// label value (docs/observability.md).
@Suite struct VersionMetricsTests {
    /// A document serving `version`, and `candidate` beside it for 10 % of callers when given.
    static func document(version: String, candidate: String? = nil) -> [UInt8] {
        func data(_ version: String) -> String {
            """
            {"name":"cfg","version":"\(version)","config":[{"url":"https://shop.example.com/p.html","interfaces":[
              {"api":"https://api.example.com/item","method":"GET","urlParam":true}]}]}
            """
        }
        let canary = candidate.map { #","canary":{"percent":10,"data":\#(data($0))}"# } ?? ""
        return Array(#"{"code":200,"data":\#(data(version))\#(canary)}"#.utf8)
    }

    /// The 32-bit FNV-1a hash of `text`'s UTF-8 bytes.
    static func fnv1a(_ text: String) -> Double {
        var hash: UInt32 = 2_166_136_261
        for byte in text.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Double(hash)
    }

    @Test("numeric versions are exported as numbers, every version as a fingerprint, a missing role as NaN")
    func versionGauges() async throws {
        try await withConfigServer { server in
            try await withFetcher { fetcher in
                let metrics = TestMetrics()
                let updater = try ConfigUpdater(
                    settings: testSettings(source: server.url("/cfg")), fetcher: fetcher, logger: testLogger,
                    metricsFactory: metrics)
                func value(_ name: String, _ role: String) throws -> Double {
                    try #require(try metrics.expectGauge(name, [("config", role)]).lastValue)
                }
                // Nothing loaded yet: every series exists, NaN.
                for name in ["prefetch_config_version", "prefetch_config_version_fingerprint"] {
                    for role in ["active", "candidate"] { #expect(try value(name, role).isNaN) }
                }

                server.serve("/cfg", Self.document(version: "ops-1", candidate: "20240501"))
                #expect(await checkNow(updater).outcome == .applied)
                #expect(try value("prefetch_config_version", "active").isNaN, "text is no number")
                #expect(try value("prefetch_config_version_fingerprint", "active") == Self.fnv1a("ops-1"))
                #expect(try value("prefetch_config_version", "candidate") == 20_240_501)
                #expect(try value("prefetch_config_version_fingerprint", "candidate") == Self.fnv1a("20240501"))

                let cases: [(String, Double?)] = [
                    ("4.25", 4.25), ("007", 7), ("123456789012345", 123_456_789_012_345), ("1234567890123456", nil),
                    ("0x10", nil), ("1e3", nil), ("-1", nil), ("4.", nil), (".5", nil), ("1.2.3", nil), ("nan", nil),
                    ("inf", nil), (" 4", nil), ("٤", nil),
                ]
                for (version, expected) in cases {
                    server.serve("/cfg", Self.document(version: version))
                    #expect(await checkNow(updater).outcome == .applied, "\(version)")
                    let number = try value("prefetch_config_version", "active")
                    if let expected {
                        #expect(number == expected, "\(version)")
                    } else {
                        #expect(number.isNaN, "\(version) gave \(number)")
                    }
                    #expect(try value("prefetch_config_version_fingerprint", "active") == Self.fnv1a(version), "\(version)")
                    #expect(try value("prefetch_config_version", "candidate").isNaN, "no candidate any more")
                    #expect(try value("prefetch_config_version_fingerprint", "candidate").isNaN)
                }
            }
        }
    }
}
