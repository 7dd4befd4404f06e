public import HTTPTypes
public import PrefetchStore

/// A caller's credential headers, in order, and their identity, hashed once per request.
public struct Credentials: Sendable {
    public var headers: HTTPFields
    public var identity: Identity
}

extension Credentials {
    /// The credential headers among `headers` (their names in `names`, lowercased), in order. A credential header
    /// with a blank value is no credential: it is dropped, as the identity ignores it, so "sends credentials" and
    /// "keyed by an identity" never disagree (an empty `Cookie` from a fresh cookie jar must not make a guest's
    /// private answer look credentialed, and so shared).
    public static func headers(in headers: HTTPFields, named names: Set<String>) -> HTTPFields {
        HTTPFields(
            headers.filter {
                names.contains($0.name.canonicalName) && $0.value.utf8.contains { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }
            })
    }
}
