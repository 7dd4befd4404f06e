/// Which keys a byte-bounded cache keeps: the most recently used ones whose sizes add up to at most `capacity`.
/// A value type that only decides; the memory and disk levels hold the bytes and drop what it evicts.
///
/// Recency is a counter, not a clock; ``byRecency`` gives the order to persist and re-insert. Eviction scans for the
/// oldest key (O(n)): a map holds hundreds of resources, not millions.
struct LRUIndex<Key: Hashable & Sendable>: Sendable {
    /// The most bytes the kept keys may add up to.
    let capacity: Int
    private(set) var totalBytes = 0
    private var sizes: [Key: Int] = [:]
    private var lastUse: [Key: UInt64] = [:]
    private var tick: UInt64 = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// The keys kept.
    var keys: Dictionary<Key, Int>.Keys { sizes.keys }
    var count: Int { sizes.count }

    func contains(_ key: Key) -> Bool { sizes[key] != nil }

    /// The kept keys, least recently used first.
    var byRecency: [Key] { lastUse.sorted { $0.value < $1.value }.map(\.key) }

    /// Marks `key` as just used.
    mutating func touch(_ key: Key) {
        guard sizes[key] != nil else { return }
        tick += 1
        lastUse[key] = tick
    }

    /// Keeps `key` with `bytes` as the most recently used; the keys evicted to make room, oldest first. A body larger
    /// than the whole capacity is not kept (it comes back as evicted).
    mutating func insert(_ key: Key, bytes: Int) -> [Key] {
        remove(key)
        guard bytes <= capacity else { return [key] }
        tick += 1
        sizes[key] = bytes
        lastUse[key] = tick
        totalBytes += bytes
        var evicted: [Key] = []
        while totalBytes > capacity, let oldest = lastUse.min(by: { $0.value < $1.value })?.key {
            remove(oldest)
            evicted.append(oldest)
        }
        return evicted
    }

    mutating func remove(_ key: Key) {
        guard let bytes = sizes.removeValue(forKey: key) else { return }
        lastUse[key] = nil
        totalBytes -= bytes
    }

    mutating func removeAll() {
        sizes = [:]
        lastUse = [:]
        totalBytes = 0
    }
}
