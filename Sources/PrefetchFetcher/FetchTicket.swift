import Synchronization

/// Requests submitted together (one page open's) and the handler their results go to.
///
/// The loop thread calls `handler` once per loop iteration in which any of them finished, with every result of that
/// iteration, so a page open of eight requests is woken at most once per batch of completions and never per
/// transfer. The handler runs on the loop thread: it must not block or wait (post, record, hand over; nothing else).
final class FetchBatch: Sendable {
    let handler: @Sendable ([FetchCompletion]) -> Void

    init(handler: @escaping @Sendable ([FetchCompletion]) -> Void) {
        self.handler = handler
    }
}

/// One finished request of a batch: its position in the submitted array and its result.
public struct FetchCompletion: Sendable {
    /// The position of the request in the array given to `Fetcher.submit(_:onCompletion:)`.
    public var index: Int
    public var result: Result<FetchResponse, FetchError>

    public init(index: Int, result: Result<FetchResponse, FetchError>) {
        self.index = index
        self.result = result
    }
}

/// One submitted fetch as seen by both sides: the submitter (a waiting task's continuation, or a batch's handler)
/// and the loop thread.
///
/// The result is delivered exactly once, whoever gets there first: the loop (completion, timeout, shutdown) or the
/// caller's cancellation handler. Everything mutable sits behind the ticket's own `Mutex`. A batch's ticket is
/// finished on the loop thread only, and its result travels in the loop's outbox to the batch handler.
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
    /// The batch this ticket belongs to and its position there; nil for a single awaited fetch.
    let batch: FetchBatch?
    let index: Int
    private let state = Mutex<State>(.new)

    init(
        request: FetchRequest, pin: AddressPin? = nil, now: ContinuousClock.Instant = .now, batch: FetchBatch? = nil, index: Int = 0
    ) {
        self.request = request
        self.pin = pin
        self.submitted = now
        self.deadline = now.advanced(by: request.timeout)
        self.batch = batch
        self.index = index
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

    /// Fixes the result unless one was fixed already; returns whether this call fixed it. A waiting caller is
    /// resumed here; a batch ticket's result is the caller's to hand to the batch (see `TransferLoop.deliver`).
    @discardableResult
    func finish(_ result: Result<FetchResponse, FetchError>) -> Bool {
        let (delivered, continuation): (Bool, Continuation?) = state.withLock { state in
            switch state {
            case .new:
                state = batch == nil ? .finishedEarly(result) : .delivered
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
