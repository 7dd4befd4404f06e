import Foundation
import Logging
import MetricsTestKit
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import PrefetchDNS

/// HTTPDNS may not pin a host to a loopback, private, link-local or otherwise non-public address unless
/// `allowPrivateAddresses` says so.
@Suite struct AddressSafetyTests {
    /// The `prefetch_dns_rejected_total{reason}` value (0 when never incremented).
    func rejected(_ metrics: TestMetrics, _ reason: String) -> Int64 {
        (try? metrics.expectCounter("prefetch_dns_rejected_total", [("reason", reason)]))?.totalValue ?? 0
    }

    /// Runs a resolver whose HTTPDNS stub answers `ips` for `host`, waits until `host` has an answer (from either
    /// source), then runs `body`.
    func withAnswer(
        _ ips: [String], for host: String, allowPrivateAddresses: Bool = false, metrics: TestMetrics,
        logs: CapturedLogs = CapturedLogs(), _ body: @Sendable (HostResolver) async throws -> Void
    ) async throws {
        let quoted = ips.map { "\"\($0)\"" }.joined(separator: ",")
        let json = #"{"host":"\#(host)","ips":[\#(quoted)],"ttl":60}"#
        try await withUpstream { stub in
            try await withFetcher { fetcher in
                let settings = DNSSettings(httpdns: stubEndpoint(stub, json: json), allowPrivateAddresses: allowPrivateAddresses)
                try await withResolver(settings, fetcher: fetcher, metrics: metrics, logger: logs.logger) { resolver in
                    resolver.prefetch(hosts: [host])
                    do {
                        let settled = await eventually { resolver.answer(for: host) != nil }
                        #expect(settled)
                    }
                    try await body(resolver)
                }
            }
        }
    }

    static let nonPublic: [(address: String, reason: String)] = [
        ("127.0.0.1", "loopback"), ("10.0.0.5", "private"), ("169.254.169.254", "link_local"), ("::1", "loopback"),
        ("::ffff:192.168.1.7", "private"), ("100.64.0.9", "cgnat"),
    ]

    @Test(arguments: nonPublic)
    func aNonPublicHTTPDNSAnswerIsDroppedForTheSystemResolver(address: String, reason: String) async throws {
        let metrics = TestMetrics()
        let logs = CapturedLogs()
        try await withAnswer([address], for: "localhost", metrics: metrics, logs: logs) { resolver in
            #expect(resolver.answer(for: "localhost")?.source == .system, "the HTTPDNS answer was not used")
            if reason != "loopback" {
                #expect(resolver.answer(for: "localhost")?.addresses.contains(address) == false)
                #expect(resolver.pin(host: "localhost", port: 443)?.address != address)
            }
            #expect(rejected(metrics, reason) == 1)
            #expect(lookups(metrics, "httpdns", "ok") == 0)
            #expect(lookups(metrics, "httpdns", "fallback") == 1)
            let warning = logs.all.first { $0.hasPrefix("warning HTTPDNS lookup failed") }
            #expect(warning?.contains("host=localhost") == true, "\(logs.all)")
            #expect(warning?.contains(IPLiteral.canonical(address)!) == true, "\(logs.all)")
        }
    }

    @Test(arguments: nonPublic)
    func allowPrivateAddressesLetsTheAnswerPin(address: String, reason: String) async throws {
        let metrics = TestMetrics()
        try await withAnswer([address], for: "api.prefetch.test", allowPrivateAddresses: true, metrics: metrics) { resolver in
            let answer = try #require(resolver.answer(for: "api.prefetch.test"))
            #expect(answer.source == .httpdns)
            #expect(answer.addresses == [IPLiteral.canonical(address)!])
            #expect(rejected(metrics, reason) == 0)
        }
    }

    @Test func aPublicAddressIsAcceptedByDefault() async throws {
        let metrics = TestMetrics()
        try await withAnswer(["93.184.216.34", "2606:2800:220:1::"], for: "api.prefetch.test", metrics: metrics) { resolver in
            let answer = try #require(resolver.answer(for: "api.prefetch.test"))
            #expect(answer.source == .httpdns)
            #expect(answer.addresses == ["93.184.216.34", "2606:2800:220:1::"])
            #expect(
                resolver.pin(host: "api.prefetch.test", port: 443)
                    == AddressPin(host: "api.prefetch.test", port: 443, address: "93.184.216.34"))
            #expect(NonPublicAddress.allCases.allSatisfy { rejected(metrics, $0.rawValue) == 0 })
        }
    }

    @Test func oneNonPublicAddressRejectsTheWholeAnswer() async throws {
        let metrics = TestMetrics()
        try await withAnswer(["93.184.216.34", "10.1.2.3"], for: "localhost", metrics: metrics) { resolver in
            #expect(resolver.answer(for: "localhost")?.source == .system)
            #expect(resolver.answer(for: "localhost")?.addresses.contains("93.184.216.34") == false)
            #expect(rejected(metrics, "private") == 1)
        }
    }

    @Test(arguments: [
        ("http://127.0.0.1:9/dns?account=k3y", 1), ("HTTP://dns.example/resolve", 1), ("https://dns.example/resolve", 0),
    ])
    func aPlainHTTPEndpointIsWarnedAboutOnceAtStart(endpoint: String, warnings: Int) async throws {
        let logs = CapturedLogs()
        try await withFetcher { fetcher in
            try await withResolver(DNSSettings(httpdns: endpoint), fetcher: fetcher, logger: logs.logger) { resolver in
                resolver.prefetch(hosts: [])
                do {
                    let started = await eventually { logs.all.contains { $0.contains("dns resolver starting") } }
                    #expect(started)
                }
            }
        }
        let lines = logs.all.filter { $0.hasPrefix("warning") && $0.contains("plain http://") }
        #expect(lines.count == warnings, "\(logs.all)")
        #expect(!logs.all.joined().contains("k3y"))
    }
}

@Suite struct NonPublicAddressTests {
    @Test(arguments: [
        ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"),
        ("10.0.0.5", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.0.1", "private"),
        ("fc00::1", "private"), ("fd12:3456::1", "private"), ("fec0::1", "private"), ("64:ff9b::a00:5", "private"),
        ("::ffff:10.0.0.5", "private"), ("::10.0.0.5", "private"),
        ("169.254.169.254", "link_local"), ("fe80::1", "link_local"), ("febf::1", "link_local"),
        ("::ffff:169.254.169.254", "link_local"),
        ("0.0.0.0", "unspecified"), ("0.1.2.3", "unspecified"), ("::", "unspecified"), ("::ffff:0.0.0.0", "unspecified"),
        ("100.64.0.1", "cgnat"), ("100.127.255.255", "cgnat"),
        ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"), ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"),
    ])
    func nonPublicAddressesAreClassified(address: String, reason: String) {
        #expect(NonPublicAddress(literal: address)?.rawValue == reason)
    }

    @Test(arguments: [
        "93.184.216.34", "8.8.8.8", "172.15.255.255", "172.32.0.1", "192.169.0.1", "100.63.255.255", "100.128.0.1",
        "169.253.0.1", "223.255.255.255", "2606:2800:220:1::", "2001:4860:4860::8888", "::ffff:8.8.8.8",
        "64:ff9b::808:808", "fe00::1", "not-an-address",
    ])
    func publicAddressesAreNot(address: String) {
        #expect(NonPublicAddress(literal: address) == nil)
    }

    @Test func theSettingDecodesAndDefaultsToOff() throws {
        #expect(DNSSettings().allowPrivateAddresses == false)
        #expect(try JSONDecoder().decode(DNSSettings.self, from: Data("{}".utf8)).allowPrivateAddresses == false)
        let json = #"{"httpdns":"https://dns.example/resolve","allowPrivateAddresses":true}"#
        #expect(try JSONDecoder().decode(DNSSettings.self, from: Data(json.utf8)).allowPrivateAddresses == true)
    }
}
