import Foundation
public import PrefetchCore

/// The user's cookies with their attributes, as a shell's cookie store holds them, so the service can send each
/// upstream request exactly the cookies a browser would send to its URL (RFC 6265bis §5.8.3): one host's cookies
/// never reach another host's upstream, and a `Secure` cookie never travels over plain http.
///
/// A trigger or an open carries a jar in `cookies` (`[{name, value, domain, hostOnly, path, secure, expires,
/// sameSite}]`); a single `Cookie` header is the page's own host's cookies, sent to that host alone.
public struct CookieJar: Sendable, Hashable {
    /// One stored cookie.
    public struct Cookie: Sendable, Hashable {
        public var name: String
        public var value: String
        /// The host (host-only) or the domain (domain cookie), lowercased, without a leading dot.
        public var domain: String
        /// Sent to `domain` alone (no `Domain` attribute when it was set), else to `domain` and every host under it.
        public var hostOnly: Bool
        /// Starts with `/`.
        public var path: String
        public var secure: Bool
        /// Seconds since 1970; nil for a session cookie.
        public var expires: Int64?
        /// Where the cookie goes across sites: only `none` is sent to an api on another site than the page, and only
        /// where the webview accepts third-party cookies (a cookie stored without the attribute counts as `lax`, as
        /// in Chromium).
        public var sameSite: SameSite

        /// A cookie's `SameSite` attribute.
        public enum SameSite: String, Sendable, Hashable {
            case strict, lax, none
        }

        public init(
            name: String, value: String, domain: String, hostOnly: Bool = true, path: String = "/", secure: Bool = false,
            expires: Int64? = nil, sameSite: SameSite = .lax
        ) {
            self.name = name
            self.value = value
            let lowered = domain.lowercased()
            self.domain = lowered.hasPrefix(".") ? String(lowered.dropFirst()) : lowered
            self.hostOnly = hostOnly
            self.path = path.hasPrefix("/") ? path : "/"
            self.secure = secure
            self.expires = expires
            self.sameSite = sameSite
        }

        /// Whether a browser sends this cookie with a request to `url` from a page on `page` at `now`: domain or
        /// host-only match, path match, `Secure` only over https, not expired; to an api on another site than the
        /// page (schemeful, RFC 6265bis §5.2: an http page and an https api of one domain are two sites) only when
        /// the webview accepts third-party cookies (`thirdParty`), and then only a `SameSite=None` one.
        func isSent(to url: HTTPURL, page: HTTPURL, now: Int64, thirdParty: Bool) -> Bool {
            if let expires, expires <= now { return false }
            if !(page.scheme == url.scheme && SiteRule.isSameSite(page: page, api: url)) && !(thirdParty && sameSite == .none) {
                return false
            }
            if secure && url.scheme != "https" { return false }
            let host = url.host
            let domainMatches = hostOnly ? host == domain : host == domain || (!Self.isIPAddress(host) && host.hasSuffix("." + domain))
            return domainMatches && Self.pathMatches(url.path, path)
        }

        /// RFC 6265 §5.1.4.
        static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
            if requestPath == cookiePath { return true }
            guard requestPath.hasPrefix(cookiePath) else { return false }
            return cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).hasPrefix("/")
        }

        static func isIPAddress(_ host: String) -> Bool {
            host.hasPrefix("[") || (host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
        }
    }

    /// The most cookies a jar may hold (a browser keeps about 180 per host; a jar covers a shell's api hosts).
    public static let maximumCookies = 300

    public var cookies: [Cookie]

    public init(_ cookies: [Cookie]) {
        self.cookies = cookies
    }

    /// The `Cookie` header a browser sends with a request to `url` from a page on `page` at `now`, or nil when no
    /// cookie applies: longer paths first, then in the jar's order (RFC 6265bis §5.8.3 step 2). `thirdParty`: the
    /// webview accepts third-party cookies (``EngineSettings/thirdPartyCookies``).
    public func header(for url: HTTPURL, page: HTTPURL, now: Int64, thirdParty: Bool = false) -> String? {
        let sent = cookies.enumerated().filter { $0.element.isSent(to: url, page: page, now: now, thirdParty: thirdParty) }
            .sorted { a, b in
                a.element.path.count != b.element.path.count ? a.element.path.count > b.element.path.count : a.offset < b.offset
            }
        guard !sent.isEmpty else { return nil }
        return sent.map { "\($0.element.name)=\($0.element.value)" }.joined(separator: "; ")
    }

    /// The wall clock's seconds since 1970, for cookie expiry.
    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// Every cookie of the jar as one `Cookie` value, for the identity a ticket is entitled by: each
    /// `name=value` in the jar's order (a shell presents the same value when it reads its tickets).
    public var wholeHeader: String? {
        cookies.isEmpty ? nil : cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }
}
