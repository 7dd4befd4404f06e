import Testing

@testable import PrefetchDNS

@Suite struct ResolverCacheTests {
    let t0 = ContinuousClock.now

    func at(_ seconds: Double) -> ContinuousClock.Instant {
        t0.advanced(by: .milliseconds(Int64(seconds * 1000)))
    }

    @Test func newHostsAreDueAtOnceAndMarkedInFlight() {
        var cache = ResolverCache(maxInFlight: 8)
        #expect(cache.watch(["a.test", "b.test"], now: t0) == 2)
        #expect(cache.nextDeadline == t0)
        #expect(Set(cache.takeDue(now: t0)) == ["a.test", "b.test"])
        #expect(cache.inFlight == 2)
        #expect(cache.takeDue(now: at(100)).isEmpty)
        #expect(cache.nextDeadline == nil)
    }

    @Test func answerIsServedUntilExpiryAndRefreshIsDueAhead() {
        var cache = ResolverCache(maxInFlight: 8)
        cache.watch(["a.test"], now: t0)
        _ = cache.takeDue(now: t0)
        cache.resolved("a.test", addresses: ["10.0.0.1"], source: .httpdns, lifetime: .seconds(60), refreshAhead: 0.75, now: t0)
        #expect(cache.answer(for: "a.test", now: at(59.9))?.addresses == ["10.0.0.1"])
        #expect(cache.answer(for: "a.test", now: at(60)) == nil)
        #expect(cache.nextDeadline == at(45))
        #expect(cache.takeDue(now: at(44.9)).isEmpty)
        #expect(cache.takeDue(now: at(45)) == ["a.test"])
        // The refresh lands before expiry: the host never goes without an answer.
        cache.resolved("a.test", addresses: ["10.0.0.2"], source: .httpdns, lifetime: .seconds(60), refreshAhead: 0.75, now: at(46))
        #expect(cache.answer(for: "a.test", now: at(100))?.addresses == ["10.0.0.2"])
        #expect(cache.answer(for: "a.test", now: at(106)) == nil)
    }

    @Test func failureKeepsUnexpiredAnswerAndSchedulesRetry() {
        var cache = ResolverCache(maxInFlight: 8)
        cache.watch(["a.test"], now: t0)
        _ = cache.takeDue(now: t0)
        cache.resolved("a.test", addresses: ["10.0.0.1"], source: .system, lifetime: .seconds(10), refreshAhead: 0.5, now: t0)
        #expect(cache.takeDue(now: at(5)) == ["a.test"])
        cache.failed("a.test", retryAfter: .seconds(2), now: at(5))
        #expect(cache.answer(for: "a.test", now: at(6))?.addresses == ["10.0.0.1"])
        #expect(cache.nextDeadline == at(7))
        #expect(cache.takeDue(now: at(7)) == ["a.test"])
        cache.failed("a.test", retryAfter: .seconds(2), now: at(11))
        #expect(cache.answer(for: "a.test", now: at(11)) == nil)
        #expect(cache.entries["a.test"]?.answer == nil)
    }

    @Test func concurrencyIsBoundedAndDeadlineWaitsForAFreeSlot() {
        var cache = ResolverCache(maxInFlight: 2)
        cache.watch(["a.test", "b.test", "c.test"], now: t0)
        #expect(cache.takeDue(now: t0).count == 2)
        #expect(cache.takeDue(now: t0).isEmpty)
        // Every slot busy: no deadline, so a waiting loop does not spin on the overdue third host.
        #expect(cache.nextDeadline == nil)
        let running = cache.entries.filter { $0.value.inFlight }.map(\.key)
        cache.failed(running[0], retryAfter: .seconds(5), now: at(1))
        #expect(cache.nextDeadline == t0)
        #expect(cache.takeDue(now: at(1)).count == 1)
    }

    @Test func forgottenHostsDropAnswersAndIgnoreLateResults() {
        var cache = ResolverCache(maxInFlight: 4)
        cache.watch(["a.test", "b.test"], now: t0)
        _ = cache.takeDue(now: t0)
        cache.resolved("a.test", addresses: ["10.0.0.1"], source: .system, lifetime: .seconds(60), refreshAhead: 0.75, now: t0)
        cache.watch(["b.test", "c.test"], now: at(1))
        #expect(cache.answer(for: "a.test", now: at(1)) == nil)
        #expect(cache.inFlight == 1)
        cache.watch(["c.test"], now: at(2))
        #expect(cache.inFlight == 0)
        cache.resolved("b.test", addresses: ["10.0.0.2"], source: .system, lifetime: .seconds(60), refreshAhead: 0.75, now: at(3))
        #expect(cache.answer(for: "b.test", now: at(3)) == nil)
        #expect(cache.inFlight == 0)
    }

    @Test func invalidateDropsTheAnswerAndMakesALookupDue() {
        var cache = ResolverCache(maxInFlight: 4)
        cache.watch(["a.test"], now: t0)
        _ = cache.takeDue(now: t0)
        cache.resolved("a.test", addresses: ["10.0.0.1"], source: .system, lifetime: .seconds(60), refreshAhead: 0.75, now: t0)
        let dropped = cache.invalidate("a.test", now: at(1))
        #expect(dropped)
        #expect(cache.answer(for: "a.test", now: at(1)) == nil)
        #expect(cache.takeDue(now: at(1)) == ["a.test"])
        let droppedUnknown = cache.invalidate("unknown.test", now: at(1))
        #expect(!droppedUnknown)
    }

    @Test func emptyAnswerCountsAsFailure() {
        var cache = ResolverCache(maxInFlight: 1)
        cache.watch(["a.test"], now: t0)
        _ = cache.takeDue(now: t0)
        cache.resolved("a.test", addresses: [], source: .system, lifetime: .seconds(3), refreshAhead: 0.75, now: t0)
        #expect(cache.inFlight == 0)
        #expect(cache.answer(for: "a.test", now: t0) == nil)
        #expect(cache.nextDeadline == at(3))
    }
}
