import PrefetchCore
import PrefetchStore
import Synchronization
import Testing

@testable import RedisStore

/// The store's decisions without Redis, sockets or sleeping: every event comes with an explicit instant.
@Suite struct RedisStoreStateTests {
    typealias State = RedisStoreState

    let t0 = ContinuousClock.now

    /// A state with the default configuration (lock age 10 s, poll 100 ms, local TTL 1 s, backoff 100 ms to 2 s).
    static func makeState(_ change: (inout RedisStore.Configuration) -> Void = { _ in }) -> State {
        var configuration = RedisStore.Configuration()
        change(&configuration)
        return State(configuration: configuration, database: 0)
    }

    static let callErrorKinds: [RedisCallError.Kind] = [.unavailable, .connect, .io, .closed, .auth]

    static func reply(_ text: String) -> State.Reply { .success(.string(Array(text.utf8))) }

    static func claim(_ state: State, _ path: String = "/a", policy: StorePolicy = policy(), token: UInt64 = 1) -> State.Claim {
        state.calls.claim(key(path), policy: policy, token: FlightToken(token))
    }

    /// Leads `path` in Redis at `now`; returns the claim.
    static func lead(
        _ state: inout State, _ path: String = "/a", policy: StorePolicy = policy(), token: UInt64 = 1,
        now: ContinuousClock.Instant
    ) -> State.Claim {
        let claim = claim(state, path, policy: policy, token: token)
        #expect(state.beginReplied(claim, reply: reply("leader"), now: now) == .done(.leader(claim.token)))
        return claim
    }

    /// The read script's reply for a stored value.
    static func valueReply(_ value: StoredValue, pttl: Int64) -> State.Reply {
        .success(.array([.integer(1), .string(EntryCodec.encode(value)), .integer(pttl)]))
    }

    // MARK: Health

    @Test func outageDegradesBacksOffDoublingUpToTwoSecondsAndCountsOneRecovery() {
        var state = Self.makeState()
        #expect(!state.isDegraded)
        #expect(state.claimAttempt(now: t0) == true, "up: every call may go to Redis")
        #expect(state.callSucceeded(now: t0) == .none, "already up: nothing to count")

        #expect(state.callFailed(now: t0) == .wentDown)
        #expect(state.callFailed(now: t0 + .milliseconds(5)) == .none, "one outage, one transition")
        #expect(state.isDegraded)
        #expect(state.health.downSince == t0)

        // Attempts are due 100, 200, 400, 800, 1600, then every 2000 ms after the previous one.
        var due = t0 + .milliseconds(100)
        for wait in [200, 400, 800, 1600, 2000, 2000, 2000] {
            #expect(state.claimAttempt(now: due - .milliseconds(1)) == false, "before the attempt is due everyone fails fast")
            #expect(state.claimAttempt(now: due) == true)
            #expect(state.claimAttempt(now: due) == false, "one caller per backoff period")
            #expect(state.health.backoff == .milliseconds(wait))
            #expect(state.callFailed(now: due) == .none, "the attempt failed: still the same outage")
            due = due + .milliseconds(wait)
        }
        #expect(state.health.backoff == .seconds(2), "capped at 2 s")
        #expect(state.health.reconnects == 0)

        let back = due + .milliseconds(30)
        #expect(state.callSucceeded(now: back) == .cameUp(downFor: back - t0))
        #expect(state.callSucceeded(now: back) == .none, "a recovery is counted once")
        #expect(state.health.reconnects == 1)
        #expect(!state.isDegraded && state.health.downSince == nil)

        // The next outage starts over at 100 ms.
        #expect(state.callFailed(now: back) == .wentDown)
        #expect(state.health.backoff == .milliseconds(100))
        #expect(state.claimAttempt(now: back + .milliseconds(100)) == true)
        #expect(state.callSucceeded(now: back + .milliseconds(120)) == .cameUp(downFor: .milliseconds(120)))
        #expect(state.health.reconnects == 2)
    }

    @Test func backoffHonoursTheConfiguredBounds() {
        var state = Self.makeState {
            $0.reconnectInitialBackoff = .milliseconds(100)
            $0.reconnectMaxBackoff = .milliseconds(400)
        }
        _ = state.callFailed(now: t0)
        #expect(state.claimAttempt(now: t0 + .milliseconds(100)) == true)
        #expect(state.claimAttempt(now: t0 + .milliseconds(299)) == false)
        #expect(state.claimAttempt(now: t0 + .milliseconds(300)) == true)
        #expect(state.claimAttempt(now: t0 + .milliseconds(700)) == true)
        #expect(state.health.backoff == .milliseconds(400), "capped")
        #expect(state.claimAttempt(now: t0 + .milliseconds(1099)) == false)
        #expect(state.claimAttempt(now: t0 + .milliseconds(1100)) == true)
    }

    // MARK: Begin

    @Test func leaderReplyRecordsTheFlightAndTheLead() {
        var state = Self.makeState()
        let claim = Self.lead(&state, now: t0)
        #expect(state.flights.flights[claim.token]?.mode == .redis(lockValue: claim.lockValue))
        #expect(state.leads.isLeading(claim.keys.digest, now: t0 + .milliseconds(999)))
        #expect(!state.leads.isLeading(claim.keys.digest, now: t0 + .seconds(1)), "trusted for the local TTL only")
        #expect(claim.call.script == Scripts.begin)
        #expect(claim.call.tail.contains(Array("10000".utf8)), "the lock lives for the lock age")
    }

    @Test func joinedAndFreshRepliesPassThroughAndRecordNothing() {
        var state = Self.makeState()
        let claim = Self.claim(state)
        #expect(state.beginReplied(claim, reply: Self.reply("joined"), now: t0) == .done(.joined))
        #expect(state.beginReplied(claim, reply: Self.reply("fresh"), now: t0) == .done(.fresh))
        #expect(state.flights.flights.isEmpty)
        #expect(state.leads.count == 0)
    }

    @Test(arguments: callErrorKinds)
    func beginWithoutAnAnswerFallsBack(kind: RedisCallError.Kind) {
        var state = Self.makeState()
        let claim = Self.claim(state)
        let failed = State.Reply.failure(RedisCallError(kind: kind, message: "down"))
        #expect(state.beginReplied(claim, reply: failed, now: t0) == .beginInFallback)
        #expect(state.flights.flights.isEmpty)
    }

    @Test func anUnexpectedBeginReplyFallsBack() {
        var state = Self.makeState()
        let claim = Self.claim(state)
        for odd: RedisValue in [.integer(1), .null, .status("QUEUED"), .string(Array("leaderless".utf8))] {
            #expect(state.beginReplied(claim, reply: .success(odd), now: t0) == .beginInFallback)
        }
        #expect(state.flights.flights.isEmpty)
    }

    @Test func aFallbackLeadIsRecordedUnderTheClaimsToken() {
        var state = Self.makeState()
        let claim = Self.claim(state, token: 42)
        #expect(state.fallbackBegan(claim, outcome: .leader(FlightToken(7)), now: t0) == .leader(FlightToken(42)))
        #expect(state.leads.count == 0, "no lock in Redis, so no lead to trust")
        let other = Self.claim(state, "/b", token: 43)
        #expect(state.fallbackBegan(other, outcome: .joined, now: t0) == .joined)
        #expect(state.fallbackBegan(other, outcome: .fresh, now: t0) == .fresh)
        #expect(state.flights.flights.count == 1)
        #expect(
            state.complete(key(), token: FlightToken(42))
                == .completeInFallback(fallbackToken: FlightToken(7), digest: claim.keys.digest, policy: policy()))
    }

    @Test func putSettlesItsCompletionOnlyWhenItsBeginLed() {
        #expect(State.putReplied(beginReply: Self.reply("leader")) == .settleCompletion)
        #expect(State.putReplied(beginReply: Self.reply("joined")) == .declined)
        #expect(State.putReplied(beginReply: Self.reply("fresh")) == .declined)
        for kind in Self.callErrorKinds {
            #expect(State.putReplied(beginReply: .failure(RedisCallError(kind: kind, message: "x"))) == .beginInFallback)
        }
    }

    // MARK: Complete and abandon

    @Test func completingARedisFlightEndsItsLeadAndSendsTheLockValue() {
        var state = Self.makeState()
        let claim = Self.lead(&state, now: t0)
        #expect(state.complete(key("/other"), token: claim.token) == .ignore, "another key's token")
        #expect(state.complete(key(), token: FlightToken(99)) == .ignore, "an unknown token")
        #expect(state.complete(key(), token: claim.token) == .completeInRedis(claim.lead))
        #expect(state.complete(key(), token: claim.token) == .ignore, "a flight completes once")
        #expect(!state.leads.isLeading(claim.keys.digest, now: t0), "readers ask Redis again")
    }

    @Test func aKeptResponseGoesToTheLocalTierUntilTheRedisExpiryAndWakesWithoutPayload() {
        var state = Self.makeState()
        let claim = Self.lead(&state, policy: policy(ttl: .milliseconds(300)), now: t0)
        let kept = response("kept")
        let result = Result<StoredResponse, StoreFailure>.success(kept)
        let completion = state.calls.completion(claim.lead, result: result, encoded: [1, 2, 3])
        #expect(completion.isKept && completion.payload == nil)
        #expect(completion.call.script == Scripts.complete)
        #expect(completion.call.tail.contains(Array("300".utf8)), "Redis keeps it for the TTL")
        let sentAt = t0 + .milliseconds(10)
        state.completing(completion, sentAt: sentAt)
        #expect(
            state.completionReplied(completion, reply: .success(.integer(1)), sentAt: sentAt)
                == .wake(digest: claim.keys.digest, payload: nil))
        _ = state.complete(key(), token: claim.token)
        #expect(
            state.startRead(key(), wait: .zero, cancelled: false, now: sentAt + .milliseconds(299)).1
                == .finish(.ready(kept, joined: false), label: "profile"))
        #expect(
            state.startRead(key(), wait: .zero, cancelled: false, now: sentAt + .milliseconds(300)).1
                == .probe(state.calls.read(claim.keys)), "never past the Redis expiry")
    }

    @Test func resultsRedisDoesNotKeepTravelInTheAnnouncement() {
        let state = Self.makeState()
        let zeroTTL = Self.claim(state, policy: policy(ttl: .zero, negativeTTL: .zero)).lead
        let unkept = state.calls.completion(zeroTTL, result: .success(response("now only")), encoded: [9])
        #expect(!unkept.isKept && unkept.payload == [9])
        let failure = StoreFailure(code: .timeout, message: "upstream timed out")
        let unkeptFailure = state.calls.completion(zeroTTL, result: .failure(failure), encoded: [8])
        #expect(unkeptFailure.payload == [8])
        // A no-store response must sit in Redis for its one reader, even with a zero TTL.
        let noStore = state.calls.completion(zeroTTL, result: .success(response("once", noStore: true)), encoded: [7])
        #expect(noStore.isKept && noStore.keep == .milliseconds(1) && noStore.payload == nil)
        let keptFailure = state.calls.completion(
            Self.claim(state, policy: policy(negativeTTL: .seconds(5))).lead, result: .failure(failure), encoded: [6])
        #expect(keptFailure.keep == .seconds(5) && keptFailure.payload == nil)
    }

    @Test func noStoreAndUnkeptResponsesNeverReachTheLocalTier() {
        var state = Self.makeState()
        let claim = Self.lead(&state, now: t0)
        let noStore = state.calls.completion(claim.lead, result: .success(response("once", noStore: true)), encoded: [1])
        state.completing(noStore, sentAt: t0)
        _ = state.completionReplied(noStore, reply: .success(.integer(1)), sentAt: t0)
        let zero = Self.claim(state, "/z", policy: policy(ttl: .zero)).lead
        let unkept = state.calls.completion(zero, result: .success(response("z")), encoded: [2])
        state.completing(unkept, sentAt: t0)
        #expect(state.completionReplied(unkept, reply: .success(.integer(1)), sentAt: t0) == .wake(digest: zero.keys.digest, payload: [2]))
        #expect(state.local.items.isEmpty)
    }

    @Test func aStaleCompletionIsIgnoredAndAnUnansweredOneIsKeptInTheFallback() {
        var state = Self.makeState()
        let claim = Self.lead(&state, policy: policy(ttl: .zero), now: t0)
        let completion = state.calls.completion(claim.lead, result: .success(response("r")), encoded: [5])
        #expect(state.completionReplied(completion, reply: .success(.integer(0)), sentAt: t0) == .ignoredStale)
        for kind in Self.callErrorKinds {
            let error = RedisCallError(kind: kind, message: "gone")
            #expect(
                state.completionReplied(completion, reply: .failure(error), sentAt: t0)
                    == .keepInFallback(digest: claim.keys.digest, payload: [5], error: error))
        }
        #expect(state.local.items.isEmpty)
    }

    /// The local tier has a kept response from the moment its completion is sent, so a reader woken by the
    /// announcement (which can overtake the script's reply) finds it; a refused completion takes it out again.
    @Test func aCompletionsResponseIsLocalBeforeItsReplyAndGoneIfRefused() {
        var state = Self.makeState()
        let claim = Self.lead(&state, now: t0)
        let kept = response("kept")
        let completion = state.calls.completion(claim.lead, result: .success(kept), encoded: [1])
        state.completing(completion, sentAt: t0)
        var (reader, _) = state.startRead(key(), wait: .seconds(1), cancelled: false, now: t0)
        #expect(
            state.woke(&reader, fired: true, value: nil, now: t0) == .finish(.ready(kept, joined: reader.joinedFlight), label: "profile"),
            "woken by the announcement before the reply: served locally")
        #expect(state.completionReplied(completion, reply: .success(.integer(0)), sentAt: t0) == .ignoredStale)
        #expect(state.local.items.isEmpty, "a refused completion leaves nothing behind")
        state.completing(completion, sentAt: t0)
        state.completionDropped(completion)
        #expect(state.local.items.isEmpty)
    }

    @Test func abandonReleasesTheRightFlightOnce() {
        var state = Self.makeState()
        let claim = Self.lead(&state, now: t0)
        #expect(state.abandon(key(), token: FlightToken(99)) == .ignore)
        guard case .abandonInRedis(let call) = state.abandon(key(), token: claim.token) else {
            Issue.record("a Redis flight is abandoned in Redis")
            return
        }
        #expect(call.script == Scripts.abandon && call.tail.last == claim.lockValue)
        #expect(!state.leads.isLeading(claim.keys.digest, now: t0))
        #expect(state.abandon(key(), token: claim.token) == .ignore)
        let fallbackClaim = Self.claim(state, "/f", token: 5)
        _ = state.fallbackBegan(fallbackClaim, outcome: .leader(FlightToken(6)), now: t0)
        #expect(state.abandon(key("/f"), token: FlightToken(5)) == .abandonInFallback(FlightToken(6)))
    }

    @Test func aLeaderThatNeverCompletesIsForgottenAfterThreeLockAges() {
        var state = Self.makeState { $0.lockAge = .seconds(10) }
        let old = Self.lead(&state, "/old", token: 1, now: t0)
        // Just short of three lock ages the flight is still known.
        _ = Self.lead(&state, "/b", token: 2, now: t0 + .seconds(30) - .milliseconds(1))
        #expect(state.flights.flights[old.token] != nil)
        // The book prunes at most once a second; the next insertion at or past three lock ages forgets it.
        _ = Self.lead(&state, "/c", token: 3, now: t0 + .seconds(31))
        #expect(state.flights.flights[old.token] == nil)
        #expect(state.complete(key("/old"), token: old.token) == .ignore, "its late completion is ignored")
        #expect(state.complete(key("/b"), token: FlightToken(2)) != .ignore, "a younger flight still completes")
    }

    // MARK: Read

    @Test func readReplyDecodesEveryShape() {
        let failure = StoreFailure(code: .connect, message: "refused")
        #expect(
            State.Probe(reply: Self.valueReply(.failure(failure, label: "l"), pttl: 5)) == .value(.failure(failure, label: "l"), pttl: 5))
        #expect(State.Probe(reply: .success(.array([.integer(1), .string([0, 1]), .integer(5)]))) == .undecodable)
        #expect(State.Probe(reply: .success(.array([.integer(1), .string([])]))) == .undecodable)
        #expect(State.Probe(reply: .success(.array([.integer(2)]))) == .pending)
        for reason in AbsentReason.allCases {
            #expect(State.Probe(reply: .success(.array([.integer(3), .string(Array(reason.rawValue.utf8))]))) == .absent(reason))
        }
        #expect(State.Probe(reply: .success(.array([.integer(3)]))) == .absent(.notFound))
        #expect(State.Probe(reply: .success(.array([.integer(3), .string(Array("bogus".utf8))]))) == .absent(.notFound))
        #expect(State.Probe(reply: .success(.array([.integer(9)]))) == .unavailable)
        #expect(State.Probe(reply: .success(.integer(1))) == .unavailable)
        for kind in Self.callErrorKinds {
            #expect(State.Probe(reply: .failure(RedisCallError(kind: kind, message: "x"))) == .unavailable)
        }
    }

    @Test func aReaderProbesThenAnswersFromTheValueAndKeepsItLocally() {
        var state = Self.makeState()
        let value = response("v")
        var (reader, step) = state.startRead(key(), wait: .zero, cancelled: false, now: t0)
        #expect(step == .probe(state.calls.read(reader.keys)))
        #expect(!reader.canWait)
        step = state.probed(
            &reader, .value(.response(value, label: "feed"), pttl: 500), sentAt: t0, cancelled: false,
            now: t0 + .milliseconds(2))
        #expect(step == .finish(.ready(value, joined: false), label: "feed"))
        state.readEnded(reader)
        // The next read is a local hit, until the Redis expiry measured from before the call.
        (reader, step) = state.startRead(key(), wait: .seconds(5), cancelled: false, now: t0 + .milliseconds(499))
        #expect(step == .finish(.ready(value, joined: false), label: "feed"))
        (reader, step) = state.startRead(key(), wait: .zero, cancelled: false, now: t0 + .milliseconds(500))
        #expect(step == .probe(state.calls.read(reader.keys)))
        // A value without an expiry (or about to expire) is not kept locally.
        _ = state.probed(&reader, .value(.response(response("w"), label: "feed"), pttl: -1), sentAt: t0, cancelled: false, now: t0)
        #expect(state.local.items.isEmpty)
    }

    @Test func absentReasonsAndFailuresAnswerAtOnce() {
        var state = Self.makeState()
        let failure = StoreFailure(code: .timeout, message: "slow")
        for reason in AbsentReason.allCases {
            var (reader, _) = state.startRead(key(), wait: .seconds(5), cancelled: false, now: t0)
            #expect(state.probed(&reader, .absent(reason), sentAt: t0, cancelled: false, now: t0) == .finish(.absent(reason), label: nil))
        }
        var (reader, _) = state.startRead(key(), wait: .seconds(5), cancelled: false, now: t0)
        #expect(
            state.probed(&reader, .value(.failure(failure, label: "p"), pttl: 100), sentAt: t0, cancelled: false, now: t0)
                == .finish(.failed(failure, joined: false), label: "p"))
        #expect(state.probed(&reader, .undecodable, sentAt: t0, cancelled: false, now: t0) == .finish(.absent(.notFound), label: nil))
        #expect(state.waitingReaders == 0)
    }

    @Test func aPendingReaderWaitsAPollIntervalAtATimeUntilItsDeadline() {
        var state = Self.makeState()
        var (reader, _) = state.startRead(key(), wait: .milliseconds(250), cancelled: false, now: t0)
        #expect(reader.canWait)
        #expect(state.probed(&reader, .pending, sentAt: t0, cancelled: false, now: t0) == .wait(.milliseconds(100)))
        #expect(state.waitingReaders == 1)
        #expect(state.woke(&reader, fired: false, value: nil, now: t0 + .milliseconds(100)) == .probe(state.calls.read(reader.keys)))
        #expect(
            state.probed(&reader, .pending, sentAt: t0, cancelled: false, now: t0 + .milliseconds(200)) == .wait(.milliseconds(50)),
            "never past the reader's deadline")
        #expect(state.waitingReaders == 1, "counted once")
        #expect(
            state.probed(&reader, .pending, sentAt: t0, cancelled: false, now: t0 + .milliseconds(250)) == .finish(.pending, label: nil))
        state.readEnded(reader)
        #expect(state.waitingReaders == 0)
    }

    @Test func aReaderThatMayNotWaitAnswersPending() {
        var state = Self.makeState()
        var (reader, _) = state.startRead(key(), wait: .zero, cancelled: false, now: t0)
        #expect(state.probed(&reader, .pending, sentAt: t0, cancelled: false, now: t0) == .finish(.pending, label: nil))
        var (cancelled, _) = state.startRead(key(), wait: .seconds(5), cancelled: true, now: t0)
        #expect(!cancelled.canWait)
        #expect(state.probed(&cancelled, .pending, sentAt: t0, cancelled: true, now: t0) == .finish(.pending, label: nil))
        var (later, _) = state.startRead(key(), wait: .seconds(5), cancelled: false, now: t0)
        #expect(
            state.probed(&later, .pending, sentAt: t0, cancelled: true, now: t0) == .finish(.pending, label: nil), "cancelled while waiting"
        )
    }

    @Test func aWokenReaderTakesTheAnnouncedResultOrTheLocalCopyOrAsksAgain() {
        var state = Self.makeState()
        var (reader, _) = state.startRead(key(), wait: .seconds(5), cancelled: false, now: t0)
        _ = state.probed(&reader, .pending, sentAt: t0, cancelled: false, now: t0)
        let failure = StoreFailure(code: .connect, message: "refused")
        #expect(
            state.woke(&reader, fired: true, value: .failure(failure, label: "p"), now: t0)
                == .finish(.failed(failure, joined: true), label: "p"))
        let announced = response("x")
        #expect(
            state.woke(&reader, fired: true, value: .response(announced, label: "p"), now: t0)
                == .finish(.ready(announced, joined: true), label: "p"))
        #expect(state.woke(&reader, fired: true, value: nil, now: t0) == .probe(state.calls.read(reader.keys)), "nothing local: ask Redis")
        // Completed on this replica: the response is in the local tier before the wake-up.
        let claim = Self.lead(&state, now: t0)
        _ = state.complete(key(), token: claim.token)
        let here = response("here")
        let completion = state.calls.completion(claim.lead, result: .success(here), encoded: [1])
        state.completing(completion, sentAt: t0)
        _ = state.completionReplied(completion, reply: .success(.integer(1)), sentAt: t0)
        #expect(state.woke(&reader, fired: true, value: nil, now: t0) == .finish(.ready(here, joined: true), label: "profile"))
        #expect(
            state.woke(&reader, fired: false, value: nil, now: t0) == .probe(state.calls.read(reader.keys)),
            "a timed-out wait polls Redis even when a local copy exists")
    }

    @Test func aReaderOnTheLeadingReplicaKnowsItIsPendingWithoutAsking() {
        var state = Self.makeState()
        let claim = Self.lead(&state, now: t0)
        var (reader, step) = state.startRead(key(), wait: .seconds(5), cancelled: false, now: t0 + .milliseconds(10))
        #expect(step == .wait(.milliseconds(100)))
        #expect(reader.joinedFlight && state.waitingReaders == 1)
        state.readEnded(reader)
        (reader, step) = state.startRead(key(), wait: .zero, cancelled: false, now: t0)
        #expect(step == .finish(.pending, label: nil))
        state.readEnded(reader)
        // Anything that may have changed the key makes readers ask again.
        state.announced(claim.keys.digest)
        #expect(state.startRead(key(), wait: .zero, cancelled: false, now: t0).1 == .probe(state.calls.read(claim.keys)))
        _ = Self.lead(&state, "/b", token: 2, now: t0)
        state.resubscribed()
        #expect(!state.leads.isLeading(state.calls.keySpace.keys(for: key("/b")).digest, now: t0))
        _ = Self.lead(&state, "/c", policy: policy("gone"), token: 3, now: t0)
        _ = Self.lead(&state, "/d", policy: policy("kept"), token: 4, now: t0)
        state.retain(labels: ["kept"])
        #expect(!state.leads.isLeading(state.calls.keySpace.keys(for: key("/c")).digest, now: t0))
        #expect(state.leads.isLeading(state.calls.keySpace.keys(for: key("/d")).digest, now: t0))
        #expect(state.waitingReaders == 0)
    }

    @Test func aJoinedReaderKeepsWaitingWhenItsFlightIsAbandoned() {
        var state = Self.makeState()
        var (reader, _) = state.startRead(key(), wait: .seconds(5), cancelled: false, now: t0)
        _ = state.probed(&reader, .pending, sentAt: t0, cancelled: false, now: t0)
        #expect(state.probed(&reader, .absent(.notFound), sentAt: t0, cancelled: false, now: t0) == .wait(.milliseconds(100)))
        #expect(
            state.probed(&reader, .absent(.evicted), sentAt: t0, cancelled: false, now: t0) == .finish(.absent(.evicted), label: nil),
            "a drop ends the wait")
        let next = response("next")
        #expect(
            state.probed(&reader, .value(.response(next, label: "profile"), pttl: 0), sentAt: t0, cancelled: false, now: t0)
                == .finish(.ready(next, joined: true), label: "profile"))
    }

    @Test func withoutAnAnswerAReaderFallsBackForWhatIsLeftOfItsWait() {
        var state = Self.makeState()
        var (reader, _) = state.startRead(key(), wait: .seconds(2), cancelled: false, now: t0)
        #expect(
            state.probed(&reader, .unavailable, sentAt: t0, cancelled: false, now: t0 + .milliseconds(500))
                == .readFallback(wait: .milliseconds(1500)))
        #expect(state.probed(&reader, .unavailable, sentAt: t0, cancelled: true, now: t0) == .readFallback(wait: .zero))
        #expect(state.probed(&reader, .unavailable, sentAt: t0, cancelled: false, now: t0 + .seconds(3)) == .readFallback(wait: .zero))
        // Joined a flight when Redis went down: its leader here completes into the fallback and wakes it.
        _ = state.probed(&reader, .pending, sentAt: t0, cancelled: false, now: t0)
        #expect(state.probed(&reader, .unavailable, sentAt: t0, cancelled: false, now: t0) == .wait(.milliseconds(100)))
        state.fallbackCompleted(reader.keys.digest, policy: policy(), now: t0)
        #expect(state.probed(&reader, .unavailable, sentAt: t0, cancelled: false, now: t0) == .readFallback(wait: .seconds(2)))
    }

    @Test func anOutagesResultIsAnsweredFromTheFallbackAfterRecoveryWhileItsTTLLives() {
        var state = Self.makeState()
        _ = state.callFailed(now: t0)
        let claim = Self.claim(state)
        #expect(state.beginReplied(claim, reply: .failure(.unavailable), now: t0) == .beginInFallback)
        #expect(state.fallbackBegan(claim, outcome: .leader(FlightToken(9)), now: t0) == .leader(claim.token))
        guard case .completeInFallback(_, let digest, let policy) = state.complete(key(), token: claim.token) else {
            Issue.record("a fallback flight completes in the fallback")
            return
        }
        let completedAt = t0 + .seconds(1)
        state.fallbackCompleted(digest, policy: policy, now: completedAt)
        #expect(state.callSucceeded(now: t0 + .seconds(2)) == .cameUp(downFor: .seconds(2)))

        // Redis knows nothing of the key: the fallback answers while the result may live (TTL 30 s).
        var (reader, _) = state.startRead(key(), wait: .zero, cancelled: false, now: t0 + .seconds(3))
        #expect(
            state.probed(&reader, .absent(.notFound), sentAt: t0, cancelled: false, now: completedAt + .seconds(30) - .milliseconds(1))
                == .readFallback(wait: .zero))
        #expect(
            state.probed(&reader, .absent(.expired), sentAt: t0, cancelled: false, now: completedAt)
                == .finish(.absent(.expired), label: nil),
            "what Redis knows wins")
        #expect(
            state.probed(&reader, .absent(.notFound), sentAt: t0, cancelled: false, now: completedAt + .seconds(30))
                == .finish(.absent(.notFound), label: nil), "not after its TTL")
        #expect(state.fallbackResults.until.isEmpty, "and then forgotten")
    }

    @Test func aFailuresFallbackResultLivesForTheLongerOfTheTTLs() {
        var state = Self.makeState()
        let digest = state.calls.keySpace.keys(for: key()).digest
        state.fallbackCompleted(digest, policy: policy(ttl: .seconds(1), negativeTTL: .seconds(5)), now: t0)
        #expect(state.fallbackResults.until[digest] == t0 + .seconds(5))
        var results = FallbackResults()
        for index in 0..<FallbackResults.pruneAt {
            results.note("d\(index)", until: t0 + .seconds(1), now: t0)
        }
        results.note("late", until: t0 + .seconds(9), now: t0 + .seconds(2))
        #expect(results.until.count == 1, "expired entries are pruned once the book is full")
    }
}
