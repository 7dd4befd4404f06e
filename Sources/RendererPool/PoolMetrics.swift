import Metrics
import PrefetchCore

/// The pool's swift-metrics instruments. Every metric carries one dimension, `profile` (a configured profile
/// name, so bounded); acquires add `result`, one of `warm`, `cold`, `timeout`, `failed`, `callerLimit`.
///
/// - `renderer_pool_acquires_total{profile,result}` counter: finished acquires by outcome.
/// - `renderer_pool_acquire_wait` timer: time from acquire to lease (successful acquires only).
/// - `renderer_pool_pending_acquires` gauge: acquirers waiting in the FIFO queue.
/// - `renderer_pool_idle`, `renderer_pool_leased`, `renderer_pool_warming` gauges: renderers per state.
/// - `renderer_pool_created_total`, `renderer_pool_destroyed_total` counters: renderer creations and destructions.
/// - `renderer_pool_reclaimed_total` counter: leases never released and reclaimed after `leaseTimeout`.
struct PoolMetrics: Sendable {
    let warm: Counter
    let cold: Counter
    let timeout: Counter
    let failed: Counter
    let callerLimit: Counter
    let wait: Timer
    let pending: Gauge
    let idle: Gauge
    let leased: Gauge
    let warming: Gauge
    let created: Counter
    let destroyed: Counter
    let reclaimed: Counter

    init(profile: String, factory: any MetricsFactory) {
        func acquires(_ result: String) -> Counter {
            Counter(
                label: "renderer_pool_acquires_total", dimensions: [("profile", profile), ("result", result)],
                factory: factory)
        }
        let dims = [("profile", profile)]
        warm = acquires("warm")
        cold = acquires("cold")
        timeout = acquires("timeout")
        failed = acquires("failed")
        callerLimit = acquires("callerLimit")
        wait = Timer(label: "renderer_pool_acquire_wait", dimensions: dims, factory: factory)
        pending = Gauge(label: "renderer_pool_pending_acquires", dimensions: dims, factory: factory)
        idle = Gauge(label: "renderer_pool_idle", dimensions: dims, factory: factory)
        leased = Gauge(label: "renderer_pool_leased", dimensions: dims, factory: factory)
        warming = Gauge(label: "renderer_pool_warming", dimensions: dims, factory: factory)
        created = Counter(label: "renderer_pool_created_total", dimensions: dims, factory: factory)
        destroyed = Counter(label: "renderer_pool_destroyed_total", dimensions: dims, factory: factory)
        reclaimed = Counter(label: "renderer_pool_reclaimed_total", dimensions: dims, factory: factory)
    }
}

/// Acquire-wait percentiles over a bounded window of recent successful acquires, in milliseconds.
public struct WaitPercentiles: Sendable, Codable, Equatable {
    /// Median wait.
    public var p50: Double
    /// 90th percentile wait.
    public var p90: Double
    /// 99th percentile wait.
    public var p99: Double
    /// How many acquires the window holds (at most its capacity).
    public var samples: Int
}

/// The most recent `capacity` wait samples, oldest overwritten first.
struct WaitWindow: Sendable {
    private var samples: [Double] = []
    private var next = 0
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        samples.reserveCapacity(capacity)
    }

    mutating func add(_ wait: Duration) {
        let ms = wait.fractionalSeconds * 1000
        if samples.count < capacity {
            samples.append(ms)
        } else {
            samples[next] = ms
            next = (next + 1) % capacity
        }
    }

    /// Nearest-rank percentiles; all zero when empty.
    var percentiles: WaitPercentiles {
        guard !samples.isEmpty else { return WaitPercentiles(p50: 0, p90: 0, p99: 0, samples: 0) }
        let sorted = samples.sorted()
        func rank(_ p: Double) -> Double {
            let index = Int((p * Double(sorted.count)).rounded(.up)) - 1
            return sorted[min(max(index, 0), sorted.count - 1)]
        }
        return WaitPercentiles(p50: rank(0.5), p90: rank(0.9), p99: rank(0.99), samples: sorted.count)
    }
}

/// A point-in-time view of one pool: renderers per state, lifetime counters and recent acquire waits.
public struct PoolSnapshot: Sendable, Codable, Equatable {
    /// The profile name.
    public var profile: String
    /// Warm renderers ready to lease.
    public var idle: Int
    /// Renderers handed out.
    public var leased: Int
    /// Renderers being created.
    public var warming: Int
    /// Released renderers being reset.
    public var resetting: Int
    /// Renderers being destroyed.
    public var retiring: Int
    /// Acquirers waiting.
    public var pending: Int
    /// Renderers created successfully, ever.
    public var created: Int
    /// Renderers destroyed, ever.
    public var destroyed: Int
    /// Creations that failed, ever.
    public var createFailures: Int
    /// Acquires served by an already-warm renderer.
    public var warmHits: Int
    /// Acquires served by a renderer created for them.
    public var coldStarts: Int
    /// Acquires that timed out.
    public var timeouts: Int
    /// Leases reclaimed after `leaseTimeout`.
    public var reclaimed: Int
    /// Memory reported by live renderers, in megabytes.
    public var memoryMB: Int
    /// Acquire-wait percentiles over the recent window.
    public var acquireWaitMs: WaitPercentiles

    /// Renderers that exist now (never above the profile's `maxSize`).
    public var live: Int { idle + leased + warming + resetting + retiring }
}
