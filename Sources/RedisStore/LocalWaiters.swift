import PrefetchCore
import PrefetchStore
import Synchronization

/// A one-reader wake-up: `fire` (a completion was announced) or the reader's timeout ends one `wait`.
///
/// This is one of the project's copies of "a continuation raced against a sleep"; they are to be unified, so its
/// API stays these two calls.
final class WakeSignal: Sendable {
    private struct State {
        var fired = false
        var expired = false
        /// A result that travelled in the announcement because it was not stored (see `RedisStore.complete`).
        var payload: [UInt8]?
        var continuation: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    /// Wakes the reader, now or at its next `wait`; `payload` is kept until the reader takes it.
    func fire(payload: [UInt8]?) {
        let continuation = state.withLock { state in
            state.fired = true
            if let payload { state.payload = payload }
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume()
    }

    /// Waits until fired, `timeout` passes on `clock`, or the task is cancelled. Returns whether it was fired and
    /// the payload, if one came, and re-arms the signal for the next wait.
    func wait(upTo timeout: Duration, clock: any ServiceClock = ContinuousClock()) async -> (fired: Bool, payload: [UInt8]?) {
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
                try? await clock.sleep(until: clock.now.advanced(by: timeout), tolerance: nil)
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
