import Testing

@testable import RendererPool

/// Drives a ``PoolState`` the way the pool's shell does, synchronously and with explicit instants, and checks
/// the state machine's invariants after every event.
struct PoolDriver {
    typealias Step = PoolState.AcquireStep

    var state: PoolState
    /// The instant every event is reported at; tests move it with `advance(by:)`.
    var now: ContinuousClock.Instant
    private var issued = 0

    init(name: String = "main", profile: RendererProfile, healthCheckInterval: Duration = .seconds(1), seed: UInt64 = 1) {
        state = PoolState(
            settings: PoolState.Settings(name: name, profile: profile, healthCheckInterval: healthCheckInterval),
            seed: seed)
        // Any instant serves as the origin: the state machine only ever compares the instants it is given.
        now = ContinuousClock.now
    }

    mutating func advance(by duration: Duration) {
        now = now.advanced(by: duration)
    }

    /// Starts an acquire; returns its id and first step.
    mutating func start(caller: String? = nil) -> (id: PoolState.AcquireID, step: Step) {
        let (id, step, actions) = state.acquire(caller: caller, now: now)
        check(actions)
        return (id, step)
    }

    /// Performs an acquire's steps with healthy renderers and successful creations, until it is granted,
    /// fails or waits.
    mutating func drive(_ id: PoolState.AcquireID, _ step: Step) -> Step {
        var step = step
        while true {
            let next: (step: Step, actions: PoolState.Actions)
            switch step {
            case .checkHealth:
                next = state.healthChecked(id, healthy: true, now: now)
            case .create:
                next = state.created(id, createTime: .milliseconds(300), now: now)
            case .open:
                issued += 1
                next = state.opened(id, leaseID: LeaseID(stringLiteral: "lease-\(issued)"), now: now)
            case .wait, .granted, .failed:
                return step
            }
            check(next.actions)
            step = next.step
        }
    }

    /// Acquires and expects a lease at once.
    mutating func lease(caller: String? = nil) throws -> PoolState.Grant {
        let (id, step) = start(caller: caller)
        guard case .granted(let grant) = drive(id, step) else {
            Issue.record("acquire was not granted at once")
            throw PoolDriverError()
        }
        return grant
    }

    /// Releases a lease; a reset it asks for succeeds and a destroy completes. Returns the acquires woken.
    @discardableResult
    mutating func release(_ grant: PoolState.Grant, healthy: Bool = true) -> [PoolState.Resume] {
        guard let actions = state.release(leaseID: grant.leaseID, healthy: healthy, now: now) else {
            Issue.record("lease \(grant.leaseID) unknown")
            return []
        }
        return settle(actions)
    }

    /// Performs actions as a well-behaved shell: every reset succeeds, every destroy completes. Returns the
    /// acquires woken on the way, in order.
    @discardableResult
    mutating func settle(_ actions: PoolState.Actions) -> [PoolState.Resume] {
        var woken = actions.resume
        for rendererID in actions.reset {
            let next = state.resetFinished(rendererID, ok: true, now: now)
            check(next)
            woken += settle(next)
        }
        for retirement in actions.destroy {
            let next = state.destroyed(retirement.rendererID, now: now)
            check(next)
            woken += settle(next)
        }
        return woken
    }

    /// The invariants every event keeps.
    func check(_ actions: PoolState.Actions, sourceLocation: SourceLocation = #_sourceLocation) {
        let settings = state.settings
        #expect(state.entries.count <= settings.maxSize, "live above maxSize", sourceLocation: sourceLocation)
        if !state.queue.isEmpty {
            #expect(state.idle.isEmpty, "an acquire waits while a renderer is idle", sourceLocation: sourceLocation)
            #expect(
                state.entries.count == settings.maxSize, "an acquire waits while a slot is free",
                sourceLocation: sourceLocation)
        }
        #expect(actions.counts == state.counts, sourceLocation: sourceLocation)
        #expect(Set(state.idle).count == state.idle.count, sourceLocation: sourceLocation)
        for rendererID in state.idle {
            #expect(state.entries[rendererID]?.life.state == .idle, sourceLocation: sourceLocation)
        }
    }
}

struct PoolDriverError: Error {}

private func profile(
    minIdle: Int = 0, maxSize: Int = 2, acquireTimeout: Double = 2000, _ adjust: (inout RendererProfile) -> Void = { _ in }
) -> RendererProfile {
    var profile = RendererProfile()
    profile.minIdle = minIdle
    profile.maxSize = maxSize
    profile.acquireTimeout = acquireTimeout
    profile.lifetimeJitter = 0
    adjust(&profile)
    return profile
}

@Suite struct PoolStateAcquireTests {
    @Test func aColdStartCreatesThenChecksThenOpens() throws {
        var pool = PoolDriver(profile: profile())
        let (id, step) = pool.start()
        #expect(step == .create("main-1"))
        #expect(pool.state.counts == PoolState.Counts(warming: 1))
        let created = pool.state.created(id, createTime: .milliseconds(300), now: pool.now)
        #expect(created.step == .checkHealth("main-1"))
        let checked = pool.state.healthChecked(id, healthy: true, now: pool.now)
        #expect(checked.step == .open("main-1"))
        pool.advance(by: .milliseconds(20))
        let opened = pool.state.opened(id, leaseID: "L", now: pool.now)
        let grant = PoolState.Grant(
            leaseID: "L", rendererID: "main-1", warm: false, waited: .milliseconds(20), createTime: .milliseconds(300),
            uses: 1)
        #expect(opened.step == .granted(grant))
        #expect(opened.actions.counts == PoolState.Counts(leased: 1))
        let snapshot = pool.state.snapshot(memoryMB: 0)
        #expect(snapshot.coldStarts == 1)
        #expect(snapshot.created == 1)
        #expect(snapshot.acquireWaitMs.samples == 1)
    }

    @Test func aWarmHitTakesTheMostRecentlyUsedIdleRenderer() throws {
        var pool = PoolDriver(profile: profile(maxSize: 3))
        let a = try pool.lease()
        let b = try pool.lease()
        pool.release(a)
        pool.release(b)
        #expect(pool.state.idle == ["main-1", "main-2"])
        let (id, step) = pool.start()
        #expect(step == .checkHealth("main-2"))
        guard case .granted(let grant) = pool.drive(id, step) else { throw PoolDriverError() }
        #expect(grant.warm)
        #expect(grant.uses == 2)
        #expect(pool.state.snapshot(memoryMB: 0).warmHits == 1)
    }

    @Test func waitersAreServedFirstComeFirstServed() throws {
        var pool = PoolDriver(profile: profile(maxSize: 1))
        var held = try pool.lease()
        let waiters = (0..<4).map { _ in pool.start() }
        #expect(waiters.allSatisfy { $0.step == .wait })
        #expect(pool.state.counts.pending == 4)
        var served: [PoolState.AcquireID] = []
        for _ in waiters {
            let woken = pool.release(held)
            try #require(woken.count == 1)
            #expect(woken[0].step == .checkHealth("main-1"))
            served.append(woken[0].id)
            guard case .granted(let grant) = pool.drive(woken[0].id, woken[0].step) else { throw PoolDriverError() }
            held = grant
        }
        #expect(served == waiters.map(\.id))
        #expect(pool.state.snapshot(memoryMB: 0).created == 1)
    }

    @Test func aNewcomerQueuesBehindWaitersAndTheRefillDoesNotOvertakeThem() throws {
        var pool = PoolDriver(profile: profile(minIdle: 1, maxSize: 1))
        let held = try pool.lease()
        let first = pool.start()
        #expect(first.step == .wait)
        let releaseActions = pool.state.release(leaseID: held.leaseID, healthy: false, now: pool.now)
        let release = try #require(releaseActions)
        #expect(release.destroy == [PoolState.Retirement(rendererID: "main-1", reason: .releasedUnhealthy)])
        // Before the destroy completes a newcomer arrives; it queues behind the first waiter.
        let newcomer = pool.start()
        #expect(newcomer.step == .wait)
        #expect(pool.state.nextRefill(now: pool.now) == nil)
        let destroyed = pool.state.destroyed("main-1", now: pool.now)
        pool.check(destroyed)
        #expect(destroyed.resume == [PoolState.Resume(id: first.id, step: .create("main-2"))])
        #expect(pool.state.queue == [newcomer.id])
        #expect(pool.state.nextRefill(now: pool.now) == nil)
    }

    @Test func maxSizeCountsWarmingLeasedResettingAndRetiringRenderers() throws {
        var pool = PoolDriver(profile: profile(minIdle: 1, maxSize: 4))
        #expect(pool.state.nextRefill(now: pool.now) == "main-1")
        _ = try pool.lease()
        let resetting = try pool.lease()
        let retiring = try pool.lease()
        let resetActions = pool.state.release(leaseID: resetting.leaseID, healthy: true, now: pool.now)
        let reset = try #require(resetActions)
        #expect(reset.reset == ["main-3"])
        let destroyActions = pool.state.release(leaseID: retiring.leaseID, healthy: false, now: pool.now)
        let destroy = try #require(destroyActions)
        #expect(destroy.destroy.map(\.rendererID) == ["main-4"])
        let snapshot = pool.state.snapshot(memoryMB: 0)
        #expect([snapshot.warming, snapshot.leased, snapshot.resetting, snapshot.retiring] == [1, 1, 1, 1])

        let waiter = pool.start()
        #expect(waiter.step == .wait)
        let woken = pool.settle(destroy)
        #expect(woken == [PoolState.Resume(id: waiter.id, step: .create("main-5"))])
    }

    @Test func aHealthCheckFailureKeepsTheHeadOfTheQueue() throws {
        var pool = PoolDriver(profile: profile(maxSize: 2))
        let a = try pool.lease()
        _ = try pool.lease()
        let first = pool.start()
        let second = pool.start()
        let woken = pool.release(a)
        #expect(woken == [PoolState.Resume(id: first.id, step: .checkHealth("main-1"))])
        #expect(pool.state.queue == [second.id])

        let failed = pool.state.healthChecked(first.id, healthy: false, now: pool.now)
        pool.check(failed.actions)
        #expect(failed.step == .wait)
        #expect(failed.actions.destroy == [PoolState.Retirement(rendererID: "main-1", reason: .unhealthy)])
        #expect(pool.state.queue == [first.id, second.id])
        let afterDestroy = pool.settle(failed.actions)
        #expect(afterDestroy == [PoolState.Resume(id: first.id, step: .create("main-3"))])
        #expect(pool.state.queue == [second.id])
    }

    @Test func aHealthCheckFailureMovesOnToAnotherIdleRendererAtOnce() throws {
        var pool = PoolDriver(profile: profile(maxSize: 2))
        let a = try pool.lease()
        let b = try pool.lease()
        pool.release(a)
        pool.release(b)
        let (id, step) = pool.start()
        #expect(step == .checkHealth("main-2"))
        let failed = pool.state.healthChecked(id, healthy: false, now: pool.now)
        #expect(failed.step == .checkHealth("main-1"))
        #expect(failed.actions.destroy.map(\.rendererID) == ["main-2"])
    }

    @Test func theAcquireTimeoutFailsOnlyAQueuedAcquireAndOnlyAtItsDeadline() throws {
        var pool = PoolDriver(profile: profile(maxSize: 1, acquireTimeout: 2000))
        let held = try pool.lease(caller: "bob")
        let waiter = pool.start(caller: "alice")
        #expect(pool.state.deadline(of: waiter.id) == pool.now.advanced(by: .seconds(2)))
        pool.advance(by: .milliseconds(1999))
        let early = pool.state.timedOut(waiter.id, now: pool.now)
        #expect(early.resume.isEmpty)
        #expect(pool.state.queue == [waiter.id])
        pool.advance(by: .milliseconds(1))
        let late = pool.state.timedOut(waiter.id, now: pool.now)
        pool.check(late)
        #expect(late.resume == [PoolState.Resume(id: waiter.id, step: .failed(.timeout))])
        #expect(late.counts.pending == 0)
        #expect(pool.state.leasesHeld(by: "alice") == 0)
        #expect(pool.state.snapshot(memoryMB: 0).timeouts == 1)

        // A timer going off after its acquire was served changes nothing.
        let served = pool.start()
        let woken = pool.release(held)
        #expect(woken.map(\.id) == [served.id])
        pool.advance(by: .seconds(5))
        #expect(pool.state.timedOut(served.id, now: pool.now).resume.isEmpty)
        guard case .granted = pool.drive(served.id, woken[0].step) else { throw PoolDriverError() }
    }

    @Test func aZeroAcquireTimeoutFailsAtOnceWhenThePoolIsFull() throws {
        var pool = PoolDriver(profile: profile(maxSize: 1, acquireTimeout: 0))
        _ = try pool.lease()
        let refused = pool.start(caller: "alice")
        #expect(refused.step == .failed(.timeout))
        #expect(pool.state.queue.isEmpty)
        #expect(pool.state.leasesHeld(by: "alice") == 0)
    }

    @Test func cancellingEndsAQueuedAcquireButNotOneBeingServed() throws {
        var pool = PoolDriver(profile: profile(maxSize: 1))
        let creating = pool.start(caller: "alice")
        #expect(creating.step == .create("main-1"))
        #expect(pool.state.cancelled(creating.id, now: pool.now).resume.isEmpty)
        let queued = pool.start(caller: "bob")
        let cancelled = pool.state.cancelled(queued.id, now: pool.now)
        pool.check(cancelled)
        #expect(cancelled.resume == [PoolState.Resume(id: queued.id, step: .failed(.cancelled))])
        #expect(pool.state.leasesHeld(by: "bob") == 0)
        guard case .granted = pool.drive(creating.id, creating.step) else { throw PoolDriverError() }
        #expect(pool.state.leasesHeld(by: "alice") == 1)
    }

    @Test func threeFailedCreationsFailTheAcquireAndFreeTheSlotForTheNext() throws {
        var pool = PoolDriver(profile: profile(maxSize: 1))
        let error = RendererError(.createFailed, "modelled creation failed")
        let first = pool.start()
        let waiter = pool.start()
        #expect(first.step == .create("main-1"))
        #expect(waiter.step == .wait)
        let retry1 = pool.state.createFailed(first.id, error: error, now: pool.now)
        pool.check(retry1.actions)
        #expect(retry1.step == .create("main-2"))
        #expect(retry1.actions.resume.isEmpty)
        let retry2 = pool.state.createFailed(first.id, error: error, now: pool.now)
        #expect(retry2.step == .create("main-3"))
        let gaveUp = pool.state.createFailed(first.id, error: error, now: pool.now)
        pool.check(gaveUp.actions)
        #expect(gaveUp.step == .failed(.createFailed(error)))
        #expect(gaveUp.actions.resume == [PoolState.Resume(id: waiter.id, step: .create("main-4"))])
        let snapshot = pool.state.snapshot(memoryMB: 0)
        #expect(snapshot.createFailures == 3)
        #expect(snapshot.destroyed == 0)
    }
}

@Suite struct PoolStateCallerTests {
    @Test func aCallerAtItsCapIsRefusedAtOnceWhileOthersQueue() throws {
        var pool = PoolDriver(profile: profile(maxSize: 1) { $0.maxLeasesPerCaller = 1 })
        let alice = try pool.lease(caller: "alice")
        let refused = pool.start(caller: "alice")
        #expect(refused.step == .failed(.callerLimit(held: 1, limit: 1)))
        #expect(pool.state.queue.isEmpty)
        let bob = pool.start(caller: "bob")
        #expect(bob.step == .wait)
        #expect(pool.state.leasesHeld(by: "bob") == 1)
        #expect(pool.start(caller: "bob").step == .failed(.callerLimit(held: 1, limit: 1)))
        #expect(pool.state.snapshot(memoryMB: 0).timeouts == 0)
        pool.release(alice)
        #expect(pool.state.leasesHeld(by: "alice") == 0)
    }

    @Test func releasingDestroyingOrReclaimingFreesTheSlot() throws {
        var pool = PoolDriver(profile: profile(maxSize: 2) { $0.maxLeasesPerCaller = 1 })
        pool.release(try pool.lease(caller: "alice"))
        #expect(pool.state.leasesHeld(by: "alice") == 0)
        pool.release(try pool.lease(caller: "alice"), healthy: false)
        #expect(pool.state.leasesHeld(by: "alice") == 0)
        _ = try pool.lease(caller: "alice")
        pool.advance(by: .seconds(60))
        pool.settle(pool.state.tick(now: pool.now))
        #expect(pool.state.leasesHeld(by: "alice") == 0)
        _ = try pool.lease(caller: "alice")
    }
}

@Suite struct PoolStateRetirementTests {
    @Test func maxUsesRetiresAtRelease() throws {
        var pool = PoolDriver(profile: profile(maxSize: 1) { $0.maxUses = 2 })
        let first = try pool.lease()
        #expect(pool.state.release(leaseID: first.leaseID, healthy: true, now: pool.now)?.reset == ["main-1"])
        pool.settle(pool.state.resetFinished("main-1", ok: true, now: pool.now))
        let second = try pool.lease()
        #expect(second.rendererID == "main-1")
        let releaseActions = pool.state.release(leaseID: second.leaseID, healthy: true, now: pool.now)
        let release = try #require(releaseActions)
        #expect(release.destroy == [PoolState.Retirement(rendererID: "main-1", reason: .maxUses)])
        pool.settle(release)
        #expect(try pool.lease().rendererID == "main-2")
    }

    @Test func aFailedResetRetires() throws {
        var pool = PoolDriver(profile: profile(maxSize: 1))
        let lease = try pool.lease()
        _ = pool.state.release(leaseID: lease.leaseID, healthy: true, now: pool.now)
        let failed = pool.state.resetFinished("main-1", ok: false, now: pool.now)
        #expect(failed.destroy == [PoolState.Retirement(rendererID: "main-1", reason: .resetFailed)])
        #expect(pool.state.idle.isEmpty)
    }

    @Test func maxLifetimeRetiresAtReleaseAndWhileIdle() throws {
        var pool = PoolDriver(profile: profile(maxSize: 2) { $0.maxLifetime = 10 })
        let old = try pool.lease()
        let idle = try pool.lease()
        pool.release(idle)
        pool.advance(by: .seconds(9))
        #expect(pool.state.tick(now: pool.now).destroy.isEmpty)
        pool.advance(by: .seconds(1))
        let releaseActions = pool.state.release(leaseID: old.leaseID, healthy: true, now: pool.now)
        let release = try #require(releaseActions)
        #expect(release.destroy == [PoolState.Retirement(rendererID: "main-1", reason: .lifetime)])
        let tick = pool.state.tick(now: pool.now)
        #expect(tick.destroy == [PoolState.Retirement(rendererID: "main-2", reason: .lifetime)])
        #expect(pool.state.idle.isEmpty)
        pool.settle(release)
        pool.settle(tick)
        #expect(pool.state.snapshot(memoryMB: 0).destroyed == 2)
    }

    @Test func lifetimeJitterIsDrawnFromTheSeed() throws {
        func lifetimes(seed: UInt64) throws -> [RendererID: Duration] {
            var pool = PoolDriver(
                profile: profile(maxSize: 8) {
                    $0.maxLifetime = 100
                    $0.lifetimeJitter = 0.5
                }, seed: seed)
            for _ in 0..<8 { _ = try pool.lease() }
            return pool.state.lifetimes()
        }
        let first = try lifetimes(seed: 42)
        #expect(try lifetimes(seed: 42) == first)
        #expect(try lifetimes(seed: 43) != first)
        #expect(Set(first.values).count == 8)
        #expect(first.values.allSatisfy { $0 > .seconds(50) && $0 <= .seconds(100) })
    }

    @Test func aLeaseHeldPastTheLeaseTimeoutIsReclaimed() throws {
        var pool = PoolDriver(profile: profile(maxSize: 2) { $0.leaseTimeout = 60 })
        let forgotten = try pool.lease(caller: "alice")
        // An acquire still health checking its renderer holds no lease yet and is never reclaimed.
        let checking = pool.start()
        pool.advance(by: .seconds(59))
        #expect(pool.state.tick(now: pool.now).destroy.isEmpty)
        pool.advance(by: .seconds(61))
        let tick = pool.state.tick(now: pool.now)
        #expect(tick.destroy == [PoolState.Retirement(rendererID: "main-1", reason: .reclaimed, leaseID: forgotten.leaseID)])
        #expect(pool.state.leasesHeld(by: "alice") == 0)
        #expect(pool.state.release(leaseID: forgotten.leaseID, healthy: true, now: pool.now) == nil)
        pool.settle(tick)
        let snapshot = pool.state.snapshot(memoryMB: 0)
        #expect(snapshot.reclaimed == 1)
        #expect(snapshot.destroyed == 1)
        guard case .granted = pool.drive(checking.id, checking.step) else { throw PoolDriverError() }
    }

    @Test func idleRenderersShrinkToMinIdleLeastRecentlyUsedFirst() throws {
        var pool = PoolDriver(profile: profile(minIdle: 1, maxSize: 4) { $0.idleTimeout = 300 })
        let leases = try (0..<3).map { _ in try pool.lease() }
        for lease in leases { pool.release(lease) }
        #expect(pool.state.idle == ["main-1", "main-2", "main-3"])
        pool.advance(by: .seconds(299))
        #expect(pool.state.tick(now: pool.now).destroy.isEmpty)
        pool.advance(by: .seconds(1))
        let tick = pool.state.tick(now: pool.now)
        #expect(tick.destroy.map(\.rendererID) == ["main-1", "main-2"])
        #expect(tick.destroy.allSatisfy { $0.reason == .idle })
        #expect(pool.state.idle == ["main-3"])
        pool.settle(tick)
        #expect(pool.state.snapshot(memoryMB: 0).live == 1)
    }

    @Test func idleRenderersAreHealthCheckedEveryInterval() throws {
        var pool = PoolDriver(profile: profile(maxSize: 2), healthCheckInterval: .seconds(1))
        let a = try pool.lease()
        let b = try pool.lease()
        pool.release(a)
        pool.release(b)
        #expect(pool.state.tick(now: pool.now).checkIdle == ["main-1", "main-2"])
        pool.advance(by: .milliseconds(500))
        #expect(pool.state.tick(now: pool.now).checkIdle.isEmpty)
        pool.advance(by: .milliseconds(500))
        #expect(pool.state.tick(now: pool.now).checkIdle == ["main-1", "main-2"])
        // main-2 is leased before its check answers: the answer no longer matters.
        let taken = pool.start()
        #expect(taken.step == .checkHealth("main-2"))
        #expect(pool.state.idleChecked("main-2", healthy: false, now: pool.now).destroy.isEmpty)
        let dead = pool.state.idleChecked("main-1", healthy: false, now: pool.now)
        #expect(dead.destroy == [PoolState.Retirement(rendererID: "main-1", reason: .unhealthy)])
        #expect(pool.state.idle.isEmpty)
    }

    @Test func clearDestroysOnlyIdleRenderers() throws {
        var pool = PoolDriver(profile: profile(maxSize: 3))
        let held = try pool.lease()
        pool.release(try pool.lease())
        let clear = pool.state.clear(now: pool.now)
        #expect(clear.destroy == [PoolState.Retirement(rendererID: "main-2", reason: .cleared)])
        pool.settle(clear)
        #expect(pool.state.snapshot(memoryMB: 0).leased == 1)
        pool.release(held)
    }
}

@Suite struct PoolStateRefillTests {
    @Test func theRefillFillsToMinIdleOneSlotAtATimeWithinMaxSize() throws {
        var pool = PoolDriver(profile: profile(minIdle: 2, maxSize: 3))
        #expect(pool.state.nextRefill(now: pool.now) == "main-1")
        #expect(pool.state.nextRefill(now: pool.now) == "main-2")
        #expect(pool.state.nextRefill(now: pool.now) == nil)
        let created1 = pool.state.refillCreated("main-1", createTime: .milliseconds(300), now: pool.now)
        pool.check(created1)
        let failed2 = pool.state.refillFailed("main-2", now: pool.now)
        pool.check(failed2)
        #expect(pool.state.idle == ["main-1"])
        #expect(pool.state.nextRefill(now: pool.now) == "main-3")
        let created3 = pool.state.refillCreated("main-3", createTime: .milliseconds(300), now: pool.now)
        pool.check(created3)
        _ = try pool.lease()
        _ = try pool.lease()
        #expect(pool.state.nextRefill(now: pool.now) == "main-4")
        // Three live renderers: maxSize reached although only one is warming and none idle.
        #expect(pool.state.nextRefill(now: pool.now) == nil)
        let snapshot = pool.state.snapshot(memoryMB: 0)
        #expect(snapshot.createFailures == 1)
        #expect(snapshot.created == 2)
    }

    @Test func aRefilledRendererServesTheHeadOfTheQueue() throws {
        var pool = PoolDriver(profile: profile(minIdle: 1, maxSize: 2))
        #expect(pool.state.nextRefill(now: pool.now) == "main-1")
        _ = try pool.lease()
        let waiter = pool.start()
        #expect(waiter.step == .wait)
        let created = pool.state.refillCreated("main-1", createTime: .milliseconds(300), now: pool.now)
        #expect(created.resume == [PoolState.Resume(id: waiter.id, step: .checkHealth("main-1"))])
    }
}

@Suite struct PoolStateShutdownTests {
    @Test func shutdownFailsWaitersAndDestroysEverything() throws {
        var pool = PoolDriver(profile: profile(minIdle: 1, maxSize: 4))
        let leased = try pool.lease(caller: "alice")
        let resetting = try pool.lease()
        let creating = pool.start()
        #expect(creating.step == .create("main-3"))
        _ = try pool.lease()
        let waiter = pool.start(caller: "bob")
        #expect(waiter.step == .wait)
        #expect(pool.state.release(leaseID: resetting.leaseID, healthy: true, now: pool.now)?.reset == ["main-2"])

        let shutdown = pool.state.shutdown(now: pool.now)
        pool.check(shutdown)
        #expect(shutdown.resume == [PoolState.Resume(id: waiter.id, step: .failed(.shutdown))])
        #expect(Set(shutdown.destroy.map(\.rendererID)) == ["main-1", "main-2", "main-4"])
        #expect(shutdown.destroy.allSatisfy { $0.reason == .shutdown })
        #expect(!shutdown.drained)
        #expect(pool.state.leasesHeld(by: "bob") == 0)
        #expect(pool.start().step == .failed(.shutdown))
        #expect(pool.state.nextRefill(now: pool.now) == nil)

        for retirement in shutdown.destroy {
            #expect(!pool.state.destroyed(retirement.rendererID, now: pool.now).drained)
        }
        #expect(pool.state.leasesHeld(by: "alice") == 0)
        #expect(pool.state.release(leaseID: leased.leaseID, healthy: true, now: pool.now) == nil)
        #expect(pool.state.resetFinished("main-2", ok: true, now: pool.now).destroy.isEmpty)
        // The renderer still being created arrives after the shutdown: it is destroyed, and its acquire fails.
        let arrived = pool.state.created(creating.id, createTime: .milliseconds(300), now: pool.now)
        #expect(arrived.step == .failed(.shutdown))
        #expect(arrived.actions.destroy == [PoolState.Retirement(rendererID: "main-3", reason: .shutdown)])
        let last = pool.state.destroyed("main-3", now: pool.now)
        #expect(last.drained)
        #expect(pool.state.isDrained)
        let snapshot = pool.state.snapshot(memoryMB: 0)
        #expect(snapshot.live == 0)
        #expect(snapshot.destroyed == snapshot.created)
    }

    @Test func shutdownDestroysIdleRenderersToo() throws {
        var pool = PoolDriver(profile: profile(maxSize: 2))
        pool.release(try pool.lease())
        let shutdown = pool.state.shutdown(now: pool.now)
        #expect(shutdown.destroy == [PoolState.Retirement(rendererID: "main-1", reason: .shutdown)])
        #expect(pool.state.idle.isEmpty)
        #expect(pool.state.destroyed("main-1", now: pool.now).drained)
    }

    @Test func anEmptyPoolIsDrainedAtOnce() {
        var pool = PoolDriver(profile: profile())
        #expect(pool.state.shutdown(now: pool.now).drained)
    }

    @Test func anAcquireHealthCheckingDuringShutdownFails() throws {
        var pool = PoolDriver(profile: profile(maxSize: 1))
        pool.release(try pool.lease())
        let checking = pool.start()
        #expect(checking.step == .checkHealth("main-1"))
        let shutdown = pool.state.shutdown(now: pool.now)
        #expect(shutdown.destroy.map(\.rendererID) == ["main-1"])
        #expect(pool.state.healthChecked(checking.id, healthy: true, now: pool.now).step == .failed(.shutdown))
    }
}
