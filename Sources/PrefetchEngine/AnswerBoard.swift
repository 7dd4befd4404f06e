public import NIOCore
public import PrefetchCore
import Synchronization

/// What a leader of a page open got, for the dependents of the same open: a 2xx body, or why there is none.
public enum DependencyAnswer: Sendable, Hashable {
    /// A 2xx body; `ownOnly` when it is kept for this page open alone (it set a cookie, was `private`, or was made
    /// from such an answer), so whatever is made from it is kept for this page open alone too.
    case body(ByteBuffer, ownOnly: Bool)
    /// Why there is no body to use: a failure code, or the upstream status that was not 2xx.
    case failed(String)
}

/// The answers a page open's leaders post for its dependent requests, each awaited by any number of them.
///
/// Only answers some dependent needs are kept, and each only until every dependent that needs it took it, so a
/// page open holds no copy of a response beyond the moment it is used.
public final class AnswerBoard: Sendable {
    private struct State {
        var answers: [Int: DependencyAnswer] = [:]
        /// Dependents still to take each needed answer.
        var consumers: [Int: Int]
        var waiting: [Int: [Int: CheckedContinuation<DependencyAnswer?, Never>]] = [:]
        var nextID = 0
    }

    private let state: Mutex<State>

    /// A board for answers `consumers` names, each taken by that many dependents.
    init(consumers: [Int: Int] = [:]) {
        state = Mutex(State(consumers: consumers))
    }

    /// Request `index` has its answer: every dependent waiting for it gets it, and later ones at once. Ignored
    /// when nobody needs it.
    public func post(_ index: Int, _ answer: DependencyAnswer) {
        let waiting = state.withLock { state -> [CheckedContinuation<DependencyAnswer?, Never>] in
            guard let count = state.consumers[index], count > 0, state.answers[index] == nil else { return [] }
            let waiting = state.waiting.removeValue(forKey: index).map { Array($0.values) } ?? []
            state.consumers[index] = count - waiting.count
            if count > waiting.count { state.answers[index] = answer }
            return waiting
        }
        for continuation in waiting { continuation.resume(returning: answer) }
    }

    /// The dependents counted on `inputs` take their answers elsewhere (from the page open's completions): each
    /// input is kept for one consumer fewer. Called before any answer is posted.
    func withdraw(_ inputs: [Int]) {
        state.withLock { state in
            for input in inputs {
                guard let count = state.consumers[input] else { continue }
                state.consumers[input] = count > 1 ? count - 1 : nil
            }
        }
    }

    /// Request `index`'s answer once posted, or nil when `deadline` passes on `clock` first (or the task is
    /// cancelled).
    public func answer(for index: Int, until deadline: ContinuousClock.Instant, clock: any ServiceClock) async -> DependencyAnswer? {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return await withDeadline(deadline, clock: clock, onExpiry: { self.giveUp(index, id) }) {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<DependencyAnswer?, Never>) in
                    let now: DependencyAnswer?? = state.withLock { state in
                        if let answer = state.answers[index] {
                            let left = (state.consumers[index] ?? 1) - 1
                            state.consumers[index] = left
                            if left <= 0 { state.answers[index] = nil }
                            return .some(answer)
                        }
                        if Task.isCancelled { return .some(nil) }
                        state.waiting[index, default: [:]][id] = continuation
                        return .none
                    }
                    if case .some(let answer) = now { continuation.resume(returning: answer) }
                }
            } onCancel: {
                self.giveUp(index, id)
            }
        }
    }

    private func giveUp(_ index: Int, _ id: Int) {
        let continuation = state.withLock { $0.waiting[index]?.removeValue(forKey: id) }
        continuation?.resume(returning: nil)
    }
}
