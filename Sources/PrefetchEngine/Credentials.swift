public import HTTPTypes
public import PrefetchCore
public import PrefetchStore

/// A caller's credential headers, in order, and their identity, hashed once per request; with a cookie jar, the
/// headers hold the whole jar as one `Cookie` (the identity a ticket and its entries are keyed by), and each
/// upstream request carries only the jar's cookies for its URL (``sentHeaders(for:)``).
public struct Credentials: Sendable {
    public var headers: HTTPFields
    public var identity: Identity
    public var jar: CookieJar? = nil
    /// Whether the jar's `SameSite=None` cookies go across sites (``EngineSettings/thirdPartyCookies``).
    public var thirdPartyCookies = false

    /// The credential headers a request to `url` made for a page on `page` carries, as a browser would send them:
    /// - with a jar, every header but `Cookie`, and the jar's cookies a browser sends to that URL from that page
    ///   (domain or host-only match, path, `Secure` only over https, expiry; across sites none, or only
    ///   `SameSite=None` ones where the webview accepts third-party cookies);
    /// - without one, ``headers``, except that a single `Cookie` header (the cookies of the page's own host, as a
    ///   page or a same-site read presents them) goes only to the page's own host, and never from an https page to
    ///   plain http (it may hold `Secure` cookies): one host's cookies never reach another host's upstream.
    public func sentHeaders(for url: String, page: HTTPURL) -> HTTPFields {
        guard let target = try? HTTPURL(parsing: url) else { return Self.withoutCookie(headers) }
        guard let jar else { return Self.sentHeaders(headers, for: target, page: page) }
        var sent = Self.withoutCookie(headers)
        if let value = jar.header(for: target, page: page, now: CookieJar.now, thirdParty: thirdPartyCookies) {
            sent.append(HTTPField(name: .cookie, value: value))
        }
        return sent
    }

    /// `headers` (a caller's credential headers, no jar) as sent to `url` for a page on `page`: a `Cookie` header
    /// only to the page's own host, and not from an https page to plain http.
    public static func sentHeaders(_ headers: HTTPFields, for url: HTTPURL, page: HTTPURL) -> HTTPFields {
        let sameHost = url.host == page.host && !(page.scheme == "https" && url.scheme != "https")
        return sameHost ? headers : withoutCookie(headers)
    }

    static func withoutCookie(_ headers: HTTPFields) -> HTTPFields {
        var kept = headers
        kept[.cookie] = nil
        return kept
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
