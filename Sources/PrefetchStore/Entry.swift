/// Identifies one reader waiting on a flight, unique per store.
typealias WaiterID = UInt64

/// The life of one key's entry, as a value type with no clock and no I/O of its own.
///
///     pending --complete--> ready | failed
///     pending --begin after lockAge / abandon--> pending (new or no leader)
///     ready | failed --expire--> ended(expired);  --evict / drop--> ended(evicted);  --invalidate--> ended(invalidated)
///     ready (no-store) --first read--> ended(consumed)
///     pending --drop--> ended(evicted);  leaderless, waiterless or stale pending --> ended(notFound)
///
/// `ended` is terminal; the store removes ended entries (leaving a tombstone unless the reason is `notFound`).
struct Entry: Sendable {
    /// A fetch in progress and the readers waiting on it, in arrival order.
    struct Flight: Sendable, Hashable {
        /// The current leader, or nil once it abandoned (the next `begin` leads at once).
        var leader: FlightToken?
        var startedAt: ContinuousClock.Instant
        var waiters: [WaiterID]
    }

    enum State: Sendable, Hashable {
        case pending(Flight)
        case ready(StoredResponse, expiresAt: ContinuousClock.Instant, reads: Int)
        case failed(StoreFailure, expiresAt: ContinuousClock.Instant)
        case ended(AbsentReason)
    }

    enum BeginStep: Sendable, Hashable {
        /// The caller's token now leads; `tookOver` when it replaced an older (or absent) leader.
        case leader(tookOver: Bool)
        case joined
        case fresh
        /// The entry already ended; the store must replace it.
        case ended
    }

    enum ReadStep: Sendable, Hashable {
        case outcome(ReadOutcome)
        /// The entry is pending: the reader must wait (or give up at once).
        case wait
    }

    private(set) var state: State
    private(set) var policy: StorePolicy
    /// Set when a response ended without a single read: a wasted prefetch.
    private(set) var endedUnread = false

    /// A new entry, pending under `leader`.
    init(leader: FlightToken, policy: StorePolicy, now: ContinuousClock.Instant) {
        self.state = .pending(Flight(leader: leader, startedAt: now, waiters: []))
        self.policy = policy
    }

    var isPending: Bool {
        if case .pending = state { return true }
        return false
    }

    var isEnded: Bool {
        if case .ended = state { return true }
        return false
    }

    var endReason: AbsentReason? {
        if case .ended(let reason) = state { return reason }
        return nil
    }

    var waiters: [WaiterID] {
        if case .pending(let flight) = state { return flight.waiters }
        return []
    }

    /// Whether `token` leads this entry's flight right now.
    func isLed(by token: FlightToken) -> Bool {
        if case .pending(let flight) = state { return flight.leader == token }
        return false
    }

    /// The bytes this entry counts against the budget, given its key's bytes and the per-entry overhead.
    func accountedBytes(keyBytes: Int, overhead: Int) -> Int {
        switch state {
        case .pending, .ended: overhead + keyBytes
        case .ready(let response, _, _): overhead + keyBytes + response.accountedBytes
        case .failed(let failure, _): overhead + keyBytes + failure.accountedBytes
        }
    }

    /// Whether completing with `result` would keep a response in this entry (as opposed to handing a no-store
    /// response straight to a waiter, or keeping a failure).
    func wouldKeepResponse(_ result: Result<StoredResponse, StoreFailure>) -> Bool {
        guard case .pending(let flight) = state, case .success(let response) = result else { return false }
        return !(response.noStore && !flight.waiters.isEmpty)
    }

    /// A trigger asks to fetch. Leads if the entry is pending without a leader or its flight is at least
    /// `lockAge` old; joins a younger flight; reports `.fresh` for a completed entry that has not expired.
    mutating func begin(
        token: FlightToken, policy: StorePolicy, now: ContinuousClock.Instant, lockAge: Duration
    ) -> BeginStep {
        expireIfDue(now: now)
        switch state {
        case .pending(var flight):
            guard flight.leader == nil || now - flight.startedAt >= lockAge else { return .joined }
            flight.leader = token
            flight.startedAt = now
            state = .pending(flight)
            self.policy = policy
            return .leader(tookOver: true)
        case .ready, .failed:
            return .fresh
        case .ended:
            return .ended
        }
    }

    /// Adds a reader to the flight's waiting list. False unless pending.
    mutating func addWaiter(_ id: WaiterID) -> Bool {
        guard case .pending(var flight) = state else { return false }
        flight.waiters.append(id)
        state = .pending(flight)
        return true
    }

    /// Removes a reader from the flight's waiting list (deadline or cancellation). A leaderless flight left with
    /// nobody waiting ends as `notFound`. False if the reader was not waiting here.
    mutating func removeWaiter(_ id: WaiterID) -> Bool {
        guard case .pending(var flight) = state, let at = flight.waiters.firstIndex(of: id) else { return false }
        flight.waiters.remove(at: at)
        state = flight.leader == nil && flight.waiters.isEmpty ? .ended(.notFound) : .pending(flight)
        return true
    }

    /// The leader gives up. Waiters stay for the next leader; with none, the entry ends as `notFound`.
    /// False (and no change) for a stale token.
    mutating func abandon(token: FlightToken) -> Bool {
        guard case .pending(var flight) = state, flight.leader == token else { return false }
        flight.leader = nil
        state = flight.waiters.isEmpty ? .ended(.notFound) : .pending(flight)
        return true
    }

    /// Publishes the leader's result. Returns what each waiter gets, in arrival order, or nil (and no change)
    /// for a stale token. A no-store response goes to the first waiter only; the others get `.absent(.consumed)`.
    /// `rejection` (decided by the store when the response cannot be kept) replaces a kept response with a failure.
    mutating func complete(
        token: FlightToken,
        result: Result<StoredResponse, StoreFailure>,
        now: ContinuousClock.Instant,
        rejection: StoreFailure? = nil
    ) -> [(WaiterID, ReadOutcome)]? {
        guard case .pending(let flight) = state, flight.leader == token else { return nil }
        let failedUntil = now + policy.negativeTTL
        switch result {
        case .failure(let failure):
            state = .failed(failure, expiresAt: failedUntil)
            return flight.waiters.map { ($0, .failed(failure, joined: true)) }
        case .success(let response) where response.noStore && !flight.waiters.isEmpty:
            state = .ended(.consumed)
            return flight.waiters.enumerated().map { offset, id in
                (id, offset == 0 ? .ready(response, joined: true) : .absent(.consumed))
            }
        case .success(let response):
            if let rejection {
                state = .failed(rejection, expiresAt: failedUntil)
            } else {
                state = .ready(response, expiresAt: now + policy.ttl, reads: flight.waiters.count)
            }
            return flight.waiters.map { ($0, .ready(response, joined: true)) }
        }
    }

    /// A reader arrives. Expires the entry first if due; a no-store response is consumed by this read.
    mutating func read(now: ContinuousClock.Instant) -> ReadStep {
        expireIfDue(now: now)
        switch state {
        case .pending:
            return .wait
        case .ready(let response, let expiresAt, let reads):
            state = response.noStore ? .ended(.consumed) : .ready(response, expiresAt: expiresAt, reads: reads + 1)
            return .outcome(.ready(response, joined: false))
        case .failed(let failure, _):
            return .outcome(.failed(failure, joined: false))
        case .ended(let reason):
            return .outcome(.absent(reason))
        }
    }

    /// Ends a completed entry whose TTL has passed. Returns whether it ended now.
    @discardableResult
    mutating func expireIfDue(now: ContinuousClock.Instant) -> Bool {
        switch state {
        case .ready(_, let expiresAt, let reads) where now >= expiresAt:
            endedUnread = reads == 0
            state = .ended(.expired)
            return true
        case .failed(_, let expiresAt) where now >= expiresAt:
            state = .ended(.expired)
            return true
        default:
            return false
        }
    }

    /// Ends a completed entry to make room. Pending entries are never evicted: returns false for them.
    mutating func evict() -> Bool {
        switch state {
        case .ready(_, _, let reads):
            endedUnread = reads == 0
            state = .ended(.evicted)
            return true
        case .failed:
            state = .ended(.evicted)
            return true
        case .pending, .ended:
            return false
        }
    }

    /// Ends a completed entry because an invalidation names it. A pending entry is left alone (its flight's waiters
    /// still get the result): returns false for it, and for an ended one.
    mutating func invalidate() -> Bool {
        switch state {
        case .ready(_, _, let reads):
            endedUnread = reads == 0
            state = .ended(.invalidated)
            return true
        case .failed:
            state = .ended(.invalidated)
            return true
        case .pending, .ended:
            return false
        }
    }

    /// Ends the entry whatever its state (its interface left the configuration). Returns the waiters to release.
    mutating func drop() -> [WaiterID] {
        let released = waiters
        if case .ready(_, _, let reads) = state { endedUnread = reads == 0 }
        if !isEnded { state = .ended(.evicted) }
        return released
    }

    /// Ends a pending entry nobody waits for whose leader abandoned or has been silent for `after`, so a leader
    /// that never completes cannot pin memory forever. Returns whether it ended now.
    @discardableResult
    mutating func reclaimIfStale(now: ContinuousClock.Instant, after: Duration) -> Bool {
        guard case .pending(let flight) = state, flight.waiters.isEmpty,
            flight.leader == nil || now - flight.startedAt >= after
        else { return false }
        state = .ended(.notFound)
        return true
    }
}
