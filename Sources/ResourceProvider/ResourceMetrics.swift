import CoreMetrics

/// The provider's metrics, every dimension from a fixed set: refresh outcomes, the bytes published, blob reads.
final class ResourceMetrics: Sendable {
    private let refreshes: [RefreshOutcome: Counter]
    private let bytes: Gauge
    private let entries: Gauge
    private let version: Gauge
    private let reads: [BlobAnswer.Outcome: Counter]

    init(factory: any MetricsFactory) {
        var refreshes: [RefreshOutcome: Counter] = [:]
        for outcome in RefreshOutcome.allCases {
            refreshes[outcome] = Counter(
                label: "prefetch_resource_refreshes_total", dimensions: [("outcome", outcome.rawValue)], factory: factory)
        }
        self.refreshes = refreshes
        bytes = Gauge(label: "prefetch_resource_bytes", factory: factory)
        entries = Gauge(label: "prefetch_resource_entries", factory: factory)
        version = Gauge(label: "prefetch_resource_map_version", factory: factory)
        var reads: [BlobAnswer.Outcome: Counter] = [:]
        for outcome in BlobAnswer.Outcome.allCases {
            reads[outcome] = Counter(
                label: "prefetch_resource_blob_reads_total", dimensions: [("outcome", outcome.rawValue)], factory: factory)
        }
        self.reads = reads
    }

    /// A refresh ended with `outcome`; the published map has `bytes`, `entries` and `version` (decimal text of at
    /// most 15 digits, so exact as a gauge's value).
    func refreshed(_ outcome: RefreshOutcome, bytes: Int, entries: Int, version: String) {
        refreshes[outcome]?.increment()
        if let number = Double(version) { self.version.record(number) }
        self.bytes.record(bytes)
        self.entries.record(entries)
    }

    func read(_ outcome: BlobAnswer.Outcome) {
        reads[outcome]?.increment()
    }
}

/// How a refresh ended, a bounded metric label.
public enum RefreshOutcome: String, Sendable, Codable, CaseIterable {
    /// Every resource answered (a body or `304`) and fit the caps.
    case ok
    /// Some resources failed; their previous copies (if any) stay published.
    case partial
    /// Every resource failed.
    case failed
    /// Another refresh was running; this one did nothing.
    case skipped
}
