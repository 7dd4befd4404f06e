/// Proof of leadership of one flight; only the leader's token completes it.
public struct FlightToken: Sendable, Hashable, CustomStringConvertible {
    /// The token's value; unique per store for the store's lifetime.
    public let value: UInt64

    /// Creates a token. Backends mint tokens; callers only pass them back.
    public init(_ value: UInt64) {
        self.value = value
    }

    /// `flight#<value>`.
    public var description: String { "flight#\(value)" }
}

/// The answer to `ResponseStore.begin`.
public enum BeginOutcome: Sendable, Hashable {
    /// The caller leads: it must fetch and then call `complete` (or `abandon`) with this token.
    case leader(FlightToken)
    /// A flight for the key is already in progress; nothing to do.
    case joined
    /// A completed entry exists (a response, or a failure within its `negativeTTL`); nothing to do.
    case fresh
}
