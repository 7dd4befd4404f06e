import Foundation
import HTTPTypes
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import PrefetchFetcher

/// Fair admission across page opens: the queue on its own, then a real fetcher against a real upstream.
@Suite struct AdmissionTests {
    @Test func aGroupNeverAdmittedGoesBeforeABurstsNextRequest() {
        var queue = AdmissionQueue<String>()
        for index in 1...4 { queue.append("a\(index)", group: "a") }
        #expect(queue.popNext() == "a1")
        queue.append("b1", group: "b")
        queue.append("c1", group: "c")
        queue.append("b2", group: "b")
        // b and c were never admitted: they go first, in arrival order; then the groups alternate.
        var order: [String] = []
        while let next = queue.popNext() { order.append(next) }
        #expect(order == ["b1", "c1", "a2", "b2", "a3", "a4"])
        #expect(queue.isEmpty && queue.count == 0)
    }

    @Test func withOneGroupItIsFIFO() {
        var queue = AdmissionQueue<Int>()
        for index in 0..<200 { queue.append(index, group: "") }
        var order: [Int] = []
        while let next = queue.popNext() { order.append(next) }
        #expect(order == Array(0..<200))
    }

    @Test func removalCallsThePredicateOncePerElementAndKeepsOrder() {
        var queue = AdmissionQueue<Int>()
        for index in 0..<10 { queue.append(index, group: index % 2 == 0 ? "even" : "odd") }
        var calls = 0
        queue.removeAll { value in
            calls += 1
            return value % 3 == 0
        }
        #expect(calls == 10)
        #expect(queue.count == 6)
        #expect(queue.minimum { $0 } == 1)
        var order: [Int] = []
        while let next = queue.popNext() { order.append(next) }
        #expect(order == [2, 1, 4, 5, 8, 7])
        #expect(queue.drain().isEmpty)
    }

    @Test func aPrependedElementGoesFirstInItsGroup() {
        var queue = AdmissionQueue<String>()
        queue.append("a1", group: "a")
        queue.append("a2", group: "a")
        #expect(queue.popNext() == "a1")
        queue.prepend("a1-again", group: "a")
        queue.prepend("b0", group: "b")
        #expect(queue.count == 3)
        var order: [String] = []
        while let next = queue.popNext() { order.append(next) }
        // b was never admitted, so it goes first; a's retry goes before a2.
        #expect(order == ["b0", "a1-again", "a2"])
    }

    /// One slot, held by a request that never answers while page A queues four requests and then page B one;
    /// once the slot frees, B's is served second, not fifth. Only the order of events decides, no timing.
    @Test func onePagesBurstDoesNotStarveAnother() async throws {
        try await withUpstream { upstream in
            try await withFetcher(FetcherConfiguration(maxTransfers: 1)) { fetcher in
                let base = "http://127.0.0.1:\(upstream.port)/fair"
                let blocker = Task {
                    try? await fetcher.fetch(FetchRequest(url: "http://127.0.0.1:\(upstream.port)/block?hang=1", timeout: .seconds(30)))
                }
                do {
                    let settled = await eventually { upstream.hits(path: "/block") == 1 }
                    #expect(settled)
                }
                let burst = Task {
                    await withTaskGroup(of: Void.self) { group in
                        for index in 1...4 {
                            group.addTask {
                                _ = try? await fetcher.fetch(
                                    FetchRequest(url: "\(base)?n=a\(index)", timeout: .seconds(30), group: "page-a"))
                            }
                        }
                    }
                }
                do {
                    let settled = await eventually { fetcher.inFlight == 5 }
                    #expect(settled)
                }
                let other = Task { try await fetcher.fetch(FetchRequest(url: "\(base)?n=b1", timeout: .seconds(30), group: "page-b")) }
                do {
                    let settled = await eventually { fetcher.inFlight == 6 }
                    #expect(settled)
                }
                blocker.cancel()
                let answer = try await other.value
                await burst.value
                // The upstream numbers the requests to one path in the order it serves them.
                #expect(answer.status == 200)
                let hit = (try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["hit"] as? Int
                #expect(hit == 2, "page B's request was served as number \(hit ?? -1) of 5")
                #expect(answer.queued > .zero, "it waited for the slot, and says so")
            }
        }
    }

    /// A page whose interfaces share one host runs them all at once: no per-host cap below the transfer limit,
    /// unless one is set.
    @Test func oneHostIsNotCappedBelowTheTransferLimit() async throws {
        // Every answer is held at a gate until the test releases it, so no connection is free for reuse while the
        // fetcher decides how many to open: the requests in flight at once are the connections it opened.
        for (limit, expected) in [(nil, 12), (Optional(4), 4)] as [(Int?, Int)] {
            try await withUpstream { upstream in
                let gate = "admission-\(limit.map(String.init) ?? "default")"
                try await withFetcher(FetcherConfiguration(maxTransfers: 64, maxConnectionsPerHost: limit)) { fetcher in
                    await withTaskGroup(of: Void.self) { group in
                        for index in 0..<12 {
                            group.addTask {
                                _ = try? await fetcher.fetch(
                                    FetchRequest(
                                        url: "http://127.0.0.1:\(upstream.port)/one?hold=\(gate)&n=\(index)", timeout: .seconds(60)))
                            }
                        }
                        // `expected` requests wait at the gate at once: one connection each.
                        let inFlight = await eventually(within: 30) { upstream.held(gate) >= expected }
                        #expect(inFlight, "per-host limit \(limit.map(String.init) ?? "default"): \(upstream.held(gate)) in flight")
                        #expect(upstream.connections() == expected, "per-host limit \(limit.map(String.init) ?? "default")")
                        upstream.release(gate)
                    }
                    // The rest went over the connections already open, once answers freed them.
                    #expect(upstream.hits(path: "/one") == 12)
                    #expect(upstream.connections() == expected, "per-host limit \(limit.map(String.init) ?? "default")")
                }
            }
        }
    }
}

/// Header lines as the fetcher reads them.
@Suite struct HeaderLineTests {
    @Test func whitespaceBeforeTheColonIsRemoved() {
        #expect(headerField("Set-Cookie : guest=1; Path=/")?.name.rawName == "Set-Cookie")
        #expect(headerField("Set-Cookie\t: guest=1")?.name.rawName == "Set-Cookie")
        #expect(headerField("Set-Cookie : guest=1")?.value == "guest=1")
        #expect(headerField("Content-Type:application/json")?.value == "application/json")
        #expect(headerField(" : orphan") == nil)
        #expect(headerField("no colon") == nil)
    }
}

/// The test upstream's gate (`hold=NAME`), which the tests above use to decide when an answer goes.
@Suite struct UpstreamGateTests {
    @Test func aGateReleasedAfterShutdownAnswersNothingAndTheHeldRequestFails() async throws {
        let upstream = try await TestUpstream.start()
        try await withFetcher { fetcher in
            async let held = fetcher.fetch(FetchRequest(url: "http://127.0.0.1:\(upstream.port)/g?hold=late", timeout: .seconds(60)))
            #expect(await eventually { upstream.held("late") == 1 })
            try await upstream.shutdown()
            // Its event loops are gone: a release finds nothing to answer (and schedules nothing on them).
            #expect(upstream.release("late") == 0)
            // The held request's connection closed with the server: it fails, never answered.
            do {
                let answer = try await held
                Issue.record("a request held at a gate was answered after shutdown: \(answer.status)")
            } catch {}
        }
    }
}
