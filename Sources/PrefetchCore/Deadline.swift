import Dispatch
import Synchronization

/// The project's one way to bound a wait: runs `body`, which suspends until another party resumes it, while a
/// sleeper on `clock` calls `expire` once `deadline` passes; `expire` must end `body`'s wait (by resuming what it
/// waits on). When the calling task is cancelled first, the sleeper calls `cancelled` instead. The sleeper is
/// cancelled, and neither is called, as soon as `body` returns on its own. A nil deadline never expires.
///
/// Every bounded wait of a task in the service goes through here: an async store read's deadline, a renderer
/// acquire's timeout, the DNS loop's next due time. A wait driven by callbacks (a store read's poll, a results
/// view's deadline) is bounded by `ServiceClock.schedule(at:on:_:)` instead. So each can be driven by a test's
/// `ManualClock`.
public func withDeadline<T: Sendable>(
    _ deadline: ContinuousClock.Instant?,
    clock: any ServiceClock,
    isolation: isolated (any Actor)? = #isolation,
    onExpiry expire: @escaping @Sendable () async -> Void,
    onCancel cancelled: (@Sendable () async -> Void)? = nil,
    _ body: () async -> T
) async -> T {
    guard let deadline else { return await body() }
    let finished = Flag()
    return await withTaskGroup(of: Void.self, returning: T.self) { group in
        group.addTask {
            do {
                if clock is ContinuousClock {
                    try await CancellableTimer.sleep(until: deadline)
                } else {
                    try await clock.sleep(until: deadline, tolerance: nil)
                }
            } catch {
                if !finished.value.load(ordering: .acquiring), let cancelled { await cancelled() }
                return
            }
            await expire()
        }
        let result = await body()
        finished.value.store(true, ordering: .releasing)
        group.cancelAll()
        return result
    }
}

/// A sleep on the continuous clock that cancellation frees at once. `Task.sleep`'s timer cannot be taken back:
/// a cancelled sleep returns at once, but its job and dispatch timer stay allocated (about 500 bytes) until the
/// deadline, so every bounded wait that ended early held them for the rest of its `wait` (6,000 of them, 3 MB,
/// during the memory benchmark's reads with `wait=10000`). This one's dispatch timer is cancelled with the task.
final class CancellableTimer: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, any Error>?
        var ended = false
    }

    private let state = Mutex(State())
    /// Dispatch sources are thread-safe: this one is scheduled and activated once, in `start`, and cancelled once
    /// the sleep ends (cancellation releases its handler, and with it this timer).
    private nonisolated(unsafe) let source = DispatchSource.makeTimerSource(queue: .global())

    /// Returns at `deadline`, or throws `CancellationError` as soon as the calling task is cancelled.
    static func sleep(until deadline: ContinuousClock.Instant) async throws {
        let timer = CancellableTimer()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                timer.start(until: deadline, continuation)
            }
        } onCancel: {
            timer.end(CancellationError())
        }
    }

    private func start(until deadline: ContinuousClock.Instant, _ continuation: CheckedContinuation<Void, any Error>) {
        let nanoseconds = Int(max(.zero, ContinuousClock.now.duration(to: deadline)).nanoseconds)
        source.setEventHandler { [self] in end(nil) }
        source.schedule(deadline: .now() + .nanoseconds(nanoseconds))
        let armed = state.withLock { state in
            guard !state.ended else { return false }
            state.continuation = continuation
            return true
        }
        // Activated in every case: libdispatch traps on releasing a source that was never activated.
        source.activate()
        guard armed else {
            source.cancel()
            continuation.resume(throwing: CancellationError())
            return
        }
    }

    /// Ends the sleep once: at the deadline (`error` nil) or on cancellation. The timer is cancelled either way,
    /// which frees it now rather than at the deadline.
    private func end(_ error: (any Error)?) {
        let continuation = state.withLock { state in
            defer {
                state.ended = true
                state.continuation = nil
            }
            return state.continuation
        }
        source.cancel()
        guard let continuation else { return }
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
    }
}

/// Whether a bounded wait's body returned on its own (so its sleeper's cancellation is not the caller's).
private final class Flag: Sendable {
    let value = Atomic(false)
}

/// A level-triggered wake-up for one waiter: `signal` from any thread wakes the waiter, or the next `wait` if
/// nobody waits yet, and may hand it a payload. Waiting is cancellable and bounded by a deadline on a clock.
public final class Wakeup<Payload: Sendable>: Sendable {
    private struct State {
        var signalled = false
        var expired = false
        var payload: Payload?
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    public init() {}

    /// Wakes the waiter, now or at its next `wait`; a non-nil `payload` is kept until the waiter takes it.
    public func signal(_ payload: Payload? = nil) {
        let waiter = state.withLock { state in
            state.signalled = true
            if let payload { state.payload = payload }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Returns when signalled, when `deadline` passes on `clock` (nil: no deadline) or when the task is cancelled:
    /// whether it was signalled, and the payload if one came. Re-arms for the next wait.
    @discardableResult
    public func wait(
        until deadline: ContinuousClock.Instant?, clock: any ServiceClock = ContinuousClock()
    ) async -> (signalled: Bool, payload: Payload?) {
        await withDeadline(deadline, clock: clock, onExpiry: { self.expire() }) {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let now = state.withLock { state in
                        if state.signalled || state.expired || Task.isCancelled { return true }
                        state.waiter = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                self.expire()
            }
        }
        return state.withLock { state in
            defer {
                state.signalled = false
                state.expired = false
                state.payload = nil
            }
            return (state.signalled, state.payload)
        }
    }

    private func expire() {
        let waiter = state.withLock { state in
            state.expired = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
