import Foundation
import HTTPTypes
import Logging
import MetricsTestKit
import PrefetchCore
import PrefetchDNS
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import PrefetchTestUpstreamTLS
import Subprocess
import Testing

/// Runs `body` with a fresh PKI, removed afterwards.
func withPKI<T: Sendable>(_ body: (TestPKI) async throws -> T) async throws -> T {
    let pki = try await TestPKI.make()
    defer { pki.remove() }
    return try await body(pki)
}

/// Runs `body` with a running resolver; its `run()` is cancelled afterwards.
func withResolver<T: Sendable>(
    _ settings: DNSSettings,
    fetcher: Fetcher? = nil,
    metrics: TestMetrics = TestMetrics(),
    logger: Logger = Logger(label: "prefetch.dns.test"),
    clock: any ServiceClock = ContinuousClock(),
    _ body: @Sendable (HostResolver) async throws -> T
) async throws -> T {
    let resolver = try HostResolver(
        settings: settings,
        fetcher: fetcher,
        logger: logger,
        metricsFactory: metrics,
        clock: clock
    )
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await resolver.run() }
        defer { group.cancelAll() }
        return try await body(resolver)
    }
}

/// An HTTPDNS endpoint on `upstream` that answers `json` to every query (and `delay` ms late).
func stubEndpoint(_ upstream: TestUpstream, json: String, delayMs: Int = 0) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    let encoded = json.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    return "http://127.0.0.1:\(upstream.port)/dns?delay=\(delayMs)&body=\(encoded)"
}

/// The value of `prefetch_dns_lookups_total{source, outcome}` (0 when never incremented).
func lookups(_ metrics: TestMetrics, _ source: String, _ outcome: String) -> Int64 {
    (try? metrics.expectCounter("prefetch_dns_lookups_total", [("source", source), ("outcome", outcome)]))?
        .totalValue ?? 0
}

/// The header values named `name` (case-insensitive), in order.
func headerValues(_ response: FetchResponse, _ name: String) -> [String] {
    response.headers.filter { $0.name.canonicalName == name.lowercased() }.map(\.value)
}
