import Foundation
import Logging
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import Synchronization
import Testing

@testable import RendererPool

@Suite(.timeLimit(.minutes(1))) struct PoolTests {
    @Test func acquireBeforeRunColdStartsThenReusesWarm() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(), logger: testLogger, seed: 1)
        let first = try await pool.acquire(page: "https://app.example/a")
        #expect(!first.warm)
        #expect(first.uses == 1)
        #expect(await pool.release(id: first.id))
        let second = try await pool.acquire(page: nil)
        #expect(second.warm)
        #expect(second.rendererID == first.rendererID)
        #expect(second.uses == 2)
        let snapshot = await pool.snapshot()
        #expect(snapshot.coldStarts == 1)
        #expect(snapshot.warmHits == 1)
        #expect(snapshot.leased == 1)
        #expect(snapshot.acquireWaitMs.samples == 2)
        #expect(snapshot.memoryMB == 80)
    }

    /// A warm lease without suspending (the fast path's `POST /v1/open`): the lease `acquire` would grant at once,
    /// the same bookkeeping; nil, with nothing changed, whenever `acquire` would not hand out an idle renderer at once.
    @Test func aWarmRendererIsLeasedWithoutSuspendingAndNothingElseIs() async throws {
        let pool = RendererPool(
            name: "main", profile: modelledProfile(maxSize: 2, acquireTimeout: 50) { $0.maxLeasesPerCaller = 1 }, logger: testLogger)
        // Nothing idle yet: nil, and the pool is as it was.
        let empty = await pool.snapshot()
        #expect(pool.acquireWithoutSuspending(page: "https://app.example/a", caller: "client:a") == nil)
        #expect(await pool.snapshot() == empty)

        let cold = try await pool.acquire(page: nil)
        #expect(await pool.release(id: cold.id))
        let idle = await pool.snapshot()
        #expect(idle.idle == 1)

        // A dead idle renderer is not handed out here (the async acquire retires it).
        cold.modelled.kill()
        #expect(pool.acquireWithoutSuspending(page: nil, caller: nil) == nil)
        #expect(await pool.snapshot() == idle)
        let replacement = try await pool.acquire(page: nil)
        #expect(replacement.rendererID != cold.rendererID)
        #expect(await pool.release(id: replacement.id))

        // Warm: leased at once, told the page, counted as a warm hit with its caller's slot taken.
        let warm = try #require(pool.acquireWithoutSuspending(page: "https://app.example/b", caller: "client:a"))
        #expect(warm.warm && warm.rendererID == replacement.rendererID && warm.uses == 2)
        #expect(await warm.renderer.openedPages() == ["https://app.example/b"])
        let leased = await pool.snapshot()
        #expect(leased.leased == 1 && leased.idle == 0 && leased.warmHits == 1)
        #expect(await pool.leasesHeld(by: "client:a") == 1)

        // The caller at its share: nil, nothing changed; the async acquire refuses it as before.
        let other = try await pool.acquire(page: nil, caller: "client:b")
        #expect(await pool.release(id: other.id))
        let before = await pool.snapshot()
        #expect(pool.acquireWithoutSuspending(page: nil, caller: "client:a") == nil)
        #expect(await pool.snapshot() == before)
        await #expect(throws: PoolError.self) { try await pool.acquire(page: nil, caller: "client:a") }

        // Released like any lease.
        #expect(await pool.release(id: warm.id))
        #expect(await pool.release(id: warm.id) == false)
    }

    @Test func resetClearsThePreviousPageBeforeReuse() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(maxSize: 1), logger: testLogger)
        let first = try await pool.acquire(page: "https://app.example/secret")
        #expect(await first.renderer.openedPages() == ["https://app.example/secret"])
        await pool.release(id: first.id)
        let second = try await pool.acquire(page: "https://app.example/next")
        #expect(second.rendererID == first.rendererID)
        #expect(await second.renderer.openedPages() == ["https://app.example/next"])
    }

    @Test func releaseUnhealthyDestroysTheRenderer() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(maxSize: 1), logger: testLogger)
        let first = try await pool.acquire(page: nil)
        #expect(await pool.release(id: first.id, healthy: false))
        #expect(first.modelled.isDestroyed)
        #expect(await pool.release(id: first.id) == false)
        let second = try await pool.acquire(page: nil)
        #expect(second.rendererID != first.rendererID)
        #expect(!second.warm)
        #expect(await pool.snapshot().destroyed == 1)
    }

    @Test func aDeadIdleRendererIsNeverHandedOut() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(maxSize: 1), logger: testLogger)
        let first = try await pool.acquire(page: nil)
        await pool.release(id: first.id)
        first.modelled.kill()
        let second = try await pool.acquire(page: nil)
        #expect(second.rendererID != first.rendererID)
        #expect(!second.modelled.isDead)
        #expect(first.modelled.isDestroyed)
    }

    @Test func aRendererThatDiesDuringItsLeaseIsNotReused() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(maxSize: 1), logger: testLogger)
        let first = try await pool.acquire(page: nil)
        first.modelled.kill()
        // The shell did not notice; the reset fails and the renderer is destroyed instead of reused.
        await pool.release(id: first.id, healthy: true)
        #expect(first.modelled.isDestroyed)
        let second = try await pool.acquire(page: nil)
        #expect(second.rendererID != first.rendererID)
    }

    @Test func exhaustedPoolTimesOut() async throws {
        let clock = ManualClock()
        let pool = RendererPool(
            name: "main", profile: modelledProfile(maxSize: 1, acquireTimeout: 100), logger: testLogger, clock: clock)
        let held = try await pool.acquire(page: nil)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await #expect(throws: PoolError(.timeout, "renderer pool main: no renderer within 100 ms (maxSize 1)")) {
                    try await pool.acquire(page: nil)
                }
            }
            do {
                let settled = await eventually { await pool.snapshot().pending == 1 }
                #expect(settled)
            }
            clock.advance(by: .milliseconds(100))
            try await group.waitForAll()
        }
        let snapshot = await pool.snapshot()
        #expect(snapshot.timeouts == 1)
        #expect(snapshot.pending == 0)
        #expect(snapshot.live == 1)
        await pool.release(id: held.id)
        _ = try await pool.acquire(page: nil)
    }

    @Test func waitersAreServedFirstComeFirstServed() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(maxSize: 1), logger: testLogger, clock: ManualClock())
        let held = try await pool.acquire(page: nil)
        let order = Recorder<Int>()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for waiter in 1...4 {
                group.addTask {
                    let lease = try await pool.acquire(page: nil)
                    order.add(waiter)
                    await pool.release(id: lease.id)
                }
                // Start the next waiter only once this one is queued.
                do {
                    let settled = await eventually { await pool.snapshot().pending == waiter }
                    #expect(settled)
                }
            }
            await pool.release(id: held.id)
            try await group.waitForAll()
        }
        #expect(order.values == [1, 2, 3, 4])
        #expect(await pool.snapshot().created == 1)
    }

    @Test func maxUsesRecyclesTheRenderer() async throws {
        let profile = modelledProfile(maxSize: 1) { $0.maxUses = 2 }
        let pool = RendererPool(name: "main", profile: profile, logger: testLogger)
        var ids: [RendererID] = []
        for _ in 0..<3 {
            let lease = try await pool.acquire(page: nil)
            ids.append(lease.rendererID)
            await pool.release(id: lease.id)
        }
        #expect(ids[0] == ids[1])
        #expect(ids[2] != ids[1])
        #expect(await pool.snapshot().destroyed == 1)
    }

    @Test func lifetimeRecyclesAtReleaseAndWhileIdle() async throws {
        let profile = modelledProfile(maxSize: 2) {
            $0.maxLifetime = 0.2
            $0.lifetimeJitter = 0
        }
        let clock = ManualClock()
        let pool = RendererPool(name: "main", profile: profile, logger: testLogger, clock: clock)
        let old = try await pool.acquire(page: nil)
        let idleOne = try await pool.acquire(page: nil)
        await pool.release(id: idleOne.id)
        clock.advance(by: .milliseconds(200))
        await pool.release(id: old.id)
        #expect(old.modelled.isDestroyed)
        #expect(await pool.snapshot().idle == 1)
        await pool.housekeeping()
        #expect(idleOne.modelled.isDestroyed)
        let snapshot = await pool.snapshot()
        #expect(snapshot.idle == 0)
        #expect(snapshot.destroyed == 2)
    }

    @Test func lifetimeJitterSpreadsExpiry() async throws {
        let profile = modelledProfile(maxSize: 8) {
            $0.maxLifetime = 100
            $0.lifetimeJitter = 0.5
        }
        let pool = RendererPool(name: "main", profile: profile, logger: testLogger, seed: 42)
        var leases: [Lease] = []
        for _ in 0..<8 { leases.append(try await pool.acquire(page: nil)) }
        let lifetimes = Set(await pool.lifetimes().values)
        #expect(lifetimes.count == 8)
        #expect(lifetimes.allSatisfy { $0 > .seconds(50) && $0 <= .seconds(100) })
    }

    @Test func idleRenderersShrinkBackToMinIdle() async throws {
        let profile = modelledProfile(minIdle: 1, maxSize: 4) { $0.idleTimeout = 0.2 }
        let clock = ManualClock()
        let pool = RendererPool(name: "main", profile: profile, logger: testLogger, clock: clock)
        var leases: [Lease] = []
        for _ in 0..<3 { leases.append(try await pool.acquire(page: nil)) }
        for lease in leases { await pool.release(id: lease.id) }
        #expect(await pool.snapshot().idle == 3)
        await pool.housekeeping()
        #expect(await pool.snapshot().idle == 3)
        clock.advance(by: .milliseconds(199))
        await pool.housekeeping()
        #expect(await pool.snapshot().idle == 3)
        clock.advance(by: .milliseconds(1))
        await pool.housekeeping()
        let snapshot = await pool.snapshot()
        #expect(snapshot.idle == 1)
        #expect(snapshot.destroyed == 2)
    }

    @Test func aLeaseNeverReleasedIsReclaimed() async throws {
        let profile = modelledProfile(maxSize: 1) { $0.leaseTimeout = 0.2 }
        let clock = ManualClock()
        let pool = RendererPool(name: "main", profile: profile, logger: testLogger, clock: clock)
        let forgotten = try await pool.acquire(page: nil)
        clock.advance(by: .milliseconds(199))
        await pool.housekeeping()
        #expect(await pool.snapshot().leased == 1)
        clock.advance(by: .milliseconds(1))
        await pool.housekeeping()
        let snapshot = await pool.snapshot()
        #expect(snapshot.reclaimed == 1)
        #expect(snapshot.leased == 0)
        #expect(forgotten.modelled.isDestroyed)
        #expect(await pool.release(id: forgotten.id) == false)
        let next = try await pool.acquire(page: nil)
        #expect(next.rendererID != forgotten.rendererID)
    }

    @Test func clearDestroysIdleRenderersAndRefills() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(minIdle: 2, maxSize: 3), logger: testLogger)
        await pool.clear()
        var snapshot = await pool.snapshot()
        #expect(snapshot.idle == 2)
        #expect(snapshot.created == 2)
        let held = try await pool.acquire(page: nil)
        #expect(held.warm)
        await pool.clear()
        snapshot = await pool.snapshot()
        #expect(snapshot.destroyed == 1)
        #expect(snapshot.leased == 1)
        #expect(snapshot.idle == 2)
        #expect(snapshot.created == 4)
    }

    @Test func runKeepsMinIdleWarmAndDestroysEverythingWhenItEnds() async throws {
        let clock = ManualClock()
        let pool = RendererPool(
            name: "main", profile: modelledProfile(minIdle: 2, maxSize: 4, createMs: 20), logger: testLogger,
            tick: .milliseconds(20), clock: clock)
        let leased = try await withRunningPool(pool) {
            do {
                let settled = await eventually { await pool.snapshot().idle == 2 }
                #expect(settled)
            }
            let lease = try await pool.acquire(page: nil)
            #expect(lease.warm)
            #expect(await pool.snapshot().idle == 1)
            // The refill runs once per tick of the pool's clock.
            do {
                let settled = await eventually {
                    clock.advance(by: .milliseconds(20))
                    return await pool.snapshot().idle == 2
                }
                #expect(settled)
            }
            let snapshot = await pool.snapshot()
            #expect(snapshot.leased == 1)
            #expect(snapshot.created == 3)
            return lease
        }
        let snapshot = await pool.snapshot()
        #expect(snapshot.live == 0)
        #expect(snapshot.destroyed == 3)
        #expect(leased.modelled.isDestroyed)
        await #expect(throws: PoolError.self) { try await pool.acquire(page: nil) }
    }

    @Test func invariantsHoldUnderConcurrencyWithFailuresAndDeaths() async throws {
        let profile = modelledProfile(minIdle: 1, maxSize: 3, createMs: 2) {
            $0.failureRate = 0.15
            $0.deathRate = 0.1
            $0.maxUses = 4
        }
        let clock = ManualClock()
        let pool = RendererPool(
            name: "main", profile: profile, logger: testLogger, seed: 7, tick: .milliseconds(5),
            healthCheckInterval: .milliseconds(5), clock: clock)
        let inUse = InUse()
        let violations = Recorder<String>()
        let outcomes = Recorder<Bool>()
        try await withRunningPool(pool) {
            await withTaskGroup(of: Void.self) { group in
                // Samples the live count and drives the pool's ticks: 400 ticks of 5 ms stay far below the
                // acquire timeout (5 s) and the lease timeout (60 s).
                group.addTask {
                    for _ in 0..<400 {
                        let live = await pool.snapshot().live
                        if live > 3 { violations.add("live \(live) > maxSize") }
                        clock.advance(by: .milliseconds(5))
                        await Task.yield()
                    }
                }
                for worker in 0..<12 {
                    group.addTask {
                        var random = SeededRandom(seed: UInt64(worker))
                        for round in 0..<15 {
                            let lease: Lease
                            do throws(PoolError) {
                                lease = try await pool.acquire(page: "page-\(worker)-\(round)")
                            } catch {
                                // Three creation failures in a row can happen at this failure rate.
                                if error.code != .createFailed { violations.add("acquire: \(error)") }
                                outcomes.add(false)
                                continue
                            }
                            outcomes.add(true)
                            if lease.modelled.isDead { violations.add("dead renderer \(lease.rendererID) handed out") }
                            if lease.modelled.isDestroyed { violations.add("destroyed \(lease.rendererID) handed out") }
                            let pages = await lease.renderer.openedPages()
                            if pages != ["page-\(worker)-\(round)"] { violations.add("unclean state \(pages)") }
                            let fresh = inUse.insert(lease.rendererID)
                            if !fresh { violations.add("\(lease.rendererID) leased twice") }
                            let live = await pool.snapshot().live
                            if live > 3 { violations.add("live \(live) > maxSize") }
                            for _ in 0..<Int.random(in: 0...3, using: &random) { await Task.yield() }
                            if Int.random(in: 0..<10, using: &random) == 0 { lease.modelled.kill() }
                            inUse.remove(lease.rendererID)
                            let healthy = Int.random(in: 0..<8, using: &random) != 0
                            await pool.release(id: lease.id, healthy: healthy)
                        }
                    }
                }
            }
        }
        #expect(violations.values == [])
        #expect(outcomes.values.filter { $0 }.count > 150)
        let snapshot = await pool.snapshot()
        #expect(snapshot.live == 0)
        #expect(snapshot.destroyed == snapshot.created)
        #expect(snapshot.createFailures > 0)
        #expect(snapshot.warmHits > 0)
        #expect(snapshot.acquireWaitMs.samples > 0)
    }
}

@Suite(.timeLimit(.minutes(1))) struct PoolsTests {
    @Test func profilesDecodeFromJSONAndPoolsServeByName() async throws {
        let json = #"{"main": {"minIdle": 0, "createMs": 1}, "third": {"maxSize": 1, "createMs": 1}}"#
        let profiles = try JSONDecoder().decode([String: RendererProfile].self, from: Data(json.utf8))
        let pools = try RendererPools(profiles: profiles, logger: testLogger)
        let lease = try await pools.acquire(profile: "third", page: "https://partner.example/")
        #expect(lease.profile == "third")
        await #expect(throws: PoolError(.unknownProfile, #"no renderer profile named "none""#)) {
            try await pools.acquire(profile: "none", page: nil)
        }
        let snapshots = await pools.snapshot()
        #expect(snapshots["third"]?.leased == 1)
        #expect(snapshots["main"]?.live == 0)
        #expect(await pools.release(lease))
        #expect(await pools.pool(named: "third")?.snapshot().idle == 1)
        await pools.clear()
        #expect(await pools.pool(named: "third")?.snapshot().destroyed == 1)
    }
}
