import Foundation
import Testing

@testable import PrefetchShell

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The SDK against the real service: `prefetch serve` and the test upstream as processes on 127.0.0.1.
///
/// The page `http://127.0.0.1/profile` has two interfaces on the upstream, under two host names: `user.info`
/// on 127.0.0.1 answers the mirror (the cookies it received, so each user's answer is their own), `prefs` on
/// `localhost` sets cookies. Both send the caller's credentials (`credentials: include`; the page is on
/// `127.0.0.1`, so only `user.info` is on its site and gets its cookies).
@Suite(.serialized) struct LiveShellTests {
    static let page = URL(string: "http://127.0.0.1/profile?id=7")!
    static let pageOrigin = "http://127.0.0.1"
    static let expires = "Wed, 09 Jun 2060 10:18:14 GMT"

    static func userInfoAPI(_ upstream: Int) -> String { "http://127.0.0.1:\(upstream)/user/info?mirror=1" }

    static func prefsAPI(_ upstream: Int) -> String {
        let cookies = [
            "theme=dark; Path=/; HttpOnly; Max-Age=600", "lang=de; Domain=localhost; Expires=\(expires)", "evil=1; Domain=example.com",
        ]
        let query = cookies.map { "setCookie=" + $0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }.joined(separator: "&")
        return "http://localhost:\(upstream)/prefs/get?\(query)"
    }

    static func config(_ upstream: Int) -> String {
        let interfaces = [
            ["name": "user.info", "api": userInfoAPI(upstream), "method": "GET", "credentials": "include"],
            ["name": "prefs", "api": prefsAPI(upstream), "method": "GET", "credentials": "include"],
        ]
        let document: [String: Any] = [
            "code": 200,
            "data": ["name": "shell", "version": "1", "config": [["url": "http://127.0.0.1/profile", "interfaces": interfaces]]],
        ]
        return String(decoding: try! JSONSerialization.data(withJSONObject: document), as: UTF8.self)
    }

    static func shell(_ service: LiveService, profile: String? = nil) -> PrefetchShell {
        PrefetchShell(
            configuration: PrefetchShellConfiguration(
                service: service.base,
                apiURLs: [
                    URL(string: "http://127.0.0.1:\(service.upstreamPort)/user")!,
                    URL(string: "http://localhost:\(service.upstreamPort)/")!,
                ],
                rendererProfile: profile, budgets: .init(pageOpen: .seconds(3), cookieSync: .seconds(5))))
    }

    static func cookie(_ name: String, _ value: String, domain: String, path: String = "/") -> HTTPCookie {
        HTTPCookie(properties: [.name: name, .value: value, .domain: domain, .path: path])!
    }

    /// A user's cookies in the shell: their session for the upstream's two hosts, and cookies of other sites.
    static func jar(_ user: String) -> [HTTPCookie] {
        [
            cookie("sid", user, domain: "127.0.0.1"), cookie("lang", "en", domain: "localhost"),
            cookie("ads", "tracking-\(user)", domain: ".ads.example"), cookie("bank", "secret-\(user)", domain: "bank.example"),
        ]
    }

    /// The page's own read, as `client.js` makes it with the key the shell handed over: `GET /v1/data` with the key
    /// in `X-Prefetch-Key`, from the page's origin.
    static func pageRead(
        _ service: LiveService, api: String, key: String
    ) async throws -> (status: Int, headers: [String: String], body: String) {
        let query = "api=" + api.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&wait=3000"
        let url = URL(string: "\(service.base.absoluteString)/v1/data?\(query)")!
        let answer = try await fetch(url, headers: ["X-Prefetch-Key": key, "Origin": pageOrigin])
        return (answer.status, answer.headers, String(decoding: answer.body, as: UTF8.self))
    }

    @Test func thePageListenerServesThePackagesCopyOfTheDocument() async throws {
        let copy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/PrefetchShellAPI/openapi.yaml")
        try await withLiveService(config: Self.config) { service in
            let served = try await fetch(service.base.appendingPathComponent("openapi.yaml"))
            #expect(served.status == 200)
            let ours = try Data(contentsOf: copy)
            if served.body != ours {
                let servedLines = String(decoding: served.body, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
                let ourLines = String(decoding: ours, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
                let line = Array(zip(servedLines, ourLines)).firstIndex { $0 != $1 } ?? min(servedLines.count, ourLines.count)
                Issue.record(
                    """
                    The page listener's /openapi.yaml differs from the client's copy at line \(line + 1), so the generated client \
                    no longer matches the service: copy it over (curl \(service.base)/openapi.yaml > Clients/PrefetchShell/Sources/PrefetchShellAPI/openapi.yaml, \
                    or from the server's Sources/PageAPI/Resources), run scripts/generate-shell-api.sh and fix what the regenerated client breaks.
                    """)
            }
        }
    }

    @Test func aUsersPageReadsItsOwnDataWithTheKeyTheShellHandedOver() async throws {
        try await withLiveService(config: Self.config) { service in
            let shell = Self.shell(service)
            let open = await shell.pageWillOpen(Self.page, cookies: Self.jar("alice"))
            #expect(open.outcome == .triggered)
            let key = try #require(open.readKey)
            #expect(open.ticket != nil && open.interfaces.map(\.name) == ["user.info", "prefs"])

            let script = try #require(await shell.documentStartScript(for: open))
            #expect(try JavaScriptLiterals.strings(in: script) == [Self.pageOrigin, Self.pageOrigin, key])

            let read = try await Self.pageRead(service, api: Self.userInfoAPI(service.upstreamPort), key: key)
            #expect(read.status == 200)
            #expect(["hit", "joined"].contains(read.headers["x-prefetch"]))
            let mirror = try #require(try JSONSerialization.jsonObject(with: Data(read.body.utf8)) as? [String: String])
            // The upstream (127.0.0.1) got the user's cookie for its own host only: not `localhost`'s `lang`, which
            // the shell also holds for a configured api host, and no cookie of another site.
            #expect(mirror["cookie"] == "sid=alice")

            let counters = await shell.counters
            #expect(counters.triggersSent == 1 && counters.triggersAccepted == 1 && counters.readKeysHandedOver == 1)
        }
    }

    @Test func aSecondUsersShellGetsNothingOfTheFirsts() async throws {
        try await withLiveService(config: Self.config) { service in
            let alice = Self.shell(service)
            let bob = Self.shell(service)
            let aliceOpen = await alice.pageWillOpen(Self.page, cookies: Self.jar("alice"))
            let bobOpen = await bob.pageWillOpen(Self.page, cookies: Self.jar("bob"))
            let api = Self.userInfoAPI(service.upstreamPort)

            let bobRead = try await Self.pageRead(service, api: api, key: try #require(bobOpen.readKey))
            #expect(bobRead.status == 200 && bobRead.body.contains("sid=bob") && !bobRead.body.contains("alice"))

            // Bob's credentials on Alice's ticket: the service refuses the reads, so no cookie of hers reaches him.
            let stolen = PageOpen(
                page: aliceOpen.page, outcome: aliceOpen.outcome, ticket: aliceOpen.ticket, readKey: nil, readKeyExpiresAt: nil,
                interfaces: aliceOpen.interfaces, renderer: nil, rendererError: nil, credentials: bobOpen.credentials)
            #expect(await bob.cookiesToSync(for: stolen).isEmpty)
            #expect(await !alice.cookiesToSync(for: aliceOpen).isEmpty)

            // Bob's logout drops his responses only.
            let bobLogout = await bob.logout(cookies: Self.jar("bob"))
            #expect(bobLogout.identities == 1 && bobLogout.failed == 0 && bobLogout.dropped >= 1)
            let bobAfter = try await Self.pageRead(service, api: api, key: try #require(bobOpen.readKey))
            #expect(bobAfter.status == 404 && bobAfter.headers["x-prefetch-reason"] == "invalidated")
            let aliceRead = try await Self.pageRead(service, api: api, key: try #require(aliceOpen.readKey))
            #expect(aliceRead.status == 200 && aliceRead.body.contains("sid=alice"))

            let aliceLogout = await alice.logout(cookies: Self.jar("alice"))
            #expect(aliceLogout.failed == 0 && aliceLogout.dropped >= 1)
            let aliceAfter = try await Self.pageRead(service, api: api, key: try #require(aliceOpen.readKey))
            #expect(aliceAfter.status == 404 && aliceAfter.headers["x-prefetch-reason"] == "invalidated")
        }
    }

    @Test func cookiesTheUpstreamSetComeBackKeyedByTheRequestsHostName() async throws {
        try await withLiveService(config: Self.config) { service in
            let shell = Self.shell(service)
            let open = await shell.pageWillOpen(Self.page, cookies: Self.jar("carol"))
            let cookies = await shell.cookiesToSync(for: open)
            let byName = Dictionary(cookies.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            #expect(Set(byName.keys) == ["theme", "lang"], "the cookie for example.com is dropped: \(cookies)")
            let theme = try #require(byName["theme"])
            #expect(theme.domain == "localhost" && theme.path == "/" && theme.isHTTPOnly && !theme.isSecure)
            #expect(try #require(theme.expiresDate).timeIntervalSinceNow > 500)
            let lang = try #require(byName["lang"])
            // `Domain=localhost` is the host itself, a single label: a host-only cookie of it; the path is the request's directory.
            #expect(lang.domain == "localhost" && lang.path == "/prefs" && !lang.isHTTPOnly)
            // Its `Expires` in 2060 is capped at 400 days, as browsers cap it.
            let lifetime = try #require(lang.expiresDate).timeIntervalSinceNow
            #expect(lifetime <= SetCookie.maximumLifetime && lifetime > SetCookie.maximumLifetime - 3_600)
        }
    }

    /// The service's answer names each interface's host; a shell syncs cookies only for the api hosts it was
    /// configured with, whatever the answer names: here `localhost`'s cookies are not this shell's to set.
    @Test func cookiesOfAHostOutsideTheConfiguredAPIsAreNeverSynced() async throws {
        try await withLiveService(config: Self.config) { service in
            let shell = PrefetchShell(
                configuration: PrefetchShellConfiguration(
                    service: service.base, apiURLs: [URL(string: "http://127.0.0.1:\(service.upstreamPort)/user")!],
                    budgets: .init(pageOpen: .seconds(3), cookieSync: .seconds(5))))
            let open = await shell.pageWillOpen(Self.page, cookies: Self.jar("dave"))
            #expect(open.ticket != nil && open.interfaces.contains { $0.name == "prefs" })
            #expect(await shell.cookiesToSync(for: open).isEmpty, "the prefs interface is on localhost, not a configured api host")
        }
    }

    /// An interface fetched without the user's credentials that answers `Set-Cookie: sid=guest-session` (a guest
    /// session) syncs nothing: the signed-in user's `sid` stays. The credentialed interface's cookie is synced.
    @Test func aCredentiallessFetchsCookieNeverReplacesTheUsersSession() async throws {
        func config(_ upstream: Int) -> String {
            let guest = "setCookie=" + "sid=guest-session; Path=/".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let own = "setCookie=" + "theme=dark; Path=/".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let interfaces = [
                ["name": "guest", "api": "http://localhost:\(upstream)/guest/start?\(guest)", "method": "GET", "credentials": "omit"],
                ["name": "prefs", "api": "http://localhost:\(upstream)/prefs/own?\(own)", "method": "GET", "credentials": "include"],
            ]
            let document: [String: Any] = [
                "code": 200,
                "data": [
                    "name": "shell", "version": "1", "config": [["url": "http://127.0.0.1/profile", "interfaces": interfaces]],
                ],
            ]
            return String(decoding: try! JSONSerialization.data(withJSONObject: document), as: UTF8.self)
        }
        try await withLiveService(config: config) { service in
            let shell = Self.shell(service)
            let open = await shell.pageWillOpen(Self.page, cookies: [Self.cookie("sid", "alice-session", domain: "localhost")])
            #expect(open.ticket != nil, "\(open.outcome)")
            let names = await shell.cookiesToSync(for: open).map { "\($0.name)=\($0.value)" }
            #expect(names == ["theme=dark"], "\(names)")
        }
    }

    /// With a profile the shell opens through `POST /v1/open`: the generated client decodes the service's real answers,
    /// a null error half beside each value, a null renderer beside a prefetch, and a null prefetch beside a renderer.
    @Test func anOpenWithARendererProfileLeasesOneAndReleasesIt() async throws {
        try await withLiveService(config: Self.config) { service in
            let shell = Self.shell(service, profile: "main")
            let open = await shell.pageWillOpen(Self.page, cookies: Self.jar("dave"))
            #expect(open.outcome == .triggered && open.readKey != nil)
            let lease = try #require(open.renderer, "renderer error: \(open.rendererError ?? "none")")
            #expect(lease.profile == "main")
            #expect(await shell.releaseRenderer(lease))
            #expect(await !shell.releaseRenderer(lease), "a lease is released once")

            let unknown = await Self.shell(service, profile: "no-such-profile").pageWillOpen(Self.page, cookies: [])
            #expect(unknown.outcome == .triggered && unknown.renderer == nil && unknown.rendererError == "unknown-profile")
            let unconfigured = await shell.pageWillOpen(URL(string: "http://127.0.0.1/elsewhere")!, cookies: [])
            #expect(unconfigured.outcome == .refused(code: "no-config") && unconfigured.readKey == nil)
            let other = try #require(unconfigured.renderer, "a page without a config entry still gets its renderer")
            #expect(await shell.releaseRenderer(other))
        }
    }

    @Test func aPageNotInTheConfigIsRefusedAndTheBreakerStaysClosed() async throws {
        try await withLiveService(config: Self.config) { service in
            let shell = Self.shell(service)
            for _ in 0..<4 {
                let open = await shell.pageWillOpen(URL(string: "http://127.0.0.1/unknown")!, cookies: Self.jar("erin"))
                #expect(open.outcome == .refused(code: "no-config"))
                #expect(await shell.documentStartScript(for: open) == nil)
            }
            #expect(await shell.breakerState == .closed)
            #expect(await shell.counters.triggersRefused == 4)
        }
    }

    @Test func aStoppedServiceLeavesThePageOpenWithinItsBudgetAndOpensTheBreaker() async throws {
        let port = try await withLiveService(config: Self.config) { $0.port }
        let service = LiveService(port: port, upstreamPort: 1)
        try await Self.checkFailingOpen(service, expected: .unreachable)
    }

    @Test func aServiceThatNeverAnswersLeavesThePageOpenWithinItsBudgetAndOpensTheBreaker() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        try await Self.checkFailingOpen(LiveService(port: listener.port, upstreamPort: 1), expected: .timeout)
    }

    @Test func aRedirectIsNotFollowedWithTheUsersCookies() async throws {
        let elsewhere = try ScriptedResponder(response: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        defer { elsewhere.close() }
        let redirecting = try ScriptedResponder(
            response: "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:\(elsewhere.port)/v1/invalidate\r\n"
                + "Content-Length: 0\r\nConnection: close\r\n\r\n")
        defer { redirecting.close() }
        let shell = PrefetchShell(
            configuration: PrefetchShellConfiguration(
                service: URL(string: "http://127.0.0.1:\(redirecting.port)")!, apiURLs: [URL(string: "http://127.0.0.1/")!],
                budgets: .init(pageOpen: .seconds(5), logout: .seconds(5))))
        let cookies = [Self.cookie("sid", "grace", domain: "127.0.0.1")]
        let open = await shell.pageWillOpen(Self.page, cookies: cookies)
        #expect(open.outcome == .refused(code: "status-307"))
        let logout = await shell.logout(cookies: cookies)
        #expect(logout.failed == 1)
        #expect(redirecting.requests.count == 2)
        #expect(redirecting.requests.last?.contains("Cookie: sid=grace") == true)
        #expect(elsewhere.requests.isEmpty, "a redirect was followed: \(elsewhere.requests)")
        // No request of the shell carries an Origin: the service takes it for a native shell's.
        #expect(redirecting.requests.allSatisfy { !$0.lowercased().contains("\norigin:") })
    }

    /// Three page opens against a service that fails: each returns within its budget (plus scheduling slack),
    /// failed; then the breaker is open and the next open is skipped without a call.
    static func checkFailingOpen(_ service: LiveService, expected: PrefetchShellFailure) async throws {
        let budget = Duration.seconds(1)
        let shell = PrefetchShell(
            configuration: PrefetchShellConfiguration(
                service: service.base, apiURLs: [URL(string: "http://127.0.0.1/")!], budgets: .init(pageOpen: budget),
                breaker: .init(failureThreshold: 3, coolDown: .seconds(600))))
        let cookies = [cookie("sid", "frank", domain: "127.0.0.1")]
        for _ in 0..<3 {
            let started = ContinuousClock.now
            let open = await shell.pageWillOpen(Self.page, cookies: cookies)
            let took = ContinuousClock.now - started
            #expect(open.outcome == .failed(expected))
            #expect(open.readKey == nil && open.ticket == nil)
            #expect(took < budget + .seconds(2), "pageWillOpen took \(took)")
        }
        #expect(await shell.breakerState == .open)
        let skipped = await shell.pageWillOpen(Self.page, cookies: cookies)
        #expect(skipped.outcome == .skipped)
        #expect(await shell.cookiesToSync(for: skipped).isEmpty)
        let counters = await shell.counters
        #expect(
            counters.triggersSent == 3 && counters.triggersFailed == 3 && counters.skippedByBreaker == 1 && counters.breakerOpenings == 1)
    }
}
