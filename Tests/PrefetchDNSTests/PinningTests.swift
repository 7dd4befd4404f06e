import Foundation
import MetricsTestKit
import PrefetchCore
import PrefetchDNS
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import PrefetchTestUpstreamTLS
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
                            let pin = resolver.pin(host: "api.prefetch.test", port: api.port)
                            #expect(pin == AddressPin(host: "api.prefetch.test", port: api.port, address: "127.0.0.1"))

                            let response = try await fetcher.fetch(FetchRequest(url: url, pinning: resolver))
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
                                FetchRequest(url: "https://api.prefetch.test:\(api.port)/__requests", pinning: resolver)
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
                            #expect(resolver.pin(host: "api.prefetch.test", port: other.port) != nil)
                            #expect(await failureCode(fetcher, FetchRequest(url: url, pinning: resolver)) == .tls)
                            #expect(other.hits(path: "/items") == 0)

                            // The server itself is fine: under its own name the same address verifies.
                            let own = try await fetcher.fetch(
                                FetchRequest(
                                    url: "https://other.prefetch.test:\(other.port)/own",
                                    pinning: StaticPins([AddressPin(host: "other.prefetch.test", port: other.port, address: "127.0.0.1")])
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
                    let pins = StaticPins([AddressPin(host: "api.prefetch.test", port: api.port, address: "127.0.0.1")])
                    #expect(await failureCode(fetcher, FetchRequest(url: url, pinning: pins)) == .tls)
                    #expect(api.hits(path: "/items") == 0)
                }
            }
        }
    }

    /// The pinned address refuses the connection: the fetcher tells the resolver itself (nobody in between), which
    /// drops the answer and asks HTTPDNS again at once.
    @Test func aRefusedPinIsReportedToTheResolverByTheFetcher() async throws {
        // Held (bound, not listening) for the whole test: every connection to it is refused.
        let held = try #require(BoundLocalPort())
        defer { withExtendedLifetime(held) {} }
        let port = held.port
        try await withUpstream { stub in
            try await withFetcher { fetcher in
                let settings = DNSSettings(httpdns: stubEndpoint(stub, json: Self.answerForLoopback), allowPrivateAddresses: true)
                try await withResolver(settings, fetcher: fetcher) { resolver in
                    resolver.prefetch(hosts: ["api.prefetch.test"])
                    let settled = await eventually { resolver.answer(for: "api.prefetch.test") != nil }
                    try #require(settled)
                    #expect(resolver.pin(host: "api.prefetch.test", port: port)?.address == "127.0.0.1")
                    let request = FetchRequest(url: "http://api.prefetch.test:\(port)/items", pinning: resolver)
                    #expect(stub.hits(path: "/dns") == 1)
                    #expect(await failureCode(fetcher, request) == .connect)
                    let askedAgain = await eventually { stub.hits(path: "/dns") == 2 }
                    #expect(askedAgain)
                }
            }
        }
    }

    @Test func pinningOneTransferLeavesConcurrentTransfersToTheSameHostAlone() async throws {
        try await withUpstream { serverA in
            try await withUpstream { serverB in
                try await withFetcher { fetcher in
                    let pin = StaticPins([
                        AddressPin(host: "localhost", port: serverB.port, address: "127.0.0.1", connectPort: serverA.port)
                    ])
                    let rounds = 5
                    for round in 0..<rounds {
                        async let pinned = fetcher.fetch(
                            FetchRequest(url: "http://localhost:\(serverB.port)/pinned?delay=100&r=\(round)", pinning: pin)
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
