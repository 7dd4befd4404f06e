import Foundation
import HTTPTypes
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// Single flight when the one fetch goes wrong (cf. nginx proxy_cache_lock, Go singleflight): everyone waiting
/// learns of the failure at once, the failure is forgotten after its negative TTL, and one consumer giving up
/// never takes the response away from the others.
@Suite("reliability: coalescing under faults", .timeLimit(.minutes(2)))
struct ReliabilityCoalescingTests {
    static let consumers = 50

    /// A failure (a 503 after a second) and a timeout (an upstream slower than the interface's timeout).
    @Test(arguments: [("status=503&delay=1000", "upstream-5xx", 5000), ("delay=6000", "timeout", 1000)])
    func everyWaitingConsumerGetsTheLeadersFailureAndTheNextTriggerFetchesAgain(script: String, code: String, timeout: Int) async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/coalesce"
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "c", api: "\(base)/coalesce/c?\(script)", timeout: timeout)])
            ])
            var settings = testSettings()
            settings.engine.maximumWait = .seconds(20)
            // Long enough that every consumer's read, sent before the failure, is in before it expires on a loaded
            // machine (the reads are many connections opened at once).
            settings.engine.negativeTTL = .seconds(6)
            try await withService(config: config, settings: settings) { service in
                let ticket = try await service.ticket(page)
                // Each consumer would wait 20 s; the failure arrives after about a second.
                let started = ContinuousClock.now
                let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                    for index in 0..<Self.consumers {
                        let uri =
                            index % 2 == 0 ? "/v1/prefetch/\(ticket)/data?name=c&wait=20000" : "/v1/data?page=\(q(page))&name=c&wait=20000"
                        group.addTask { try await service.separateRequest(.get, uri) }
                    }
                    var replies: [Reply] = []
                    for try await reply in group { replies.append(reply) }
                    return replies
                }
                let elapsed = ContinuousClock.now - started
                #expect(replies.count == Self.consumers)
                for reply in replies {
                    #expect(reply.status == 404, "\(reply.text)")
                    #expect(reply.errorCode == code)
                    #expect(reply.header("X-Prefetch-Reason") == code)
                }
                // Promptly: far from the 20 s each consumer was ready to wait (a `pending` miss would mean a deadline).
                #expect(elapsed < .seconds(15), "consumers answered after \(elapsed)")
                #expect(upstream.hits(path: "/coalesce/c") == 1)

                // The failure is kept for its negative TTL only, then readers learn it expired.
                var last: Reply?
                let forgotten = try await eventually(within: 20) {
                    last = try await service.get("/v1/data?page=\(q(page))&name=c&wait=0")
                    return last?.errorCode != code
                }
                #expect(forgotten, "the failure was still served: \(last?.text ?? "")")
                #expect(last?.status == 404)
                #expect(last?.errorCode == "expired")
                #expect(upstream.hits(path: "/coalesce/c") == 1)

                // The next trigger leads a new fetch.
                let again = try await service.trigger(page)
                #expect(again.status == 202)
                #expect(try again.decoded(TriggerAnswer.self).requests.first?.flight == .leader, "\(again.text)")
                let retried = try await service.get("/v1/data?page=\(q(page))&name=c&wait=20000")
                #expect(retried.errorCode == code, "\(retried.text)")
                #expect(upstream.hits(path: "/coalesce/c") == 2)
            }
        }
    }

    @Test func aConsumerThatDisconnectsDoesNotCancelTheFetchForTheOthers() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/leave"
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "l", api: "\(base)/leave/l?delay=1500", timeout: 8000)])
            ])
            var settings = testSettings()
            settings.engine.maximumWait = .seconds(10)
            try await withService(config: config, settings: settings) { service in
                let ticket = try await service.ticket(page)
                let replies = try await withThrowingTaskGroup(of: Reply?.self) { group in
                    // Consumers that navigate away mid-wait, on both data endpoints.
                    for index in 0..<10 {
                        let uri =
                            index % 2 == 0 ? "/v1/prefetch/\(ticket)/data?name=l&wait=10000" : "/v1/data?page=\(q(page))&name=l&wait=10000"
                        group.addTask {
                            try await abandonedRequest(port: service.port, uri: uri, after: .milliseconds(200 + 50 * index))
                            return nil
                        }
                    }
                    for index in 0..<30 {
                        let uri =
                            index % 2 == 0 ? "/v1/prefetch/\(ticket)/data?name=l&wait=10000" : "/v1/data?page=\(q(page))&name=l&wait=10000"
                        group.addTask { try await service.separateRequest(.get, uri) }
                    }
                    var replies: [Reply] = []
                    for try await reply in group { if let reply { replies.append(reply) } }
                    return replies
                }
                #expect(replies.count == 30)
                for reply in replies {
                    #expect(reply.status == 200, "\(reply.text)")
                    #expect(Echo(reply).path == "/leave/l")
                    #expect(Echo(reply).hit == 1)
                }
                #expect(upstream.hits(path: "/leave/l") == 1)
                // A reader that comes later still finds the response.
                let late = try await service.get("/v1/prefetch/\(ticket)/data?name=l&wait=0")
                #expect(late.status == 200)
                #expect(late.header("X-Prefetch") == "hit")
                #expect(try await service.get("/healthz").status == 200)
            }
        }
    }
}
