public import PrefetchCore

/// Why `read` found nothing to hand out.
public enum AbsentReason: String, Sendable, Hashable, CaseIterable {
    /// Nothing was ever triggered for this key (or the store forgot it).
    case notFound = "not-triggered"
    /// The entry outlived its TTL (or the failure its negative TTL).
    case expired
    /// A no-store response was already handed out to another reader.
    case consumed
    /// The entry was evicted for room, or dropped because its interface left the configuration.
    case evicted
    /// The entry was dropped by an invalidation: its user logged out, or a backend said what it holds changed.
    case invalidated
}

extension AbsentReason {
    /// The failure code of a read that found this (the `X-Prefetch-Reason` of the miss).
    public var code: FailureCode {
        switch self {
        case .notFound: .notTriggered
        case .expired: .expired
        case .consumed: .consumed
        case .evicted: .evicted
        case .invalidated: .invalidated
        }
    }
}

/// The answer to `ResponseStore.read`.
public enum ReadOutcome: Sendable, Hashable {
    /// The response. `joined` is true when the reader waited on (or arrived during) the flight.
    case ready(StoredResponse, joined: Bool)
    /// The shared failure of the flight. `joined` as for `.ready`.
    case failed(StoreFailure, joined: Bool)
    /// Still in flight when the reader's deadline passed (or its task was cancelled).
    case pending
    /// Nothing to hand out, and why.
    case absent(AbsentReason)
}
