public import HTTPTypes
import PrefetchCore
public import PrefetchStore

/// A caller's credential headers, in order, and their identity, hashed once per request; with a cookie jar, the
/// headers hold the whole jar as one `Cookie` (the identity a ticket and its entries are keyed by), and each
/// upstream request carries only the jar's cookies for its URL (``sentHeaders(for:)``).
public struct Credentials: Sendable {
    public var headers: HTTPFields
    public var identity: Identity
    public var jar: CookieJar? = nil

    /// The credential headers a request to `url` carries: with a jar, every header but `Cookie` and the cookies a
    /// browser would send to that URL (none of another host's, no `Secure` one over http); without, ``headers``.
    public func sentHeaders(for url: String) -> HTTPFields {
        guard let jar else { return headers }
        var sent = headers
        sent[.cookie] = nil
        if let value = (try? HTTPURL(parsing: url)).flatMap({ jar.header(for: $0, now: CookieJar.now) }) {
            sent.append(HTTPField(name: .cookie, value: value))
        }
        return sent
    }
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
