/// When the shell stops calling the service: after `failureThreshold` consecutive failures the breaker opens, and
/// every call is skipped (the page opens without a prefetch, at once) until `coolDown` has passed. Then one call
/// goes through as a probe (half-open): its success closes the breaker, its failure opens it for another cool-down.
///
/// A value type that decides and does nothing: the shell asks ``admit(at:)`` before a call and reports the call's
/// outcome with ``record(_:of:at:)``. Time is a parameter, so tests drive it without clocks or sleeps. A call's
/// outcome counts only in the state it was admitted in: a slow answer from before the breaker opened (or from an
/// earlier probe) changes nothing.
struct CircuitBreaker<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// The states of the breaker.
    enum State: Sendable, Equatable {
        /// Calls go through; `failures` consecutive ones have failed so far.
        case closed(failures: Int)
        /// Calls are skipped until `until`.
        case open(until: Instant)
        /// The cool-down is over and one probe call is in flight; others are skipped until it ends.
        case halfOpen
    }

    /// What a caller may do now.
    enum Admission: Sendable, Equatable {
        /// Make the call; report its outcome with this pass.
        case call(Pass)
        /// Skip the call: the breaker is open, or a probe is already in flight.
        case skip
    }

    /// The right to report one call's outcome: the epoch it was admitted in, and whether it is the probe.
    struct Pass: Sendable, Equatable {
        var epoch: Int
        var isProbe: Bool
    }

    /// How a call ended, for the breaker: an answer from the service, or none (timeout, transport error, a 5xx).
    enum Outcome: Sendable, Equatable {
        case success
        case failure
    }

    /// What the breaker did on a report, so the shell can count it.
    enum Transition: Sendable, Equatable {
        case none
        case opened
        case closed
    }

    let failureThreshold: Int
    let coolDown: Duration
    private(set) var state: State = .closed(failures: 0)
    /// Bumped on every change of state: passes of an earlier epoch are stale.
    private(set) var epoch = 0

    /// A closed breaker that opens after `failureThreshold` (at least 1) consecutive failures for `coolDown`.
    init(failureThreshold: Int, coolDown: Duration) {
        self.failureThreshold = max(1, failureThreshold)
        self.coolDown = coolDown
    }

    /// Whether a call may start at `now`; moves an open breaker whose cool-down is over to half-open and hands out
    /// its one probe.
    mutating func admit(at now: Instant) -> Admission {
        switch state {
        case .closed:
            return .call(Pass(epoch: epoch, isProbe: false))
        case .open(let until):
            guard now >= until else { return .skip }
            move(to: .halfOpen)
            return .call(Pass(epoch: epoch, isProbe: true))
        case .halfOpen:
            return .skip
        }
    }

    /// Reports how the call admitted with `pass` ended, at `now`.
    @discardableResult
    mutating func record(_ outcome: Outcome, of pass: Pass, at now: Instant) -> Transition {
        guard pass.epoch == epoch else { return .none }
        switch (state, outcome) {
        case (.closed, .success):
            state = .closed(failures: 0)
            return .none
        case (.closed(let failures), .failure):
            if failures + 1 >= failureThreshold {
                move(to: .open(until: now.advanced(by: coolDown)))
                return .opened
            }
            state = .closed(failures: failures + 1)
            return .none
        case (.halfOpen, .success) where pass.isProbe:
            move(to: .closed(failures: 0))
            return .closed
        case (.halfOpen, .failure) where pass.isProbe:
            move(to: .open(until: now.advanced(by: coolDown)))
            return .opened
        case (.halfOpen, _), (.open, _):
            return .none
        }
    }

    private mutating func move(to next: State) {
        state = next
        epoch += 1
    }
}
