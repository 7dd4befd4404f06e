import PrefetchStore
import Synchronization

/// A one-reader wake-up: `fire` (a completion was announced) or the reader's own deadline ends one `wait`.
final class WakeSignal: Sendable {
    private struct State {
        var fired = false
        var expired = false
        /// A result that travelled in the announcement because it was not stored (see `RedisStore.complete`).
        var payload: [UInt8]?
        var continuation: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    /// Wakes the reader; `payload` is kept until the reader takes it.
    func fire(payload: [UInt8]?) {
        let continuation = state.withLock { state in
            state.fired = true
            if let payload { state.payload = payload }
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume()
    }

    /// Waits until fired, `timeout` passes, or the task is cancelled. Returns whether it was fired and any payload.
    func wait(upTo timeout: Duration) async -> (fired: Bool, payload: [UInt8]?) {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let now = self.state.withLock { state in
                            if state.fired || state.expired { return true }
                            state.continuation = continuation
                            return false
                        }
                        if now { continuation.resume() }
                    }
                } onCancel: {
                    self.expire()
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.expire()
            }
            _ = await group.next()
            group.cancelAll()
        }
        return state.withLock { state in
            defer {
                state.fired = false
                state.expired = false
                state.payload = nil
            }
            return (state.fired, state.payload)
        }
    }

    private func expire() {
        let continuation = state.withLock { state in
            state.expired = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume()
    }
}

/// The readers of this replica waiting on flights, by key digest, so an announcement (from pub/sub or from a
/// completion on this replica) wakes exactly the readers of that key.
final class LocalWaiters: Sendable {
    struct Registration: Sendable {
        let digest: String
        let id: UInt64
        let signal: WakeSignal
    }

    private let waiters = Mutex<[String: [UInt64: WakeSignal]]>([:])
    private let nextID = Atomic<UInt64>(0)

    func register(_ digest: String) -> Registration {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let signal = WakeSignal()
        waiters.withLock { $0[digest, default: [:]][id] = signal }
        return Registration(digest: digest, id: id, signal: signal)
    }

    func unregister(_ registration: Registration) {
        waiters.withLock { waiters in
            waiters[registration.digest]?[registration.id] = nil
            if waiters[registration.digest]?.isEmpty == true { waiters[registration.digest] = nil }
        }
    }

    func notify(_ digest: String, payload: [UInt8]? = nil) {
        let signals = waiters.withLock { $0[digest].map { Array($0.values) } ?? [] }
        for signal in signals { signal.fire(payload: payload) }
    }

    /// Wakes every reader so it checks Redis again (announcements may have been missed).
    func notifyAll() {
        let signals = waiters.withLock { $0.values.flatMap(\.values) }
        for signal in signals { signal.fire(payload: nil) }
    }

    var count: Int { waiters.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}

/// The flights this replica leads in Redis, by key digest, and when each began. While one is younger than `window`
/// (the smaller of the lock age and the local tier's `localTTL`) its lock is taken to be this replica's, so a reader
/// here knows the key is pending without asking Redis: a page's reads, which arrive while its fetches run, cost no
/// round trip until they are woken. Whatever may have changed the key forgets it, so a reader then asks Redis as
/// usual: the flight's own completion or abandonment, any announcement for the digest (a completion or a drop on any
/// replica), a `retain` here, and a resubscription (announcements may have been missed). A drop by another replica
/// whose announcement has not arrived yet is the one thing this cannot see; the window bounds that staleness by the
/// same `localTTL` that already bounds the local tier's.
final class LocalLeads: Sendable {
    private struct Lead {
        let token: FlightToken
        let label: String
        let startedAt: ContinuousClock.Instant
    }

    private let window: Duration
    private let leads = Mutex<[String: Lead]>([:])

    init(window: Duration) {
        self.window = window
    }

    /// This replica took the lock for `digest` at `startedAt`.
    func lead(_ digest: String, token: FlightToken, label: String, startedAt: ContinuousClock.Instant) {
        leads.withLock { leads in
            // Leaders that never finish are dropped once past the window.
            if leads.count >= 4096 { leads = leads.filter { startedAt - $0.value.startedAt < window } }
            leads[digest] = Lead(token: token, label: label, startedAt: startedAt)
        }
    }

    /// The flight `token` leads for `digest` completed or was abandoned (a later flight's lead is kept).
    func ended(_ digest: String, token: FlightToken) {
        leads.withLock { leads in
            if leads[digest]?.token == token { leads[digest] = nil }
        }
    }

    func forget(_ digest: String) {
        _ = leads.withLock { $0.removeValue(forKey: digest) }
    }

    func forgetAll() {
        leads.withLock { $0.removeAll() }
    }

    /// Forgets the flights whose label is not in `labels` (`retain` dropped their locks).
    func retain(labels: Set<String>) {
        leads.withLock { leads in leads = leads.filter { labels.contains($0.value.label) } }
    }

    /// Whether this replica is taken to hold the lock for `digest` at `now`.
    func isLeading(_ digest: String, now: ContinuousClock.Instant) -> Bool {
        leads.withLock { leads in leads[digest].map { now - $0.startedAt < window } ?? false }
    }
}
