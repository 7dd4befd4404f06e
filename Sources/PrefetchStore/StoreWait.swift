package import PrefetchCore
import Synchronization

/// What ``ResponseStore/read(_:canWait:notify:)`` found.
public enum ImmediateRead: Sendable {
    /// Every outcome, now (nothing was in flight, or the reader would not wait).
    case done([ReadOutcome])
    /// Some were in flight: `notify` gets every outcome once they are settled, or once `StoreWait.expire()` is
    /// called (those still in flight then read `.pending`).
    case waiting(StoreWait)
}

/// A reader's wait registered without a task: the reader ends it at its deadline with `expire()`.
public final class StoreWait: Sendable {
    private let giveUp: @Sendable () -> Void

    public init(giveUp: @escaping @Sendable () -> Void) {
        self.giveUp = giveUp
    }

    /// The deadline passed: whatever is still in flight reads `.pending`. Harmless after everything settled.
    public func expire() {
        giveUp()
    }
}

/// Collects the outcomes of one reader's waits and calls `notify` once, when the last is in.
final class StoreWaitGroup: Sendable {
    private struct State {
        var outcomes: [ReadOutcome]
        var remaining: Int
    }

    private let state: Mutex<State>
    private let notify: @Sendable ([ReadOutcome]) -> Void

    init(outcomes: [ReadOutcome], remaining: Int, notify: @escaping @Sendable ([ReadOutcome]) -> Void) {
        state = Mutex(State(outcomes: outcomes, remaining: remaining))
        self.notify = notify
    }

    func settle(_ index: Int, _ outcome: ReadOutcome) {
        let done: [ReadOutcome]? = state.withLock { state in
            state.outcomes[index] = outcome
            state.remaining -= 1
            return state.remaining == 0 ? state.outcomes : nil
        }
        if let done { notify(done) }
    }
}

extension ImmediateRead {
    /// A callback read for a caller that is async by nature: `start` begins it (whether it may wait, and the
    /// `notify` to give the store), and its wait ends at `wait` on `clock` or when the caller's task is cancelled.
    package static func awaited(
        wait: Duration, clock: any ServiceClock,
        _ start: (_ canWait: Bool, _ notify: @escaping @Sendable ([ReadOutcome]) -> Void) -> ImmediateRead
    ) async -> [ReadOutcome] {
        let deadline = clock.now.advanced(by: wait)
        let handoff = ReadHandoff()
        let read = start(wait > .zero && !Task.isCancelled) { handoff.notify($0) }
        return await read.outcomes(handoff, deadline: deadline, clock: clock)
    }

    /// The outcomes of a read for a caller that is async by nature: at once when the store had them, else once its
    /// wait settles, ends at `deadline` on `clock`, or the caller's task is cancelled (what is still in flight then
    /// reads `.pending`). `handoff` must be the one whose `notify` the read was given.
    package func outcomes(
        _ handoff: ReadHandoff, deadline: ContinuousClock.Instant, clock: any ServiceClock
    ) async -> [ReadOutcome] {
        switch self {
        case .done(let outcomes):
            return outcomes
        case .waiting(let wait):
            return await withDeadline(deadline, clock: clock, onExpiry: { wait.expire() }) {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in handoff.attach(continuation) }
                } onCancel: {
                    wait.expire()
                }
            }
        }
    }
}

/// Carries one waiting read's outcomes from the thread that settles it to the task that awaits them, whichever of
/// the two comes first: `notify` is the read's callback, `attach` the awaiting task's continuation.
package final class ReadHandoff: Sendable {
    private enum State {
        case empty
        case settled([ReadOutcome])
        case attached(CheckedContinuation<[ReadOutcome], Never>)
        case done
    }

    private let state = Mutex(State.empty)

    package init() {}

    package func notify(_ outcomes: [ReadOutcome]) {
        let continuation: CheckedContinuation<[ReadOutcome], Never>? = state.withLock { state in
            switch state {
            case .empty:
                state = .settled(outcomes)
                return nil
            case .attached(let continuation):
                state = .done
                return continuation
            case .settled, .done:
                preconditionFailure("a read's outcomes were handed over twice")
            }
        }
        continuation?.resume(returning: outcomes)
    }

    func attach(_ continuation: CheckedContinuation<[ReadOutcome], Never>) {
        let settled: [ReadOutcome]? = state.withLock { state in
            switch state {
            case .empty:
                state = .attached(continuation)
                return nil
            case .settled(let outcomes):
                state = .done
                return outcomes
            case .attached, .done:
                preconditionFailure("a read was awaited twice")
            }
        }
        if let settled { continuation.resume(returning: settled) }
    }
}
