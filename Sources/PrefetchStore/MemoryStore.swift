public import CoreMetrics
public import Logging
public import PrefetchCore
import Synchronization

/// The in-process `ResponseStore`: entries in memory under a byte budget, with single flight per key.
///
/// All state sits behind one `Mutex` and every operation holds it only for bookkeeping; waiters are resumed,
/// metrics recorded and logs written after it is released. See the design notes in `ResponseStore.swift`.
public final class MemoryStore: ResponseStore {
    /// The fixed bytes accounted per entry on top of its key, headers and body: an estimate of the slot,
    /// dictionary bucket, LRU links and bookkeeping that every entry costs.
    public static let perEntryOverhead = 256

    /// How many ended entries the store remembers (as a 32-byte key digest and a reason) to answer `read` with
    /// `expired`, `consumed` or `evicted` rather than `not-triggered`. Oldest forgotten first; not budgeted
    /// (at most about 64 KiB).
    public static let tombstoneCapacity = 1024

    /// The byte budget; accounted bytes never exceed it.
    public let budgetBytes: Int
    /// After this long a flight may be taken over by the next `begin`.
    public let lockAge: Duration

    private let state: Mutex<StoreState>
    private let metrics: StoreMetrics
    private let logger: Logger
    /// See `ResponseStore.clock`.
    public let clock: any ServiceClock
    private let heldElsewhere: (@Sendable () -> Int)?

    /// Creates an empty store. A pending entry nobody waits for is forgotten once its flight is three lock ages
    /// old. Metrics go to `metricsFactory` (the bootstrapped system by default). Every TTL, lock age and reader
    /// deadline is measured on `clock`.
    ///
    /// `heldElsewhere` tells the bytes of responses still arriving (the fetcher's `bufferedBytes`): they count
    /// against the budget too, so completing a response evicts least recently used entries until the store and
    /// those bytes fit together. It is read just before the store takes its lock and must be cheap (an atomic load).
    public init(
        budgetBytes: Int = 64 * 1024 * 1024,
        lockAge: Duration = .seconds(10),
        logger: Logger,
        metricsFactory: any MetricsFactory = MetricsSystem.factory,
        clock: any ServiceClock = ContinuousClock(),
        heldElsewhere: (@Sendable () -> Int)? = nil
    ) {
        self.clock = clock
        self.heldElsewhere = heldElsewhere
        precondition(budgetBytes > 0, "budgetBytes must be positive, got \(budgetBytes)")
        precondition(lockAge >= .zero, "lockAge must not be negative, got \(lockAge)")
        self.budgetBytes = budgetBytes
        self.lockAge = lockAge
        self.state = Mutex(StoreState(budget: budgetBytes, lockAge: lockAge, staleFlightAfter: lockAge * 3))
        self.metrics = StoreMetrics(factory: metricsFactory, budgetBytes: budgetBytes)
        self.logger = logger
    }

    /// See `ResponseStore.begin(_:then:)`: every claim under one acquisition of the lock, then `done`, before
    /// returning.
    public func begin(
        _ requests: [(key: StoreKey, policy: StorePolicy)], then done: @escaping @Sendable ([BeginOutcome]) -> Void
    ) {
        done(claim(requests))
    }

    /// Every claim of `requests` under one acquisition of the lock: ``begin(_:then:)``'s work, for the Redis
    /// store's fallback tier, which is this type and needs the outcomes where it stands.
    package func claim(_ requests: [(key: StoreKey, policy: StorePolicy)]) -> [BeginOutcome] {
        locked { state, now, effects in
            requests.map { state.begin($0.key, policy: $0.policy, now: now, effects: &effects) }
        }
    }

    /// See `ResponseStore.read(_:canWait:notify:)`: under one acquisition of the lock, every key is read; those in
    /// flight get a waiter each whose outcome goes to a `StoreWaitGroup` (on the thread that settles it).
    public func read(
        _ keys: [StoreKey], canWait: Bool, notify: @escaping @Sendable ([ReadOutcome]) -> Void
    ) -> ImmediateRead {
        locked { state, now, effects -> ImmediateRead in
            var outcomes = [ReadOutcome](repeating: .pending, count: keys.count)
            var waiting: [(index: Int, id: WaiterID)] = []
            waiting.reserveCapacity(keys.count)
            for (index, key) in keys.enumerated() {
                switch state.read(key, now: now, canWait: canWait, effects: &effects) {
                case .done(let outcome): outcomes[index] = outcome
                case .waiting(let id): waiting.append((index, id))
                }
            }
            guard !waiting.isEmpty else { return .done(outcomes) }
            let group = StoreWaitGroup(outcomes: outcomes, remaining: waiting.count, notify: notify)
            for (index, id) in waiting {
                // Attached under the same lock as the read: nothing can have settled it in between.
                _ = state.attach(id, .callback { group.settle(index, $0) })
            }
            let ids = waiting.map(\.id)
            return .waiting(StoreWait { [self] in for id in ids { giveUp(id) } })
        }
    }

    /// See `ResponseStore.settle(_:then:)`: every settlement under one acquisition of the lock, then `done`,
    /// before returning.
    public func settle(_ settlements: [Settlement], then done: @escaping @Sendable () -> Void) {
        settleAll(settlements)
        done()
    }

    /// Every settlement under one acquisition of the lock: ``settle(_:then:)``'s work, for the Redis store's
    /// fallback tier.
    package func settleAll(_ settlements: [Settlement]) {
        let held = heldElsewhere?() ?? 0
        locked { state, now, effects in
            state.heldElsewhere = held
            // Mostly one event and one resumed reader a settlement: room for them at once.
            effects.events.reserveCapacity(settlements.count)
            effects.resumes.reserveCapacity(settlements.count)
            for settlement in settlements {
                switch settlement {
                case .complete(let key, let token, let result):
                    state.complete(key, token: token, result: result, now: now, effects: &effects)
                case .put(let key, let policy, let result):
                    if case .leader(let token) = state.begin(key, policy: policy, now: now, effects: &effects) {
                        state.complete(key, token: token, result: result, now: now, effects: &effects)
                    }
                case .abandon(let key, let token):
                    state.abandon(key, token: token, now: now, effects: &effects)
                }
            }
        }
    }

    /// See `ResponseStore.retain`.
    public func retain(labels: Set<String>) async -> Int {
        let now = clock.now
        let (dropped, effects) = state.withLock { state in
            var effects = Effects()
            let dropped = state.retain(labels: labels, now: now, effects: &effects)
            return (dropped, effects)
        }
        apply(effects)
        return dropped
    }

    /// See `ResponseStore.invalidate(identity:)`. Never suspends and never fails: the store is this process.
    @discardableResult
    public func invalidate(identity: Identity) -> Int {
        locked { state, now, effects in state.invalidate(identity: identity, now: now, effects: &effects) }
    }

    /// See `ResponseStore.invalidate(label:)`. Never suspends and never fails.
    @discardableResult
    public func invalidate(label: String) -> Int {
        locked { state, now, effects in state.invalidate(label: label, now: now, effects: &effects) }
    }

    /// See `ResponseStore.invalidate(surrogateKey:)`. Never suspends and never fails.
    @discardableResult
    public func invalidate(surrogateKey: String) -> Int {
        locked { state, now, effects in state.invalidate(surrogateKey: surrogateKey, now: now, effects: &effects) }
    }

    /// Runs `body` on the state under the lock at the current instant, then applies its effects.
    private func locked<T: Sendable>(_ body: (inout StoreState, ContinuousClock.Instant, inout Effects) -> T) -> T {
        let now = clock.now
        let (result, effects) = state.withLock { state in
            var effects = Effects()
            let result = body(&state, now, &effects)
            return (result, effects)
        }
        apply(effects)
        return result
    }

    /// See `ResponseStore.snapshot`. Reclaims expired entries first so the numbers are current.
    public func snapshot() async -> StoreSnapshot {
        let now = clock.now
        let (snapshot, effects) = state.withLock { state in
            var effects = Effects()
            state.sweep(now: now, effects: &effects)
            return (state.snapshot(), effects)
        }
        apply(effects)
        return snapshot
    }

    /// Readers currently registered on flights, for tests.
    var waitingReaders: Int { state.withLock { $0.waitingCount } }

    // MARK: Waiting

    /// The waiter's deadline passed or its task was cancelled: it leaves the flight and gets `.pending`, unless
    /// the flight already settled it.
    private func giveUp(_ id: WaiterID) {
        let now = clock.now
        let effects = state.withLock { state in
            var effects = Effects()
            state.giveUp(id, now: now, effects: &effects)
            return effects
        }
        apply(effects)
    }

    private func apply(_ effects: Effects) {
        for (resumer, outcome) in effects.resumes {
            resumer.resume(outcome)
        }
        for event in effects.events {
            metrics.record(event)
        }
        if let size = effects.size {
            metrics.recordSize(bytes: size.bytes, entries: size.entries)
        }
        if let waiting = effects.waiting {
            metrics.recordWaiting(waiting)
        }
        for note in effects.notes {
            logger.log(level: note.level, "\(note.message)", metadata: note.metadata)
        }
    }
}

/// What a locked operation asks to happen once the lock is released.
struct Effects: Sendable {
    struct Note: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: Logger.Metadata
    }

    var resumes: [(WaiterResumer, ReadOutcome)] = []
    /// Readers waiting on flights, when that changed.
    var waiting: Int?
    var events: [MetricEvent] = []
    var size: (bytes: Int, entries: Int)?
    var notes: [Note] = []

    mutating func note(_ level: Logger.Level, _ message: String, key: StoreKey, _ extra: Logger.Metadata = [:]) {
        var metadata: Logger.Metadata = ["store.key": "\(key)"]
        metadata.merge(extra) { $1 }
        notes.append(Note(level: level, message: message, metadata: metadata))
    }
}

/// The outcome of the locked part of `read`.
enum ReadProgress: Sendable {
    case done(ReadOutcome)
    case waiting(WaiterID)
}
