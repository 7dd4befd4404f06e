// PrefetchStore: the TTL response store behind the prefetch orchestrator. The trigger side claims a key's single
// flight with `begin` and, when it leads, fetches and calls `complete`; the page side calls `read`, which never
// starts a fetch and waits (bounded) for one in flight. `ResponseStore` is the seam for a shared backend
// (`RedisStore`); `MemoryStore` is the in-process one.
// Design notes: docs/design/response-store.md

public import PrefetchCore

/// A response store with single flight per key and per-identity isolation.
///
/// One API: the three calls of a page open (``begin(_:then:)``, ``settle(_:then:)`` and
/// ``read(_:canWait:notify:)``) take a callback that runs before the call returns when the store has the answer at
/// hand (an in-process store, always) and otherwise on the thread that has it (a Redis connection's event loop).
/// Every `async` form of them (`begin(_:policy:)`, `complete`, `abandon`, `put`, `read(_:wait:)`) is a thin adapter
/// in the extension below, written once for every store, for callers that are async by nature (the CLI, tests).
public protocol ResponseStore: Sendable {
    /// The clock the store's TTLs, lock ages and read deadlines are measured on.
    var clock: any ServiceClock { get }

    /// How the store is doing, for readiness (`GET /readyz`): an in-process store has no outage state.
    var health: StoreHealth { get }

    /// Claims the single flight for each of `requests`, in order, and hands `done` one outcome per request, in the
    /// same order: exactly what calling `begin(_:policy:)` for each in turn would answer (so of duplicate keys
    /// within one call the first leads and the rest join). A page open claims all its requests at once through
    /// this, so a shared store does it in one round trip. `done` runs exactly once: before the call returns when
    /// the store has the answer at hand (an in-process store, always), else on the thread that has the store's
    /// answer (a Redis connection's event loop). It must not block.
    func begin(_ requests: [(key: StoreKey, policy: StorePolicy)], then done: @escaping @Sendable ([BeginOutcome]) -> Void)

    /// Settles several flights in order (an in-process store: under one acquisition of its lock, readers resumed
    /// after it), then calls `done` once, as ``begin(_:then:)`` calls its own: before returning, or on the thread
    /// that has the store's answer. The fetcher's loop thread hands over every result of one loop iteration of a
    /// page open this way.
    func settle(_ settlements: [Settlement], then done: @escaping @Sendable () -> Void)

    /// Reads `keys` without a task. Every outcome is counted as `read` counts it and a no-store response is
    /// consumed alike. Answers `.done` with every outcome when the store has them at hand, and then never calls
    /// `notify`. Otherwise `.waiting`, and `notify` is called once with every outcome, on the thread that has them:
    /// with `canWait`, keys in flight are waited for until the last of them settles or the caller calls `expire()`
    /// (those still in flight then read `.pending`); a store that must ask a server first (Redis) answers `.waiting`
    /// even without `canWait`, unless the server's answers came before the call returned. `notify` must not block.
    func read(_ keys: [StoreKey], canWait: Bool, notify: @escaping @Sendable ([ReadOutcome]) -> Void) -> ImmediateRead

    /// Drops every entry, in flight or not, whose policy label is not in `labels` (used when a configuration
    /// update removes interfaces); their waiters get `.absent(.evicted)`. Returns how many entries were dropped.
    func retain(labels: Set<String>) async -> Int

    /// Drops every stored value (a response or a kept failure) fetched for `identity`, on every replica of a shared
    /// store, leaving the reason `invalidated` for later readers. Flights in progress are not touched: their waiters
    /// still get the result, which is then stored as usual. The anonymous identity holds shared entries and is never
    /// dropped this way (answers 0). Returns how many values were dropped.
    /// - Throws: ``StoreUnavailable`` when part of the store could not be reached, so some values may remain.
    func invalidate(identity: Identity) async throws(StoreUnavailable) -> Int

    /// Drops every stored value whose policy label (interface name) is `label`, for every identity, as
    /// `invalidate(identity:)` does. Returns how many values were dropped.
    /// - Throws: ``StoreUnavailable`` when part of the store could not be reached, so some values may remain.
    func invalidate(label: String) async throws(StoreUnavailable) -> Int

    /// Drops every stored response whose upstream named `surrogateKey` in its `Surrogate-Key` header (as recorded
    /// when it was stored, within ``SurrogateKeys``' bounds), for every identity, as `invalidate(identity:)` does.
    /// Returns how many responses were dropped.
    /// - Throws: ``StoreUnavailable`` when part of the store could not be reached, so some values may remain.
    func invalidate(surrogateKey: String) async throws(StoreUnavailable) -> Int

    /// The store's current size and cumulative counters.
    func snapshot() async -> StoreSnapshot
}

extension ResponseStore {
    /// See `ResponseStore.health`: in process.
    public var health: StoreHealth { .inProcess }

    /// ``begin(_:then:)`` for a caller that is async by nature.
    public func begin(_ requests: [(key: StoreKey, policy: StorePolicy)]) async -> [BeginOutcome] {
        await withCheckedContinuation { continuation in begin(requests) { continuation.resume(returning: $0) } }
    }

    /// Claims the single flight for `key`. `.leader` means the caller must fetch and then call `complete` (or
    /// `abandon`); `.joined` that a flight is already under way; `.fresh` that a completed entry exists.
    /// A flight older than the store's lock age may be taken over: the caller then leads and the old token is stale.
    public func begin(_ key: StoreKey, policy: StorePolicy) async -> BeginOutcome {
        await begin([(key: key, policy: policy)])[0]
    }

    /// ``settle(_:then:)`` for a caller that is async by nature.
    public func settle(_ settlements: [Settlement]) async {
        await withCheckedContinuation { continuation in settle(settlements) { continuation.resume() } }
    }

    /// Publishes the leader's result and wakes every waiter. A success is kept for `policy.ttl` (a no-store one
    /// until its first read), a failure for `policy.negativeTTL`. A stale or unknown token is ignored. A shared
    /// store that cannot take the result keeps it in its fallback tier, so this replica's readers still get it.
    public func complete(_ key: StoreKey, token: FlightToken, result: Result<StoredResponse, StoreFailure>) async {
        await settle([.complete(key, token: token, result: result)])
    }

    /// The leader gives up without a result (e.g. its task was cancelled). Waiters keep waiting until their own
    /// deadlines, and the next `begin` leads at once. A stale or unknown token is ignored.
    public func abandon(_ key: StoreKey, token: FlightToken) async {
        await settle([.abandon(key, token: token)])
    }

    /// Begins `key` and, when that leads, completes it with `result`; returns whether it led (when it did not,
    /// nothing was written). Two calls: on a shared store, two round trips, the flight visible as pending between
    /// them (a page open's private copies go as `Settlement.put` in its batch, one pipeline).
    @discardableResult
    public func put(_ key: StoreKey, policy: StorePolicy, result: Result<StoredResponse, StoreFailure>) async -> Bool {
        guard case .leader(let token) = await begin(key, policy: policy) else { return false }
        await complete(key, token: token, result: result)
        return true
    }

    /// Reads the entry for exactly `key`, waiting up to `wait` while it is pending. Never starts a fetch.
    /// Cancelling the reader only stops that reader (it gets `.pending`); a reader already cancelled does not wait.
    public func read(_ key: StoreKey, wait: Duration) async -> ReadOutcome {
        await read([key], wait: wait)[0]
    }

    /// Reads several entries at once, each as `read(_:wait:)` would, all waiting up to the same `wait` on the
    /// store's clock: ``read(_:canWait:notify:)`` for a caller that is async by nature, its wait ended at `wait` or
    /// when the reader's task is cancelled (what is still in flight then reads `.pending`). Outcomes are in the
    /// order of `keys`; those in flight are waited on together (one timer, not one task per key). A shared store
    /// bounds a wait of its own (the Redis store: ``RedisStore/longestWaitWithoutTask``, 60 s) whatever `wait` asks.
    public func read(_ keys: [StoreKey], wait: Duration) async -> [ReadOutcome] {
        await ImmediateRead.awaited(wait: wait, clock: clock) { read(keys, canWait: $0, notify: $1) }
    }
}
