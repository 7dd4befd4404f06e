import CoreMetrics
import PrefetchStore
import Synchronization

/// Read counters under the same names and bounded dimensions as `MemoryStore`'s: `prefetch_store_hits_total` and
/// `prefetch_store_joins_total` by `interface` (a configured interface name), `prefetch_store_misses_total` by
/// `reason` (an `AbsentReason` value, `failed` or `pending`). Reads answered by the fallback store are counted there
/// instead, under the same names.
final class RedisStoreMetrics: Sendable {
    struct Totals: Sendable {
        var hits = 0
        var joins = 0
        var misses = 0
    }

    static let missReasons = AbsentReason.allCases.map(\.rawValue) + ["failed", "pending"]

    private struct PerInterface {
        var hits: [String: Counter] = [:]
        var joins: [String: Counter] = [:]
    }

    private let factory: any MetricsFactory
    private let perInterface = Mutex(PerInterface())
    private let misses: [String: Counter]
    private let totalsState = Mutex(Totals())

    init(factory: any MetricsFactory) {
        self.factory = factory
        var misses: [String: Counter] = [:]
        for reason in Self.missReasons {
            misses[reason] = Counter(
                label: "prefetch_store_misses_total", dimensions: [("reason", reason)], factory: factory)
        }
        self.misses = misses
    }

    var totals: Totals { totalsState.withLock { $0 } }

    /// Counts one read, exactly once; `label` is the entry's interface, known whenever a response was found.
    func record(_ outcome: ReadOutcome, label: String?) {
        switch outcome {
        case .ready(_, let joined):
            totalsState.withLock { joined ? ($0.joins += 1) : ($0.hits += 1) }
            guard let label else { return }
            let counter = perInterface.withLock { cache in
                let name = joined ? "prefetch_store_joins_total" : "prefetch_store_hits_total"
                let family: WritableKeyPath<PerInterface, [String: Counter]> = joined ? \.joins : \.hits
                if let existing = cache[keyPath: family][label] { return existing }
                let made = Counter(label: name, dimensions: [("interface", label)], factory: factory)
                cache[keyPath: family][label] = made
                return made
            }
            counter.increment()
        case .failed:
            miss("failed")
        case .pending:
            miss("pending")
        case .absent(let reason):
            miss(reason.rawValue)
        }
    }

    private func miss(_ reason: String) {
        totalsState.withLock { $0.misses += 1 }
        misses[reason]?.increment()
    }
}
