import HTTPTypes
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import PrefetchStore

@Suite struct SingleFlightTests {
    @Test func hundredConcurrentBeginsMakeExactlyOneLeader() async throws {
        let store = makeStore()
        let outcomes = await withTaskGroup(of: BeginOutcome.self) { group in
            for _ in 0..<100 { group.addTask { await store.begin(key(), policy: policy()) } }
            return await group.reduce(into: [BeginOutcome]()) { $0.append($1) }
        }
        let leaders = outcomes.filter { if case .leader = $0 { true } else { false } }
        #expect(leaders.count == 1)
        #expect(outcomes.filter { $0 == .joined }.count == 99)
    }

    @Test func hundredWaitersAllGetTheLeadersResult() async throws {
        let store = makeStore()
        let token = try await lead(store, key(), policy: policy())
        let outcomes = await withTaskGroup(of: ReadOutcome.self) { group in
            for _ in 0..<100 { group.addTask { await store.read(key(), wait: .seconds(10)) } }
            do {
                let settled = await eventually { store.waitingReaders == 100 }
                #expect(settled)
            }
            await store.complete(key(), token: token, result: .success(response("payload")))
            return await group.reduce(into: [ReadOutcome]()) { $0.append($1) }
        }
        #expect(outcomes.count == 100)
        #expect(outcomes.allSatisfy { $0 == .ready(response("payload"), joined: true) })
        let snapshot = await store.snapshot()
        #expect(snapshot.joins == 100)
        #expect(snapshot.pending == 0)
    }

    @Test func failureIsSharedThenGoneAfterNegativeTTL() async throws {
        let clock = ManualClock()
        let store = makeStore(clock: clock)
        let failing = policy(negativeTTL: .seconds(2))
        let token = try await lead(store, key(), policy: failing)
        let failure = StoreFailure(code: .connect, message: "connection to api.test:443 refused")
        async let waiter = store.read(key(), wait: .seconds(10))
        do {
            let settled = await eventually { store.waitingReaders == 1 }
            #expect(settled)
        }
        await store.complete(key(), token: token, result: .failure(failure))
        #expect(await waiter == .failed(failure, joined: true))
        #expect(await store.read(key(), wait: .zero) == .failed(failure, joined: false))
        #expect(await store.begin(key(), policy: failing) == .fresh, "a fresh failure stops another fetch")

        clock.advance(by: .seconds(2) - .milliseconds(1))
        #expect(await store.read(key(), wait: .zero) == .failed(failure, joined: false), "still inside the negative TTL")
        clock.advance(by: .milliseconds(1))
        #expect(await store.read(key(), wait: .zero) == .absent(.expired))
        _ = try await lead(store, key(), policy: failing)  // "after negativeTTL a trigger must lead again"
    }

    @Test func cancelledWaiterLeavesTheFlightAndOtherWaitersAlone() async throws {
        let store = makeStore()
        let token = try await lead(store, key(), policy: policy())
        let cancelled = Task { await store.read(key(), wait: .seconds(10)) }
        async let first = store.read(key(), wait: .seconds(10))
        async let second = store.read(key(), wait: .seconds(10))
        do {
            let settled = await eventually { store.waitingReaders == 3 }
            #expect(settled)
        }
        cancelled.cancel()
        #expect(await cancelled.value == .pending)
        do {
            let settled = await eventually { store.waitingReaders == 2 }
            #expect(settled)
        }
        #expect(await store.snapshot().pending == 1, "the flight is still in progress")

        await store.complete(key(), token: token, result: .success(response("ok")))
        #expect(await first == .ready(response("ok"), joined: true))
        #expect(await second == .ready(response("ok"), joined: true))
        #expect(await store.read(key(), wait: .zero) == .ready(response("ok"), joined: false))
    }

    @Test func readerDeadlinePassesWithPendingAndTheFlightGoesOn() async throws {
        let clock = ManualClock()
        let store = makeStore(clock: clock)
        let token = try await lead(store, key(), policy: policy())
        async let waited = store.read(key(), wait: .milliseconds(100))
        let asleep = await eventually { clock.sleepers == 1 }
        try #require(asleep)
        #expect(store.waitingReaders == 1)
        clock.advance(by: .milliseconds(100))
        #expect(await waited == .pending)
        #expect(await store.read(key(), wait: .zero) == .pending)
        #expect(store.waitingReaders == 0)
        await store.complete(key(), token: token, result: .success(response("late")))
        #expect(await store.read(key(), wait: .zero) == .ready(response("late"), joined: false))
    }

    @Test func readNeverStartsAFlight() async throws {
        let store = makeStore()
        #expect(await store.read(key(), wait: .seconds(10)) == .absent(.notFound), "nothing to wait for: answered at once")
        _ = try await lead(store, key(), policy: policy())  // "a read must not have claimed the flight"
    }

    @Test func lockAgeLetsANewLeaderTakeOverAndIgnoresTheStaleToken() async throws {
        let clock = ManualClock()
        let store = makeStore(lockAge: .milliseconds(100), clock: clock)
        let first = try await lead(store, key(), policy: policy())
        #expect(await store.begin(key(), policy: policy()) == .joined)
        async let waiter = store.read(key(), wait: .seconds(10))
        do {
            let settled = await eventually { store.waitingReaders == 1 }
            #expect(settled)
        }
        clock.advance(by: .milliseconds(99))
        #expect(await store.begin(key(), policy: policy()) == .joined, "the lock is younger than its age")
        clock.advance(by: .milliseconds(1))
        let second = try await lead(store, key(), policy: policy())
        #expect(second != first)
        await store.complete(key(), token: first, result: .success(response("stale")))
        #expect(await store.read(key(), wait: .zero) == .pending, "the stale leader's result is ignored")
        await store.complete(key(), token: second, result: .success(response("fresh")))
        #expect(await waiter == .ready(response("fresh"), joined: true))
        #expect(await store.read(key(), wait: .zero) == .ready(response("fresh"), joined: false))
    }

    @Test func abandonedFlightKeepsWaitersForTheNextLeader() async throws {
        let store = makeStore(lockAge: .seconds(60))
        let first = try await lead(store, key(), policy: policy())
        async let waiter = store.read(key(), wait: .seconds(10))
        do {
            let settled = await eventually { store.waitingReaders == 1 }
            #expect(settled)
        }
        await store.abandon(key(), token: first)
        let second = try await lead(store, key(), policy: policy())
        await store.complete(key(), token: second, result: .success(response("second")))
        #expect(await waiter == .ready(response("second"), joined: true))
    }

    @Test func abandonedFlightWithoutWaitersIsForgotten() async throws {
        let store = makeStore()
        let token = try await lead(store, key(), policy: policy())
        await store.abandon(key(), token: token)
        #expect(await store.snapshot().entries == 0)
        #expect(await store.read(key(), wait: .zero) == .absent(.notFound))
    }
}

@Suite struct IsolationTests {
    @Test func identitiesNeverSeeEachOthersEntries() async throws {
        let alice = Identity(headers: HTTPFields([("Cookie", "sid=alice-secret")]), key: key)
        let bob = Identity(headers: HTTPFields([("Cookie", "sid=bob-secret")]), key: key)
        let body = Array("{\"page\":1}".utf8)
        let aliceKey = StoreKey(identity: alice, method: "POST", url: "https://api.test/feed", body: body)
        let bobKey = StoreKey(identity: bob, method: "POST", url: "https://api.test/feed", body: body)
        let anonKey = StoreKey(identity: .anonymous, method: "POST", url: "https://api.test/feed", body: body)
        let store = makeStore()

        await put(store, aliceKey, .success(response("alice's feed")))
        #expect(await store.read(bobKey, wait: .milliseconds(50)) == .absent(.notFound))
        #expect(await store.read(anonKey, wait: .zero) == .absent(.notFound))
        let token = try await lead(store, bobKey, policy: policy())
        await store.complete(bobKey, token: token, result: .success(response("bob's feed")))
        #expect(await store.read(aliceKey, wait: .zero).response == response("alice's feed"))
        #expect(await store.read(bobKey, wait: .zero).response == response("bob's feed"))
        #expect(!alice.digest.contains("alice-secret"))
    }

    @Test func bodyHashIsPartOfTheKey() async throws {
        let store = makeStore()
        let one = key("/search", body: Array("q=1".utf8))
        let two = key("/search", body: Array("q=2".utf8))
        await put(store, one, .success(response("one")))
        #expect(await store.read(two, wait: .zero) == .absent(.notFound))
        await put(store, two, .success(response("two")))
        #expect(await store.read(one, wait: .zero).response == response("one"))
        #expect(await store.read(two, wait: .zero).response == response("two"))
    }
}

@Suite struct LifetimeTests {
    @Test func readyEntryExpiresAfterItsTTL() async throws {
        let clock = ManualClock()
        let store = makeStore(clock: clock)
        await put(store, key(), .success(response("short")), policy: policy(ttl: .milliseconds(150)))
        #expect(await store.read(key(), wait: .zero) == .ready(response("short"), joined: false))
        clock.advance(by: .milliseconds(149))
        #expect(await store.read(key(), wait: .zero) == .ready(response("short"), joined: false))
        clock.advance(by: .milliseconds(1))
        #expect(await store.read(key(), wait: .zero) == .absent(.expired))
        let snapshot = await store.snapshot()
        #expect(snapshot.entries == 0)
        #expect(snapshot.bytes == 0)
        #expect(snapshot.expiredUnused == 0, "it was read once")
    }

    @Test func expiredUnreadResponsesAreCountedAsWaste() async throws {
        let clock = ManualClock()
        let store = makeStore(clock: clock)
        await put(store, key("/x"), .success(response("never read")), policy: policy(ttl: .milliseconds(100)))
        await put(store, key("/y"), .success(response("read")), policy: policy(ttl: .milliseconds(100)))
        _ = await store.read(key("/y"), wait: .zero)
        clock.advance(by: .milliseconds(100))
        let snapshot = await store.snapshot()
        #expect(snapshot.expiredUnused == 1)
        #expect(snapshot.entries == 0)
    }

    @Test func noStoreResponseIsHandedOutOnce() async throws {
        let store = makeStore()
        await put(store, key(), .success(response("once", noStore: true)))
        #expect(await store.read(key(), wait: .zero) == .ready(response("once", noStore: true), joined: false))
        #expect(await store.read(key(), wait: .zero) == .absent(.consumed))
        #expect(await store.snapshot().entries == 0)
        _ = try await lead(store, key(), policy: policy())  // "a consumed no-store entry must not block the next fetch"
    }

    @Test func noStoreResponseGoesToExactlyOneOfManyConcurrentWaiters() async throws {
        let store = makeStore()
        let token = try await lead(store, key(), policy: policy())
        let outcomes = await withTaskGroup(of: ReadOutcome.self) { group in
            for _ in 0..<20 { group.addTask { await store.read(key(), wait: .seconds(10)) } }
            do {
                let settled = await eventually { store.waitingReaders == 20 }
                #expect(settled)
            }
            await store.complete(key(), token: token, result: .success(response("private", noStore: true)))
            return await group.reduce(into: [ReadOutcome]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == .ready(response("private", noStore: true), joined: true) }.count == 1)
        #expect(outcomes.filter { $0 == .absent(.consumed) }.count == 19)
        #expect(await store.read(key(), wait: .zero) == .absent(.consumed))
    }

    @Test func noStoreResponseIsDeliveredExactlyOnceWhileDeadlinesRaceTheCompletion() async throws {
        let store = makeStore()
        for round in 0..<50 {
            let k = key("/race/\(round)")
            let token = try await lead(store, k, policy: policy())
            let delivered = await withTaskGroup(of: Int.self) { group in
                for reader in 0..<10 {
                    group.addTask {
                        let outcome = await store.read(k, wait: .microseconds(500 * (reader % 5)))
                        return outcome.response == nil ? 0 : 1
                    }
                }
                group.addTask {
                    try? await Task.sleep(for: .microseconds(300 * (round % 7)))
                    await store.complete(k, token: token, result: .success(response("r\(round)", noStore: true)))
                    return 0
                }
                return await group.reduce(0, +)
            }
            let late = await store.read(k, wait: .zero).response == nil ? 0 : 1
            #expect(delivered + late == 1, "round \(round): handed out \(delivered + late) times")
        }
        #expect(store.waitingReaders == 0)
    }

    @Test func retainDropsEntriesOfRemovedInterfaces() async throws {
        let store = makeStore()
        await put(store, key("/a"), .success(response("a")), policy: policy("kept"))
        await put(store, key("/b"), .success(response("b")), policy: policy("removed"))
        let token = try await lead(store, key("/c"), policy: policy("gone"))
        async let waiter = store.read(key("/c"), wait: .seconds(10))
        do {
            let settled = await eventually { store.waitingReaders == 1 }
            #expect(settled)
        }

        #expect(await store.retain(labels: ["kept"]) == 2)
        #expect(await waiter == .absent(.evicted))
        #expect(await store.read(key("/b"), wait: .zero) == .absent(.evicted))
        #expect(await store.read(key("/a"), wait: .zero).response == response("a"))
        await store.complete(key("/c"), token: token, result: .success(response("c")))
        #expect(await store.read(key("/c"), wait: .zero) == .absent(.evicted), "the dropped flight's result is not kept")
        let snapshot = await store.snapshot()
        #expect(snapshot.entries == 1)
        #expect(snapshot.expiredUnused == 1, "b was never read")
    }
}

@Suite struct BudgetTests {
    /// Accounted size of a stored `response(bytes:)` under `key(path)`.
    func footprint(_ path: String, bytes: Int) -> Int {
        MemoryStore.perEntryOverhead + key(path).accountedBytes + bytes
    }

    @Test func fillingThreeTimesTheBudgetNeverExceedsIt() async throws {
        let budget = 64 * 1024
        let store = makeStore(budget: budget)
        var generator = SystemRandomNumberGenerator()
        var inserted = 0
        var n = 0
        while inserted < 3 * budget {
            let size = Int.random(in: 0...8_000, using: &generator)
            n += 1
            await put(store, key("/item/\(n)"), .success(response(bytes: size)))
            inserted += footprint("/item/\(n)", bytes: size)
            let snapshot = await store.snapshot()
            #expect(snapshot.bytes <= budget)
            #expect(snapshot.bytes >= 0)
        }
        let snapshot = await store.snapshot()
        #expect(snapshot.evictions > 0)
        #expect(snapshot.entries < n)
        #expect(await store.read(key("/item/\(n)"), wait: .zero).response != nil, "the newest entry is kept")
    }

    @Test func pendingEntriesSurviveEviction() async throws {
        let budget = 32 * 1024
        let store = makeStore(budget: budget)
        let token = try await lead(store, key("/slow"), policy: policy())
        for n in 0..<30 {
            await put(store, key("/filler/\(n)"), .success(response(bytes: 3_000)))
        }
        #expect(await store.begin(key("/slow"), policy: policy()) == .joined, "still in flight")
        await store.complete(key("/slow"), token: token, result: .success(response("slow")))
        #expect(await store.read(key("/slow"), wait: .zero).response == response("slow"))
        #expect(await store.snapshot().bytes <= budget)
    }

    @Test func leastRecentlyUsedEntryIsEvictedFirst() async throws {
        let size = 1_000
        let budget = 4 * footprint("/a", bytes: size) + 10
        let store = makeStore(budget: budget)
        for path in ["/a", "/b", "/c", "/d"] {
            await put(store, key(path), .success(response(bytes: size)))
        }
        #expect(await store.snapshot().evictions == 0)
        _ = await store.read(key("/a"), wait: .zero)
        await put(store, key("/e"), .success(response(bytes: size)))
        #expect(await store.read(key("/b"), wait: .zero) == .absent(.evicted))
        #expect(await store.read(key("/a"), wait: .zero).response != nil)
        await put(store, key("/f"), .success(response(bytes: size)))
        #expect(await store.read(key("/c"), wait: .zero) == .absent(.evicted))
        for path in ["/a", "/d", "/e", "/f"] {
            #expect(await store.read(key(path), wait: .zero).response != nil, "\(path) should have been kept")
        }
        let snapshot = await store.snapshot()
        #expect(snapshot.evictions == 2)
        #expect(snapshot.expiredUnused == 2, "b and c were evicted unread")
    }

    @Test func oversizeResponseReachesWaitersButIsNotKept() async throws {
        let budget = 4_096
        let store = makeStore(budget: budget)
        await put(store, key("/small"), .success(response("small")))
        let token = try await lead(store, key("/huge"), policy: policy())
        async let waiter = store.read(key("/huge"), wait: .seconds(10))
        do {
            let settled = await eventually { store.waitingReaders == 1 }
            #expect(settled)
        }
        await store.complete(key("/huge"), token: token, result: .success(response(bytes: 10_000)))
        #expect(await waiter == .ready(response(bytes: 10_000), joined: true))
        let later = await store.read(key("/huge"), wait: .zero)
        #expect(later.failure?.code == .tooLarge, "a later read must learn the response was too large: \(later)")
        #expect(await store.read(key("/small"), wait: .zero).response == response("small"), "nothing was evicted for it")
        let snapshot = await store.snapshot()
        #expect(snapshot.bytes <= budget)
        #expect(snapshot.evictions == 0)
    }

    @Test func storeFullOfInFlightEntriesStillLetsTriggersLead() async throws {
        // Room for two in-flight entries plus a little, not for a third one nor for a 300-byte response beside them.
        let budget = 2 * (MemoryStore.perEntryOverhead + key("/p/0").accountedBytes) + 200
        let store = makeStore(budget: budget)
        var tokens: [FlightToken] = []
        for n in 0..<3 {
            if case .leader(let token) = await store.begin(key("/p/\(n)"), policy: policy()) { tokens.append(token) }
        }
        #expect(tokens.count == 3, "every trigger leads even when its flight cannot be tracked")
        let snapshot = await store.snapshot()
        #expect(snapshot.pending == 2)
        #expect(snapshot.bytes <= budget)
        await store.complete(key("/p/2"), token: tokens[2], result: .success(response("untracked")))
        #expect(await store.read(key("/p/2"), wait: .zero) == .absent(.notFound))
        await store.complete(key("/p/0"), token: tokens[0], result: .success(response(bytes: 300)))
        let full = await store.read(key("/p/0"), wait: .zero)
        #expect(full.failure?.code == .storeFull, "no room beside in-flight entries must be reported: \(full)")
        #expect(await store.snapshot().bytes <= budget)
    }
}
