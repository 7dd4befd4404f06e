public import PrefetchCore

/// Where a browser would send the page's credentials: the rule behind `credentials: same-site`.
///
/// An api host is on the page's site when it is the page host itself, or under the page's site domain: for a page
/// on `m.example.com` (or `a.b.example.com`) the site is `example.com`, so `api.example.com`, `example.com` and
/// `m.example.com` get the page's `Cookie` and `Authorization`; `example.org` and `m.example.com.evil.net` do not.
/// The site domain is the host's last two labels, or three under a country-code second level (`co.uk`, `com.cn`,
/// ... : a label from a short list under a two-letter top level), so a page on `www.example.co.uk` has
/// `example.co.uk` as its site.
///
/// Limits, documented in docs/http-api.md: without the full Public Suffix List the rule can be more permissive than
/// a browser for hosts under multi-label suffixes not in the list (for instance a shared hosting domain such as
/// `*.github.io`), so a config author serving pages from such a domain should set `credentials: omit` or
/// `include` explicitly. IP-address hosts are only same-site with the identical address. An https page never
/// sends credentials to an http api (a browser would keep `Secure` cookies back).
public enum SiteRule {
    static let suffixSecondLevels: Set<String> = [
        "co", "com", "net", "org", "gov", "edu", "ac", "ne", "or", "go", "gv", "mil", "nic", "ltd", "plc", "sch",
    ]

    /// Whether `mode` lets the page's credentials go to `api` when the page is `page`.
    public static func allowsCredentials(_ mode: CredentialsMode, page: HTTPURL, api: HTTPURL) -> Bool {
        switch mode {
        case .omit: return false
        case .include: return true
        case .sameSite: return isSameSite(page: page, api: api)
        }
    }

    /// Whether `api` is on the site of `page` (see the type's documentation).
    public static func isSameSite(page: HTTPURL, api: HTTPURL) -> Bool {
        if page.scheme == "https" && api.scheme != "https" { return false }
        let pageHost = page.host
        let apiHost = api.host
        if pageHost == apiHost { return true }
        if isIPAddress(pageHost) || isIPAddress(apiHost) { return false }
        let site = siteDomain(of: pageHost)
        return apiHost == site || apiHost.hasSuffix("." + site)
    }

    /// The host's registrable-ish site domain: its last two labels, or three when the second-to-last is a
    /// country-code second level (`co.uk`, `com.cn`: a label of the short list under a two-letter top level), so
    /// `a.b.example.com` and `example.com` are one site, and `www.example.co.uk`'s is `example.co.uk`.
    public static func siteDomain(of host: String) -> String {
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count > 2 else { return host }
        let count = labels[labels.count - 1].count == 2 && suffixSecondLevels.contains(String(labels[labels.count - 2])) ? 3 : 2
        return labels.suffix(count).joined(separator: ".")
    }

    static func isIPAddress(_ host: String) -> Bool {
        if host.hasPrefix("[") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }
    }
}
