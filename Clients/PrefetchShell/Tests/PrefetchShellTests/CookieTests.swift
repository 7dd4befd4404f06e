import Foundation
import Testing

@testable import PrefetchShell

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `Set-Cookie` into `HTTPCookie`s by RFC 6265, and which cookies go to the service.
@Suite struct CookieTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func cookies(_ values: [String], _ url: String) -> [HTTPCookie] {
        SetCookie.cookies(from: values, for: URL(string: url)!, now: now)
    }

    func cookie(
        _ name: String, _ value: String = "1", domain: String, path: String = "/", secure: Bool = false, expires: Date? = nil
    ) -> HTTPCookie {
        var properties: [HTTPCookiePropertyKey: Any] = [.name: name, .value: value, .domain: domain, .path: path]
        if secure { properties[.secure] = "TRUE" }
        if let expires { properties[.expires] = expires }
        return HTTPCookie(properties: properties)!
    }

    @Test func aCookieWithoutDomainIsHostOnlyForTheRequestsHostName() throws {
        let stored = cookies(["sid=abc; Path=/; HttpOnly"], "https://API.Example.com/v1/user")
        let sid = try #require(stored.first)
        #expect(sid.name == "sid" && sid.value == "abc")
        #expect(sid.domain == "api.example.com")
        #expect(sid.path == "/")
        #expect(sid.isHTTPOnly)
        #expect(!sid.isSecure)
        #expect(sid.isSessionOnly)
    }

    @Test func aDomainCookieIsKeptOnlyWhenTheHostIsInTheDomain() {
        let stored = cookies(
            [
                "a=1; Domain=example.com", "b=2; Domain=.API.example.com", "c=3; Domain=other.com", "d=4; Domain=pi.example.com",
                "e=5; Domain=com",
            ],
            "https://api.example.com/x")
        #expect(stored.map(\.name) == ["a", "b"])
        #expect(stored.map(\.domain) == [".example.com", ".api.example.com"])
    }

    @Test func anIPAddressHostTakesHostOnlyCookiesOnly() {
        let stored = cookies(["a=1", "b=2; Domain=0.0.1", "c=3; Domain=127.0.0.1"], "http://127.0.0.1:9000/p")
        #expect(stored.map(\.name) == ["a", "c"])
        #expect(stored.allSatisfy { $0.domain == "127.0.0.1" })
    }

    @Test func thePathIsTheAttributeOrTheRequestsDirectory() {
        let stored = cookies(["a=1", "b=2; Path=/api", "c=3; Path=relative"], "https://h.example/v1/user/info?x=1")
        #expect(stored.map(\.path) == ["/v1/user", "/api", "/v1/user"])
        #expect(cookies(["a=1"], "https://h.example/info").first?.path == "/")
    }

    @Test func maxAgeWinsOverExpiresAndAPastExpiryRemoves() throws {
        let stored = cookies(
            [
                "a=1; Max-Age=600; Expires=Wed, 09 Jun 2021 10:18:14 GMT", "b=2; Expires=Wed, 09 Jun 2027 10:18:14 GMT", "c=3; Max-Age=0",
                "d=4; Max-Age=-5",
            ],
            "https://h.example/")
        #expect(stored[0].expiresDate == now.addingTimeInterval(600))
        let components = Calendar(identifier: .gregorian).dateComponents(
            in: TimeZone(identifier: "UTC")!, from: try #require(stored[1].expiresDate))
        #expect(
            [components.year, components.month, components.day, components.hour, components.minute, components.second] == [
                2027, 6, 9, 10, 18, 14,
            ])
        #expect(stored[2].expiresDate.map { $0 < now } == true)
        #expect(stored[3].expiresDate.map { $0 < now } == true)
    }

    @Test func theCookieDateAlgorithmReadsTheFormatsServersSend() {
        let expected = Date(timeIntervalSince1970: 1_623_233_894)  // 2021-06-09 10:18:14 UTC
        for text in [
            "Wed, 09 Jun 2021 10:18:14 GMT", "Wednesday, 09-Jun-21 10:18:14 GMT", "Wed Jun  9 10:18:14 2021", "09 Jun 2021 10:18:14",
        ] {
            #expect(CookieDate.parse(text) == expected, "\(text)")
        }
        #expect(CookieDate.parse("Wed, 31 Feb 2021 10:18:14 GMT") == nil)
        #expect(CookieDate.parse("not a date") == nil)
    }

    @Test func secureIsKeptFromHTTPSAndDroppedFromHTTP() {
        #expect(cookies(["a=1; Secure; SameSite=Lax"], "https://h.example/").first?.isSecure == true)
        #expect(cookies(["a=1; Secure"], "http://h.example/").isEmpty)
    }

    @Test func malformedLinesAreDropped() {
        #expect(cookies(["novalue", "=empty-name", "; a=1"], "https://h.example/").isEmpty)
    }

    @Test func setCookieValuesJoinedByCommasAreSplitBackWithoutBreakingExpiresDates() {
        let joined = "a=1; Expires=Wed, 09 Jun 2060 10:18:14 GMT; Path=/, b=2; HttpOnly,c=3"
        #expect(SetCookie.split(joined) == ["a=1; Expires=Wed, 09 Jun 2060 10:18:14 GMT; Path=/", "b=2; HttpOnly", "c=3"])
        #expect(cookies([joined], "https://h.example/").map(\.name) == ["a", "b", "c"])
    }

    @Test func onlyCookiesABrowserWouldSendToAConfiguredAPIGoToTheService() {
        let apis = [URL(string: "https://api.example.com/v1/user")!, URL(string: "http://127.0.0.1:9000/")!]
        let jar = [
            cookie("sid", "s", domain: "api.example.com"),
            cookie("wide", "w", domain: ".example.com"),
            cookie("deep", "d", domain: "api.example.com", path: "/v1"),
            cookie("other-path", "o", domain: "api.example.com", path: "/admin"),
            cookie("tracker", "t", domain: ".ads.example.net"),
            cookie("sibling", "x", domain: "www.example.com"),
            cookie("secure", "s", domain: "127.0.0.1", secure: true),
            cookie("local", "l", domain: "127.0.0.1"),
            cookie("gone", "g", domain: "api.example.com", expires: now.addingTimeInterval(-1)),
        ]
        let header = CookieMatching.cookieHeader(jar, apis: apis, now: now)
        #expect(header == "deep=d; local=l; sid=s; wide=w")
        // The same cookies in another order give the same header: the service keys the user by it.
        #expect(CookieMatching.cookieHeader(jar.reversed(), apis: apis, now: now) == header)
        #expect(CookieMatching.cookieHeader(jar, apis: [], now: now) == nil)
    }

    @Test func domainAndPathMatchingFollowRFC6265() {
        #expect(CookieMatching.domainMatches("a.b.example.com", "example.com"))
        #expect(!CookieMatching.domainMatches("badexample.com", "example.com"))
        #expect(!CookieMatching.domainMatches("1.2.3.4", "2.3.4"))
        #expect(CookieMatching.pathMatches("/v1/user", "/v1"))
        #expect(CookieMatching.pathMatches("/v1/user", "/v1/"))
        #expect(!CookieMatching.pathMatches("/v10", "/v1"))
        #expect(CookieMatching.defaultPath("") == "/")
        #expect(CookieMatching.defaultPath("/a/b/c") == "/a/b")
    }

    // MARK: What a browser refuses (RFC 6265bis as browsers implement it)

    /// A `Domain` that is a public suffix (the bundled list, not only single labels) sets no cookie for other hosts.
    @Test func aPublicSuffixIsNoCookieDomain() {
        #expect(cookies(["a=1; Domain=co.uk"], "https://api.example.co.uk/").isEmpty)
        #expect(cookies(["a=1; Domain=com.cn"], "https://shop.example.com.cn/").isEmpty)
        #expect(cookies(["a=1; Domain=github.io"], "https://alice.github.io/").isEmpty)
        #expect(cookies(["a=1; Domain=com"], "https://example.com/").isEmpty)
        // The registrable domain is fine; a public suffix that is the host itself is a host-only cookie of it.
        #expect(cookies(["a=1; Domain=example.co.uk"], "https://api.example.co.uk/").first?.domain == ".example.co.uk")
        #expect(cookies(["a=1; Domain=github.io"], "https://github.io/").first?.domain == "github.io")
        #expect(PublicSuffixList.bundled.snapshot.contains("publicsuffix"), "the bundled snapshot names its source")
        #expect(PublicSuffixList(text: "*.ck\n!www.ck").isPublicSuffix("any.ck"))
        #expect(!PublicSuffixList(text: "*.ck\n!www.ck").isPublicSuffix("www.ck"))
    }

    /// `__Secure-` and `__Host-` names only with their rules, in any letter case.
    @Test func cookiePrefixesKeepTheirRules() {
        let refused = [
            ("__Secure-a=1", "https://h.example/p"), ("__Secure-a=1; Secure", "http://h.example/p"),
            ("__SECURE-a=1", "https://h.example/p"), ("__Host-a=1; Path=/", "https://h.example/p"),
            ("__Host-a=1; Secure", "https://h.example/p/q"), ("__Host-a=1; Secure; Path=/; Domain=h.example", "https://h.example/"),
            ("__host-a=1; Secure; Path=/a", "https://h.example/a"),
        ]
        for (line, url) in refused {
            #expect(cookies([line], url).isEmpty, "\(line) from \(url)")
        }
        #expect(cookies(["__Secure-a=1; Secure"], "https://h.example/").count == 1)
        #expect(cookies(["__Host-a=1; Secure; Path=/"], "https://h.example/").first?.domain == "h.example")
    }

    @Test func sameSiteNoneNeedsSecure() {
        #expect(cookies(["a=1; SameSite=None"], "https://h.example/").isEmpty)
        #expect(cookies(["a=1; SameSite=None; Secure"], "https://h.example/").count == 1)
    }

    /// Sizes and counts a response cannot grow past.
    @Test func oversizedAndTooManyCookiesAreBounded() {
        let big = "a=" + String(repeating: "x", count: 6_000)
        #expect(cookies([big], "https://h.example/").isEmpty, "name and value over 4,096 bytes")
        #expect(cookies(["a=" + String(repeating: "x", count: 4_094)], "https://h.example/").count == 1)
        let flood = (0..<1_000).map { "c\($0)=1" }
        #expect(cookies(flood, "https://h.example/").count == SetCookie.maximumPerResponse)
        // An over-long attribute is ignored, not the cookie.
        let longPath = cookies(["a=1; Path=/" + String(repeating: "p", count: 2_000)], "https://h.example/x/y")
        #expect(longPath.first?.path == "/x")
    }

    /// `Expires` is capped like `Max-Age`: 400 days.
    @Test func noCookieOutlivesFourHundredDays() throws {
        let far = try #require(cookies(["a=1; Expires=Fri, 31 Dec 9999 23:59:59 GMT"], "https://h.example/").first?.expiresDate)
        #expect(far <= now.addingTimeInterval(400 * 86_400))
        let maxAge = try #require(cookies(["a=1; Max-Age=99999999999"], "https://h.example/").first?.expiresDate)
        #expect(maxAge <= now.addingTimeInterval(400 * 86_400))
    }

    /// An `http` response cannot set a cookie that shadows a `Secure` one the store holds for the same name and a
    /// matching domain and path.
    @Test func anInsecureResponseCannotShadowASecureCookie() {
        let existing = [cookie("sid", "real", domain: "h.example", secure: true)]
        let url = URL(string: "http://h.example/")!
        #expect(SetCookie.cookies(from: ["sid=attacker"], for: url, now: now, existing: existing).isEmpty)
        #expect(SetCookie.cookies(from: ["sid=attacker; Domain=h.example"], for: url, now: now, existing: existing).isEmpty)
        #expect(SetCookie.cookies(from: ["other=1"], for: url, now: now, existing: existing).count == 1)
        #expect(
            SetCookie.cookies(from: ["sid=new; Secure"], for: URL(string: "https://h.example/")!, now: now, existing: existing).count == 1)
    }

    /// Tickets and read keys are checked against the service's formats before any URL or page is built from them.
    @Test func ticketsAndReadKeysHaveTheirFormat() {
        #expect(PageOpen.isWellFormedTicket("0Y7kW3xQm2Jd9sVb1LhN4A"))
        for bad in ["..", "../../v1/data", "0Y7kW3xQm2Jd9sVb1LhN4A/..", "0Y7kW3xQm2Jd9sVb1LhN4", "0Y7kW3xQm2Jd9sVb1LhN4%", ""] {
            #expect(!PageOpen.isWellFormedTicket(bad), "\(bad)")
        }
        #expect(PageOpen.isWellFormedReadKey(String(repeating: "A", count: 64)))
        #expect(!PageOpen.isWellFormedReadKey(String(repeating: "A", count: 63) + "\""))
    }

    /// The trigger's jar holds only cookies that can travel in a `Cookie` header (the service leaves out any other,
    /// and the two must agree on the jar that entitles the ticket), and at most 32 KiB of them.
    @Test func theJarHoldsWhatCanTravelWithinItsBound() {
        let odd = [
            cookie("a b", domain: "h.example"), cookie("ok", "1", domain: "h.example"), cookie("semi", "x;y", domain: "h.example"),
            cookie("fine", "2", domain: "h.example"),
        ]
        #expect(CookieMatching.jarCookies(odd).map(\.name) == ["ok", "fine"])
        let many = (0..<20).map { cookie("c\($0)", String(repeating: "v", count: 4_000), domain: "h.example") }
        let kept = CookieMatching.jarCookies(many)
        #expect(kept.count == 8 && kept.map(\.name) == (0..<8).map { "c\($0)" })
    }

    /// A sync adds no cookie beyond 180 per domain in the store (Chromium's bound), however many replays set them;
    /// a cookie replacing one already held always goes.
    @Test func aDomainHoldsAtMostOneHundredEightyCookies() {
        let held = (0..<170).map { cookie("h\($0)", domain: "api.example.com") }
        let new =
            (0..<20).map { cookie("n\($0)", domain: "api.example.com") } + [cookie("h3", "again", domain: "api.example.com")]
            + (0..<5).map { cookie("o\($0)", domain: ".example.org") }
        let kept = SetCookie.boundedPerDomain(new, existing: held)
        #expect(kept.filter { $0.domain == "api.example.com" && $0.name.hasPrefix("n") }.count == 10)
        #expect(kept.contains { $0.name == "h3" && $0.value == "again" })
        #expect(kept.filter { $0.domain == ".example.org" }.count == 5)
    }
}
