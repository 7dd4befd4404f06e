import Logging
import PrefetchDNS
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

/// The resolver as a swift-service-lifecycle `Service`.
@Suite(.timeLimit(.minutes(1)))
struct LifecycleTests {
    @Test func gracefulShutdownAbandonsASlowLookupAndReturns() async throws {
        try await withUpstream { stub in
            try await withFetcher { fetcher in
                let body = #"{"host":"api.prefetch.test","ips":["127.0.0.1"],"ttl":60}"#
                let settings = DNSSettings(httpdns: stubEndpoint(stub, json: body, delayMs: 30_000), timeoutMs: 30_000)
                let resolver = try HostResolver(settings: settings, fetcher: fetcher, logger: Logger(label: "test"))
                try await testGracefulShutdown { trigger in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { try await resolver.run() }
                        resolver.prefetch(hosts: ["api.prefetch.test"])
                        do {
                            let settled = await eventually { stub.hits(path: "/dns") == 1 }
                            #expect(settled)
                        }
                        #expect(resolver.lookupsInFlight == 1)
                        trigger.triggerGracefulShutdown()
                        // run() returns long before the 30 s answer would arrive (the suite's time limit bounds it).
                        try await group.next()
                    }
                }
                #expect(resolver.answer(for: "api.prefetch.test") == nil)
                await #expect(throws: DNSError.self) { try await resolver.run() }
            }
        }
    }
}
