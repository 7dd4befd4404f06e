import PrefetchStore

/// The small in-process tier in front of Redis for hot ready responses, as a value type with no clock of its own.
///
/// Guarantees: an item is never served at or after the Redis expiry it was read with (measured from before the
/// Redis call, so the local copy always ends first); no-store responses are never kept (each must come from Redis,
/// which hands it out once); and an item lives at most `ttlCap`, which bounds how long a replica can keep serving an
/// entry another replica dropped with `retain(labels:)`. Bounded by `maxEntries` and `maxBytes`, least recently
/// used out first. An invalidation drops its items at once (`drop`), and for a while remembers when, so a Redis
/// reply read before the invalidation but arriving after it does not bring the dropped response back.
struct LocalTier: Sendable {
    struct Item: Sendable {
        var response: StoredResponse
        var label: String
        var expiresAt: ContinuousClock.Instant
        var bytes: Int
        var lastUse: UInt64
    }

    /// Bytes counted per item on top of its response and key.
    static let perItemOverhead = 128

    let maxEntries: Int
    let maxBytes: Int
    let ttlCap: Duration
    private(set) var items: [String: Item] = [:]
    private(set) var bytes = 0
    private var tick: UInt64 = 0
    /// Every use in order, oldest first from `head`: (digest, tick). An entry is current while its tick is its item's
    /// `lastUse`; older ones are skipped when evicting and dropped when the log is compacted. This makes the LRU
    /// victim O(1) amortised: a full tier takes a new response on every completion, and scanning every item for the
    /// oldest on each put cost more CPU than the Redis calls around it.
    private(set) var uses: [(digest: String, tick: UInt64)] = []
    private var head = 0
    /// When each recently invalidated digest was dropped here; a response read from Redis no later than that is not
    /// kept. Forgotten after `dropMemory` (far longer than any Redis call may take) once `pruneDropsAt` are held.
    private(set) var droppedAt: [String: ContinuousClock.Instant] = [:]
    static let dropMemory = Duration.seconds(10)
    static let pruneDropsAt = 4096

    init(maxEntries: Int, maxBytes: Int, ttlCap: Duration) {
        self.maxEntries = maxEntries
        self.maxBytes = maxBytes
        self.ttlCap = ttlCap
    }

    var isEnabled: Bool { maxEntries > 0 && maxBytes > 0 && ttlCap > .zero }

    /// The item for `digest` unless it is due.
    mutating func get(_ digest: String, now: ContinuousClock.Instant) -> Item? {
        guard let item = items[digest] else { return nil }
        guard now < item.expiresAt else {
            remove(digest)
            return nil
        }
        touch(digest)
        return items[digest]
    }

    /// Keeps a ready response until the earlier of `redisExpiresAt` and `now + ttlCap`. No-store responses and
    /// responses larger than the whole tier are not kept.
    mutating func put(
        _ digest: String, response: StoredResponse, label: String, redisExpiresAt: ContinuousClock.Instant,
        now: ContinuousClock.Instant
    ) {
        guard isEnabled, !response.noStore else { return }
        if let dropped = droppedAt[digest], now <= dropped { return }
        let expiresAt = min(redisExpiresAt, now + ttlCap)
        guard expiresAt > now else { return }
        let size = Self.perItemOverhead + digest.utf8.count + label.utf8.count + response.accountedBytes
        guard size <= maxBytes else { return }
        remove(digest)
        while items.count >= maxEntries || bytes + size > maxBytes {
            guard let victim = leastRecentlyUsed() else { break }
            remove(victim)
        }
        items[digest] = Item(response: response, label: label, expiresAt: expiresAt, bytes: size, lastUse: 0)
        bytes += size
        touch(digest)
    }

    /// Marks the item held under `digest` as used now. Keeps the log within a small multiple of the items held:
    /// superseded entries are dropped once they outnumber the items, and the consumed prefix once it is half the log.
    private mutating func touch(_ digest: String) {
        tick += 1
        items[digest]?.lastUse = tick
        uses.append((digest, tick))
        if uses.count - head > 2 * items.count + 64 {
            uses = uses[head...].filter { items[$0.digest]?.lastUse == $0.tick }
            head = 0
        } else if head >= 64 && head * 2 >= uses.count {
            uses.removeFirst(head)
            head = 0
        }
    }

    /// The digest of the least recently used item, skipping (and dropping) log entries superseded by a later use or
    /// a removal.
    private mutating func leastRecentlyUsed() -> String? {
        while head < uses.count {
            let (digest, used) = uses[head]
            head += 1
            if items[digest]?.lastUse == used { return digest }
        }
        uses.removeAll(keepingCapacity: true)
        head = 0
        return nil
    }

    mutating func remove(_ digest: String) {
        guard let item = items.removeValue(forKey: digest) else { return }
        bytes -= item.bytes
    }

    /// An invalidation dropped the value of `digest` at `now`: the item goes, and a response read from Redis at or
    /// before `now` is not taken for it.
    mutating func drop(_ digest: String, now: ContinuousClock.Instant) {
        remove(digest)
        if droppedAt.count >= Self.pruneDropsAt { droppedAt = droppedAt.filter { now - $0.value < Self.dropMemory } }
        droppedAt[digest] = now
    }

    /// Drops every item whose label is not in `labels`.
    mutating func retain(labels: Set<String>) {
        for (digest, item) in items where !labels.contains(item.label) {
            remove(digest)
        }
    }
}
