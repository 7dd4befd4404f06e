import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `Set-Cookie` header values turned into `HTTPCookie`s for the host that was asked, by the storage model of
/// RFC 6265bis (§5.6, §5.7) as browsers implement it, so the shell's store holds what the webview's own fetch would
/// have stored, and nothing a browser would refuse.
///
/// - The cookie is keyed by the request's host name (never an address the service connected to): without a
///   `Domain` attribute it is a host-only cookie of that host; with one, a domain cookie (`.example.com`) only when
///   the host domain-matches the domain, else it is dropped. An IP address host takes host-only cookies only. A
///   `Domain` that is a public suffix (`com`, `co.uk`, `github.io`: ``PublicSuffixList``) is taken only when it is
///   the host itself, and then as host-only.
/// - Without `Max-Age` or `Expires` it is a session cookie (`isSessionOnly`). `Max-Age` wins over `Expires`; both
///   are capped at 400 days from now; 0 or less, or a date in the past, gives an expiry in the past, which removes
///   the cookie from a store.
/// - `Path` is kept when it starts with `/`, else the default path of the request URL (§5.1.4).
/// - Refused as a browser refuses them: a name and value over 4,096 bytes together; a `Secure` cookie from an
///   `http` URL; `SameSite=None` without `Secure`; a `__Secure-` name without `Secure` from `https`; a `__Host-` name
///   without `Secure` from `https`, with a `Domain` or with a `Path` other than `/`; a cookie from an `http` URL
///   whose name and domain match a `Secure` cookie already stored (§5.7 step 16: an insecure response cannot
///   shadow a secure cookie). An attribute value over 1,024 bytes is ignored.
/// - At most ``maximumPerResponse`` cookies from one response (the first ones).
/// - A value may hold several `Set-Cookie` lines joined by commas (the HTTP transports a native shell has join
///   repeated headers: Foundation's `HTTPURLResponse` on every platform): they are split back at a comma followed
///   by `name=` (``split(_:)``). A browser reads one line `pref=en, sid=x` as one cookie and a joined reader two, so
///   the service never replays such a line (docs/design/cookies.md, "Each `Set-Cookie` as its own value").
enum SetCookie {
    /// The most bytes of a cookie's name and value together (RFC 6265bis §5.7 step 3).
    static let maximumNameValueBytes = 4096
    /// The most bytes of one attribute's value; a longer one is ignored (§5.6 step 8).
    static let maximumAttributeBytes = 1024
    /// The longest a cookie is kept (§5.6.1, §5.6.2: 400 days).
    static let maximumLifetime: TimeInterval = 400 * 86_400
    /// The most cookies taken from one response.
    static let maximumPerResponse = 50
    /// The most cookies a store holds for one domain (Chromium's per-domain limit): a sync adds no cookie beyond it.
    static let maximumPerDomain = 180

    /// `new` without the cookies that would take a domain's count in the store (`existing` and what is taken before
    /// them) over ``maximumPerDomain``; a cookie that replaces one of the same name, domain and path always goes.
    static func boundedPerDomain(_ new: [HTTPCookie], existing: [HTTPCookie]) -> [HTTPCookie] {
        func identity(_ cookie: HTTPCookie) -> String { "\(cookie.name)\u{0}\(bare(cookie.domain))\u{0}\(cookie.path)" }
        var held: [String: Set<String>] = [:]
        for cookie in existing { held[bare(cookie.domain), default: []].insert(identity(cookie)) }
        return new.filter { cookie in
            let domain = bare(cookie.domain)
            let key = identity(cookie)
            if held[domain]?.contains(key) == true { return true }
            guard held[domain, default: []].count < maximumPerDomain else { return false }
            held[domain, default: []].insert(key)
            return true
        }
    }

    /// The cookies `values` (each one `Set-Cookie` header value, or several joined by commas) set for a request to `url`, received at `now`, given the
    /// cookies the store already holds (`existing`, for the rule that an insecure response cannot shadow a secure
    /// cookie).
    static func cookies(
        from values: [String], for url: URL, now: Date, existing: [HTTPCookie] = [], suffixes: PublicSuffixList = .bundled
    ) -> [HTTPCookie] {
        guard let host = url.host?.lowercased(), !host.isEmpty else { return [] }
        let secureURL = url.scheme?.lowercased() == "https"
        // The path as requested: `URL.path` drops a trailing slash, which decides the default path (`/v1/` gives
        // `/v1`, `/v1` gives `/`).
        let requestPath = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? url.path
        let taken = values.flatMap(split).prefix(maximumPerResponse).compactMap { line -> HTTPCookie? in
            guard let parsed = parse(line) else { return nil }
            return cookie(parsed, host: host, requestPath: requestPath, secureURL: secureURL, now: now, suffixes: suffixes)
        }
        guard !secureURL else { return taken }
        return taken.filter { new in
            !existing.contains { old in
                old.isSecure && old.name == new.name
                    && (CookieMatching.domainMatches(bare(old.domain), bare(new.domain))
                        || CookieMatching.domainMatches(bare(new.domain), bare(old.domain)))
                    && CookieMatching.pathMatches(new.path, old.path)
            }
        }
    }

    private static func bare(_ domain: String) -> String {
        (domain.hasPrefix(".") ? String(domain.dropFirst()) : domain).lowercased()
    }

    /// One parsed `Set-Cookie` line (§5.2): the name and value, and the attributes that matter here.
    struct Parsed: Equatable {
        var name: String
        var value: String
        var domain: String?
        var path: String?
        var maxAge: Int?
        var expires: Date?
        var secure = false
        var httpOnly = false
        var sameSite: String?
    }

    /// Parses one `Set-Cookie` value; nil when it has no `=` in its first part or an empty name (§5.2 steps 2-5).
    static func parse(_ line: String) -> Parsed? {
        var parts = line.split(separator: ";", omittingEmptySubsequences: false).map { String($0) }
        let pair = parts.removeFirst()
        guard let equals = pair.firstIndex(of: "=") else { return nil }
        let name = trimmed(pair[..<equals])
        guard !name.isEmpty else { return nil }
        var parsed = Parsed(name: name, value: trimmed(pair[pair.index(after: equals)...]))
        guard parsed.name.utf8.count + parsed.value.utf8.count <= maximumNameValueBytes else { return nil }
        for part in parts {
            let (key, value) =
                part.firstIndex(of: "=").map { (trimmed(part[..<$0]), trimmed(part[part.index(after: $0)...])) } ?? (trimmed(part[...]), "")
            if value.utf8.count > maximumAttributeBytes { continue }
            switch key.lowercased() {
            case "expires": parsed.expires = CookieDate.parse(value) ?? parsed.expires
            case "max-age":
                let digits = value.hasPrefix("-") ? value.dropFirst() : Substring(value)
                guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { continue }
                parsed.maxAge = value.hasPrefix("-") ? 0 : Int(digits) ?? Int.max
            case "domain":
                // A leading dot is ignored; an empty value means no attribute (§5.2.3). A lone dot names no domain
                // at all and refuses the cookie, as Chromium does (kept as ".", which no host domain-matches).
                let domain = value.hasPrefix(".") ? String(value.dropFirst()) : value
                parsed.domain = value.isEmpty ? nil : domain.isEmpty ? "." : domain.lowercased()
            case "path": parsed.path = value.hasPrefix("/") ? value : nil
            case "secure": parsed.secure = true
            case "httponly": parsed.httpOnly = true
            case "samesite": parsed.sameSite = value
            default: continue
            }
        }
        return parsed
    }

    /// The stored cookie for `parsed` received from `host`, or nil when the rules drop it.
    static func cookie(
        _ parsed: Parsed, host: String, requestPath: String, secureURL: Bool, now: Date, suffixes: PublicSuffixList = .bundled
    ) -> HTTPCookie? {
        if parsed.secure && !secureURL { return nil }
        let sameSite = parsed.sameSite?.lowercased()
        if sameSite == "none" && !parsed.secure { return nil }
        let name = parsed.name.lowercased()
        if name.hasPrefix("__secure-") && !(parsed.secure && secureURL) { return nil }
        if name.hasPrefix("__host-") && !(parsed.secure && secureURL && parsed.domain == nil && parsed.path == "/") { return nil }
        var domain = host
        if let attribute = parsed.domain {
            // An IP address, or a public suffix, is never a domain for other hosts: only the host itself, host-only.
            let hostOnly = CookieMatching.isIPAddress(host) || suffixes.isPublicSuffix(attribute)
            guard hostOnly ? attribute == host : CookieMatching.domainMatches(host, attribute) else { return nil }
            if !hostOnly { domain = "." + attribute }
        }
        var properties: [HTTPCookiePropertyKey: Any] = [
            .name: parsed.name, .value: parsed.value, .domain: domain,
            .path: parsed.path ?? CookieMatching.defaultPath(requestPath),
        ]
        if let maxAge = parsed.maxAge {
            properties[.expires] =
                maxAge <= 0 ? Date(timeIntervalSince1970: 0) : now.addingTimeInterval(min(TimeInterval(maxAge), maximumLifetime))
        } else if let expires = parsed.expires {
            properties[.expires] = min(expires, now.addingTimeInterval(maximumLifetime))
        } else {
            properties[.discard] = "TRUE"
        }
        if parsed.secure { properties[.secure] = "TRUE" }
        if parsed.httpOnly { properties[HTTPCookiePropertyKey("HttpOnly")] = "TRUE" }
        if let sameSite, ["strict", "lax", "none"].contains(sameSite) {
            properties[HTTPCookiePropertyKey("SameSite")] = sameSite
        }
        return HTTPCookie(properties: properties)
    }

    /// Splits a header value that may hold several `Set-Cookie` values joined by commas (as `HTTPURLResponse` joins
    /// repeated headers): at a comma followed by `name=` before any `;`, which an `Expires` date's comma never is.
    static func split(_ value: String) -> [String] {
        var lines: [String] = []
        var current = ""
        var rest = Substring(value)
        while let comma = rest.firstIndex(of: ",") {
            let after = rest[rest.index(after: comma)...]
            let next = after.prefix { $0 != ";" && $0 != "," }
            current += rest[..<comma]
            if let equals = next.firstIndex(of: "="), isToken(trimmed(next[..<equals])) {
                lines.append(current)
                current = ""
            } else {
                current += ","
            }
            rest = after
        }
        current += rest
        lines.append(current)
        return lines.map { trimmed($0[...]) }.filter { !$0.isEmpty }
    }

    private static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains($0) }
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}

/// The cookie-date algorithm of RFC 6265 §5.1.1, which reads every `Expires` format servers send.
enum CookieDate {
    static func parse(_ text: String) -> Date? {
        var time: (Int, Int, Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        let delimiters = Set<UInt8>([0x09] + Array(0x20...0x2F) + Array(0x3B...0x40) + Array(0x5B...0x60) + Array(0x7B...0x7E))
        let tokens = Array(text.utf8).split { delimiters.contains($0) }.map { String(decoding: $0, as: UTF8.self) }
        for token in tokens {
            if time == nil, let parsed = timeOfDay(token) {
                time = parsed
            } else if day == nil, let value = leadingDigits(token, 1...2) {
                day = value
            } else if month == nil, let index = months.firstIndex(of: token.prefix(3).lowercased()), token.count >= 3 {
                month = index + 1
            } else if year == nil, let value = leadingDigits(token, 2...4) {
                year = value
            }
        }
        guard let (hour, minute, second) = time, let day, let month, var year else { return nil }
        if (70...99).contains(year) { year += 1900 } else if (0...69).contains(year) { year += 2000 }
        guard (1...31).contains(day), year >= 1601, hour <= 23, minute <= 59, second <= 59 else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        guard let date = calendar.date(from: components), calendar.component(.day, from: date) == day else { return nil }
        return date
    }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// `hh:mm:ss` (each 1-2 digits), optionally followed by non-digits.
    private static func timeOfDay(_ token: String) -> (Int, Int, Int)? {
        let fields = token.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count == 3 else { return nil }
        let values = fields.enumerated().map { index, field -> Int? in
            let digits = field.prefix { $0.isASCII && $0.isNumber }
            guard (1...2).contains(digits.count), index == 2 || digits.count == field.count else { return nil }
            return Int(digits)
        }
        guard let hour = values[0], let minute = values[1], let second = values[2] else { return nil }
        return (hour, minute, second)
    }

    /// A token of `count` digits, optionally followed by non-digits.
    private static func leadingDigits(_ token: String, _ count: ClosedRange<Int>) -> Int? {
        let digits = token.prefix { $0.isASCII && $0.isNumber }
        guard count.contains(digits.count), token.dropFirst(digits.count).first.map({ !($0.isASCII && $0.isNumber) }) ?? true else {
            return nil
        }
        return Int(digits)
    }
}
