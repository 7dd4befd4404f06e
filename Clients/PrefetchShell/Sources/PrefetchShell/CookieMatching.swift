import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Which of the shell's cookies go to the service, by the rules a browser sends cookies with (RFC 6265 §5.4): a
/// cookie is sent when it would be sent to at least one of the api URLs the shell configured (the interfaces of
/// the pages it opens), never because it exists. A cookie of another host, a `Secure` cookie for an `http` api, a
/// cookie scoped to a path no api is under, and an expired cookie stay on the device.
enum CookieMatching {
    /// The `Cookie` header for `apis`, or nil when no cookie applies: each applicable cookie once, longer paths first
    /// (§5.4 step 2), then by name, domain and value, so the same cookies always give the same header, which is what
    /// the service keys the user's identity by.
    static func cookieHeader(_ cookies: [HTTPCookie], apis: [URL], now: Date) -> String? {
        header(sentCookies(cookies, apis: apis, now: now))
    }

    /// The cookies a browser would send to at least one of `apis`, each once, in the order of ``cookieHeader``.
    static func sentCookies(_ cookies: [HTTPCookie], apis: [URL], now: Date) -> [HTTPCookie] {
        var seen = Set<String>()
        let sent = cookies.filter { cookie in
            guard cookie.expiresDate.map({ $0 > now }) ?? true else { return false }
            guard apis.contains(where: { isSent(cookie, to: $0) }) else { return false }
            return seen.insert("\(cookie.name)\u{0}\(cookie.domain.lowercased())\u{0}\(cookie.path)").inserted
        }
        return sent.sorted { a, b in
            if a.path.count != b.path.count { return a.path.count > b.path.count }
            return (a.name, a.domain, a.value) < (b.name, b.domain, b.value)
        }
    }

    /// The most bytes of names and values a trigger's jar carries. The service takes a body of 256 KiB, but the jar's
    /// names and values come back as one `Cookie` header on the ticket's reads, which proxies in front of the service
    /// limit far below that.
    static let maximumJarBytes = 32 * 1024

    /// `cookies` as the trigger's jar: those that can travel in a `Cookie` header (a token name without `=`, no
    /// control character or `;` in the value, domain or path: the service leaves out any other, and the two must
    /// agree on the jar), in order, up to ``maximumJarBytes``.
    static func jarCookies(_ cookies: [HTTPCookie]) -> [HTTPCookie] {
        var bytes = 0
        var kept: [HTTPCookie] = []
        for cookie in cookies where isToken(cookie.name) && [cookie.value, cookie.domain, cookie.path].allSatisfy(travels) {
            bytes += cookie.name.utf8.count + cookie.value.utf8.count
            if bytes > maximumJarBytes { break }
            kept.append(cookie)
        }
        return kept
    }

    private static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains($0) }
    }

    private static func travels(_ text: String) -> Bool {
        text.utf8.allSatisfy { ($0 >= 0x20 || $0 == 0x09) && $0 != 0x7F && $0 != UInt8(ascii: ";") }
    }

    /// `cookie`'s `SameSite` attribute as the jar spells it (`strict`, `lax`, `none`), or nil when the store does not
    /// keep it: Apple's `HTTPCookie` has `sameSitePolicy` (nil for `None` or unspecified: WebKit sends those across
    /// sites, so a cookie the store marks neither way is sent as `none` only when it is `Secure`, the form a
    /// browser accepts `SameSite=None` in); swift-corelibs-foundation drops the attribute, so on Linux the jar says
    /// nothing and the service counts the cookie as `lax`, the stricter reading.
    static func sameSite(of cookie: HTTPCookie) -> String? {
        #if canImport(Darwin)
        switch cookie.sameSitePolicy {
        case .some(.sameSiteStrict): return "strict"
        case .some(.sameSiteLax): return "lax"
        default: return cookie.isSecure ? "none" : nil
        }
        #else
        let value = (cookie.properties?[HTTPCookiePropertyKey("SameSite")] as? String)?.lowercased()
        return value.flatMap { ["strict", "lax", "none"].contains($0) ? $0 : nil }
        #endif
    }

    /// `cookies` as one `Cookie` value, in their order; nil for none.
    static func header(_ cookies: [HTTPCookie]) -> String? {
        cookies.isEmpty ? nil : cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    /// Whether a browser sends `cookie` with a request to `url` (domain, path and `Secure`; expiry is checked apart).
    static func isSent(_ cookie: HTTPCookie, to url: URL) -> Bool {
        guard let host = url.host?.lowercased(), !host.isEmpty else { return false }
        let scheme = url.scheme?.lowercased()
        guard scheme == "https" || scheme == "http" else { return false }
        if cookie.isSecure && scheme != "https" { return false }
        let domain = cookie.domain.lowercased()
        let matches = domain.hasPrefix(".") ? domainMatches(host, String(domain.dropFirst())) : host == domain
        // The path as requested: `URL.path` drops a trailing slash (`/v1/` reads `/v1`, and a cookie for `/v1/`
        // would not go to the api URL `/v1/`, which a browser sends it to).
        let path = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? url.path
        return matches && pathMatches(path.isEmpty ? "/" : path, cookie.path)
    }

    /// RFC 6265 §5.1.3: `host` is `domain`, or a name under it (never an IP address under a "domain").
    static func domainMatches(_ host: String, _ domain: String) -> Bool {
        host == domain || (!isIPAddress(host) && host.hasSuffix("." + domain))
    }

    /// RFC 6265 §5.1.4: `requestPath` is within `cookiePath`.
    static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
        if requestPath == cookiePath { return true }
        guard requestPath.hasPrefix(cookiePath) else { return false }
        return cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).hasPrefix("/")
    }

    /// RFC 6265 §5.1.4: the directory of the request path, `/` when there is none.
    static func defaultPath(_ requestPath: String) -> String {
        guard requestPath.hasPrefix("/"), let slash = requestPath.lastIndex(of: "/"), slash != requestPath.startIndex else { return "/" }
        return String(requestPath[..<slash])
    }

    /// An IPv4 literal, or an IPv6 one (with or without brackets).
    static func isIPAddress(_ host: String) -> Bool {
        if host.contains(":") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy { $0.isASCII && $0.isNumber } }
    }
}
