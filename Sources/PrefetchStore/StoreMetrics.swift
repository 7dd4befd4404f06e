import CoreMetrics
import Synchronization

/// Something the store counted, recorded under its lock and reported after it is released.
enum MetricEvent: Sendable, Hashable {
    case hit(label: String)
    case join(label: String)
    case miss(reason: String)
    case eviction
    case expiredUnused(label: String)
}

/// The store's metrics. Every dimension is bounded: `interface` is a configured interface name and `reason` one
/// of `MissReason`. Each metric object is created once per label value and cached. `prefetch_store_budget_bytes`
/// is the byte budget `prefetch_store_bytes` is held under (`--store-bytes`, or a Redis store's fallback budget),
/// recorded once: the budget-use ratio divides by it.
final class StoreMetrics: Sendable {
    /// Every `reason` a miss can carry: the `AbsentReason` values plus `failed` and `pending`.
    static let missReasons = AbsentReason.allCases.map(\.rawValue) + ["failed", "pending"]

    private struct PerInterface {
        var hits: [String: Counter] = [:]
        var joins: [String: Counter] = [:]
        var expiredUnused: [String: Counter] = [:]
    }

    private let factory: any MetricsFactory
    private let perInterface = Mutex(PerInterface())
    private let misses: [String: Counter]
    private let evictions: Counter
    private let bytes: Gauge
    private let budget: Gauge
    private let entries: Gauge
    private let waitingReaders: Gauge

    init(factory: any MetricsFactory, budgetBytes: Int) {
        self.factory = factory
        var misses: [String: Counter] = [:]
        for reason in Self.missReasons {
            misses[reason] = Counter(
                label: "prefetch_store_misses_total", dimensions: [("reason", reason)], factory: factory)
        }
        self.misses = misses
        self.evictions = Counter(label: "prefetch_store_evictions_total", factory: factory)
        self.bytes = Gauge(label: "prefetch_store_bytes", factory: factory)
        self.budget = Gauge(label: "prefetch_store_budget_bytes", factory: factory)
        budget.record(budgetBytes)
        self.entries = Gauge(label: "prefetch_store_entries", factory: factory)
        self.waitingReaders = Gauge(label: "prefetch_store_waiting_readers", factory: factory)
    }

    /// Readers waiting on flights in progress (a task's or an event loop's).
    func recordWaiting(_ count: Int) {
        waitingReaders.record(count)
    }

    func record(_ event: MetricEvent) {
        switch event {
        case .hit(let label):
            counter(\.hits, name: "prefetch_store_hits_total", label: label).increment()
        case .join(let label):
            counter(\.joins, name: "prefetch_store_joins_total", label: label).increment()
        case .expiredUnused(let label):
            counter(\.expiredUnused, name: "prefetch_store_expired_unused_total", label: label).increment()
        case .miss(let reason):
            misses[reason]?.increment()
        case .eviction:
            evictions.increment()
        }
    }

    func recordSize(bytes: Int, entries: Int) {
        self.bytes.record(bytes)
        self.entries.record(entries)
    }

    private func counter(
        _ family: WritableKeyPath<PerInterface, [String: Counter]>, name: String, label: String
    ) -> Counter {
        perInterface.withLock { cache in
            if let existing = cache[keyPath: family][label] { return existing }
            let made = Counter(label: name, dimensions: [("interface", label)], factory: factory)
            cache[keyPath: family][label] = made
            return made
        }
    }
}
