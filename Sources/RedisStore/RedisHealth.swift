import CoreMetrics
import Logging
import Synchronization

/// Whether Redis is reachable, and when the next reconnect attempt is due, as a value type with no clock of its own.
///
///     up --failure--> down(retry after `initialBackoff`)
///     down --claimAttempt when due--> down(next retry after twice the backoff, at most `maxBackoff`)
///     down --success--> up (backoff reset)
///
/// While down, only the caller that claims the attempt touches the network; everyone else fails fast, so an outage
/// costs callers no connect timeouts.
struct RedisHealth: Sendable, Hashable {
    enum Transition: Sendable, Hashable {
        case none
        case wentDown
        case cameUp
    }

    let initialBackoff: Duration
    let maxBackoff: Duration
    private(set) var isUp = true
    private(set) var retryAt: ContinuousClock.Instant?
    private(set) var backoff: Duration

    init(initialBackoff: Duration, maxBackoff: Duration) {
        self.initialBackoff = initialBackoff
        self.maxBackoff = max(initialBackoff, maxBackoff)
        self.backoff = initialBackoff
    }

    /// A call reached Redis.
    mutating func succeeded() -> Transition {
        guard !isUp else { return .none }
        isUp = true
        retryAt = nil
        backoff = initialBackoff
        return .cameUp
    }

    /// A call could not reach Redis.
    mutating func failed(now: ContinuousClock.Instant) -> Transition {
        guard isUp else { return .none }
        isUp = false
        backoff = initialBackoff
        retryAt = now + backoff
        return .wentDown
    }

    /// Whether the caller may try the network now. While down, true for one caller per backoff period, which also
    /// doubles the backoff (up to `maxBackoff`).
    mutating func claimAttempt(now: ContinuousClock.Instant) -> Bool {
        guard !isUp else { return true }
        guard let retryAt, now >= retryAt else { return false }
        backoff = min(backoff * 2, maxBackoff)
        self.retryAt = now + backoff
        return true
    }
}

/// The shared `RedisHealth` of one store, with its metrics and logs: `prefetch_store_redis_up` (1 or 0) and
/// `prefetch_store_redis_reconnects_total`.
final class RedisHealthMonitor: Sendable {
    private let state: Mutex<RedisHealth>
    private let reconnectCount = Atomic<Int>(0)
    private let upGauge: Gauge
    private let reconnectCounter: Counter
    private let logger: Logger
    private let endpoint: RedisEndpoint
    private let clock = ContinuousClock()

    init(
        endpoint: RedisEndpoint, initialBackoff: Duration, maxBackoff: Duration, logger: Logger,
        factory: any MetricsFactory
    ) {
        self.state = Mutex(RedisHealth(initialBackoff: initialBackoff, maxBackoff: maxBackoff))
        self.upGauge = Gauge(label: "prefetch_store_redis_up", factory: factory)
        self.reconnectCounter = Counter(label: "prefetch_store_redis_reconnects_total", factory: factory)
        self.logger = logger
        self.endpoint = endpoint
        // Not known to be down until a call fails.
        upGauge.record(1)
    }

    var isUp: Bool { state.withLock { $0.isUp } }

    var reconnects: Int { reconnectCount.load(ordering: .relaxed) }

    func claimAttempt() -> Bool {
        let now = clock.now
        return state.withLock { $0.claimAttempt(now: now) }
    }

    func succeeded() {
        guard state.withLock({ $0.succeeded() }) == .cameUp else { return }
        reconnectCount.add(1, ordering: .relaxed)
        reconnectCounter.increment()
        upGauge.record(1)
        logger.notice("Redis is reachable again; shared store restored", metadata: ["redis.endpoint": "\(endpoint)"])
    }

    func failed(_ error: RedisCallError) {
        let now = clock.now
        guard state.withLock({ $0.failed(now: now) }) == .wentDown else { return }
        upGauge.record(0)
        let what = error.kind == .auth ? "Redis refused this replica's credentials" : "Redis is unreachable"
        logger.warning(
            "\(what); serving from this replica's fallback store until it returns",
            metadata: ["redis.endpoint": "\(endpoint)", "redis.error": "\(error)"])
    }
}
