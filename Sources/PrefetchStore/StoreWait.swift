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
