import Synchronization

/// A level-triggered signal for one waiter: `signal()` from any thread wakes the waiter, or the next `wait` if
/// nobody waits yet. Waiting is cancellable and may be bounded by a deadline.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    func signal() {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns when signalled, when `deadline` passes (nil: no deadline) or when the task is cancelled.
    func wait(until deadline: ContinuousClock.Instant?) async {
        guard let deadline else {
            await waitForSignal()
            return
        }
        guard deadline > .now else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) }
            group.addTask { await self.waitForSignal() }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForSignal() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                let waiter = state.waiter
                state.waiter = nil
                return waiter
            }
            waiter?.resume()
        }
    }
}
