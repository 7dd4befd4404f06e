import Foundation
import HTTPTypes
import PrefetchTestSupport
import PrefetchTestUpstream
import PrefetchTestUpstreamTLS
import Testing

@testable import PrefetchFetcher

/// HTTP/2 multiplexing: a page's requests to one host share one connection, even with one connection per host
/// allowed, against a real HTTP/2 upstream (TLS with ALPN).
@Suite struct HTTP2Tests {
    /// Eight requests that each take a second, to one host, one connection allowed: the upstream sees one
    /// connection carrying all eight streams at once, and every answer says HTTP/2.
    @Test func eightRequestsToOneHostShareOneTLSConnection() async throws {
        let pki = try await TestPKI.make()
        defer { pki.remove() }
        try await withUpstream(tls: pki.tls(for: "api.prefetch.test"), http2: true) { upstream in
            let configuration = FetcherConfiguration(maxConnectionsPerHost: 1, caBundlePath: pki.caPath)
            try await withFetcher(configuration) { fetcher in
                let answers = await fetchEight(
                    fetcher, base: "https://api.prefetch.test:\(upstream.port)",
                    pinning: StaticPins([AddressPin(host: "api.prefetch.test", port: upstream.port, address: "127.0.0.1")]))
                #expect(answers.map(\.status) == Array(repeating: 200, count: 8))
                #expect(answers.allSatisfy { $0.httpVersion == "2" }, "versions: \(answers.map(\.httpVersion))")
                #expect(upstream.connections() == 1)
                #expect(upstream.peakStreams() == 8, "streams at once: \(upstream.peakStreams())")
                // The connection stays for the next page's requests, one after another.
                for index in 0..<2 {
                    let next = try await fetcher.fetch(
                        FetchRequest(
                            url: "https://api.prefetch.test:\(upstream.port)/h2?n=next\(index)", timeout: .seconds(20),
                            pinning: StaticPins([AddressPin(host: "api.prefetch.test", port: upstream.port, address: "127.0.0.1")])
                        )
                    )
                    #expect(next.status == 200 && next.httpVersion == "2")
                    let echo = try JSONSerialization.jsonObject(with: Data(next.body)) as? [String: Any]
                    #expect(echo?["query"] as? String == "n=next\(index)")
                }
                #expect(upstream.connections() == 1)
            }
        }
    }

    /// A cleartext upstream is spoken to in HTTP/1.1 (see `FetcherConfiguration.enableHTTP2`): eight requests in
    /// flight, eight connections.
    @Test func cleartextStaysHTTP1ByDefault() async throws {
        try await withUpstream { upstream in
            try await withFetcher(FetcherConfiguration(maxConnectionsPerHost: 8)) { fetcher in
                let answers = await fetchEight(fetcher, base: "http://127.0.0.1:\(upstream.port)", pinning: nil)
                #expect(answers.allSatisfy { $0.httpVersion == "1.1" })
                #expect(upstream.connections() == 8)
            }
        }
    }

    private func fetchEight(_ fetcher: Fetcher, base: String, pinning: (any AddressPinning)?) async -> [FetchResponse] {
        await withTaskGroup(of: (Int, FetchResponse?).self) { group in
            for index in 0..<8 {
                group.addTask {
                    let request = FetchRequest(
                        url: "\(base)/h2?delay=1000&n=\(index)", headers: HTTPFields([("X-Page", "p\(index)")]),
                        timeout: .seconds(20), pinning: pinning
                    )
                    return (index, try? await fetcher.fetch(request))
                }
            }
            var answers = [FetchResponse?](repeating: nil, count: 8)
            for await (index, answer) in group { answers[index] = answer }
            return answers.compactMap { $0 }
        }
    }
}
