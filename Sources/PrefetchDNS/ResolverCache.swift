/// Where an answer came from; also the `source` metric label.
public enum DNSSource: String, Sendable, CaseIterable {
    /// The system resolver (getaddrinfo), with the configured `systemTTL`.
    case system
    /// The configured HTTPDNS endpoint, with the TTL it answered.
    case httpdns
}

/// A cached answer for one host.
public struct DNSAnswer: Sendable, Equatable {
    /// The host name (lowercased) the answer is for.
    public var host: String
    /// The addresses in the order the source gave them; the first is the one pinned.
    public var addresses: [String]
    /// Which resolver answered.
    public var source: DNSSource
    /// When it was resolved.
    public var resolvedAt: ContinuousClock.Instant
    /// When the background refresh is due (`resolvedAt + refreshAhead × lifetime`).
    public var refreshAt: ContinuousClock.Instant
    /// After this instant the answer is never used.
    public var expiresAt: ContinuousClock.Instant

    /// Creates an answer value.
    public init(
        host: String,
        addresses: [String],
        source: DNSSource,
        resolvedAt: ContinuousClock.Instant,
        refreshAt: ContinuousClock.Instant,
        expiresAt: ContinuousClock.Instant
    ) {
        self.host = host
        self.addresses = addresses
        self.source = source
        self.resolvedAt = resolvedAt
        self.refreshAt = refreshAt
        self.expiresAt = expiresAt
    }
}

/// The resolver's state machine, a value type with no clock of its own: every transition takes `now`.
///
/// Each watched host is `idle` (a lookup is due at `nextAttempt`) or `inFlight`, and independently may hold an
/// answer. An answer is served only before its `expiresAt`; a refresh is due at `refreshAt`, before expiry, so a
/// host whose lookups keep succeeding never goes without one. A failed lookup keeps the earlier answer until it
/// expires and retries after `failureRetry`. At most `maxInFlight` lookups run at once.
struct ResolverCache {
    struct Entry: Equatable {
        var answer: DNSAnswer?
        var inFlight = false
        var nextAttempt: ContinuousClock.Instant
    }

    private(set) var entries: [String: Entry] = [:]
    let maxInFlight: Int
    private(set) var inFlightCount = 0

    init(maxInFlight: Int) {
        self.maxInFlight = max(1, maxInFlight)
    }

    /// Makes `hosts` exactly the watched set: new hosts are due at once, hosts no longer listed are forgotten
    /// (their answers dropped, the results of their running lookups ignored). Returns how many hosts are new.
    @discardableResult
    mutating func watch(_ hosts: Set<String>, now: ContinuousClock.Instant) -> Int {
        var added = 0
        for host in entries.keys where !hosts.contains(host) {
            if entries[host]?.inFlight == true { inFlightCount -= 1 }
            entries[host] = nil
        }
        for host in hosts where entries[host] == nil {
            entries[host] = Entry(answer: nil, inFlight: false, nextAttempt: now)
            added += 1
        }
        return added
    }

    /// The answer for `host` if one exists and has not expired at `now`.
    func answer(for host: String, now: ContinuousClock.Instant) -> DNSAnswer? {
        guard let answer = entries[host]?.answer, now < answer.expiresAt else { return nil }
        return answer
    }

    /// Hosts whose lookup is due at `now`, oldest due first, marked in flight; never more than the free slots.
    mutating func takeDue(now: ContinuousClock.Instant) -> [String] {
        let free = maxInFlight - inFlightCount
        guard free > 0 else { return [] }
        let due = entries.filter { !$0.value.inFlight && $0.value.nextAttempt <= now }
            .sorted { ($0.value.nextAttempt, $0.key) < ($1.value.nextAttempt, $1.key) }
            .prefix(free)
            .map(\.key)
        for host in due {
            entries[host]?.inFlight = true
        }
        inFlightCount += due.count
        return due
    }

    /// When the next lookup becomes due, or nil when none is waiting or every slot is busy (a finishing lookup
    /// frees a slot and the caller looks again then).
    var nextDeadline: ContinuousClock.Instant? {
        guard inFlightCount < maxInFlight else { return nil }
        return entries.values.filter { !$0.inFlight }.map(\.nextAttempt).min()
    }

    /// Records a successful lookup of `host`: the answer lives `lifetime` from `now` and its refresh is due after
    /// `refreshAhead × lifetime`. Ignored if the host is no longer watched or was not in flight.
    mutating func resolved(
        _ host: String,
        addresses: [String],
        source: DNSSource,
        lifetime: Duration,
        refreshAhead: Double,
        now: ContinuousClock.Instant
    ) {
        guard !addresses.isEmpty else {
            // An empty answer resolves nothing: treat it as a failure so the slot is freed and a retry scheduled.
            failed(host, retryAfter: lifetime, now: now)
            return
        }
        guard var entry = entries[host], entry.inFlight else { return }
        let refreshAt = now.advanced(by: lifetime * refreshAhead)
        entry.answer = DNSAnswer(
            host: host,
            addresses: addresses,
            source: source,
            resolvedAt: now,
            refreshAt: refreshAt,
            expiresAt: now.advanced(by: lifetime)
        )
        entry.inFlight = false
        entry.nextAttempt = refreshAt
        entries[host] = entry
        inFlightCount -= 1
    }

    /// Records a failed lookup of `host`: an unexpired earlier answer stays; the next attempt is `retryAfter` from
    /// `now`. Ignored if the host is no longer watched or was not in flight.
    mutating func failed(_ host: String, retryAfter: Duration, now: ContinuousClock.Instant) {
        guard var entry = entries[host], entry.inFlight else { return }
        entry.inFlight = false
        entry.nextAttempt = now.advanced(by: retryAfter)
        if let answer = entry.answer, answer.expiresAt <= now {
            entry.answer = nil
        }
        entries[host] = entry
        inFlightCount -= 1
    }

    /// Drops the answer for `host` (e.g. after its pinned address refused connections) and makes a new lookup due
    /// at once. Returns whether an answer was dropped.
    @discardableResult
    mutating func invalidate(_ host: String, now: ContinuousClock.Instant) -> Bool {
        guard var entry = entries[host] else { return false }
        let dropped = entry.answer != nil
        entry.answer = nil
        if !entry.inFlight { entry.nextAttempt = now }
        entries[host] = entry
        return dropped
    }

    /// Hosts holding an unexpired answer at `now`.
    func cachedCount(now: ContinuousClock.Instant) -> Int {
        entries.values.count { entry in entry.answer.map { now < $0.expiresAt } ?? false }
    }

    /// Lookups running now.
    var inFlight: Int { inFlightCount }
}
