/// A point-in-time view of a store's size and cumulative counters.
public struct StoreSnapshot: Sendable, Hashable {
    /// Entries held, including in-flight ones.
    public var entries: Int
    /// Bytes accounted against the budget.
    public var bytes: Int
    /// The byte budget.
    public var budget: Int
    /// Entries still in flight.
    public var pending: Int
    /// Reads that found a response ready on arrival.
    public var hits: Int
    /// Reads that waited on a flight and got its response.
    public var joins: Int
    /// Reads that got no response (failed, pending or absent). `hits + joins + misses` counts every read.
    public var misses: Int
    /// Completed entries evicted to make room.
    public var evictions: Int
    /// Responses that expired, were evicted or dropped without ever being read: wasted prefetches.
    public var expiredUnused: Int

    /// Creates a snapshot.
    public init(
        entries: Int = 0, bytes: Int = 0, budget: Int = 0, pending: Int = 0, hits: Int = 0, joins: Int = 0,
        misses: Int = 0, evictions: Int = 0, expiredUnused: Int = 0
    ) {
        self.entries = entries
        self.bytes = bytes
        self.budget = budget
        self.pending = pending
        self.hits = hits
        self.joins = joins
        self.misses = misses
        self.evictions = evictions
        self.expiredUnused = expiredUnused
    }
}
