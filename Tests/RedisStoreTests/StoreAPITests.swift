import MetricsTestKit
import PrefetchStore
import PrefetchTestSupport
import Synchronization
import Testing

@testable import RedisStore

/// The one store API (`begin(_:then:)`, `settle(_:then:)`, `read(_:canWait:notify:)`), held by both stores alike:
/// each function runs exactly once, with what the store did; the memory store runs it before the call returns, the
/// Redis store once Redis answered. No caller asks which kind of store it has.
@Suite(.serialized) struct StoreAPITests {
    /// What a store handed to a callback: how many times it was called, with what, and whether before the call that
    /// took it returned.
    final class Calls<Value: Sendable>: Sendable {
        private struct State {
            var values: [Value] = []
            var returned = false
            var beforeReturn = 0
        }

        private let state = Mutex(State())

        func call(_ value: Value) {
            state.withLock { state in
                state.values.append(value)
                if !state.returned { state.beforeReturn += 1 }
            }
        }

        /// The call that took the callback has returned.
        func returned() { state.withLock { $0.returned = true } }

        var values: [Value] { state.withLock { $0.values } }
        var calledBeforeReturn: Bool { state.withLock { $0.beforeReturn > 0 } }

        /// The values once the callback was called.
        func called() async -> [Value] {
            _ = await eventually(within: 10) { !self.values.isEmpty }
            return values
        }
    }

    /// Runs `body` on a memory store and on a Redis store, telling it whether answers come before returning.
    private func onEveryStore(_ body: (any ResponseStore, _ inline: Bool) async throws -> Void) async throws {
        try await body(MemoryStore(logger: quietLogger, metricsFactory: TestMetrics()), true)
        try await withRedis { server in
            try await withReplicas(server, count: 1) { stores in try await body(stores[0], false) }
        }
    }

    @Test func aBeginCallsItsFunctionOnceWithEveryClaimsOutcome() async throws {
        try await onEveryStore { store, inline in
            let calls = Calls<[BeginOutcome]>()
            store.begin([(key("/one"), policy()), (key("/two"), policy()), (key("/one"), policy())]) { calls.call($0) }
            calls.returned()
            #expect(calls.calledBeforeReturn == inline)
            let outcomes = await calls.called()
            #expect(outcomes.count == 1, "called exactly once")
            let claims = try #require(outcomes.first)
            #expect(claims.count == 3)
            #expect(claims[0].token != nil && claims[1].token != nil, "a new key's first claim leads")
            #expect(claims[2].token == nil, "a second claim of the same key in the same call does not lead")
        }
    }

    @Test func aSettleCallsItsFunctionOnceAndItsResultsAreThenRead() async throws {
        try await onEveryStore { store, inline in
            let began = Calls<[BeginOutcome]>()
            store.begin([(key("/settled"), policy()), (key("/dropped"), policy())]) { began.call($0) }
            let claims = try #require(await began.called().first)
            let (settledToken, droppedToken) = (try #require(claims[0].token), try #require(claims[1].token))
            let settled = Calls<Bool>()
            store.settle([
                .complete(key("/settled"), token: settledToken, result: .success(response("kept"))),
                .abandon(key("/dropped"), token: droppedToken),
                .put(key("/put"), policy: policy(), result: .success(response("put"))),
            ]) { settled.call(true) }
            settled.returned()
            #expect(settled.calledBeforeReturn == inline)
            #expect(await settled.called() == [true], "called exactly once")
            #expect(await store.read(key("/settled"), wait: .zero).body == "kept")
            #expect(await store.read(key("/put"), wait: .zero).body == "put")
            let next = Calls<[BeginOutcome]>()
            store.begin([(key("/dropped"), policy())]) { next.call($0) }
            #expect(await next.called().first?.first?.token != nil, "an abandoned flight is led again at once")
        }
    }

    @Test func aReadThatHasItsAnswersNeverNotifies() async throws {
        try await onEveryStore { store, inline in
            let began = Calls<[BeginOutcome]>()
            store.begin([(key("/flying"), policy())]) { began.call($0) }
            let token = try #require(await began.called().first?.first?.token)
            let notified = Calls<[ReadOutcome]>()
            let read = store.read([key("/flying"), key("/none")], canWait: false) { notified.call($0) }
            notified.returned()
            switch read {
            case .done(let outcomes):
                // The memory store has every answer at hand; the Redis store only when Redis answered before the
                // call returned (a loaded machine can deschedule the caller that long).
                #expect(outcomes == [.pending, .absent(.notFound)])
                #expect(notified.values.isEmpty, "answered at once, so never notified")
            case .waiting:
                #expect(!inline, "the memory store has every answer at hand")
                #expect(await notified.called() == [[.pending, .absent(.notFound)]])
            }
            // A reader that may wait is notified once, when the flight settles.
            let waiting = Calls<[ReadOutcome]>()
            guard case .waiting = store.read([key("/flying")], canWait: true, notify: { waiting.call($0) }) else {
                Issue.record("a key in flight is waited for")
                return
            }
            let settled = Calls<Bool>()
            store.settle([.complete(key("/flying"), token: token, result: .success(response("flown")))]) { settled.call(true) }
            _ = await settled.called()
            let outcomes = await waiting.called()
            #expect(outcomes.count == 1, "notified exactly once")
            #expect(outcomes.first?.map(\.body) == ["flown"])
            if inline { #expect(notified.values.isEmpty, "an answer given at once is never also notified") }
        }
    }
}
