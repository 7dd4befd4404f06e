import Synchronization

/// One submitted fetch as seen by both sides: the caller's task (waiting on a continuation) and the loop thread.
///
/// The result is delivered exactly once, whoever gets there first: the loop (completion, timeout, shutdown) or the
/// caller's cancellation handler. Everything mutable sits behind the ticket's own `Mutex`.
final class FetchTicket: Sendable {
    typealias Continuation = CheckedContinuation<Result<FetchResponse, FetchError>, Never>

    private enum State {
        case new
        case waiting(Continuation)
        /// Finished before the caller installed its continuation (e.g. cancelled up front); kept for `install`.
        case finishedEarly(Result<FetchResponse, FetchError>)
        case delivered
    }

    let request: FetchRequest
    /// The address the transfer connects to, when the request's pinning gave one.
    let pin: AddressPin?
    let submitted: ContinuousClock.Instant
    let deadline: ContinuousClock.Instant
    private let state = Mutex<State>(.new)

    init(request: FetchRequest, pin: AddressPin? = nil, now: ContinuousClock.Instant = .now) {
        self.request = request
        self.pin = pin
        self.submitted = now
        self.deadline = now.advanced(by: request.timeout)
    }

    /// Registers the caller's continuation. Returns false (and resumes it at once) if the ticket already finished.
    func install(_ continuation: Continuation) -> Bool {
        let early: Result<FetchResponse, FetchError>? = state.withLock { state in
            switch state {
            case .new:
                state = .waiting(continuation)
                return nil
            case .finishedEarly(let result):
                state = .delivered
                return result
            case .waiting, .delivered:
                preconditionFailure("a ticket's continuation is installed once")
            }
        }
        if let early {
            continuation.resume(returning: early)
            return false
        }
        return true
    }

    /// Delivers the result unless one was delivered already. Returns whether this call delivered it.
    @discardableResult
    func finish(_ result: Result<FetchResponse, FetchError>) -> Bool {
        let (delivered, continuation): (Bool, Continuation?) = state.withLock { state in
            switch state {
            case .new:
                state = .finishedEarly(result)
                return (true, nil)
            case .waiting(let continuation):
                state = .delivered
                return (true, continuation)
            case .finishedEarly, .delivered:
                return (false, nil)
            }
        }
        continuation?.resume(returning: result)
        return delivered
    }

    /// Whether a result has been delivered (or fixed) already; the loop drops such tickets.
    var isFinished: Bool {
        state.withLock { state in
            switch state {
            case .new, .waiting: false
            case .finishedEarly, .delivered: true
            }
        }
    }
}
