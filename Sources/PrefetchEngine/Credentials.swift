public import HTTPTypes
public import PrefetchStore

/// A caller's credential headers, in order, and their identity, hashed once per request.
public struct Credentials: Sendable {
    public var headers: HTTPFields
    public var identity: Identity
}
