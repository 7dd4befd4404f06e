/// How a request of a page open got its flight: the `flight` of a trigger's answer and the debug view's `origin`.
public enum FlightRole: String, Sendable, Hashable, Codable, CaseIterable {
    /// This trigger fetches it.
    case leader
    /// A flight for the same key was already running: this trigger waits for it.
    case joined
    /// A stored entry within its TTL answers it: nothing is fetched.
    case fresh
    /// A ticket read back from the shared store on another replica: its flights were claimed there.
    case remote
}

/// How a data read was answered: the `X-Prefetch` header, the ticket's read log and the per-version metrics.
public enum ReadResult: String, Sendable, Hashable, Codable, CaseIterable {
    /// The stored response, ready when asked.
    case hit
    /// The response of a flight the read waited for.
    case joined
    /// Anything else: pending, failed, or a miss reason (`X-Prefetch-Reason`).
    case miss

    /// `hit` or `joined`, as the store said.
    public init(joined: Bool) {
        self = joined ? .joined : .hit
    }
}
