import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchDNS
import PrefetchEngine
import PrefetchFetcher
import PrefetchRuntime
import PrefetchService
import PrefetchTestSupport
import PrefetchTestUpstream
import PrefetchTestUpstreamTLS
import ServiceTestSupport
import Testing

/// The service with HTTPDNS on: an api host name resolved by a local HTTPDNS stub, the transfer pinned to the
/// answer while TLS still checks the certificate against the host name.
@Suite struct PinnedTLSTests {
    static let host = "api.prefetch.test"

    /// Runs the service with HTTPDNS answering `address` for the test host, the test CA trusted, and a page whose
    /// interface is `https://api.prefetch.test:<port>/tls/info` on `upstream`.
    func withPinnedService(
        pki: TestPKI, upstream: TestUpstream, _ body: @Sendable (LiveService, String) async throws -> Void
    ) async throws {
        try await withUpstream { stub in
            let answer = #"{"host":"\#(Self.host)","ips":["127.0.0.1"],"ttl":60}"#
            var settings = testSettings()
            // `settledData` triggers again until the first lookup's answer is in: a DNS failure must not be kept
            // long.
            settings.engine.negativeTTL = .seconds(1)
            settings.dns.httpdns = "http://127.0.0.1:\(stub.port)/dns?body=\(q(answer))"
            settings.dns.allowPrivateAddresses = true
            settings.fetcher.caBundlePath = pki.caPath
            let page = "https://m.prefetch.test/pinned"
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "info", api: "https://\(Self.host):\(upstream.port)/tls/info", credentials: .include)])
            ])
            try await withService(config: config, settings: settings) { service in
                try await body(service, page)
            }
        }
    }

    /// Triggers the page until the answer is not a DNS failure (the first lookup runs in the background). A DNS
    /// failure kept for its negative TTL reads `expired` once that ends before the read (a loaded machine): not an
    /// answer either.
    func settledData(_ service: LiveService, _ page: String) async throws -> Reply {
        var reply: Reply?
        _ = await eventually(within: 60) {
            guard let ticket = try? await service.ticket(page + "?n=\(UUID().uuidString)", credentials: ["Cookie": "sid=7"]) else {
                return false
            }
            reply = try? await service.get("/v1/prefetch/\(ticket)/data?name=info&wait=4000", headers: ["Cookie": "sid=7"])
            guard let reply else { return false }
            return !["dns", "expired"].contains(reply.header("X-Prefetch-Reason") ?? "")
        }
        return try #require(reply)
    }

    @Test func aPinnedFetchKeepsTheHostNameForSNIHostAndCookies() async throws {
        let pki = try await TestPKI.make()
        defer { pki.remove() }
        let upstream = try await TestUpstream.start(tls: pki.tls(for: Self.host))
        do {
            try await withPinnedService(pki: pki, upstream: upstream) { service, page in
                let data = try await settledData(service, page)
                #expect(data.status == 200, "\(data.text)")
                let seen = upstream.requests().filter { $0.path == "/tls/info" }
                #expect(!seen.isEmpty)
                #expect(seen.allSatisfy { $0.tls && $0.serverName == Self.host && $0.host == "\(Self.host):\(upstream.port)" })
                let metrics = try await service.admin(.get, "/metrics").text
                #expect(metrics.contains(#"prefetch_dns_lookups_total{source="httpdns",outcome="ok"}"#))
            }
        } catch {
            try? await upstream.shutdown()
            throw error
        }
        try await upstream.shutdown()
    }

    @Test func anAnswerPointingAtAServerWithAnotherCertificateFailsWithTLS() async throws {
        let pki = try await TestPKI.make()
        defer { pki.remove() }
        let impostor = try await TestUpstream.start(tls: pki.tls(for: "other.prefetch.test"))
        do {
            try await withPinnedService(pki: pki, upstream: impostor) { service, page in
                let data = try await settledData(service, page)
                #expect(data.status == 404, "\(data.text)")
                #expect(data.header("X-Prefetch-Reason") == "tls")
                #expect(
                    impostor.requests().filter { $0.path == "/tls/info" }.isEmpty, "no request reaches a server that failed verification")
            }
        } catch {
            try? await impostor.shutdown()
            throw error
        }
        try await impostor.shutdown()
    }
}
