import Foundation
import Logging
import MetricsTestKit
import PrefetchDNS
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

/// The resolver's sources, fallbacks, TTL handling and non-blocking lookups.
@Suite struct HostResolverTests {
    @Test func httpdnsThatIsDownFallsBackToTheSystemResolver() async throws {
        // Held (bound, not listening) for the whole test: every connection to it is refused.
        let held = try #require(BoundLocalPort())
        defer { withExtendedLifetime(held) {} }
        let port = held.port
        try await withFetcher { fetcher in
            let metrics = TestMetrics()
            let settings = DNSSettings(httpdns: "http://127.0.0.1:\(port)/dns")
            try await withResolver(settings, fetcher: fetcher, metrics: metrics) { resolver in
                resolver.prefetch(hosts: ["localhost"])
                do {
                    let settled = await eventually { resolver.answer(for: "localhost") != nil }
                    #expect(settled)
                }
                let answer = try #require(resolver.answer(for: "localhost"))
                #expect(answer.source == .system)
                #expect(answer.addresses.allSatisfy { $0 == "127.0.0.1" || $0 == "::1" })
                #expect(lookups(metrics, "httpdns", "fallback") >= 1)
                #expect(lookups(metrics, "httpdns", "error") >= 1)
                #expect(lookups(metrics, "httpdns", "ok") == 0)
                #expect(lookups(metrics, "system", "ok") >= 1)
                let pin = try #require(resolver.pin(host: "localhost", port: 8080))
                #expect(pin.host == "localhost" && pin.port == 8080 && pin.connectPort == 8080)
                #expect(answer.addresses.contains(pin.address))
            }
        }
    }

    @Test(arguments: [
        #"{"host":"localhost","ips":["evil.example"],"ttl":60}"#,
        #"{"host":"localhost","ips":["127.0.0.1"],"ttl":60"#,
        #"<html>hijacked</html>"#,
    ])
    func invalidHTTPDNSAnswerFallsBackToTheSystemResolver(_ body: String) async throws {
        try await withUpstream { stub in
            try await withFetcher { fetcher in
                let metrics = TestMetrics()
                let settings = DNSSettings(httpdns: stubEndpoint(stub, json: body))
                try await withResolver(settings, fetcher: fetcher, metrics: metrics) { resolver in
                    resolver.prefetch(hosts: ["localhost"])
                    do {
                        let settled = await eventually { resolver.answer(for: "localhost") != nil }
                        #expect(settled)
                    }
                    #expect(resolver.answer(for: "localhost")?.source == .system)
                    #expect(resolver.answer(for: "localhost")?.addresses.contains("evil.example") == false)
                    #expect(stub.hits(path: "/dns") >= 1)
                    #expect(lookups(metrics, "httpdns", "error") >= 1)
                    #expect(lookups(metrics, "httpdns", "fallback") >= 1)
                }
            }
        }
    }

    @Test func slowHTTPDNSTimesOutAndFallsBack() async throws {
        try await withUpstream { stub in
            try await withFetcher { fetcher in
                let metrics = TestMetrics()
                let body = #"{"host":"localhost","ips":["127.0.0.9"],"ttl":60}"#
                let settings = DNSSettings(httpdns: stubEndpoint(stub, json: body, delayMs: 3000), timeoutMs: 200)
                try await withResolver(settings, fetcher: fetcher, metrics: metrics) { resolver in
                    resolver.prefetch(hosts: ["localhost"])
                    do {
                        let settled = await eventually { resolver.answer(for: "localhost") != nil }
                        #expect(settled)
                    }
                    #expect(resolver.answer(for: "localhost")?.source == .system)
                    #expect(lookups(metrics, "httpdns", "timeout") >= 1)
                    #expect(lookups(metrics, "httpdns", "fallback") >= 1)
                }
            }
        }
    }

    @Test func lookupsNeverBlockWhileAnHTTPDNSAnswerIsSlow() async throws {
        try await withUpstream { stub in
            try await withFetcher { fetcher in
                let body = #"{"host":"api.prefetch.test","ips":["127.0.0.1"],"ttl":60}"#
                // The answer is held 5 s: the 10,000 lookups below take milliseconds, with room for a loaded machine.
                let settings = DNSSettings(
                    httpdns: stubEndpoint(stub, json: body, delayMs: 5000), timeoutMs: 30000, allowPrivateAddresses: true)
                try await withResolver(settings, fetcher: fetcher) { resolver in
                    resolver.prefetch(hosts: ["api.prefetch.test"])
                    do {
                        let settled = await eventually { resolver.lookupsInFlight == 1 }
                        #expect(settled)
                    }
                    // While the lookup is pending, request-time lookups answer at once, with nothing pinned.
                    var answered = 0
                    for _ in 0..<10_000 where resolver.pin(host: "api.prefetch.test", port: 443) == nil {
                        answered += 1
                    }
                    #expect(answered == 10_000)
                    #expect(resolver.lookupsInFlight == 1)
                    do {
                        let settled = await eventually { resolver.pin(host: "api.prefetch.test", port: 443) != nil }
                        #expect(settled)
                    }
                    #expect(
                        resolver.pin(host: "API.prefetch.test", port: 443)
                            == AddressPin(host: "api.prefetch.test", port: 443, address: "127.0.0.1"))
                }
            }
        }
    }

    @Test func ipv6AnswersArePinnedInBrackets() async throws {
        try await withUpstream { stub in
            try await withFetcher { fetcher in
                let body = #"{"host":"api.prefetch.test","ips":["2001:DB8::10","192.0.2.10"],"ttl":60}"#
                try await withResolver(DNSSettings(httpdns: stubEndpoint(stub, json: body)), fetcher: fetcher) { resolver in
                    resolver.prefetch(hosts: ["api.prefetch.test"])
                    do {
                        let settled = await eventually { resolver.answer(for: "api.prefetch.test") != nil }
                        #expect(settled)
                    }
                    #expect(resolver.answer(for: "api.prefetch.test")?.addresses == ["2001:db8::10", "192.0.2.10"])
                    #expect(
                        resolver.pin(host: "api.prefetch.test", port: 443)
                            == AddressPin(host: "api.prefetch.test", port: 443, address: "2001:db8::10")
                    )
                }
            }
        }
    }

    /// A 1 s answer is refreshed at half its life, so the host never goes without one. Time moves by hand: each
    /// half second brings exactly one more lookup, and the pin is there all along.
    @Test func shortTTLAnswersAreRefreshedAheadOfExpiry() async throws {
        try await withUpstream { stub in
            try await withFetcher { fetcher in
                let metrics = TestMetrics()
                let clock = ManualClock()
                let body = #"{"host":"api.prefetch.test","ips":["127.0.0.1"],"ttl":1}"#
                let settings = DNSSettings(
                    httpdns: stubEndpoint(stub, json: body), minTTL: 1, refreshAhead: 0.5, allowPrivateAddresses: true)
                try await withResolver(settings, fetcher: fetcher, metrics: metrics, clock: clock) { resolver in
                    resolver.prefetch(hosts: ["api.prefetch.test"])
                    let settled = await eventually { resolver.answer(for: "api.prefetch.test") != nil }
                    try #require(settled)
                    let first = try #require(resolver.answer(for: "api.prefetch.test"))
                    for round in 1...4 {
                        let asleep = await eventually { clock.sleepers >= 1 }
                        #expect(asleep)
                        clock.advance(by: .milliseconds(500))
                        let refreshed = await eventually { lookups(metrics, "httpdns", "ok") == Int64(round + 1) }
                        #expect(refreshed, "round \(round): \(lookups(metrics, "httpdns", "ok")) lookups")
                        #expect(resolver.pin(host: "api.prefetch.test", port: 443) != nil, "round \(round): the host has its pin")
                    }
                    let refreshed = try #require(resolver.answer(for: "api.prefetch.test"))
                    #expect(refreshed.resolvedAt > first.resolvedAt)
                    #expect(stub.hits(path: "/dns") == 5, "one lookup per half life, no more")
                }
            }
        }
    }

    @Test func answersExpireWhenNotRefreshed() async throws {
        try await withUpstream { stub in
            try await withFetcher { fetcher in
                let body = #"{"host":"api.prefetch.test","ips":["127.0.0.1"],"ttl":1}"#
                let settings = DNSSettings(httpdns: stubEndpoint(stub, json: body), minTTL: 1, allowPrivateAddresses: true)
                let clock = ManualClock()
                let resolver = try HostResolver(settings: settings, fetcher: fetcher, logger: Logger(label: "test"), clock: clock)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await resolver.run() }
                    resolver.prefetch(hosts: ["api.prefetch.test"])
                    do {
                        let settled = await eventually { resolver.answer(for: "api.prefetch.test") != nil }
                        #expect(settled)
                    }
                    group.cancelAll()
                    try await group.waitForAll()
                }
                // run() has returned: nothing refreshes the 1 s answer, so it stops being served.
                let answer = try #require(resolver.answer(for: "api.prefetch.test"))
                clock.advance(by: clock.now.duration(to: answer.expiresAt) - .milliseconds(1))
                #expect(resolver.pin(host: "api.prefetch.test", port: 443) != nil, "served until its expiry")
                clock.advance(by: .milliseconds(1))
                #expect(resolver.pin(host: "api.prefetch.test", port: 443) == nil)
                #expect(resolver.answer(for: "api.prefetch.test") == nil)
            }
        }
    }

    @Test func prefetchReplacesTheWatchedSetAndSkipsIPLiterals() async throws {
        let metrics = TestMetrics()
        try await withResolver(DNSSettings(), metrics: metrics) { resolver in
            resolver.prefetch(hosts: ["LOCALHOST.", "127.0.0.1", "[::1]", ""])
            do {
                let settled = await eventually { resolver.answer(for: "localhost") != nil }
                #expect(settled)
            }
            #expect(resolver.pin(host: "127.0.0.1", port: 8080) == nil)
            #expect(resolver.pin(host: "localhost", port: 8080) != nil)
            do {
                let settled = await eventually { (try? metrics.expectGauge("prefetch_dns_cached_hosts"))?.lastValue == 1 }
                #expect(settled)
            }
            resolver.prefetch(hosts: [String]())
            #expect(resolver.answer(for: "localhost") == nil)
            #expect(resolver.pin(host: "localhost", port: 8080) == nil)
            #expect(lookups(metrics, "system", "ok") == 1)
        }
    }

    @Test func unresolvableNameIsCountedAndNotPinned() async throws {
        let metrics = TestMetrics()
        let settings = DNSSettings(systemTimeoutMs: 2000)
        try await withResolver(settings, metrics: metrics) { resolver in
            resolver.prefetch(hosts: ["no-such-host.invalid"])
            #expect(
                await eventually {
                    lookups(metrics, "system", "error") + lookups(metrics, "system", "timeout") >= 1
                }
            )
            #expect(resolver.pin(host: "no-such-host.invalid", port: 443) == nil)
        }
    }

    @Test func httpdnsWithoutAFetcherIsRejected() {
        #expect(throws: DNSError.self) {
            _ = try HostResolver(settings: DNSSettings(httpdns: "http://127.0.0.1:1/dns"), logger: Logger(label: "test"))
        }
    }
}
