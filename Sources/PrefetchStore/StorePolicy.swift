/// How long the store keeps what a flight produced, and under which interface it is counted.
public struct StorePolicy: Sendable, Hashable {
    /// How long a response is kept after it completes. Default 30 s.
    public var ttl: Duration
    /// How long a failure is kept (shared with later readers, and stopping `begin` from starting another fetch).
    /// Default 5 s; `.zero` shares a failure only with the readers already waiting.
    public var negativeTTL: Duration
    /// The interface name from the configuration: a bounded value, used as a metric label and by `retain`.
    public var label: String

    /// Creates a policy.
    public init(ttl: Duration = .seconds(30), negativeTTL: Duration = .seconds(5), label: String) {
        self.ttl = ttl
        self.negativeTTL = negativeTTL
        self.label = label
    }
}
