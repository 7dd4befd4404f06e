import HTTPTypes
import MetricsTestKit
import PrefetchCore
import PrefetchStore
import PrefetchTestSupport
import PrefetchTestUpstream
import Synchronization
import Testing

@testable import RedisStore

/// Two stores ("replicas") sharing one real redis-server started for each test.
@Suite(.serialized) struct ReplicaTests {
    @Test func responseCompletedOnOneReplicaIsAHitOnTheOther() async throws {
        try await withRedis { server in
            try await withReplicas(server) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await put(a, key(), .success(response("shared"))))
                #expect(await b.begin(key(), policy: policy()) == .fresh, "the other replica must not fetch again")
                let outcome = await b.read(key(), wait: .zero)
                #expect(outcome.content == Content(response("shared")))
                #expect(!outcome.isJoined)
                #expect(await b.read(key("/other"), wait: .milliseconds(50)) == .absent(.notFound))
                #expect(!a.isDegraded && !b.isDegraded)
            }
        }
    }

    @Test func hundredConcurrentBeginsOverTwoReplicasMakeExactlyOneLeader() async throws {
        try await withRedis { server in
            try await withReplicas(server) { replicas in
                let outcomes = await withTaskGroup(of: BeginOutcome.self) { group in
                    for index in 0..<100 {
                        let store = replicas[index % 2]
                        group.addTask { await store.begin(key(), policy: policy()) }
                    }
                    return await group.reduce(into: [BeginOutcome]()) { $0.append($1) }
                }
                #expect(outcomes.count { $0.token != nil } == 1)
                #expect(outcomes.count { $0 == .joined } == 99)
            }
        }
    }

    @Test func hundredReadersOnBothReplicasAllGetTheFlightsResult() async throws {
        try await withRedis { server in
            let metrics = [TestMetrics(), TestMetrics()]
            // Polling slower than the readers' wait: only the pub/sub announcement can wake replica b's readers.
            let configuration = testConfiguration(pollInterval: .seconds(120))
            try await withReplicas(server, configuration: configuration, metrics: metrics) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let token = try #require(await a.begin(key(), policy: policy("feed")).token)
                let readers = Task {
                    await withTaskGroup(of: ReadOutcome.self) { group in
                        for index in 0..<100 {
                            let store = replicas[index % 2]
                            group.addTask { await store.read(key(), wait: .seconds(60)) }
                        }
                        return await group.reduce(into: [ReadOutcome]()) { $0.append($1) }
                    }
                }
                do {
                    let settled = await eventually { a.waitingReaders + b.waitingReaders == 100 }
                    #expect(settled)
                }
                await a.complete(key(), token: token, result: .success(response("payload")))
                // Far less than the readers' own wait: they must have been woken, not timed out.
                let outcomes =
                    await bounded(20, "waking the readers") {
                        await withTaskCancellationHandler {
                            await readers.value
                        } onCancel: {
                            readers.cancel()
                        }
                    } ?? []
                #expect(outcomes.count == 100)
                #expect(outcomes.allSatisfy { $0.content == Content(response("payload")) && $0.isJoined })
                let joins = try metrics.map {
                    try $0.expectCounter("prefetch_store_joins_total", [("interface", "feed")]).totalValue
                }
                #expect(joins == [50, 50])
                #expect(await a.snapshot().joins + b.snapshot().joins == 100)
            }
        }
    }

    @Test func readersWakeByPollingOnTheStoresClockWhenNoSubscriberRuns() async throws {
        try await withRedis { server in
            // No subscriber runs, so nothing announces the completion to b: its readers find it at their next poll.
            // The replicas' clock is moved by hand, so the poll comes when the test moves time past it, for a read
            // made without a task and for an async one alike (their poll timers are sleepers on that clock).
            let clock = ManualClock()
            let configuration = testConfiguration(pollInterval: .seconds(30))
            try await withReplicas(server, configuration: configuration, runServices: false, clock: clock) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let token = try #require(await a.begin(key(), policy: policy()).token)
                let called = Mutex<[ReadOutcome]?>(nil)
                let read = b.read([key()], canWait: true) { outcomes in called.withLock { $0 = outcomes } }
                guard case .waiting(let wait) = read else {
                    Issue.record("a read of a flight on another replica answered at once: \(read)")
                    return
                }
                let awaited = Mutex<ReadOutcome?>(nil)
                let reader = Task {
                    let outcome = await b.read(key(), wait: .seconds(3600))
                    awaited.withLock { $0 = outcome }
                }
                defer { reader.cancel() }
                // Both readers asleep on the clock: their two poll timers and the async read's deadline.
                let asleep = await eventually { b.waitingReaders == 2 && clock.sleepers == 3 }
                #expect(asleep, "waiting readers \(b.waitingReaders), sleepers \(clock.sleepers)")
                await a.complete(key(), token: token, result: .success(response("polled")))
                #expect(called.withLock { $0 } == nil, "a reader polled before its interval had passed")
                clock.advance(by: .seconds(31))
                let outcome = await eventuallyValue { awaited.withLock { $0 } }
                #expect(outcome?.body == "polled")
                #expect(outcome?.isJoined == true)
                let polled = await eventuallyValue { called.withLock { $0 } }
                #expect(polled?.map(\.body) == ["polled"])
                wait.expire()
            }
        }
    }

    @Test func identitiesStayIsolatedAcrossReplicas() async throws {
        try await withRedis { server in
            try await withReplicas(server) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let alice = key("/feed", identity: Identity(headers: HTTPFields([("Cookie", "sid=alice-secret")]), key: testIdentityKey))
                let bob = key("/feed", identity: Identity(headers: HTTPFields([("Cookie", "sid=bob-secret")]), key: testIdentityKey))
                #expect(await put(a, alice, .success(response("alice's feed"))))
                #expect(await b.read(bob, wait: .milliseconds(50)) == .absent(.notFound))
                #expect(await b.read(key("/feed"), wait: .zero) == .absent(.notFound))
                #expect(await put(b, bob, .success(response("bob's feed"))), "bob's trigger fetches for bob")
                #expect(await a.read(bob, wait: .zero).body == "bob's feed")
                #expect(await b.read(alice, wait: .zero).body == "alice's feed")
            }
        }
    }

    @Test func noStoreResponseIsHandedOutExactlyOnceAcrossReplicas() async throws {
        try await withRedis { server in
            try await withReplicas(server) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                // Nobody waiting: the first of many concurrent readers on both replicas gets it.
                #expect(await put(a, key("/once"), .success(response("once", noStore: true))))
                let late = await withTaskGroup(of: ReadOutcome.self) { group in
                    for index in 0..<20 {
                        let store = replicas[index % 2]
                        group.addTask { await store.read(key("/once"), wait: .zero) }
                    }
                    return await group.reduce(into: [ReadOutcome]()) { $0.append($1) }
                }
                #expect(late.count { $0.content == Content(response("once", noStore: true)) } == 1)
                #expect(late.count { $0 == .absent(.consumed) } == 19)
                #expect(await b.begin(key("/once"), policy: policy()).token != nil, "consumed: the next trigger fetches")

                // Readers waiting on both replicas when it completes: exactly one gets it.
                let token = try #require(await a.begin(key("/private"), policy: policy()).token)
                let waiting = await withTaskGroup(of: ReadOutcome.self) { group in
                    for index in 0..<20 {
                        let store = replicas[index % 2]
                        group.addTask { await store.read(key("/private"), wait: .seconds(30)) }
                    }
                    do {
                        let settled = await eventually { a.waitingReaders + b.waitingReaders == 20 }
                        #expect(settled)
                    }
                    await a.complete(key("/private"), token: token, result: .success(response("private", noStore: true)))
                    return await group.reduce(into: [ReadOutcome]()) { $0.append($1) }
                }
                #expect(waiting.count { $0.body == "private" } == 1)
                #expect(waiting.count { $0 == .absent(.consumed) } == 19)
                #expect(await b.read(key("/private"), wait: .zero) == .absent(.consumed))
            }
        }
    }

    @Test func entriesExpireThroughRedisOnEveryReplica() async throws {
        try await withRedis { server in
            // A local tier cap far above the TTL: only the Redis expiry can end the local copies. The replicas'
            // clock is moved by hand and Redis is told to end the value, so no read races a short TTL.
            let clock = ManualClock()
            try await withReplicas(server, configuration: testConfiguration(localTTL: .seconds(600)), clock: clock) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await put(a, key(), .success(response("short")), policy: policy(ttl: .seconds(30))))
                #expect(await b.read(key(), wait: .zero).body == "short")
                #expect(await a.read(key(), wait: .zero).body == "short")
                // The TTL passes: Redis ends the value (its expiry), and the local copies end with it.
                try await expireNow(server, a.keySpace.keys(for: key()).entry)
                clock.advance(by: .seconds(31))
                let expired = await eventually {
                    let (onB, onA) = (await b.read(key(), wait: .zero), await a.read(key(), wait: .zero))
                    return onB == .absent(.expired) && onA == .absent(.expired)
                }
                #expect(expired, "the entry expired on both replicas")
                #expect(await b.begin(key(), policy: policy()).token != nil, "after expiry a trigger fetches again")
            }
        }
    }

    @Test func failureIsSharedAcrossReplicasOnlyForTheNegativeTTL() async throws {
        try await withRedis { server in
            // The negative TTL is long and ended by hand (the clock moved, Redis told to end the value), so no read
            // races it on a loaded machine.
            let clock = ManualClock()
            try await withReplicas(server, clock: clock) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let failing = policy(negativeTTL: .seconds(30))
                let failure = StoreFailure(code: .connect, message: "connection to api.test:443 refused")
                let token = try #require(await a.begin(key(), policy: failing).token)
                async let waiter = b.read(key(), wait: .seconds(30))
                do {
                    let settled = await eventually { b.waitingReaders == 1 }
                    #expect(settled)
                }
                await a.complete(key(), token: token, result: .failure(failure))
                #expect(await waiter == .failed(failure, joined: true))
                #expect(await b.read(key(), wait: .zero) == .failed(failure, joined: false))
                #expect(await b.begin(key(), policy: failing) == .fresh, "a fresh failure stops another fetch")
                // The negative TTL passes: Redis ends the failure (its expiry).
                try await expireNow(server, a.keySpace.keys(for: key()).entry)
                clock.advance(by: .seconds(31))
                let expired = await eventually { await b.read(key(), wait: .zero) == .absent(.expired) }
                #expect(expired, "the failure expired after its negative TTL")
                #expect(await b.begin(key(), policy: failing).token != nil)

                // A zero negative TTL shares the failure with the readers already waiting, and keeps nothing.
                let zero = policy(negativeTTL: .zero)
                let second = try #require(await a.begin(key("/z"), policy: zero).token)
                async let zeroWaiter = b.read(key("/z"), wait: .seconds(30))
                do {
                    let settled = await eventually { b.waitingReaders == 1 }
                    #expect(settled)
                }
                await a.complete(key("/z"), token: second, result: .failure(failure))
                #expect(await zeroWaiter == .failed(failure, joined: true))
                #expect(await a.begin(key("/z"), policy: zero).token != nil, "nothing was cached")
            }
        }
    }

    @Test func anotherReplicaTakesOverAfterTheLockAgeAndTheStaleLeaderIsIgnored() async throws {
        try await withRedis { server in
            // A long lock age ended by hand (the clock moved, Redis told to end the lock), so no step races it.
            let clock = ManualClock()
            try await withReplicas(server, configuration: testConfiguration(lockAge: .seconds(30)), clock: clock) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let first = try #require(await a.begin(key(), policy: policy()).token)
                #expect(await b.begin(key(), policy: policy()) == .joined)
                async let waiter = b.read(key(), wait: .seconds(600))
                do {
                    let settled = await eventually { b.waitingReaders == 1 }
                    #expect(settled)
                }
                // The lock is a Redis key that expires after the lock age: b joins until then, then leads.
                try await expireNow(server, a.keySpace.keys(for: key()).lock)
                clock.advance(by: .seconds(31))
                let second = try #require(await eventuallyValue { await b.begin(key(), policy: policy()).token }, "the lock age passed")
                await a.complete(key(), token: first, result: .success(response("stale")))
                #expect(await a.read(key(), wait: .zero) == .pending, "the stale leader's result is ignored")
                await b.complete(key(), token: second, result: .success(response("fresh")))
                let outcome = await waiter
                #expect(outcome.body == "fresh")
                #expect(outcome.isJoined)
                #expect(await a.read(key(), wait: .zero).body == "fresh")
            }
        }
    }

    @Test func abandonedFlightLetsTheNextTriggerLeadAndKeepsWaitersWaiting() async throws {
        try await withRedis { server in
            try await withReplicas(server) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let first = try #require(await a.begin(key(), policy: policy()).token)
                async let waiter = b.read(key(), wait: .seconds(30))
                do {
                    let settled = await eventually { b.waitingReaders == 1 }
                    #expect(settled)
                }
                await a.abandon(key(), token: first)
                let second = try #require(await b.begin(key(), policy: policy()).token, "no lock age to wait for")
                await b.complete(key(), token: second, result: .success(response("second")))
                #expect(await waiter.body == "second")
            }
        }
    }

    @Test func retainDropsEntriesOfRemovedInterfacesOnEveryReplica() async throws {
        try await withRedis { server in
            try await withReplicas(server) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await put(a, key("/a"), .success(response("a")), policy: policy("kept")))
                #expect(await put(a, key("/b"), .success(response("b")), policy: policy("removed")))
                let token = try #require(await a.begin(key("/c"), policy: policy("gone")).token)
                async let waiter = a.read(key("/c"), wait: .seconds(30))
                do {
                    let settled = await eventually { a.waitingReaders == 1 }
                    #expect(settled)
                }

                #expect(await b.retain(labels: ["kept"]) == 2)
                #expect(await waiter == .absent(.evicted))
                #expect(await b.read(key("/b"), wait: .zero) == .absent(.evicted))
                #expect(await a.read(key("/a"), wait: .zero).body == "a")
                await a.complete(key("/c"), token: token, result: .success(response("c")))
                #expect(await a.read(key("/c"), wait: .zero) == .absent(.evicted), "the dropped flight's result is not kept")
                #expect(await a.snapshot().entries == 1)
            }
        }
    }

    @Test func redisOutageDegradesToLocalFallbackAndRecoversByItself() async throws {
        try await withRedis { server in
            let metrics = [TestMetrics(), TestMetrics()]
            try await withReplicas(server, metrics: metrics) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await put(a, key("/before"), .success(response("before"))))
                // A flight led in Redis whose leader completes only after Redis is gone.
                let midFlight = try #require(await a.begin(key("/mid"), policy: policy()).token)
                async let midWaiter = a.read(key("/mid"), wait: .seconds(30))
                do {
                    let settled = await eventually { a.waitingReaders == 1 }
                    #expect(settled)
                }

                await server.stop()
                do {
                    let settled = await eventually { a.isDegraded && b.isDegraded }
                    #expect(settled, "both notice the outage")
                }
                await a.complete(key("/mid"), token: midFlight, result: .success(response("mid")))
                #expect(await midWaiter.body == "mid", "the result is kept on this replica and reaches its waiter")
                #expect(try metrics[0].expectGauge("prefetch_store_redis_up").lastValue == 0)

                // Every call still answers, promptly; each replica fetches and serves for itself.
                let token = try #require(
                    await bounded(10, "begin during outage") { await a.begin(key("/during"), policy: policy()) }?.token)
                #expect(await bounded(10, "begin on the other replica") { await b.begin(key("/during"), policy: policy()) }?.token != nil)
                #expect(await bounded(10, "second begin") { await a.begin(key("/during"), policy: policy()) } == .joined)
                async let waiter = a.read(key("/during"), wait: .seconds(30))
                await a.complete(key("/during"), token: token, result: .success(response("during")))
                #expect(await waiter.body == "during")
                #expect(await bounded(10, "read during outage") { await a.read(key("/during"), wait: .zero) }?.body == "during")
                #expect(await bounded(10, "read of a missing key") { await b.read(key("/during"), wait: .seconds(1)) } != nil)
                #expect(await bounded(10, "retain during outage") { await a.retain(labels: ["profile"]) } != nil)
                #expect(await bounded(10, "snapshot during outage") { await b.snapshot() } != nil)

                try await server.launch()
                do {
                    let settled = await eventually(within: 15) { !a.isDegraded && !b.isDegraded }
                    #expect(settled, "both reconnect by themselves")
                }
                #expect(a.reconnects >= 1 && b.reconnects >= 1)
                #expect(try metrics[1].expectCounter("prefetch_store_redis_reconnects_total").totalValue >= 1)
                #expect(try metrics[1].expectGauge("prefetch_store_redis_up").lastValue == 1)

                // The outage's result is still served by the replica that fetched it.
                #expect(await a.read(key("/during"), wait: .zero).body == "during")
                // Shared again: a flight on one replica is a hit on the other.
                #expect(await put(b, key("/after"), .success(response("after"))))
                #expect(await a.read(key("/after"), wait: .zero).body == "after")
            }
        }
    }
}
