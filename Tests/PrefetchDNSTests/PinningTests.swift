import Foundation
import MetricsTestKit
import PrefetchDNS
import PrefetchFetcher
import PrefetchTestUpstream
import Testing

/// Pinned TLS fetches: the address comes from HTTPDNS, everything else keeps the host name.
@Suite struct PinningTests {
    static let answerForLoopback = #"{"host":"api.prefetch.test","ips":["127.0.0.1"],"ttl":60}"#

    @Test func pinnedFetchKeepsTheHostNameForSNIHostHeaderCertificateAndCookies() async throws {
        try await withPKI { pki in
            try await withUpstream(tls: pki.tls(for: "api.prefetch.test")) { api in
                try await withUpstream { stub in
                    try await withFetcher(FetcherConfiguration(caBundlePath: pki.caPath)) { fetcher in
                        let metrics = TestMetrics()
                        let settings = DNSSettings(httpdns: stubEndpoint(stub, json: Self.answerForLoopback), allowPrivateAddresses: true)
                        try await withResolver(settings, fetcher: fetcher, metrics: metrics) { resolver in
                            resolver.prefetch(hosts: ["api.prefetch.test"])
                            do {
                                let settled = await eventually { resolver.answer(for: "api.prefetch.test") != nil }
                                #expect(settled)
                            }
                            #expect(resolver.answer(for: "api.prefetch.test")?.source == .httpdns)
                            #expect(lookups(metrics, "httpdns", "ok") >= 1)

                            let cookie = "sid=1; Domain=api.prefetch.test; Path=/; Secure; HttpOnly"
                            let url =
                                "https://api.prefetch.test:\(api.port)/items?setCookie="
                                + cookie.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                            let connectTo = resolver.connectTo(url: url)
                            #expect(connectTo == ["api.prefetch.test:\(api.port):127.0.0.1:\(api.port)"])

                            let response = try await fetcher.fetch(FetchRequest(url: url, connectTo: connectTo))
                            #expect(response.status == 200)
                            #expect(headerValues(response, "Set-Cookie") == [cookie])
                            #expect(
                                api.requests() == [
                                    SeenRequest(
                                        path: "/items",
                                        host: "api.prefetch.test:\(api.port)",
                                        serverName: "api.prefetch.test",
                                        tls: true
                                    )
                                ]
                            )
                            // The same record over the upstream's control endpoint.
                            let log = try await fetcher.fetch(
                                FetchRequest(url: "https://api.prefetch.test:\(api.port)/__requests", connectTo: connectTo)
                            )
                            let text = String(decoding: log.body, as: UTF8.self)
                            #expect(text.contains(#""sni":"api.prefetch.test""#))
                            #expect(text.contains(#""tls":true"#))
                        }
                    }
                }
            }
        }
    }

    @Test func addressServingAnotherNamesCertificateFailsWithTLS() async throws {
        try await withPKI { pki in
            try await withUpstream(tls: pki.tls(for: "other.prefetch.test")) { other in
                try await withUpstream { stub in
                    try await withFetcher(FetcherConfiguration(caBundlePath: pki.caPath)) { fetcher in
                        let settings = DNSSettings(httpdns: stubEndpoint(stub, json: Self.answerForLoopback), allowPrivateAddresses: true)
                        try await withResolver(settings, fetcher: fetcher) { resolver in
                            resolver.prefetch(hosts: ["api.prefetch.test"])
                            do {
                                let settled = await eventually { resolver.answer(for: "api.prefetch.test") != nil }
                                #expect(settled)
                            }
                            let url = "https://api.prefetch.test:\(other.port)/items"
                            let connectTo = resolver.connectTo(url: url)
                            #expect(!connectTo.isEmpty)
                            #expect(await failureCode(fetcher, FetchRequest(url: url, connectTo: connectTo)) == .tls)
                            #expect(other.hits(path: "/items") == 0)

                            // The server itself is fine: under its own name the same address verifies.
                            let own = try await fetcher.fetch(
                                FetchRequest(
                                    url: "https://other.prefetch.test:\(other.port)/own",
                                    connectTo: ["other.prefetch.test:\(other.port):127.0.0.1:\(other.port)"]
                                )
                            )
                            #expect(own.status == 200)
                            #expect(other.requests().map(\.serverName) == ["other.prefetch.test"])
                        }
                    }
                }
            }
        }
    }

    @Test func withoutTheTestCAThePinnedFetchFailsWithTLS() async throws {
        try await withPKI { pki in
            try await withUpstream(tls: pki.tls(for: "api.prefetch.test")) { api in
                try await withFetcher { fetcher in
                    let url = "https://api.prefetch.test:\(api.port)/items"
                    let connectTo = ["api.prefetch.test:\(api.port):127.0.0.1:\(api.port)"]
                    #expect(await failureCode(fetcher, FetchRequest(url: url, connectTo: connectTo)) == .tls)
                    #expect(api.hits(path: "/items") == 0)
                }
            }
        }
    }

    @Test func pinningOneTransferLeavesConcurrentTransfersToTheSameHostAlone() async throws {
        try await withUpstream { serverA in
            try await withUpstream { serverB in
                try await withFetcher { fetcher in
                    let pin = ["localhost:\(serverB.port):127.0.0.1:\(serverA.port)"]
                    let rounds = 5
                    for round in 0..<rounds {
                        async let pinned = fetcher.fetch(
                            FetchRequest(url: "http://localhost:\(serverB.port)/pinned?delay=100&r=\(round)", connectTo: pin)
                        )
                        async let plain = fetcher.fetch(
                            FetchRequest(url: "http://localhost:\(serverB.port)/plain?delay=100&r=\(round)")
                        )
                        let (first, second) = try await (pinned, plain)
                        #expect(first.status == 200)
                        #expect(second.status == 200)
                    }
                    #expect(serverA.hits(path: "/pinned") == rounds)
                    #expect(serverB.hits(path: "/pinned") == 0)
                    #expect(serverB.hits(path: "/plain") == rounds)
                    #expect(serverA.hits(path: "/plain") == 0)
                    // Afterwards, too, an unpinned transfer reaches the server its URL names.
                    _ = try await fetcher.fetch(FetchRequest(url: "http://localhost:\(serverB.port)/after"))
                    #expect(serverB.hits(path: "/after") == 1)
                    #expect(serverA.hits(path: "/after") == 0)
                    #expect(serverA.requests().allSatisfy { $0.host == "localhost:\(serverB.port)" })
                }
            }
        }
    }
}

/// Runs a fetch expected to fail and returns its error code (nil if it succeeded).
func failureCode(_ fetcher: Fetcher, _ request: FetchRequest) async -> FetchErrorCode? {
    do {
        _ = try await fetcher.fetch(request)
        return nil
    } catch {
        return error.code
    }
}
