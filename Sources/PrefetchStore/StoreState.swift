import Logging
import PrefetchCore

/// Everything `MemoryStore` keeps, mutated only under its lock. Time comes in as `now`, so the state is
/// deterministic given its inputs.
///
/// Entries live in an arena of slots; `index` maps each whole `StoreKey` to its slot and is the only way to find
/// one. Completed (ready or failed) entries are linked into an LRU list, head most recently used; pending entries
/// are not linked, which is what keeps them from being evicted.
/// How a waiting reader hears its outcome: a callback, on the thread that settled it (an event loop's reader hops
/// home itself; an async reader's callback resumes its task, see ``ReadHandoff``).
struct WaiterResumer: Sendable {
    let callback: @Sendable (ReadOutcome) -> Void

    static func callback(_ callback: @escaping @Sendable (ReadOutcome) -> Void) -> WaiterResumer {
        WaiterResumer(callback: callback)
    }

    func resume(_ outcome: ReadOutcome) {
        callback(outcome)
    }
}

struct StoreState {
    struct Slot {
        var key: StoreKey
        var entry: Entry
        var bytes: Int
        var keyBytes: Int
    }

    /// A slot's place in the LRU list, kept beside the slots (plain integers: moving an entry to the front on every
    /// read touches no slot, so copies and reference counts of keys and entries stay out of the read path).
    struct Link {
        var prev = -1
        var next = -1
        var linked = false
        /// The slot's bytes when it was linked, what unlinking takes off the evictable bytes.
        var bytes = 0
    }

    /// A reader between `read` and the end of its wait.
    enum Waiter {
        /// Registered on a flight, continuation not yet attached.
        case awaiting(StoreKey)
        /// Suspended on its continuation.
        case suspended(StoreKey, WaiterResumer)
        /// Settled before its continuation was attached; `attach` hands this over.
        case settled(ReadOutcome)
    }

    let budget: Int
    let lockAge: Duration
    let staleFlightAfter: Duration
    let overhead = MemoryStore.perEntryOverhead
    let sweepInterval = Duration.seconds(1)

    private(set) var slots: [Slot?] = []
    private var freeSlots: [Int] = []
    private(set) var index: [StoreKey: Int] = [:]
    /// Parallel to `slots`.
    private var links: [Link] = []
    private var lruHead: Int?
    private var lruTail: Int?
    /// Bytes of all entries.
    private(set) var bytes = 0
    /// Bytes of the entries in the LRU list, i.e. what eviction could free.
    private var evictableBytes = 0
    /// Bytes of responses still arriving, held outside the store (by the fetcher) but counted against its budget:
    /// before a response is linked in, least recently used entries are evicted until the store and these bytes fit
    /// together, so the budget bounds what the process holds of responses, kept or in flight. Set by the shell
    /// before each operation; never a reason to refuse a response (in-flight bytes are not the store's to free).
    var heldElsewhere = 0
    private var tombstones = Tombstones(capacity: MemoryStore.tombstoneCapacity)
    private var waiters: [WaiterID: Waiter] = [:]
    private var nextWaiterID: WaiterID = 0
    private var nextToken: UInt64 = 0
    private var lastSweep: ContinuousClock.Instant?

    private var hits = 0
    private var joins = 0
    private var misses = 0
    private var evictions = 0
    private var expiredUnused = 0

    init(budget: Int, lockAge: Duration, staleFlightAfter: Duration) {
        self.budget = budget
        self.lockAge = lockAge
        self.staleFlightAfter = staleFlightAfter
    }

    // MARK: Operations

    mutating func begin(
        _ key: StoreKey, policy: StorePolicy, now: ContinuousClock.Instant, effects: inout Effects
    ) -> BeginOutcome {
        defer { effects.size = (bytes, index.count) }
        sweepIfDue(now: now, effects: &effects)
        let token = makeToken()
        if let at = index[key] {
            switch slots[at]!.entry.begin(token: token, policy: policy, now: now, lockAge: lockAge) {
            case .leader:
                effects.note(
                    .notice, "flight taken over: its lock age passed or its leader abandoned", key: key, ["store.flight": "\(token)"])
                return .leader(token)
            case .joined:
                return .joined
            case .fresh:
                touch(at)
                return .fresh
            case .ended:
                finish(at, effects: &effects)
            }
        }
        let entry = Entry(leader: token, policy: policy, now: now)
        let keyBytes = key.accountedBytes
        let needed = entry.accountedBytes(keyBytes: keyBytes, overhead: overhead)
        guard makeRoom(needed, effects: &effects) else {
            // Only in-flight entries remain and they fill the budget: lead an untracked flight whose result is
            // dropped, rather than block the trigger.
            effects.note(.warning, "store full of in-flight entries; this flight will not be stored", key: key)
            return .leader(token)
        }
        insert(Slot(key: key, entry: entry, bytes: needed, keyBytes: keyBytes))
        return .leader(token)
    }

    mutating func complete(
        _ key: StoreKey, token: FlightToken, result: Result<StoredResponse, StoreFailure>,
        now: ContinuousClock.Instant, effects: inout Effects
    ) {
        defer { effects.size = (bytes, index.count) }
        sweepIfDue(now: now, effects: &effects)
        guard let at = index[key], slots[at]!.entry.isLed(by: token) else {
            effects.note(.debug, "completion from a stale or unknown flight ignored", key: key, ["store.flight": "\(token)"])
            return
        }
        var rejection: StoreFailure?
        if case .success(let response) = result, slots[at]!.entry.wouldKeepResponse(result) {
            let slot = slots[at]!
            let total = overhead + slot.keyBytes + response.accountedBytes
            if total > budget {
                rejection = StoreFailure(
                    code: FailureCode.tooLarge,
                    message: "response of \(response.accountedBytes) bytes exceeds the store budget of \(budget) bytes")
                effects.note(.notice, "response too large to keep", key: key, ["store.bytes": "\(total)"])
            } else if !makeRoom(total - slot.bytes, effects: &effects) {
                rejection = StoreFailure(
                    code: FailureCode.storeFull,
                    message:
                        "no room for a response of \(response.accountedBytes) bytes: in-flight entries hold the budget of \(budget) bytes")
                effects.note(.warning, "store full of in-flight entries; response not kept", key: key)
            }
        }
        let label = slots[at]!.entry.policy.label
        guard let deliveries = slots[at]!.entry.complete(token: token, result: result, now: now, rejection: rejection)
        else { return }
        for (id, outcome) in deliveries {
            settle(id, with: outcome, label: label, effects: &effects)
        }
        if slots[at]!.entry.isEnded {
            finish(at, effects: &effects)
            return
        }
        let grown = slots[at]!.entry.accountedBytes(keyBytes: slots[at]!.keyBytes, overhead: overhead)
        let delta = grown - slots[at]!.bytes
        guard makeRoom(delta, effects: &effects) else {
            // Even the failure record does not fit beside the in-flight entries.
            _ = slots[at]!.entry.evict()
            finish(at, effects: &effects)
            return
        }
        slots[at]!.bytes = grown
        bytes += delta
        // Not linked yet, so never its own victim.
        shed(effects: &effects)
        link(at)
    }

    mutating func abandon(_ key: StoreKey, token: FlightToken, now: ContinuousClock.Instant, effects: inout Effects) {
        defer { effects.size = (bytes, index.count) }
        guard let at = index[key], slots[at]!.entry.abandon(token: token) else { return }
        effects.note(.debug, "flight abandoned by its leader", key: key, ["store.flight": "\(token)"])
        if slots[at]!.entry.isEnded { finish(at, effects: &effects) }
    }

    mutating func read(
        _ key: StoreKey, now: ContinuousClock.Instant, canWait: Bool, effects: inout Effects
    ) -> ReadProgress {
        sweepIfDue(now: now, effects: &effects)
        guard let at = index[key] else {
            let outcome = ReadOutcome.absent(tombstones[key] ?? .notFound)
            count(outcome, label: nil, effects: &effects)
            return .done(outcome)
        }
        let label = slots[at]!.entry.policy.label
        switch slots[at]!.entry.read(now: now) {
        case .outcome(let outcome):
            count(outcome, label: label, effects: &effects)
            if slots[at]!.entry.isEnded {
                finish(at, effects: &effects)
                effects.size = (bytes, index.count)
            } else {
                touch(at)
            }
            return .done(outcome)
        case .wait:
            guard canWait else {
                count(.pending, label: label, effects: &effects)
                return .done(.pending)
            }
            nextWaiterID += 1
            let id = nextWaiterID
            _ = slots[at]!.entry.addWaiter(id)
            waiters[id] = .awaiting(key)
            effects.waiting = waiters.count
            return .waiting(id)
        }
    }

    /// Attaches the waiter's continuation; returns its outcome instead if it was settled in the meantime.
    mutating func attach(_ id: WaiterID, _ resumer: WaiterResumer) -> ReadOutcome? {
        switch waiters[id] {
        case .awaiting(let key):
            waiters[id] = .suspended(key, resumer)
            return nil
        case .settled(let outcome):
            waiters[id] = nil
            return outcome
        case .suspended, nil:
            preconditionFailure("waiter \(id) attached twice")
        }
    }

    /// The waiter stops waiting (deadline or cancellation) unless it was already settled.
    mutating func giveUp(_ id: WaiterID, now: ContinuousClock.Instant, effects: inout Effects) {
        let key: StoreKey
        switch waiters[id] {
        case .awaiting(let k), .suspended(let k, _): key = k
        case .settled, nil: return
        }
        var label: String?
        if let at = index[key], slots[at]!.entry.removeWaiter(id) {
            label = slots[at]!.entry.policy.label
            if slots[at]!.entry.isEnded {
                finish(at, effects: &effects)
                effects.size = (bytes, index.count)
            }
        }
        settle(id, with: .pending, label: label, effects: &effects)
    }

    mutating func retain(labels: Set<String>, now: ContinuousClock.Instant, effects: inout Effects) -> Int {
        defer { effects.size = (bytes, index.count) }
        let doomed = index.values.filter { !labels.contains(slots[$0]!.entry.policy.label) }
        for at in doomed {
            let label = slots[at]!.entry.policy.label
            for id in slots[at]!.entry.drop() {
                settle(id, with: .absent(.evicted), label: label, effects: &effects)
            }
            finish(at, effects: &effects)
        }
        return doomed.count
    }

    /// Ends every completed entry for which `matches` holds (given its key, its policy label and its response, if
    /// any) with the reason `invalidated`; an entry already past its TTL ends as `expired` instead and is not
    /// counted. Pending entries are never touched. Returns how many were invalidated.
    mutating func invalidate(
        now: ContinuousClock.Instant, effects: inout Effects,
        where matches: (_ key: StoreKey, _ label: String, _ response: StoredResponse?) -> Bool
    ) -> Int {
        var ended: [Int] = []
        var invalidated = 0
        for at in index.values {
            let entry = slots[at]!.entry
            let response: StoredResponse?
            switch entry.state {
            case .ready(let ready, _, _): response = ready
            case .failed: response = nil
            case .pending, .ended: continue
            }
            guard matches(slots[at]!.key, entry.policy.label, response) else { continue }
            if slots[at]!.entry.expireIfDue(now: now) {
                ended.append(at)
            } else if slots[at]!.entry.invalidate() {
                invalidated += 1
                ended.append(at)
            }
        }
        for at in ended { finish(at, effects: &effects) }
        if !ended.isEmpty { effects.size = (bytes, index.count) }
        return invalidated
    }

    /// Ends every completed entry kept for `identity` (never the anonymous identity's: they are shared).
    mutating func invalidate(identity: Identity, now: ContinuousClock.Instant, effects: inout Effects) -> Int {
        guard identity != .anonymous else { return 0 }
        return invalidate(now: now, effects: &effects) { key, _, _ in key.identity == identity }
    }

    /// Ends every completed entry whose policy label is `label`.
    mutating func invalidate(label: String, now: ContinuousClock.Instant, effects: inout Effects) -> Int {
        invalidate(now: now, effects: &effects) { _, entryLabel, _ in entryLabel == label }
    }

    /// Ends every response tagged with `surrogateKey` (see `SurrogateKeys`).
    mutating func invalidate(surrogateKey: String, now: ContinuousClock.Instant, effects: inout Effects) -> Int {
        guard SurrogateKeys.isValid(surrogateKey) else { return 0 }
        return invalidate(now: now, effects: &effects) { _, _, response in
            response.map { SurrogateKeys.keys(in: $0.headers).contains(surrogateKey) } ?? false
        }
    }

    /// Reclaims expired entries and stale flights nobody waits for.
    mutating func sweep(now: ContinuousClock.Instant, effects: inout Effects) {
        lastSweep = now
        var ended: [Int] = []
        for at in index.values {
            let expired = slots[at]!.entry.expireIfDue(now: now)
            let reclaimed = slots[at]!.entry.reclaimIfStale(now: now, after: staleFlightAfter)
            if expired || reclaimed { ended.append(at) }
        }
        for at in ended { finish(at, effects: &effects) }
        if !ended.isEmpty { effects.size = (bytes, index.count) }
    }

    func snapshot() -> StoreSnapshot {
        StoreSnapshot(
            entries: index.count, bytes: bytes, budget: budget,
            pending: index.values.count { slots[$0]!.entry.isPending },
            hits: hits, joins: joins, misses: misses, evictions: evictions, expiredUnused: expiredUnused)
    }

    // MARK: Internals

    private mutating func makeToken() -> FlightToken {
        nextToken += 1
        return FlightToken(nextToken)
    }

    private mutating func sweepIfDue(now: ContinuousClock.Instant, effects: inout Effects) {
        if let lastSweep, now - lastSweep < sweepInterval { return }
        sweep(now: now, effects: &effects)
    }

    /// Evicts least recently used completed entries until `extra` more bytes fit. Evicts nothing and returns
    /// false when even evicting every completed entry would not make room.
    private mutating func makeRoom(_ extra: Int, effects: inout Effects) -> Bool {
        guard extra > 0 else { return true }
        guard bytes - evictableBytes + extra <= budget else { return false }
        while bytes + extra > budget, let victim = lruTail {
            _ = slots[victim]!.entry.evict()
            evictions += 1
            effects.events.append(.eviction)
            effects.note(.debug, "evicted for room", key: slots[victim]!.key, ["store.bytes": "\(slots[victim]!.bytes)"])
            finish(victim, effects: &effects)
        }
        return true
    }

    /// Evicts least recently used completed entries while the store's bytes and `heldElsewhere` together exceed
    /// the budget. Never fails: what it cannot free is in flight.
    private mutating func shed(effects: inout Effects) {
        while heldElsewhere > 0, bytes + heldElsewhere > budget, let victim = lruTail {
            _ = slots[victim]!.entry.evict()
            evictions += 1
            effects.events.append(.eviction)
            effects.note(
                .debug, "evicted for responses in flight", key: slots[victim]!.key,
                ["store.bytes": "\(slots[victim]!.bytes)", "store.in_flight_bytes": "\(heldElsewhere)"])
            finish(victim, effects: &effects)
        }
    }

    /// Counts one read outcome, exactly once per read.
    private mutating func count(_ outcome: ReadOutcome, label: String?, effects: inout Effects) {
        switch outcome {
        case .ready(_, joined: false):
            hits += 1
            if let label { effects.events.append(.hit(label: label)) }
        case .ready(_, joined: true):
            joins += 1
            if let label { effects.events.append(.join(label: label)) }
        case .failed:
            misses += 1
            effects.events.append(.miss(reason: "failed"))
        case .pending:
            misses += 1
            effects.events.append(.miss(reason: "pending"))
        case .absent(let reason):
            misses += 1
            effects.events.append(.miss(reason: reason.rawValue))
        }
    }

    /// Hands `outcome` to a waiter: resumes it if suspended, or parks the outcome until it attaches. A waiter
    /// already settled keeps its first outcome.
    private mutating func settle(_ id: WaiterID, with outcome: ReadOutcome, label: String?, effects: inout Effects) {
        switch waiters[id] {
        case .awaiting:
            waiters[id] = .settled(outcome)
        case .suspended(_, let resumer):
            waiters[id] = nil
            effects.resumes.append((resumer, outcome))
            effects.waiting = waiters.count
        case .settled, nil:
            return
        }
        count(outcome, label: label, effects: &effects)
    }

    /// Removes an ended entry: counts a wasted response, leaves a tombstone, frees its bytes and slot.
    private mutating func finish(_ at: Int, effects: inout Effects) {
        let slot = slots[at]!
        precondition(slot.entry.isEnded, "only ended entries leave the store")
        if slot.entry.endedUnread {
            expiredUnused += 1
            effects.events.append(.expiredUnused(label: slot.entry.policy.label))
        }
        if let reason = slot.entry.endReason, reason != .notFound {
            tombstones.insert(slot.key, reason)
        }
        unlink(at)
        bytes -= slot.bytes
        index[slot.key] = nil
        slots[at] = nil
        freeSlots.append(at)
    }

    private mutating func insert(_ slot: Slot) {
        let at: Int
        if let free = freeSlots.popLast() {
            at = free
            slots[at] = slot
            links[at] = Link()
        } else {
            at = slots.count
            slots.append(slot)
            links.append(Link())
        }
        index[slot.key] = at
        bytes += slot.bytes
    }

    private mutating func link(_ at: Int) {
        guard !links[at].linked else { return }
        let bytes = slots[at]!.bytes
        attachAtHead(at)
        links[at].linked = true
        links[at].bytes = bytes
        evictableBytes += bytes
    }

    private mutating func unlink(_ at: Int) {
        guard links[at].linked else { return }
        detach(at)
        evictableBytes -= links[at].bytes
        links[at] = Link()
    }

    /// A read moves its entry to the front of the list.
    private mutating func touch(_ at: Int) {
        guard links[at].linked, lruHead != at else { return }
        detach(at)
        attachAtHead(at)
    }

    private mutating func attachAtHead(_ at: Int) {
        links[at].prev = -1
        links[at].next = lruHead ?? -1
        if let head = lruHead { links[head].prev = at }
        lruHead = at
        if lruTail == nil { lruTail = at }
    }

    private mutating func detach(_ at: Int) {
        let (prev, next) = (links[at].prev, links[at].next)
        if prev >= 0 { links[prev].next = next } else { lruHead = next >= 0 ? next : nil }
        if next >= 0 { links[next].prev = prev } else { lruTail = prev >= 0 ? prev : nil }
        links[at].prev = -1
        links[at].next = -1
    }

    /// Readers registered and not yet handed their outcome, for tests.
    var waitingCount: Int { waiters.count }

    /// Keys from least to most recently used, for tests.
    var lruOrder: [StoreKey] {
        var keys: [StoreKey] = []
        var cursor = lruTail
        while let at = cursor {
            keys.append(slots[at]!.key)
            cursor = links[at].prev >= 0 ? links[at].prev : nil
        }
        return keys
    }
}

/// A bounded first-in-first-out memory of why entries ended, keyed by a fixed-size digest of the key.
struct Tombstones {
    let capacity: Int
    private var reasons: [[UInt8]: AbsentReason] = [:]
    private var order: [[UInt8]] = []
    private var head = 0

    init(capacity: Int) {
        self.capacity = capacity
    }

    var count: Int { reasons.count }

    subscript(key: StoreKey) -> AbsentReason? {
        reasons.isEmpty ? nil : reasons[key.fingerprint]
    }

    mutating func insert(_ key: StoreKey, _ reason: AbsentReason) {
        let print = key.fingerprint
        if reasons.updateValue(reason, forKey: print) == nil {
            order.append(print)
        }
        while reasons.count > capacity {
            reasons[order[head]] = nil
            head += 1
        }
        if head > capacity {
            order.removeFirst(head)
            head = 0
        }
    }
}
