import Foundation
import Testing

@testable import PrefetchShell

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The browser is the oracle of the SDK's cookie acceptance: each case's `Set-Cookie` lines are served from a local
/// origin to headless Chromium (`scripts/cookie-oracle.py accept`, DevTools `Network.getAllCookies`), and the SDK
/// must store exactly the cookies Chromium stored, with the same attributes. The cases are the attacks of the
/// cookie review (public suffixes, prefixes, `SameSite=None` without `Secure`, sizes, counts, far expiries,
/// shadowing a `Secure` cookie from http) and seeded random mixes of attributes.
///
/// Where the SDK differs from Chromium on purpose, the case says so and why (``Case/difference``):
/// - `http://localhost` and `http://127.0.0.1` are secure contexts to Chromium, which then takes `Secure` cookies over
///   plain http; the SDK keeps a `Secure` cookie to https (WebKit on iOS does the same: loopback is not special to
///   its store). The random cases use no loopback host for that reason.
/// - At most 50 cookies from one replay: a bound on what one upstream can plant (Chromium keeps up to 180 per
///   domain, whatever one response sets).
/// - A nameless cookie (`=v` or `v`) is stored by Chromium; the SDK refuses it: it could never travel in the jar,
///   whose names are tokens, and WebKit refuses it too.
/// - Foundation's `HTTPCookie` on Linux keeps no `SameSite`, so the attribute is compared through the SDK's parse
///   of the line (``SetCookie/parse(_:)``), which is what it stores on Apple platforms.
@Suite(.serialized) struct ChromiumCookieOracleTests {
    struct Case {
        var url: String
        var lines: [String]
        var existing: [[String: Any]] = []
        /// Why the SDK stores something else than Chromium here, when it does.
        var difference: String? = nil
    }

    /// A cookie as both sides are compared: what a store holds and a browser sends.
    struct Stored: Hashable, CustomStringConvertible {
        var name: String
        var value: String
        var domain: String
        var hostOnly: Bool
        var path: String
        var secure: Bool
        var httpOnly: Bool
        var sameSite: String?
        var session: Bool
        /// Seconds since 1970; compared apart, within two minutes (the two sides take "now" a moment apart).
        var expires: Double?

        static func == (a: Stored, b: Stored) -> Bool { a.identity == b.identity }
        func hash(into hasher: inout Hasher) { hasher.combine(identity) }
        /// Everything but the expiry.
        var identity: [String] {
            [name, value, domain, "\(hostOnly)", path, "\(secure)", "\(httpOnly)", sameSite ?? "-", "\(session)"]
        }

        var description: String {
            "\(name)=\(value) domain=\(hostOnly ? "" : ".")\(domain) path=\(path)\(secure ? " Secure" : "")"
                + "\(httpOnly ? " HttpOnly" : "") SameSite=\(sameSite ?? "-") \(session ? "session" : "expires@\(Int(expires ?? 0))")"
        }
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Runs the oracle for `question` with `input` (JSON), returning its answers.
    static func oracle(_ question: String, _ input: Any) throws -> [Any] {
        let script = repository.appendingPathComponent("scripts/cookie-oracle.py").path
        let output = try runProcess(
            "/usr/bin/env", ["python3", script, question], input: try JSONSerialization.data(withJSONObject: input))
        let document = try #require(try JSONSerialization.jsonObject(with: output) as? [String: Any], "the oracle answered no JSON")
        return try #require(document["answers"] as? [Any])
    }

    static func chromium(_ cookie: [String: Any]) -> Stored {
        Stored(
            name: cookie["name"] as? String ?? "", value: cookie["value"] as? String ?? "", domain: cookie["domain"] as? String ?? "",
            hostOnly: cookie["hostOnly"] as? Bool ?? true, path: cookie["path"] as? String ?? "",
            secure: cookie["secure"] as? Bool ?? false,
            httpOnly: cookie["httpOnly"] as? Bool ?? false, sameSite: cookie["sameSite"] as? String,
            session: cookie["session"] as? Bool ?? true, expires: cookie["expires"] as? Double)
    }

    /// What the SDK stores from `lines` for a request to `url`, starting from `existing`.
    static func sdk(_ lines: [String], url: String, existing: [HTTPCookie], now: Date) -> [Stored] {
        let taken = SetCookie.cookies(from: lines, for: URL(string: url)!, now: now, existing: existing)
        return taken.compactMap { cookie -> Stored? in
            if let expires = cookie.expiresDate, expires <= now { return nil }  // a deletion, not a cookie
            let line = lines.flatMap(SetCookie.split).first {
                SetCookie.parse($0)?.name == cookie.name && SetCookie.parse($0)?.value == cookie.value
            }
            let sameSite = line.flatMap { SetCookie.parse($0)?.sameSite?.lowercased() }.flatMap {
                ["strict", "lax", "none"].contains($0) ? $0 : nil
            }
            return Stored(
                name: cookie.name, value: cookie.value,
                domain: cookie.domain.hasPrefix(".") ? String(cookie.domain.dropFirst()) : cookie.domain,
                hostOnly: !cookie.domain.hasPrefix("."), path: cookie.path, secure: cookie.isSecure, httpOnly: cookie.isHTTPOnly,
                sameSite: sameSite, session: cookie.isSessionOnly, expires: cookie.expiresDate?.timeIntervalSince1970)
        }
    }

    static func httpCookie(_ cookie: [String: Any]) -> HTTPCookie {
        let hostOnly = cookie["hostOnly"] as? Bool ?? true
        var properties: [HTTPCookiePropertyKey: Any] = [
            .name: cookie["name"]!, .value: cookie["value"]!, .path: cookie["path"] ?? "/",
            .domain: (hostOnly ? "" : ".") + (cookie["domain"] as! String),
        ]
        if cookie["secure"] as? Bool == true { properties[.secure] = "TRUE" }
        if let expires = cookie["expires"] as? Double { properties[.expires] = Date(timeIntervalSince1970: expires) }
        return HTTPCookie(properties: properties)!
    }

    /// The attacks of the cookie review, and the rules each one breaks.
    nonisolated(unsafe) static let attacks: [Case] = [
        Case(url: "https://api.example.co.uk/v1/me", lines: ["sid=1; Domain=co.uk", "a=2; Domain=example.co.uk", "b=3"]),
        Case(url: "https://shop.example.com.cn/", lines: ["sid=1; Domain=com.cn", "c=2; Domain=.example.com.cn"]),
        Case(url: "https://alice.github.io/blog/post", lines: ["sid=1; Domain=github.io", "own=2; Domain=alice.github.io", "d=3"]),
        Case(url: "https://www.example.com/", lines: ["x=1; Domain=example.org", "y=2; Domain=ample.com", "z=3; Domain=www.example.com"]),
        Case(url: "https://www.example.com/", lines: ["__Secure-a=1", "__Secure-b=2; Secure", "__secure-c=3; Secure", "__SECURE-d=4"]),
        Case(url: "http://www.example.com/", lines: ["__Secure-a=1; Secure", "__Secure-b=2"]),
        Case(
            url: "https://www.example.com/a/b",
            lines: [
                "__Host-a=1; Secure; Path=/", "__Host-b=2; Secure", "__Host-c=3; Secure; Path=/; Domain=www.example.com",
                "__Host-d=4; Path=/", "__Host-e=5; Secure; Path=/a", "__host-f=6; Secure; Path=/",
            ]),
        Case(
            url: "https://www.example.com/",
            lines: ["n=1; SameSite=None", "s=2; SameSite=None; Secure", "l=3; SameSite=Lax", "t=4; SameSite=Strict", "u=5; SameSite=bogus"]),
        Case(url: "http://www.example.com/", lines: ["n=1; SameSite=None", "s=2; Secure; SameSite=None", "l=3; samesite=lax"]),
        Case(
            url: "https://www.example.com/",
            lines: ["big=" + String(repeating: "v", count: 4092), "over=" + String(repeating: "v", count: 4093)]),
        Case(
            url: "https://www.example.com/",
            lines: ["p=1; Path=" + String(repeating: "a", count: 1100), "q=2; Domain=" + String(repeating: "a", count: 1100)]),
        Case(
            url: "https://www.example.com/",
            lines: [
                "far=1; Expires=Fri, 31 Dec 9999 23:59:59 GMT", "age=2; Max-Age=999999999", "past=3; Expires=Thu, 01 Jan 1970 00:00:10 GMT",
                "zero=4; Max-Age=0", "neg=5; Max-Age=-5",
            ]),
        Case(
            url: "http://www.example.com/", lines: ["sid=attacker", "other=1"],
            existing: [["name": "sid", "value": "user", "domain": "www.example.com", "secure": true, "path": "/"]]),
        Case(
            url: "http://www.example.com/", lines: ["sid=attacker; Domain=example.com"],
            existing: [["name": "sid", "value": "user", "domain": "www.example.com", "secure": true, "path": "/"]]),
        Case(url: "http://127.0.0.1/x/y", lines: ["ip=1", "ipd=2; Domain=127.0.0.1", "ipo=3; Domain=0.0.1"]),
        Case(url: "https://www.example.com/dir/page", lines: ["d1=1", "d2=2; Path=relative", "d3=3; Path=/", "d4=4; Path=/dir/sub/"]),
        Case(url: "https://www.example.com/", lines: ["h=1; HttpOnly", "w=2; Secure; HttpOnly; SameSite=Strict; Path=/; Max-Age=60"]),
        Case(
            url: "https://www.example.com/",
            lines: ["a=1; Domain=", "b=2; Domain=.", "c=3; Domain=WWW.EXAMPLE.COM", "d=4; Domain=.example.com"]),
        Case(
            url: "https://www.example.com/", lines: ["many=1"] + (0..<60).map { "c\($0)=\($0)" },
            difference:
                "the SDK takes at most 50 cookies from one replay (a bound on what one upstream can plant); Chromium keeps 180 per domain"),
        Case(
            url: "http://localhost/", lines: ["sec=1; Secure"],
            difference: "Chromium takes Secure cookies over http://localhost (a secure context to it); the SDK and WebKit do not"),
        Case(
            url: "https://www.example.com/", lines: ["=nameless", "bare"],
            difference: "the SDK refuses nameless cookies (no jar can carry them)"),
    ]

    /// Seeded random mixes of attributes over hosts on and off public suffixes, http and https.
    static func randomCases(seed: UInt64, count: Int) -> [Case] {
        var state = seed
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let urls = [
            "https://www.example.com/a/b", "http://www.example.com/", "https://example.com/x", "https://a.b.example.com/",
            "https://api.example.co.uk/v1/", "http://alice.github.io/p", "https://shop.example.com.cn/",
        ]
        let names = ["sid", "pref", "__Secure-s", "__Host-h", "__secure-l", "a.b", "x"]
        let domains = [
            "", "example.com", ".example.com", "www.example.com", "co.uk", "example.co.uk", "github.io", "alice.github.io", "com",
            "other.org", "EXAMPLE.com",
        ]
        let paths = ["/", "/a", "/a/b", "a", "/x/"]
        let sameSites = ["None", "Lax", "Strict", "none", "weird"]
        let ages = [
            "Max-Age=0", "Max-Age=120", "Max-Age=40000000", "Max-Age=-1", "Expires=Wed, 01 Jan 2020 00:00:00 GMT",
            "Expires=Fri, 31 Dec 9999 23:59:59 GMT",
        ]
        return (0..<count).map { index in
            let url = urls[next(urls.count)]
            let lines = (0..<(1 + next(3))).map { line -> String in
                var parts = ["\(names[next(names.count)])\(index)-\(line)=v\(next(1000))"]
                if next(2) == 0 { parts.append("Domain=\(domains[next(domains.count)])") }
                if next(2) == 0 { parts.append("Path=\(paths[next(paths.count)])") }
                if next(2) == 0 { parts.append("Secure") }
                if next(3) == 0 { parts.append("HttpOnly") }
                if next(2) == 0 { parts.append("SameSite=\(sameSites[next(sameSites.count)])") }
                if next(3) == 0 { parts.append(ages[next(ages.count)]) }
                return parts.joined(separator: "; ")
            }
            return Case(url: url, lines: lines)
        }
    }

    @Test func theSDKStoresExactlyWhatChromiumStores() throws {
        let seed = ProcessInfo.processInfo.environment["COOKIE_ORACLE_SEED"].flatMap(UInt64.init) ?? UInt64(Date().timeIntervalSince1970)
        let cases = Self.attacks + Self.randomCases(seed: seed, count: 150)
        let input = cases.map { ["url": $0.url, "setCookie": $0.lines, "existing": $0.existing] as [String: Any] }
        let now = Date()
        let answers = try Self.oracle("accept", input)
        #expect(answers.count == cases.count)
        var differences = 0
        for (index, (item, answer)) in zip(cases, answers).enumerated() {
            let existing = item.existing.map(Self.chromium)
            let stored = ((answer as? [[String: Any]]) ?? []).map(Self.chromium).filter { !existing.contains($0) }
            let expected = Set(stored)
            let sdk = Set(Self.sdk(item.lines, url: item.url, existing: item.existing.map(Self.httpCookie), now: now))
            if let difference = item.difference {
                #expect(expected != sdk, "case \(index) is named a difference (\(difference)) but the SDK now agrees with Chromium")
                differences += 1
                continue
            }
            #expect(
                expected == sdk,
                """
                case \(index) (seed \(seed)): \(item.url) \(item.lines)
                  Chromium only: \(expected.subtracting(sdk).map(\.description))
                  SDK only:      \(sdk.subtracting(expected).map(\.description))
                """)
            for cookie in expected {
                guard let theirs = cookie.expires, let ours = sdk.first(where: { $0 == cookie })?.expires else { continue }
                #expect(
                    abs(theirs - ours) <= 120, "case \(index) (seed \(seed)): \(cookie.name) expires at \(ours), Chromium says \(theirs)")
            }
        }
        #expect(differences == 3)
    }

    /// The SDK's jar against what Chromium sends. The SDK puts in a trigger's jar every cookie of the webview's store
    /// that a browser would send to one of the configured api URLs and leaves the choice per request and page to the
    /// service (whose choice `ChromiumCookieSelectionTests` compares with Chromium's in the main package). So the jar
    /// must be exactly the cookies Chromium sends to each api URL when asked the most it ever sends there (a fetch
    /// from a page on the api's own origin, where `SameSite` holds nothing back): every one of them (none missing,
    /// so the service can choose) and nothing else (no cookie of another host, another path, expired, or `Secure`
    /// for an http api).
    @Test func theSDKsJarHoldsExactlyWhatChromiumSendsToTheAPIs() throws {
        let seed = ProcessInfo.processInfo.environment["COOKIE_ORACLE_SEED"].flatMap(UInt64.init) ?? UInt64(Date().timeIntervalSince1970)
        var state = seed
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let hosts = ["api.example.com", "example.com", "www.example.com", "a.b.example.com", "api.shop.test", "other.org"]
        let paths = ["/", "/v1", "/v1/", "/v1/orders", "/w"]
        let sameSites: [String?] = ["none", "lax", "strict", nil]
        let now = Date()
        // Fixed first: an api URL ending in a slash (`URL.path` drops it; a browser matches paths as requested).
        let slash: [[String: Any]] = [
            ["name": "slash", "value": "1", "domain": "api.example.com", "hostOnly": true, "path": "/v1/", "secure": false],
            ["name": "longer", "value": "2", "domain": "example.com", "hostOnly": false, "path": "/v1/x", "secure": false],
        ]
        let cases =
            [(store: slash, apis: ["https://api.example.com/v1/"])]
            + (0..<40).map { index -> (store: [[String: Any]], apis: [String]) in
                let store = (0..<(1 + next(8))).map { number -> [String: Any] in
                    let sameSite = sameSites[next(sameSites.count)]
                    var cookie: [String: Any] = [
                        "name": "c\(index)x\(number)", "value": "v\(number)", "domain": hosts[next(hosts.count)], "hostOnly": next(2) == 0,
                        "path": paths[next(paths.count)], "secure": sameSite == "none" || next(3) == 0,
                    ]
                    if let sameSite { cookie["sameSite"] = sameSite }
                    switch next(6) {
                    case 0: cookie["expires"] = now.timeIntervalSince1970 - 3600  // expired: neither sends it
                    case 1: cookie["expires"] = now.timeIntervalSince1970 + 86400
                    default: break
                    }
                    return cookie
                }
                let apis = (0..<(1 + next(3))).map { _ in
                    "\(next(3) == 0 ? "http" : "https")://\(hosts[next(hosts.count - 1)])\(paths[next(paths.count)])"
                }
                return (store, apis)
            }
        // One oracle question per api URL: a page on its origin fetches it.
        var questions: [[String: Any]] = []
        for item in cases {
            for api in item.apis {
                let url = URL(string: api)!
                questions.append(["jar": item.store, "page": "\(url.scheme!)://\(url.host!)/", "targets": [api]])
            }
        }
        let answers = try Self.oracle("send", questions)
        #expect(answers.count == questions.count)
        var answer = answers.makeIterator()
        var withCookies = 0
        var leftOnDevice = 0
        for (index, item) in cases.enumerated() {
            var chromium = Set<String>()
            for api in item.apis {
                let header = (answer.next() as? [String: Any])?[api] as? String
                for pair in (header ?? "").split(separator: ";") {
                    chromium.insert(String(pair.split(separator: "=")[0]).trimmingCharacters(in: .whitespaces))
                }
            }
            let apis = item.apis.map { URL(string: $0)! }
            let jar = CookieMatching.jarCookies(CookieMatching.sentCookies(item.store.map(Self.httpCookie), apis: apis, now: now))
            let sdk = Set(jar.map(\.name))
            let differing = item.store.filter { chromium.symmetricDifference(sdk).contains($0["name"] as! String) }
            #expect(
                sdk == chromium,
                """
                case \(index) (seed \(seed)): apis \(item.apis)
                  Chromium sent but not in the jar: \(chromium.subtracting(sdk).sorted())
                  in the jar, never sent by Chromium: \(sdk.subtracting(chromium).sorted())
                  those cookies: \(differing)
                """)
            if !chromium.isEmpty { withCookies += 1 }
            leftOnDevice += item.store.count - chromium.count
        }
        // Not vacuous: many jars had cookies, and many cookies stayed on the device.
        #expect(withCookies >= 10 && leftOnDevice >= 40, "\(withCookies) cases with cookies, \(leftOnDevice) cookies left out")
    }
}
