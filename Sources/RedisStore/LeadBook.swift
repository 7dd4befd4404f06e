import PrefetchStore

/// The flights this replica leads in Redis, by key digest, and when each began. While one is younger than `window`
/// (the smaller of the lock age and the local tier's `localTTL`) its lock is taken to be this replica's, so a reader
/// here knows the key is pending without asking Redis: a page's reads, which arrive while its fetches run, cost no
/// round trip until they are woken. Whatever may have changed the key forgets it, so a reader then asks Redis as
/// usual: the flight's own completion or abandonment, any announcement for the digest (a completion, a drop or an
/// invalidation on any replica), a `retain` here, and a resubscription (announcements may have been missed). A drop by another replica
/// whose announcement has not arrived yet is the one thing this cannot see; the window bounds that staleness by the
/// same `localTTL` that already bounds the local tier's.
struct LeadBook: Sendable {
    private struct Lead: Sendable, Hashable {
        let token: FlightToken
        let label: String
        let startedAt: ContinuousClock.Instant
    }

    /// Leads kept before the ones past the window are dropped.
    static let pruneAt = 4096

    let window: Duration
    private var leads: [String: Lead] = [:]

    init(window: Duration) {
        self.window = window
    }

    /// How many leads are held (past the window or not).
    var count: Int { leads.count }

    /// This replica took the lock for `digest` at `startedAt`.
    mutating func lead(_ digest: String, token: FlightToken, label: String, startedAt: ContinuousClock.Instant) {
        // Leaders that never finish are dropped once past the window.
        if leads.count >= Self.pruneAt { leads = leads.filter { startedAt - $0.value.startedAt < window } }
        leads[digest] = Lead(token: token, label: label, startedAt: startedAt)
    }

    /// The flight `token` leads for `digest` completed or was abandoned (a later flight's lead is kept).
    mutating func ended(_ digest: String, token: FlightToken) {
        if leads[digest]?.token == token { leads[digest] = nil }
    }

    mutating func forget(_ digest: String) {
        leads[digest] = nil
    }

    mutating func forgetAll() {
        leads.removeAll()
    }

    /// Forgets the flights whose label is not in `labels` (`retain` dropped their locks).
    mutating func retain(labels: Set<String>) {
        leads = leads.filter { labels.contains($0.value.label) }
    }

    /// Whether this replica is taken to hold the lock for `digest` at `now`.
    func isLeading(_ digest: String, now: ContinuousClock.Instant) -> Bool {
        leads[digest].map { now - $0.startedAt < window } ?? false
    }
}
