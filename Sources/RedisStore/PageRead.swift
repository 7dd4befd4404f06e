import Logging
import NIOCore
public import PrefetchStore
import Synchronization

extension RedisStore {
    /// See `ResponseStore.read(_:canWait:notify:)`. Every read of this store, with a task or without, is a
    /// `PageRead`: the reader state machine (the local tier, the lead on this replica, the probe, the wait for the
    /// announcement with its polling, the fallback store) driven by callbacks. The keys' probes go in one pipeline;
    /// a waiting key is woken by the announcement or by a timer on the store's clock. `.done` when every key was
    /// answered before the call returned (the local tier; Redis, when its replies beat the caller); otherwise
    /// `.waiting`, even without `canWait` (Redis must answer first), and `notify`
    /// gets the outcomes on the thread of the last answer. With `canWait` the keys in flight are waited for until
    /// `expire()` (at most ``longestWaitWithoutTask``); without it, a key in flight reads `.pending`.
    public func read(
        _ keys: [StoreKey], canWait: Bool, notify: @escaping @Sendable ([ReadOutcome]) -> Void
    ) -> ImmediateRead {
        let read = PageRead(store: self, keys: keys, notify: notify)
        if let outcomes = read.start(wait: canWait ? Self.longestWaitWithoutTask : .zero) { return .done(outcomes) }
        return .waiting(StoreWait { read.expire() })
    }

    /// The longest a read without a task waits when its caller never calls `expire()`.
    public static let longestWaitWithoutTask = Duration.seconds(60)

    /// One read of several keys. Each key runs the reader state machine one step at a time: at most
    /// one probe or one wait of a key is outstanding, so its reader is only touched by the step in progress;
    /// announcements that arrive meanwhile are remembered and taken by its next wait.
    final class PageRead: Sendable {
        private struct Slot {
            var reader: RedisStoreState.Reader
            var registration: UInt64?
            /// An announcement arrived while the key was not waiting, with its value if one travelled with it.
            var signalled = false
            var payload: [UInt8]?
            /// The key waits for an announcement or its timer.
            var waiting = false
            /// How many waits the key has begun: a timer ends only the wait it was set for (a cancelled one may still
            /// fire).
            var waits: UInt64 = 0
            /// Its wait's timer, or the end of its wait in the fallback store; on the store's clock.
            var timer: Scheduled<Void>?
            /// A wait of the fallback store, ended on `expire()`.
            var fallbackWait: StoreWait?
            var outcome: ReadOutcome?
        }

        private struct State {
            var slots: [Slot?]
            /// An announcement that came after the key's registration and before its slot, with its value if one
            /// travelled with it: the slot starts signalled.
            var early: [[UInt8]??]
            var remaining: Int
            var expired = false
            /// `start` has returned: from then on the last outcome goes to `notify`.
            var started = false
            var outcomes: [ReadOutcome]
        }

        private let store: RedisStore
        private let keys: [StoreKey]
        private let loop: any EventLoop
        private let notify: @Sendable ([ReadOutcome]) -> Void
        private let state: Mutex<State>

        init(store: RedisStore, keys: [StoreKey], notify: @escaping @Sendable ([ReadOutcome]) -> Void) {
            let count = keys.count
            self.store = store
            self.keys = keys
            self.loop = store.timerLoop
            self.notify = notify
            self.state = Mutex(
                State(
                    slots: Array(repeating: nil, count: count), early: Array(repeating: nil, count: count), remaining: count,
                    outcomes: Array(repeating: .pending, count: count)))
        }

        /// Starts every key's read; returns the outcomes when all were answered at once (then `notify` is never
        /// called).
        func start(wait: Duration) -> [ReadOutcome]? {
            let now = store.clock.now
            var probes: [(Int, ScriptCall)] = []
            var steps: [(Int, RedisStoreState.ReadStep)] = []
            for (index, key) in keys.enumerated() {
                let names = store.keySpace.keys(for: key)
                // Registered before the first look at the key (this replica's lead, or Redis), so no announcement
                // after that look is missed: one that comes before the slot is kept in `early`.
                let registration =
                    wait > .zero ? store.waiters.register(names.digest) { [self] in signalled(index, payload: $0) } : nil
                let (reader, step) = store.state.withLock { $0.startRead(names, wait: wait, cancelled: false, now: now) }
                state.withLock { state in
                    var slot = Slot(reader: reader, registration: registration)
                    if let early = state.early[index] { (slot.signalled, slot.payload) = (true, early) }
                    state.slots[index] = slot
                }
                if case .probe(let call) = step { probes.append((index, call)) } else { steps.append((index, step)) }
            }
            for (index, step) in steps { perform(index, step) }
            if !probes.isEmpty {
                let sentAt = store.clock.now
                let probed = probes.map(\.0)
                store.eval(probes.map(\.1)) { [self] replies in
                    for (index, reply) in zip(probed, replies) { self.probed(index, reply, sentAt: sentAt) }
                }
            }
            return state.withLock { state in
                state.started = true
                return state.remaining == 0 ? state.outcomes : nil
            }
        }

        /// The caller's deadline passed (or its connection closed): keys still waiting look once more and read what
        /// Redis says then, `.pending` for a flight still under way.
        func expire() {
            // The fallback store's waits are ended after the lock is released: ending one may call back into
            // `finish` at once.
            let (woken, fallbackWaits) = state.withLock { state -> ([Int], [StoreWait]) in
                state.expired = true
                var woken: [Int] = []
                var fallbackWaits: [StoreWait] = []
                for index in state.slots.indices {
                    guard var slot = state.slots[index] else { continue }
                    if let wait = slot.fallbackWait { fallbackWaits.append(wait) }
                    if slot.waiting {
                        slot.waiting = false
                        slot.timer?.cancel()
                        slot.timer = nil
                        woken.append(index)
                    }
                    state.slots[index] = slot
                }
                return (woken, fallbackWaits)
            }
            for wait in fallbackWaits { wait.expire() }
            for index in woken { woke(index, fired: false, payload: nil) }
        }

        private func perform(_ index: Int, _ step: RedisStoreState.ReadStep) {
            switch step {
            case .finish(let outcome, let label):
                store.metrics.record(outcome, label: label)
                finish(index, outcome)
            case .readFallback(let wait):
                guard let reader = state.withLock({ $0.slots[index]?.reader }) else { return }
                readFallback(index, reader: reader, wait: wait)
            case .probe(let call):
                let sentAt = store.clock.now
                store.eval([call]) { [self] replies in probed(index, replies[0], sentAt: sentAt) }
            case .wait(let timeout):
                let now = state.withLock { state -> (fired: Bool, payload: [UInt8]?)? in
                    guard var slot = state.slots[index] else { return nil }
                    defer { state.slots[index] = slot }
                    if slot.signalled || state.expired {
                        defer { (slot.signalled, slot.payload) = (false, nil) }
                        return (slot.signalled, slot.payload)
                    }
                    slot.waiting = true
                    slot.waits &+= 1
                    let wait = slot.waits
                    slot.timer = store.clock.schedule(at: store.clock.now.advanced(by: timeout), on: loop) { [self] in
                        timedOut(index, wait: wait)
                    }
                    return nil
                }
                if let now { woke(index, fired: now.fired, payload: now.payload) }
            }
        }

        private func readFallback(_ index: Int, reader: RedisStoreState.Reader, wait: Duration) {
            let read = store.fallback.read([keys[index]], canWait: wait > .zero) { [self] in finish(index, $0[0]) }
            switch read {
            case .done(let outcomes):
                finish(index, outcomes[0])
            case .waiting(let wait):
                let expired = state.withLock { state -> Bool in
                    guard var slot = state.slots[index] else { return true }
                    defer { state.slots[index] = slot }
                    slot.fallbackWait = wait
                    // Cancelled when the key finishes: the fallback store's wait ends at the reader's deadline.
                    if !state.expired, slot.outcome == nil {
                        slot.timer = store.clock.schedule(at: reader.deadline, on: loop) { wait.expire() }
                    }
                    return state.expired
                }
                if expired { wait.expire() }
            }
        }

        private func probed(_ index: Int, _ reply: Result<RedisValue, RedisCallError>, sentAt: ContinuousClock.Instant) {
            let probe = RedisStoreState.Probe(reply: reply)
            guard let (current, expired) = state.withLock({ state in state.slots[index].map { ($0.reader, state.expired) } }) else {
                return
            }
            var reader = current
            if probe == .undecodable {
                store.logger.error(
                    "undecodable value in Redis; treating it as absent", metadata: ["store.digest": "\(reader.keys.digest)"])
            }
            let now = store.clock.now
            let step = store.state.withLock { $0.probed(&reader, probe, sentAt: sentAt, cancelled: expired, now: now) }
            state.withLock { $0.slots[index]?.reader = reader }
            perform(index, step)
        }

        private func signalled(_ index: Int, payload: [UInt8]?) {
            let wake = state.withLock { state -> Bool in
                guard var slot = state.slots[index] else {
                    state.early[index] = .some(payload ?? state.early[index] ?? nil)
                    return false
                }
                guard slot.outcome == nil else { return false }
                defer { state.slots[index] = slot }
                guard slot.waiting else {
                    slot.signalled = true
                    if let payload { slot.payload = payload }
                    return false
                }
                slot.waiting = false
                slot.timer?.cancel()
                slot.timer = nil
                return true
            }
            if wake { woke(index, fired: true, payload: payload) }
        }

        private func timedOut(_ index: Int, wait: UInt64) {
            let wake = state.withLock { state -> Bool in
                guard var slot = state.slots[index], slot.waiting, slot.waits == wait else { return false }
                defer { state.slots[index] = slot }
                slot.waiting = false
                slot.timer = nil
                return true
            }
            if wake { woke(index, fired: false, payload: nil) }
        }

        private func woke(_ index: Int, fired: Bool, payload: [UInt8]?) {
            guard var reader = state.withLock({ $0.slots[index]?.reader }) else { return }
            let value = payload.flatMap { EntryCodec.decode($0) }
            let now = store.clock.now
            let step = store.state.withLock { $0.woke(&reader, fired: fired, value: value, now: now) }
            state.withLock { $0.slots[index]?.reader = reader }
            perform(index, step)
        }

        private func finish(_ index: Int, _ outcome: ReadOutcome) {
            let ended = state.withLock { state -> (RedisStoreState.Reader, UInt64?, [ReadOutcome]?)? in
                guard var slot = state.slots[index], slot.outcome == nil else { return nil }
                slot.outcome = outcome
                slot.timer?.cancel()
                state.slots[index] = slot
                state.outcomes[index] = outcome
                state.remaining -= 1
                return (slot.reader, slot.registration, state.remaining == 0 && state.started ? state.outcomes : nil)
            }
            guard let (reader, registration, outcomes) = ended else { return }
            if let registration { store.waiters.unregister(reader.keys.digest, id: registration) }
            store.state.withLock { $0.readEnded(reader) }
            if let outcomes { notify(outcomes) }
        }
    }
}
