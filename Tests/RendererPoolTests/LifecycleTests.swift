import Testing

@testable import RendererPool

@Suite struct LifecycleTests {
    let clock = ContinuousClock()

    @Test func warmLeaseResetCycleCountsUses() {
        let t0 = clock.now
        var life = RendererLifecycle(now: t0, maxUses: 5, lifetime: .seconds(60))
        #expect(life.state == .warming)
        let r1 = life.warmed(at: t0)
        #expect(r1)
        #expect(life.state == .idle)
        let r2 = life.lease(at: t0)
        #expect(r2)
        #expect(life.uses == 1)
        let r3 = life.release(healthy: true, at: t0)
        #expect(r3 == .resetting)
        let r4 = life.resetFinished(ok: true, at: t0)
        #expect(r4)
        #expect(life.state == .idle)
        let r5 = life.lease(at: t0)
        #expect(r5)
        #expect(life.uses == 2)
    }

    @Test func coldStartLeasesStraightFromWarming() {
        let t0 = clock.now
        var life = RendererLifecycle(now: t0, maxUses: 5, lifetime: .seconds(60))
        let r6 = life.lease(at: t0)
        #expect(r6)
        #expect(life.state == .leased)
        #expect(life.warmAt == t0)
    }

    @Test func releaseRetiresUnhealthyWornOutAndExpired() {
        let t0 = clock.now
        var unhealthy = RendererLifecycle(now: t0, maxUses: 5, lifetime: .seconds(60))
        _ = unhealthy.lease(at: t0)
        let r7 = unhealthy.release(healthy: false, at: t0)
        #expect(r7 == .retiring)
        #expect(unhealthy.retireReason == .releasedUnhealthy)

        var worn = RendererLifecycle(now: t0, maxUses: 1, lifetime: .seconds(60))
        _ = worn.lease(at: t0)
        let r8 = worn.release(healthy: true, at: t0)
        #expect(r8 == .retiring)
        #expect(worn.retireReason == .maxUses)

        var old = RendererLifecycle(now: t0, maxUses: 5, lifetime: .seconds(1))
        _ = old.warmed(at: t0)
        _ = old.lease(at: t0)
        #expect(!old.isExpired(at: t0))
        #expect(old.isExpired(at: t0.advanced(by: .seconds(2))))
        let r9 = old.release(healthy: true, at: t0.advanced(by: .seconds(2)))
        #expect(r9 == .retiring)
        #expect(old.retireReason == .lifetime)
    }

    @Test func failedResetRetires() {
        let t0 = clock.now
        var life = RendererLifecycle(now: t0, maxUses: 5, lifetime: .seconds(60))
        _ = life.lease(at: t0)
        _ = life.release(healthy: true, at: t0)
        let r10 = life.resetFinished(ok: false, at: t0)
        #expect(r10)
        #expect(life.state == .retiring)
        #expect(life.retireReason == .resetFailed)
        let r11 = life.destroyed(at: t0)
        #expect(r11)
        #expect(!life.isLive)
    }

    @Test func invalidTransitionsChangeNothing() {
        let t0 = clock.now
        var life = RendererLifecycle(now: t0, maxUses: 5, lifetime: .seconds(60))
        let r12 = life.release(healthy: true, at: t0)
        #expect(r12 == nil)
        let r13 = life.resetFinished(ok: true, at: t0)
        #expect(!r13)
        let r14 = life.destroyed(at: t0)
        #expect(!r14)
        #expect(life.state == .warming)
        _ = life.lease(at: t0)
        let leased = life
        let r15 = life.lease(at: t0)
        #expect(!r15)
        let r16 = life.warmed(at: t0)
        #expect(!r16)
        #expect(life == leased)
        let r17 = life.retire(.reclaimed, at: t0)
        #expect(r17)
        let r18 = life.retire(.shutdown, at: t0)
        #expect(!r18)
        #expect(life.retireReason == .reclaimed)
        let r19 = life.release(healthy: true, at: t0)
        #expect(r19 == nil)
        let r20 = life.destroyed(at: t0)
        #expect(r20)
        let r21 = life.retire(.shutdown, at: t0)
        #expect(!r21)
        let r22 = life.lease(at: t0)
        #expect(!r22)
    }
}
