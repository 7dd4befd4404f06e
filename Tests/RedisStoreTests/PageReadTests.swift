import PrefetchTestSupport
import Synchronization
import Testing

@testable import PrefetchStore
@testable import RedisStore

/// The Redis store's one read, `PageRead` (`read(_:canWait:notify:)`; the async reads are its adapter): its
/// outcomes, driven by Redis's replies, announcements and timers, against a real redis-server.
@Suite(.serialized) struct PageReadTests {
    /// The outcomes a read without a task hands to `notify`, or the ones it answered at once.
    final class Notified: Sendable {
        private let outcomes = Mutex<[ReadOutcome]?>(nil)
        private let waiting = Mutex<StoreWait?>(nil)
        /// The wait the store answered with, if it did not answer at once.
        var wait: StoreWait? { waiting.withLock { $0 } }

        func notify(_ read: [ReadOutcome]) {
            outcomes.withLock {
                #expect($0 == nil, "notify is called once")
                $0 = read
            }
        }

        var value: [ReadOutcome]? { outcomes.withLock { $0 } }

        /// Starts the read on `store`.
        static func read(_ store: RedisStore, _ keys: [StoreKey], canWait: Bool) -> Notified {
            let notified = Notified()
            switch store.read(keys, canWait: canWait, notify: { notified.notify($0) }) {
            case .done(let outcomes): notified.notify(outcomes)
            case .waiting(let wait): notified.waiting.withLock { $0 = wait }
            }
            return notified
        }

        /// The outcomes once they are in.
        func outcomes() async -> [ReadOutcome]? {
            _ = await eventually(within: 10) { self.value != nil }
            return value
        }
    }

    @Test func aWaitingReadIsWokenByAnotherReplicasCompletion() async throws {
        try await withRedis { server in
            // Polling slower than the test: only the announcement can wake the reader on replica b.
            try await withReplicas(server, configuration: testConfiguration(pollInterval: .seconds(120))) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await put(a, key("/ready"), .success(response("ready"))))
                let token = try #require(await a.begin(key("/flying"), policy: policy("feed")).token)
                let read = Notified.read(b, [key("/ready"), key("/flying"), key("/none")], canWait: true)
                #expect(await eventually { b.waitingReaders == 1 }, "the reader joined the flight")
                #expect(read.value == nil, "still waiting on the flight")
                await a.complete(key("/flying"), token: token, result: .success(response("flown")))
                let outcomes = try #require(await read.outcomes())
                #expect(outcomes.map(\.body) == ["ready", "flown", nil])
                #expect(outcomes[1].isJoined && !outcomes[0].isJoined)
                #expect(outcomes[2] == .absent(.notFound))
                #expect(b.waitingReaders == 0)
            }
        }
    }

    @Test func expiringTheWaitReadsWhatIsStillInFlightAsPending() async throws {
        try await withRedis { server in
            try await withReplicas(server, configuration: testConfiguration(pollInterval: .seconds(120))) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                _ = try #require(await a.begin(key("/flying"), policy: policy()).token)
                let read = Notified.read(b, [key("/flying")], canWait: true)
                #expect(await eventually { b.waitingReaders == 1 })
                read.wait?.expire()
                #expect(await read.outcomes() == [.pending])
                #expect(b.waitingReaders == 0)
                // Without a wait, a flight reads pending at once, after Redis's answer.
                #expect(await Notified.read(b, [key("/flying")], canWait: false).outcomes() == [.pending])
            }
        }
    }

    @Test func expiringAWaitInTheFallbackStoreReadsPending() async throws {
        try await withRedis { server in
            try await withReplicas(server, count: 1) { replicas in
                let store = replicas[0]
                await server.stop()
                #expect(await eventually { store.isDegraded }, "the store noticed the outage")
                _ = try #require(await store.begin(key("/during"), policy: policy()).token, "led in the fallback store")
                let read = Notified.read(store, [key("/during")], canWait: true)
                // Redis refused the probe and the key waits in the fallback store: ending the read's wait ends that
                // one too, which answers at once (it used to do so under the read's own lock and trap).
                #expect(await eventually { store.fallback.waitingReaders == 1 }, "the read waits in the fallback store")
                try #require(read.wait).expire()
                #expect(await read.outcomes() == [.pending])
                #expect(store.fallback.waitingReaders == 0)
            }
        }
    }

    @Test func aNoStoreResponseIsHandedOutOnceToReadsWithoutATask() async throws {
        try await withRedis { server in
            try await withReplicas(server) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await put(a, key("/once"), .success(response("once", noStore: true))))
                let reads = (0..<10).map { Notified.read(replicas[$0 % 2], [key("/once")], canWait: false) }
                var outcomes: [ReadOutcome] = []
                for read in reads { outcomes += try #require(await read.outcomes()) }
                #expect(outcomes.count { $0.body == "once" } == 1)
                #expect(outcomes.count { $0 == .absent(.consumed) } == 9)
                #expect(await b.read(key("/once"), wait: .zero) == .absent(.consumed))
            }
        }
    }

    @Test func aKeptResponseIsAnsweredAtOnceFromTheLocalTier() async throws {
        try await withRedis { server in
            try await withReplicas(server, configuration: testConfiguration(localTTL: .seconds(30))) { replicas in
                let b = replicas[1]
                #expect(await put(replicas[0], key("/kept"), .success(response("kept"))))
                // Not in b's local tier before b read it: the read asks Redis, and is answered later.
                let first = Notified.read(b, [key("/kept")], canWait: false)
                #expect(first.wait != nil, "not in b's local tier before b read it")
                #expect(await first.outcomes()?.map(\.body) == ["kept"])
                // Read once through Redis, now local: answered without a round trip.
                switch b.read([key("/kept")], canWait: false, notify: { _ in }) {
                case .done(let outcomes): #expect(outcomes.map(\.body) == ["kept"])
                default: Issue.record("a local copy is answered at once")
                }
            }
        }
    }
}
