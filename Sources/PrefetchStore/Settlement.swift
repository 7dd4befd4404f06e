/// One way a flight ends, for ``ResponseStore/settle(_:)``: several are handed over together, in order.
public enum Settlement: Sendable {
    /// `complete(_:token:result:)`.
    case complete(StoreKey, token: FlightToken, result: Result<StoredResponse, StoreFailure>)
    /// `put(_:policy:result:)`: claims `key`'s flight and completes it at once, or does nothing when a flight or
    /// an entry holds it.
    case put(StoreKey, policy: StorePolicy, result: Result<StoredResponse, StoreFailure>)
    /// `abandon(_:token:)`.
    case abandon(StoreKey, token: FlightToken)
}
