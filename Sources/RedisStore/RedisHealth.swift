import CoreMetrics
import Logging
import PrefetchCore
import Synchronization

/// Whether Redis is reachable, since when it is not, and when the next reconnect attempt is due, as a value type
/// with no clock of its own (part of `RedisStoreState`).
///
///     up --failure--> down(since now, retry after `initialBackoff`)
///     down --claimAttempt when due--> down(next retry after twice the backoff, at most `maxBackoff`)
///     down --success--> up (backoff reset, one reconnect counted)
///
/// While down, only the caller that claims the attempt touches the network; everyone else fails fast, so an outage
/// costs callers no connect timeouts.
struct RedisHealth: Sendable, Hashable {
    /// What a call's result changed.
    enum Transition: Sendable, Hashable {
        /// Nothing: it was already so.
        case none
        /// Redis became unreachable: the store is degraded from now on.
        case wentDown
        /// Redis is reachable again after being down for `downFor`; counted once in `reconnects`.
        case cameUp(downFor: Duration)
    }

    let initialBackoff: Duration
    let maxBackoff: Duration
    /// When the current outage began; nil while Redis is reachable.
    private(set) var downSince: ContinuousClock.Instant?
    /// When the next reconnect attempt is due; nil while Redis is reachable.
    private(set) var retryAt: ContinuousClock.Instant?
    /// The wait before the attempt after the next one.
    private(set) var backoff: Duration
    /// Recoveries so far.
    private(set) var reconnects = 0

    init(initialBackoff: Duration, maxBackoff: Duration) {
        self.initialBackoff = initialBackoff
        self.maxBackoff = max(initialBackoff, maxBackoff)
        self.backoff = initialBackoff
    }

    var isUp: Bool { downSince == nil }

    /// A call reached Redis at `now`.
    mutating func succeeded(now: ContinuousClock.Instant) -> Transition {
        guard let downSince else { return .none }
        self.downSince = nil
        retryAt = nil
        backoff = initialBackoff
        reconnects += 1
        return .cameUp(downFor: now - downSince)
    }

    /// A call could not reach Redis at `now`.
    mutating func failed(now: ContinuousClock.Instant) -> Transition {
        guard isUp else { return .none }
        downSince = now
        backoff = initialBackoff
        retryAt = now + backoff
        return .wentDown
    }

    /// Whether the caller may try the network at `now`. While down, true for one caller per backoff period, which
    /// also doubles the backoff (up to `maxBackoff`).
    mutating func claimAttempt(now: ContinuousClock.Instant) -> Bool {
        guard !isUp else { return true }
        guard let retryAt, now >= retryAt else { return false }
        backoff = min(backoff * 2, maxBackoff)
        self.retryAt = now + backoff
        return true
    }
}

/// The shell around a store's connection health: the pool's connections and the subscriber report each call here, it
/// reads the clock, feeds `RedisStoreState`, and acts on the transitions with the gauge `prefetch_store_redis_up`
/// (1 or 0), the counter `prefetch_store_redis_reconnects_total` and a log line.
///
/// Every pool call asks it twice (may I? it worked), so while Redis is up it answers both from an atomic copy of
/// "up" instead of the store's lock, which the store's own operations hold too.
final class RedisHealthMonitor: Sendable {
    private let state: SharedStoreState
    /// `!state.isDegraded`, written only under the state's lock (so it follows the state's own order of events) and
    /// read without it. A stale read costs at most one extra attempt or one success not counted while a failure is
    /// being recorded at the same moment, as either order of the two would.
    private let up = Atomic<Bool>(true)
    private let clock: any ServiceClock
    private let upGauge: Gauge
    private let reconnectCounter: Counter
    private let logger: Logger
    private let endpoint: RedisEndpoint

    /// A monitor of the health kept in `state`, read on `clock`.
    init(endpoint: RedisEndpoint, state: SharedStoreState, clock: any ServiceClock, logger: Logger, factory: any MetricsFactory) {
        self.state = state
        self.clock = clock
        self.upGauge = Gauge(label: "prefetch_store_redis_up", factory: factory)
        self.reconnectCounter = Counter(label: "prefetch_store_redis_reconnects_total", factory: factory)
        self.logger = logger
        self.endpoint = endpoint
        // Not known to be down until a call fails.
        upGauge.record(1)
    }

    /// A monitor with a state of its own, for a pool used without a store.
    convenience init(
        endpoint: RedisEndpoint, initialBackoff: Duration, maxBackoff: Duration, logger: Logger,
        factory: any MetricsFactory
    ) {
        var configuration = RedisStore.Configuration()
        configuration.reconnectInitialBackoff = initialBackoff
        configuration.reconnectMaxBackoff = maxBackoff
        let state = SharedStoreState(RedisStoreState(configuration: configuration, database: endpoint.database))
        self.init(endpoint: endpoint, state: state, clock: ContinuousClock(), logger: logger, factory: factory)
    }

    var isUp: Bool { up.load(ordering: .acquiring) }

    /// Whether the caller may try the network: always while up; while down, one caller per backoff period.
    func claimAttempt() -> Bool {
        if isUp { return true }
        let now = clock.now
        return state.withLock { $0.claimAttempt(now: now) }
    }

    /// A call reached Redis.
    func succeeded() {
        if isUp { return }
        let now = clock.now
        let transition = state.withLock { state in
            defer { up.store(!state.isDegraded, ordering: .releasing) }
            return state.callSucceeded(now: now)
        }
        guard case .cameUp(let downFor) = transition else { return }
        reconnectCounter.increment()
        upGauge.record(1)
        logger.notice(
            "Redis is reachable again; shared store restored",
            metadata: ["redis.endpoint": "\(endpoint)", "redis.down_for": "\(downFor)"])
    }

    /// A call could not reach Redis, for `error`.
    func failed(_ error: RedisCallError) {
        let now = clock.now
        let transition = state.withLock { state in
            defer { up.store(!state.isDegraded, ordering: .releasing) }
            return state.callFailed(now: now)
        }
        guard transition == .wentDown else { return }
        upGauge.record(0)
        let what = error.kind == .auth ? "Redis refused this replica's credentials" : "Redis is unreachable"
        logger.warning(
            "\(what); serving from this replica's fallback store until it returns",
            metadata: ["redis.endpoint": "\(endpoint)", "redis.error": "\(error)"])
    }
}
