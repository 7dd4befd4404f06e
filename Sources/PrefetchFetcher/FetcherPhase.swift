/// The lifecycle of a `Fetcher` as an explicit state machine.
///
/// idle ──start──▶ running ──drain──▶ draining ──loopExited──▶ stopped
///   │                │                  │
///   └──────abort─────┴──────abort───────┴──▶ aborting ──loopExited──▶ stopped
///
/// Submissions are accepted while idle (queued until the loop starts) and running; once draining, aborting or
/// stopped they are rejected with `.shutdown`.
struct FetcherPhase: Sendable, Equatable {
    enum State: Sendable, Equatable {
        case idle
        case running
        case draining
        case aborting
        case stopped
    }

    private(set) var state: State = .idle

    /// Moves idle to running; false if the fetcher was started before (it runs at most once).
    mutating func start() -> Bool {
        guard state == .idle else { return false }
        state = .running
        return true
    }

    /// Whether a new fetch may be submitted now.
    var acceptsSubmissions: Bool {
        state == .idle || state == .running
    }

    /// Graceful shutdown: stop accepting, let in-flight transfers finish.
    mutating func requestDrain() {
        if state == .running { state = .draining }
    }

    /// Hard stop: fail every in-flight transfer with `.shutdown`.
    mutating func requestAbort() {
        switch state {
        case .idle, .running, .draining: state = .aborting
        case .aborting, .stopped: break
        }
    }

    /// The loop thread has finished; nothing is in flight anymore.
    mutating func loopExited() {
        state = .stopped
    }

    /// Whether the loop must fail everything and exit now.
    var loopMustAbort: Bool { state == .aborting }

    /// Whether the loop should exit as soon as nothing is in flight.
    var loopMayExitWhenIdle: Bool { state == .draining }
}
