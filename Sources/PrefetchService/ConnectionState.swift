import NIOCore

/// When a page-listener connection closes on its own: after its idle timeout, and at a graceful shutdown once the
/// request in progress is answered. The rules of Hummingbird's `HTTPConnectionStateHandler`, kept by the
/// ``FastHandoffHandler`` for every request of its connection, since the requests it answers never reach that
/// handler (which then runs without an idle timeout and never sees the shutdown's quiesce event).
///
/// - A request is in progress from its head until its answer's end is written; several can be, with pipelining.
/// - The idle timer fires `idleTimeout` after the last activity (a request part read, or the last answer written);
///   while a request is read or none is in progress, the connection closes if nothing happened since; while
///   answers are outstanding it waits for them (the answer's end re-arms it).
/// - A quiesce event closes an idle connection at once, else the connection closes after the last answer.
///
/// A value type over an injected clock's instants, so the rules are tested without a channel.
struct ConnectionState {
    enum Action: Equatable {
        case none
        /// Arm the idle timer (if none is armed) for this instant.
        case armTimer(NIODeadline)
        case close
    }

    let idleTimeout: TimeAmount?
    private(set) var inProgress = 0
    private(set) var readingRequest = false
    private(set) var lastActive: NIODeadline
    private(set) var closeWhenAnswered = false
    private var active = false

    init(idleTimeout: TimeAmount?, now: NIODeadline) {
        self.idleTimeout = idleTimeout
        self.lastActive = now
    }

    /// The connection is up (called at `channelActive`, or when the handler joins an active channel).
    mutating func activated(now: NIODeadline) -> Action {
        guard !active else { return .none }
        active = true
        lastActive = now
        return idleTimeout.map { .armTimer(now + $0) } ?? .none
    }

    mutating func deactivated() {
        active = false
    }

    mutating func requestHead(now: NIODeadline) {
        lastActive = now
        readingRequest = true
        inProgress += 1
    }

    mutating func requestBody(now: NIODeadline) {
        lastActive = now
    }

    mutating func requestEnd(now: NIODeadline) {
        lastActive = now
        readingRequest = false
    }

    /// An answer's end is being written: `.close` when a shutdown waits for it, else the idle timer re-armed.
    mutating func answerEnd(now: NIODeadline) -> Action {
        inProgress = max(0, inProgress - 1)
        guard inProgress == 0 else { return .none }
        if closeWhenAnswered { return .close }
        guard active, let idleTimeout else { return .none }
        lastActive = now
        return .armTimer(now + idleTimeout)
    }

    /// The idle timer fired.
    mutating func timerFired(now: NIODeadline) -> Action {
        guard active, let idleTimeout else { return .none }
        // Answers outstanding for requests fully read: the last answer's end re-arms the timer.
        if !readingRequest && inProgress > 0 { return .none }
        if now >= lastActive + idleTimeout { return .close }
        return .armTimer(lastActive + idleTimeout)
    }

    /// A graceful shutdown began.
    mutating func quiesce() -> Action {
        guard inProgress > 0 else { return .close }
        closeWhenAnswered = true
        return .none
    }
}
