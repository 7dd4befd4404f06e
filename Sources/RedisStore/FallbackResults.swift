/// Digests with a result in the fallback store, and until when it may still be there. After Redis returns, reads
/// Redis knows nothing about are answered from the fallback for these, so an outage's results stay readable for
/// their TTL.
struct FallbackResults: Sendable {
    /// Entries kept before the expired ones are dropped.
    static let pruneAt = 4096

    private(set) var until: [String: ContinuousClock.Instant] = [:]

    /// A result for `digest` went to the fallback store at `now`, to live there until `until`.
    mutating func note(_ digest: String, until: ContinuousClock.Instant, now: ContinuousClock.Instant) {
        if self.until.count >= Self.pruneAt { self.until = self.until.filter { $0.value > now } }
        self.until[digest] = until
    }

    /// Whether the fallback store may still hold a result for `digest` at `now`; forgets it once it may not.
    mutating func contains(_ digest: String, now: ContinuousClock.Instant) -> Bool {
        guard let until = until[digest] else { return false }
        if until > now { return true }
        self.until[digest] = nil
        return false
    }
}
