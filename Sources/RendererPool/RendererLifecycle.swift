/// The life of one pooled renderer as an explicit state machine:
///
///     warming ──warmed──▶ idle ──lease──▶ leased ──release(healthy)──▶ resetting ──reset ok──▶ idle …
///        │                  │  ◀──────────────────────────────────────────────────────────────┘
///        │ (cold start: warming ──lease──▶ leased)
///        └──────────── retire (any live state) ──▶ retiring ──destroyed──▶ destroyed
///
/// `release(healthy: false)`, a failed reset, `maxUses` reached or the lifetime passed send a renderer to
/// `retiring` instead of back to `idle`. Invalid transitions are refused (the method returns `false` and
/// nothing changes), so a late event (a release after the lease was reclaimed) cannot corrupt the pool.
public struct RendererLifecycle: Sendable, Equatable {
    /// Where the renderer is in its life.
    public enum State: String, Sendable, Equatable {
        /// Being created; counts towards `maxSize`.
        case warming
        /// Warm, reset, ready to be leased.
        case idle
        /// Handed out to a shell.
        case leased
        /// Released and being reset before its next lease.
        case resetting
        /// Chosen for destruction; the destroy is in progress.
        case retiring
        /// Gone.
        case destroyed
    }

    /// Why a renderer was retired; bounded, safe as a log field.
    public enum RetireReason: String, Sendable, Equatable {
        /// Creation failed; nothing to destroy.
        case createFailed
        /// Found dead by a health check.
        case unhealthy
        /// The lease holder released it as unhealthy.
        case releasedUnhealthy
        /// Its reset failed.
        case resetFailed
        /// It served `maxUses` leases.
        case maxUses
        /// It outlived its (jittered) `maxLifetime`.
        case lifetime
        /// It stayed idle past `idleTimeout` with more than `minIdle` idle.
        case idle
        /// Its lease was not released within `leaseTimeout`.
        case reclaimed
        /// ``RendererPool/clear()`` (memory warning).
        case cleared
        /// The pool is shutting down.
        case shutdown
    }

    /// The current state.
    public private(set) var state: State = .warming
    /// How many leases the renderer has served.
    public private(set) var uses: Int = 0
    /// When the current state was entered.
    public private(set) var since: ContinuousClock.Instant
    /// When the renderer became warm (nil while still warming for the first time).
    public private(set) var warmAt: ContinuousClock.Instant?
    /// Why it was retired, once it was.
    public private(set) var retireReason: RetireReason?
    /// Leases after which the renderer is recycled.
    public let maxUses: Int
    /// How long the renderer may live once warm (`maxLifetime` minus its jitter).
    public let lifetime: Duration

    /// A renderer starting to warm at `now`.
    public init(now: ContinuousClock.Instant, maxUses: Int, lifetime: Duration) {
        self.since = now
        self.maxUses = maxUses
        self.lifetime = lifetime
    }

    /// Whether the renderer still exists (counts towards `maxSize`).
    public var isLive: Bool { state != .destroyed }

    /// Whether the renderer has outlived its lifetime at `now`.
    public func isExpired(at now: ContinuousClock.Instant) -> Bool {
        guard let warmAt else { return false }
        return now - warmAt >= lifetime
    }

    /// warming → idle.
    public mutating func warmed(at now: ContinuousClock.Instant) -> Bool {
        guard state == .warming else { return false }
        state = .idle
        since = now
        warmAt = now
        return true
    }

    /// idle → leased, or warming → leased for a renderer created for this very acquire (cold start).
    public mutating func lease(at now: ContinuousClock.Instant) -> Bool {
        switch state {
        case .idle:
            break
        case .warming:
            warmAt = now
        default:
            return false
        }
        state = .leased
        since = now
        uses += 1
        return true
    }

    /// leased → resetting when the renderer can serve again, otherwise leased → retiring (unhealthy,
    /// `maxUses` reached, lifetime passed). Returns the new state, or nil when the renderer was not leased.
    public mutating func release(healthy: Bool, at now: ContinuousClock.Instant) -> State? {
        guard state == .leased else { return nil }
        since = now
        if !healthy {
            retireReason = .releasedUnhealthy
        } else if uses >= maxUses {
            retireReason = .maxUses
        } else if isExpired(at: now) {
            retireReason = .lifetime
        } else {
            state = .resetting
            return state
        }
        state = .retiring
        return state
    }

    /// resetting → idle on success, resetting → retiring on failure.
    public mutating func resetFinished(ok: Bool, at now: ContinuousClock.Instant) -> Bool {
        guard state == .resetting else { return false }
        since = now
        if ok {
            state = .idle
        } else {
            state = .retiring
            retireReason = .resetFailed
        }
        return true
    }

    /// Any live state except retiring → retiring.
    public mutating func retire(_ reason: RetireReason, at now: ContinuousClock.Instant) -> Bool {
        switch state {
        case .warming, .idle, .leased, .resetting:
            state = .retiring
            retireReason = reason
            since = now
            return true
        case .retiring, .destroyed:
            return false
        }
    }

    /// retiring → destroyed.
    public mutating func destroyed(at now: ContinuousClock.Instant) -> Bool {
        guard state == .retiring else { return false }
        state = .destroyed
        since = now
        return true
    }
}
