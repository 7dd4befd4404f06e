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
                "a=1; Max-Age=600; Expires=Wed, 09 Jun 2021 10:18:14 GMT", "b=2; Expires=Wed, 09 Jun 2060 10:18:14 GMT", "c=3; Max-Age=0",
                "d=4; Max-Age=-5",
            ],
            "https://h.example/")
        #expect(stored[0].expiresDate == now.addingTimeInterval(600))
        let components = Calendar(identifier: .gregorian).dateComponents(
            in: TimeZone(identifier: "UTC")!, from: try #require(stored[1].expiresDate))
        #expect(
            [components.year, components.month, components.day, components.hour, components.minute, components.second] == [
                2060, 6, 9, 10, 18, 14,
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
}
