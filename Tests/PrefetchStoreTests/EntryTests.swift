import HTTPTypes
import PrefetchCore
import Testing

@testable import PrefetchStore

/// The entry state machine, driven with explicit instants: no clock, no waiting.
@Suite struct EntryTests {
    let t0 = ContinuousClock.now
    let policy = StorePolicy(ttl: .seconds(30), negativeTTL: .seconds(5), label: "profile")
    let lockAge = Duration.seconds(10)

    func response(_ text: String, noStore: Bool = false) -> StoredResponse {
        StoredResponse(status: 200, body: Array(text.utf8), fetchedAt: t0, noStore: noStore)
    }

    @Test func pendingCompletesToReadyAndServesEveryWaiter() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        let r1 = entry.read(now: t0)
        #expect(r1 == .wait)
        let r2 = entry.addWaiter(7)
        #expect(r2)
        let r3 = entry.addWaiter(8)
        #expect(r3)
        let deliveries = entry.complete(token: FlightToken(1), result: .success(response("a")), now: t0)
        #expect(deliveries?.map(\.0) == [7, 8])
        #expect(deliveries?.allSatisfy { $0.1 == .ready(response("a"), joined: true) } == true)
        #expect(entry.state == .ready(response("a"), expiresAt: t0 + .seconds(30), reads: 2))
        let r4 = entry.read(now: t0 + .seconds(1))
        #expect(r4 == .outcome(.ready(response("a"), joined: false)))
    }

    @Test func failureIsSharedThenExpiresAfterNegativeTTL() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = entry.addWaiter(1)
        let failure = StoreFailure(code: .timeout, message: "GET /a took longer than 2s")
        let deliveries = entry.complete(token: FlightToken(1), result: .failure(failure), now: t0)
        #expect(deliveries?.first?.1 == .failed(failure, joined: true))
        let r5 = entry.read(now: t0 + .seconds(4))
        #expect(r5 == .outcome(.failed(failure, joined: false)))
        let r6 = entry.begin(token: FlightToken(2), policy: policy, now: t0 + .seconds(4), lockAge: lockAge)
        #expect(r6 == .fresh)
        let r7 = entry.read(now: t0 + .seconds(5))
        #expect(r7 == .outcome(.absent(.expired)))
        #expect(entry.endedUnread == false)
    }

    @Test func staleTokenCompletionChangesNothing() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        let r8 = entry.complete(token: FlightToken(2), result: .success(response("x")), now: t0)
        #expect(r8 == nil)
        #expect(entry.isPending)
        #expect(entry.isLed(by: FlightToken(1)))
    }

    @Test func youngFlightIsJoinedOldFlightIsTakenOver() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = entry.addWaiter(5)
        let r9 = entry.begin(token: FlightToken(2), policy: policy, now: t0 + .seconds(9), lockAge: lockAge)
        #expect(r9 == .joined)
        #expect(
            entry.begin(token: FlightToken(3), policy: policy, now: t0 + .seconds(10), lockAge: lockAge)
                == .leader(tookOver: true))
        let r10 = entry.complete(token: FlightToken(1), result: .success(response("old")), now: t0)
        #expect(r10 == nil)
        let deliveries = entry.complete(token: FlightToken(3), result: .success(response("new")), now: t0)
        #expect(deliveries?.map(\.0) == [5], "waiters survive a takeover")
        #expect(deliveries?.first?.1 == .ready(response("new"), joined: true))
    }

    @Test func noStoreResponseGoesToTheFirstWaiterOnly() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        for id in [3, 1, 2] as [WaiterID] { _ = entry.addWaiter(id) }
        let deliveries = entry.complete(token: FlightToken(1), result: .success(response("s", noStore: true)), now: t0)
        #expect(deliveries?.map(\.0) == [3, 1, 2])
        #expect(
            deliveries?.map(\.1) == [
                .ready(response("s", noStore: true), joined: true), .absent(.consumed), .absent(.consumed),
            ])
        #expect(entry.endReason == .consumed)
    }

    @Test func noStoreResponseWithoutWaitersIsConsumedByTheFirstRead() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = entry.complete(token: FlightToken(1), result: .success(response("s", noStore: true)), now: t0)
        let r11 = entry.read(now: t0)
        #expect(r11 == .outcome(.ready(response("s", noStore: true), joined: false)))
        let r12 = entry.read(now: t0)
        #expect(r12 == .outcome(.absent(.consumed)))
        #expect(entry.endedUnread == false)
    }

    @Test func unreadResponseThatExpiresIsWaste() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = entry.complete(token: FlightToken(1), result: .success(response("a")), now: t0)
        let r13 = entry.expireIfDue(now: t0 + .seconds(29))
        #expect(r13 == false)
        let r14 = entry.expireIfDue(now: t0 + .seconds(30))
        #expect(r14)
        #expect(entry.endReason == .expired)
        #expect(entry.endedUnread)
    }

    @Test func readResponseThatExpiresIsNotWaste() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = entry.complete(token: FlightToken(1), result: .success(response("a")), now: t0)
        _ = entry.read(now: t0)
        let r15 = entry.read(now: t0 + .seconds(31))
        #expect(r15 == .outcome(.absent(.expired)))
        #expect(entry.endedUnread == false)
    }

    @Test func onlyCompletedEntriesCanBeEvicted() {
        var pending = Entry(leader: FlightToken(1), policy: policy, now: t0)
        let r16 = pending.evict()
        #expect(r16 == false)
        #expect(pending.isPending)

        var ready = pending
        _ = ready.complete(token: FlightToken(1), result: .success(response("a")), now: t0)
        let r17 = ready.evict()
        #expect(r17)
        #expect(ready.endReason == .evicted)
        #expect(ready.endedUnread)

        var failed = pending
        _ = failed.complete(token: FlightToken(1), result: .failure(StoreFailure(code: .dns, message: "x")), now: t0)
        let r18 = failed.evict()
        #expect(r18)
        let r19 = failed.read(now: t0)
        #expect(r19 == .outcome(.absent(.evicted)))
    }

    @Test func abandonedFlightKeepsItsWaitersAndLetsTheNextTriggerLead() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = entry.addWaiter(9)
        let r20 = entry.abandon(token: FlightToken(2))
        #expect(r20 == false, "a stale token cannot abandon")
        let r21 = entry.abandon(token: FlightToken(1))
        #expect(r21)
        #expect(entry.isPending)
        #expect(
            entry.begin(token: FlightToken(3), policy: policy, now: t0 + .milliseconds(1), lockAge: lockAge)
                == .leader(tookOver: true), "no lock age wait after an abandon")
        #expect(entry.waiters == [9])
    }

    @Test func leaderlessFlightWithNobodyWaitingEnds() {
        var alone = Entry(leader: FlightToken(1), policy: policy, now: t0)
        let r22 = alone.abandon(token: FlightToken(1))
        #expect(r22)
        #expect(alone.endReason == .notFound)

        var waited = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = waited.addWaiter(4)
        _ = waited.abandon(token: FlightToken(1))
        let r23 = waited.removeWaiter(4)
        #expect(r23)
        #expect(waited.endReason == .notFound)
        let r24 = waited.removeWaiter(4)
        #expect(r24 == false)
    }

    @Test func rejectedResponseReachesWaitersButIsKeptAsAFailure() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = entry.addWaiter(1)
        let tooLarge = StoreFailure(code: FailureCode.tooLarge, message: "too big")
        let deliveries = entry.complete(
            token: FlightToken(1), result: .success(response("big")), now: t0, rejection: tooLarge)
        #expect(deliveries?.first?.1 == .ready(response("big"), joined: true))
        let r25 = entry.read(now: t0)
        #expect(r25 == .outcome(.failed(tooLarge, joined: false)))
    }

    @Test func whetherAResponseWouldBeKept() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        #expect(entry.wouldKeepResponse(.success(response("a"))))
        #expect(entry.wouldKeepResponse(.success(response("a", noStore: true))), "kept until its first read")
        #expect(entry.wouldKeepResponse(.failure(StoreFailure(code: .dns, message: "x"))) == false)
        _ = entry.addWaiter(1)
        #expect(entry.wouldKeepResponse(.success(response("a", noStore: true))) == false, "goes to the waiter")
    }

    @Test func staleFlightNobodyWaitsForIsReclaimed() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        let r26 = entry.reclaimIfStale(now: t0 + .seconds(29), after: .seconds(30))
        #expect(r26 == false)
        _ = entry.addWaiter(1)
        let r27 = entry.reclaimIfStale(now: t0 + .seconds(60), after: .seconds(30))
        #expect(r27 == false, "someone waits")
        _ = entry.removeWaiter(1)
        let r28 = entry.reclaimIfStale(now: t0 + .seconds(60), after: .seconds(30))
        #expect(r28)
        #expect(entry.endReason == .notFound)
    }

    @Test func dropEndsAnyStateAndReleasesWaiters() {
        var pending = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = pending.addWaiter(1)
        _ = pending.addWaiter(2)
        let r29 = pending.drop()
        #expect(r29 == [1, 2])
        #expect(pending.endReason == .evicted)

        var ready = Entry(leader: FlightToken(1), policy: policy, now: t0)
        _ = ready.complete(token: FlightToken(1), result: .success(response("a")), now: t0)
        let r30 = ready.drop()
        #expect(r30 == [])
        #expect(ready.endedUnread)
    }

    @Test func accountingCoversKeyHeadersBodyAndOverhead() {
        var entry = Entry(leader: FlightToken(1), policy: policy, now: t0)
        #expect(entry.accountedBytes(keyBytes: 100, overhead: 256) == 356)
        let full = StoredResponse(
            status: 200, headers: [.contentType: "text/plain"], body: [1, 2, 3])
        _ = entry.complete(token: FlightToken(1), result: .success(full), now: t0)
        #expect(entry.accountedBytes(keyBytes: 100, overhead: 256) == 356 + 12 + 10 + 3)
    }
}
