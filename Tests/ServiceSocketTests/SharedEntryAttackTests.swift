import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

#if canImport(Glibc)
import Glibc
#endif

/// What reaches an upstream for an entry others may read, what others read of it, and what the page listener tells
/// anyone: attacks through real sockets on `prefetch serve` processes, against an upstream that reflects every
/// request header into its body (the test upstream's echo). Each test names its SECURITY.md promise.
@Suite("security: shared entries, redaction, the demo, caching", .serialized, .timeLimit(.minutes(2)))
struct SharedEntryAttackTests {
    /// A page on another site than its upstream: no interface sends credentials unless it says `include`.
    static let page = "https://m.example.test/shared"

    static func config(_ base: String) -> TestConfig {
        TestConfig([
            TestPage(
                page,
                [
                    TestInterface(name: "echo", api: "\(base)/shared/echo"),
                    TestInterface(name: "mine", api: "\(base)/shared/mine", credentials: .include),
                    TestInterface(name: "refused", api: "\(base)/shared/refused?status=400"),
                    TestInterface(name: "headers", api: "\(base)/shared/headers?status=431"),
                    TestInterface(name: "marked", api: "\(base)/shared/marked?status=409"),
                ])
        ])
    }

    func withServe(_ arguments: [String] = [], _ body: @Sendable (ServeProcess, TestUpstream) async throws -> Void) async throws {
        try await withServeProcess(config: Self.config, arguments: arguments, body)
    }

    func trigger(_ server: ServeProcess, _ url: String, headers: [String: String] = [:]) async throws -> String {
        let reply = try await oneRequest(port: server.port, .post, "/v1/prefetch", headers: headers, body: #"{"url": "\#(url)"}"#)
        #expect(reply.status == 202, "\(reply.text)")
        return try reply.decoded(TriggerAnswer.self).ticket
    }

    // MARK: 1. What reaches an upstream for a shared entry is made from its key alone

    /// SECURITY.md: an anonymous attacker's trigger carries `traceparent`, `tracestate` and headers of its own; the
    /// shared entry its page open stores holds none of them, so the next visitor's trigger and read (a hit) get
    /// nothing of the attacker's, as a direct fetch of their own would.
    @Test func anAttackersTraceAndHeadersNeverReachTheNextVisitorsEntry() async throws {
        try await withServe { server, _ in
            let attackerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
            let attacker = try await trigger(
                server, Self.page + "?v=1",
                headers: [
                    "traceparent": "00-\(attackerTrace)-00f067aa0ba902b7-01", "tracestate": "mallory=<script>steal()</script>",
                    "X-Forwarded-For": "6.6.6.6", "X-Api-Version": "attacker-chosen", "Accept-Language": "xx-MALLORY",
                ])
            let own = try await server.get("/v1/prefetch/\(attacker)/data?name=echo&wait=5000")
            #expect(own.status == 200, "\(own.text)")
            // The victim: a trigger of its own, then a read that the store answers.
            let victim = try await trigger(server, Self.page + "?v=1")
            for read in ["/v1/prefetch/\(victim)/data?name=echo&wait=5000", "/v1/data?page=\(q(Self.page + "?v=1"))&name=echo&wait=5000"] {
                let reply = try await server.get(read)
                #expect(reply.status == 200, "\(read): \(reply.text)")
                #expect(reply.header("X-Prefetch") == "hit" || reply.header("X-Prefetch") == "joined", "\(read) was not served")
                for planted in ["mallory", attackerTrace, "6.6.6.6", "attacker-chosen", "xx-MALLORY"] {
                    #expect(!reply.text.contains(planted), "\(read) served the attacker's \(planted): \(reply.text)")
                }
                let echo = Echo(reply)
                #expect(echo.values("tracestate").isEmpty)
                let traceparent = try #require(echo.values("traceparent").first.flatMap(TraceParent.init(header:)))
                #expect(traceparent.traceID != attackerTrace, "a shared flight is a trace of the service's own")
            }
        }
    }

    /// SECURITY.md: a signed-in user's trace (a tenant in `tracestate`) is continued only by the requests keyed by
    /// that user; the shared one of the same page open carries none of it, and the next user reads none of it.
    @Test func aUsersTraceStaysOnTheUsersOwnEntries() async throws {
        try await withServe { server, _ in
            let trace = "0af7651916cd43dd8448eb211c80319c"
            let ticket = try await trigger(
                server, Self.page + "?v=2",
                headers: [
                    "Authorization": "Bearer alice", "traceparent": "00-\(trace)-b7ad6b7169203331-01", "tracestate": "vendor=tenant-alice",
                ])
            let mine = try await server.get("/v1/prefetch/\(ticket)/data?name=mine&wait=5000", headers: ["Authorization": "Bearer alice"])
            #expect(mine.status == 200, "\(mine.text)")
            #expect(Echo(mine).values("tracestate") == ["vendor=tenant-alice"])
            // Each replay says whether its request carried the caller's credentials (what a shell may sync cookies from).
            #expect(mine.header("X-Prefetch-Credentials") == "sent")
            #expect(Echo(mine).values("traceparent").first?.hasPrefix("00-\(trace)-") == true)
            let shared = try await server.get("/v1/prefetch/\(ticket)/data?name=echo&wait=5000", headers: ["Authorization": "Bearer alice"])
            #expect(shared.status == 200, "\(shared.text)")
            #expect(!shared.text.contains("tenant-alice") && !shared.text.contains(trace), "\(shared.text)")
            #expect(shared.header("X-Prefetch-Credentials") == "omitted")
            let bob = try await server.get(
                "/v1/data?page=\(q(Self.page + "?v=2"))&name=echo&wait=5000", headers: ["Authorization": "Bearer bob"])
            #expect(!bob.text.contains("tenant-alice") && !bob.text.contains(trace), "\(bob.text)")
        }
    }

    // MARK: Cookies as a jar

    /// SECURITY.md: with the user's cookies as a jar, each upstream request carries only the cookies a browser would
    /// send to its URL from the page: the `127.0.0.1` bank session never reaches the `localhost` upstream, a
    /// `Secure` cookie never goes over http, a cookie scoped to another path stays back, and to an upstream on
    /// another site than the page only `SameSite=None` cookies go (absent counts as `Lax`); the ticket is entitled
    /// by the whole jar.
    @Test(arguments: [false, true]) func aJarsCookiesReachOnlyTheHostsTheyBelongTo(thirdParty: Bool) async throws {
        let page = "https://m.example.test/jar"
        try await withServeProcess(
            config: { base in
                let other = base.replacingOccurrences(of: "127.0.0.1", with: "localhost")
                return TestConfig([
                    TestPage(
                        page,
                        [
                            TestInterface(name: "prefs", api: "\(other)/jar/prefs", credentials: .include),
                            TestInterface(name: "account", api: "\(base)/jar/account", credentials: .include),
                        ]),
                    TestPage(
                        "http://localhost/jar/home",
                        [TestInterface(name: "prefs", api: "\(other)/jar/prefs", credentials: .include)]),
                ])
            }, arguments: thirdParty ? ["--third-party-cookies"] : []
        ) { server, _ in
            let jar = #"""
                [{"name": "bank", "value": "secret-session", "domain": "127.0.0.1", "hostOnly": true, "path": "/", "sameSite": "none"},
                 {"name": "lang", "value": "en", "domain": "localhost", "hostOnly": true, "sameSite": "none"},
                 {"name": "vault", "value": "only-https", "domain": "localhost", "secure": true, "sameSite": "none"},
                 {"name": "admin", "value": "elsewhere", "domain": "localhost", "path": "/admin", "sameSite": "none"},
                 {"name": "old", "value": "gone", "domain": "localhost", "expires": 1000, "sameSite": "none"},
                 {"name": "csrf", "value": "lax-only", "domain": "localhost"},
                 {"name": "strict", "value": "same-site-only", "domain": "localhost", "sameSite": "strict"}]
                """#
            let trigger = try await oneRequest(
                port: server.port, .post, "/v1/prefetch", body: #"{"url": "\#(page)", "cookies": \#(jar)}"#)
            #expect(trigger.status == 202, "\(trigger.text)")
            let ticket = try trigger.decoded(TriggerAnswer.self).ticket
            let whole = [
                "Cookie": "bank=secret-session; lang=en; vault=only-https; admin=elsewhere; old=gone; csrf=lax-only; strict=same-site-only"
            ]
            let prefs = try await server.get("/v1/prefetch/\(ticket)/data?name=prefs&wait=5000", headers: whole)
            #expect(prefs.status == 200, "\(prefs.status) \(prefs.text)")
            // The page is on another site than both upstreams: without third-party cookies (a WKWebView, an Android
            // WebView by default, Chromium as shipped) no cookie goes; with them, only each host's SameSite=None ones.
            #expect(
                Echo(prefs).values("Cookie") == (thirdParty ? ["lang=en"] : []),
                "the localhost upstream received \(Echo(prefs).values("Cookie"))")
            let account = try await server.get("/v1/prefetch/\(ticket)/data?name=account&wait=5000", headers: whole)
            #expect(Echo(account).values("Cookie") == (thirdParty ? ["bank=secret-session"] : []))
            // From a page on the upstream's own site, Lax and Strict cookies go too.
            let home = try await oneRequest(
                port: server.port, .post, "/v1/prefetch", body: #"{"url": "http://localhost/jar/home", "cookies": \#(jar)}"#)
            #expect(home.status == 202, "\(home.text)")
            let sameSite = try await server.get(
                "/v1/prefetch/\(try home.decoded(TriggerAnswer.self).ticket)/data?name=prefs&wait=5000", headers: whole)
            #expect(Echo(sameSite).values("Cookie") == ["lang=en; csrf=lax-only; strict=same-site-only"], "\(sameSite.text)")
            // A SameSite value no browser stores is refused, naming the member.
            let odd = try await oneRequest(
                port: server.port, .post, "/v1/prefetch",
                body: #"{"url": "\#(page)", "cookies": [{"name": "a", "value": "1", "domain": "localhost", "sameSite": "sometimes"}]}"#)
            #expect(odd.status == 400 && odd.text.contains("cookies[0].sameSite"), "\(odd.text)")
            // Another user's cookies do not open the ticket.
            #expect(try await server.get("/v1/prefetch/\(ticket)/data?name=prefs", headers: ["Cookie": "lang=en"]).status == 403)
            // A cookie that cannot travel in a Cookie header (a name that is no token, a semicolon in the value) is left
            // out, never the whole jar refused: one odd cookie a sibling site planted must not cost the user every open.
            let oddNames =
                #"[{"name": "a b", "value": "1", "domain": "localhost"}, {"name": "c", "value": "x;y", "domain": "localhost"}, {"name": "lang", "value": "en", "domain": "localhost"}]"#
            let tolerated = try await oneRequest(
                port: server.port, .post, "/v1/prefetch", body: #"{"url": "\#(page)?odd=1", "cookies": \#(oddNames)}"#)
            #expect(tolerated.status == 202, "\(tolerated.text)")
            // A null member is refused, not read as a default (a null hostOnly must not widen a cookie to a domain).
            let null = try await oneRequest(
                port: server.port, .post, "/v1/prefetch",
                body: #"{"url": "\#(page)", "cookies": [{"name": "a", "value": "1", "domain": "localhost", "hostOnly": null}]}"#)
            #expect(null.status == 400 && null.text.contains("cookies[0].hostOnly"), "\(null.text)")
            // A malformed jar is refused, naming the member.
            let bad = try await oneRequest(
                port: server.port, .post, "/v1/prefetch", body: #"{"url": "\#(page)", "cookies": [{"name": "a", "value": "1"}]}"#)
            #expect(bad.status == 400 && bad.text.contains("cookies[0].domain"), "\(bad.text)")
        }
    }

    /// SECURITY.md: without a jar, a single `Cookie` header is the page's own host's cookies: it reaches an upstream
    /// on that host, never one on another host (even with `credentials: include`), and never plain http from an
    /// https page. `Authorization` keeps its interface's rule.
    @Test func aSingleCookieHeaderReachesOnlyThePagesOwnHost() async throws {
        try await withServeProcess(
            config: { base in
                let other = base.replacingOccurrences(of: "127.0.0.1", with: "localhost")
                let port = base.split(separator: ":").last.map(String.init) ?? ""
                return TestConfig([
                    TestPage(
                        "http://127.0.0.1:\(port)/single",
                        [
                            TestInterface(name: "own", api: "\(base)/single/own"),
                            TestInterface(name: "other", api: "\(other)/single/other", credentials: .include),
                        ]),
                    TestPage(
                        "https://127.0.0.1:\(port)/single-tls",
                        [TestInterface(name: "plain", api: "\(base)/single/plain", credentials: .include)]),
                ])
            }
        ) { server, upstream in
            let headers = ["Cookie": "bank=secret-session", "Authorization": "Bearer alice"]
            let page = "http://127.0.0.1:\(upstream.port)/single"
            let ticket = try await trigger(server, page, headers: headers)
            let own = try await server.get("/v1/prefetch/\(ticket)/data?name=own&wait=5000", headers: headers)
            #expect(Echo(own).values("Cookie") == ["bank=secret-session"], "\(own.text)")
            let other = try await server.get("/v1/prefetch/\(ticket)/data?name=other&wait=5000", headers: headers)
            #expect(other.status == 200, "\(other.text)")
            #expect(Echo(other).values("Cookie").isEmpty, "the localhost upstream received \(Echo(other).values("Cookie"))")
            #expect(Echo(other).values("Authorization") == ["Bearer alice"])
            let tls = try await trigger(server, "https://127.0.0.1:\(upstream.port)/single-tls", headers: headers)
            let plain = try await server.get("/v1/prefetch/\(tls)/data?name=plain&wait=5000", headers: headers)
            #expect(plain.status == 200, "\(plain.text)")
            #expect(Echo(plain).values("Cookie").isEmpty, "an https page's cookies went over plain http: \(plain.text)")
        }
    }

    /// SECURITY.md: every `Set-Cookie` a shell gets is one the upstream sent as such. A shell's transport joins
    /// repeated headers with commas and the SDK splits them back at `, name=`; an upstream line holding such a comma
    /// (`pref=en, sid=attacker; Path=/`: one cookie to a browser) would come out as a second cookie, `sid`, planted
    /// over the user's session. Such a line is never replayed; the others (an `Expires` date's comma too) are.
    @Test func aSetCookieLineAShellWouldSplitIsNeverReplayed() async throws {
        let page = "https://m.example.test/split"
        let planted = "pref=en, sid=attacker; Path=/"
        let dated = "lang=en; Expires=Wed, 01 Jan 2031 00:00:00 GMT; Path=/"
        try await withServeProcess(config: { base in
            TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(
                            name: "cookies",
                            api: "\(base)/split/cookies?setCookie=\(q(planted))&setCookie=\(q(dated))&setCookie=\(q("ok=1"))")
                    ])
            ])
        }) { server, _ in
            let ticket = try await trigger(server, page)
            let replay = try await server.get("/v1/prefetch/\(ticket)/data?name=cookies&wait=5000")
            #expect(replay.status == 200, "\(replay.text)")
            let lines = replay.headers[values: .setCookie]
            #expect(lines == [dated, "ok=1"], "replayed \(lines)")
            #expect(!lines.contains { $0.contains("sid=attacker") })
        }
    }

    // MARK: 2. Refusals are not shared

    /// SECURITY.md: an upstream's refusal of the request itself (400, 431; 409 here only with
    /// `--unshared-status 409`) is kept for the page open that fetched it; the next caller's read is a miss and
    /// its own request goes upstream, never the refusal served as a hit.
    @Test func aRefusalIsNeverServedToAnotherCaller() async throws {
        // The shared entry's `private` marker lives the negative TTL: far past what a loaded machine takes between
        // the two page opens (at the default 5 s the second could refetch).
        try await withServe(["--unshared-status", "409", "--negative-ttl", "120"]) { server, upstream in
            let first = try await trigger(server, Self.page + "?v=3")
            for (name, status) in [("refused", 400), ("headers", 431), ("marked", 409)] {
                let own = try await server.get("/v1/prefetch/\(first)/data?name=\(name)&wait=5000")
                #expect(own.status == status, "the page open that fetched it reads it: \(own.text)")
            }
            let second = try await trigger(server, Self.page + "?v=3")
            for name in ["refused", "headers", "marked"] {
                for read in ["/v1/prefetch/\(second)/data?name=\(name)&wait=5000", "/v1/data?page=\(q(Self.page + "?v=3"))&name=\(name)"] {
                    let reply = try await server.get(read)
                    #expect(reply.header("X-Prefetch") == nil, "\(read) served another page open's refusal: \(reply.status) \(reply.text)")
                }
            }
            #expect(upstream.hits(path: "/shared/refused") == 1, "the refusal was fetched once and never replayed to another page open")
        }
    }

    // MARK: 3. One redaction

    /// SECURITY.md: a config URL's token is shown to nobody: not on the page listener's `/readyz` (ready or not and a
    /// code, nothing else), not in the operator views, not in any log line, while the config server fails.
    @Test func aConfigURLsTokenIsShownToNobody() async throws {
        try await withUpstream { upstream in
            let secret = "cfg-secret-\(UUID().uuidString)"
            let url = "\(upstream.base)/cfg/prefetch.json?status=500&access_token=\(secret)#frag-\(secret)"
            let server = try await ServeProcess.start(configPath: url, logLevel: "info")
            do {
                let checked = await eventually(within: 30) {
                    let status = try? await server.admin(.get, "/v1/config")
                    return (try? status?.decoded(ConfigStatusView.self))?.lastError != nil
                }
                #expect(checked, "the config source was never asked")
                let ready = try await server.get("/readyz")
                #expect(ready.status == 503)
                #expect(
                    ready.text == #"{"code":"no-config","ready":false}"# || ready.text == #"{"ready":false,"code":"no-config"}"#,
                    "\(ready.text)")
                for view in ["/v1/config", "/v1/debug/status"] {
                    let reply = try await server.admin(.get, view)
                    #expect(reply.status == 200)
                    #expect(!reply.text.contains(secret), "\(view) shows the token: \(reply.text)")
                    #expect(reply.text.contains("access_token=…"), "\(view) names the source, redacted: \(reply.text)")
                }
                let config = try await server.admin(.get, "/v1/config")
                #expect(config.text.contains("notReadyReason"), "the reason lives on the operator listener")
            } catch {
                await server.stop()
                throw error
            }
            let output = server.child.stdout + server.child.stderr
            await server.stop()
            #expect(!output.contains(secret), "a log line carries the config URL's token")
            #expect(output.contains("abnormal config answer"), "the log still says what happened")
        }
    }

    @Test func redactionKeepsWhereAndDropsWhatAuthenticates() {
        #expect(
            Redaction.url("https://user:pa55@cfg.example:8443/a/b.json?access_token=abc&v=2&bare#frag")
                == "https://cfg.example:8443/a/b.json?access_token=…&v=…&…")
        #expect(Redaction.url("/etc/prefetch/config.json") == "/etc/prefetch/config.json")
        #expect(
            Redaction.text("http://cfg.example/x?sig=1: fetch failed (redis://u:p@r:6379/0?password=2)")
                == "http://cfg.example/x?sig=…: fetch failed (redis://r:6379/0?password=…)")
    }

    // MARK: 4. Demo only in the demo

    /// SECURITY.md: without `--demo` no demo page, no demo interface list and no demo operation in the page
    /// listener's document; with it, the demo page learns only its configured interfaces.
    @Test func theDemoIsServedOnlyWithDemo() async throws {
        try await withServe { server, _ in
            for path in ["/demo", "/demo/shell.html", "/demo/page.html", "/demo/interfaces?page=\(q(Self.page))"] {
                let reply = try await server.get(path)
                #expect(reply.status == 404, "\(path) answered \(reply.status)")
            }
            #expect(!(try await server.get("/openapi.yaml")).text.contains("\n  /demo"), "the document lists a demo path")
        }
        try await withServe(["--demo"]) { server, upstream in
            #expect(try await server.get("/demo/page.html").status == 200)
            #expect(try await server.get("/openapi.yaml").text.contains("/demo/interfaces:"))
            let listed = try await server.get("/demo/interfaces?page=\(q(Self.page + "?api=http://attacker.example/collect"))")
            #expect(listed.status == 200)
            let apis = (listed.json["interfaces"] as? [[String: Any]] ?? []).compactMap { $0["api"] as? String }
            #expect(Set(apis) == Set(Self.config(upstream.base).pages[0].interfaces.map(\.api)), "\(listed.text)")
            #expect(try await server.get("/demo/interfaces").status == 400)
        }
    }

    // MARK: 5. Every answer that holds a user's data says so

    /// SECURITY.md: every answer of the page listener carries `Cache-Control: private, no-store` on every path
    /// (the event loop's and the router's), errors included; only the static files choose their own.
    @Test func everyPageAnswerIsPrivateNoStore() async throws {
        try await withServe { server, _ in
            let cookie = ["Cookie": "sid=alice"]
            let ticket = try await trigger(server, Self.page + "?v=5", headers: cookie)
            let readKey = try #require(
                try await oneRequest(
                    port: server.port, .post, "/v1/prefetch", headers: cookie, body: #"{"url": "\#(Self.page)?v=5"}"#
                ).json["readKey"] as? String)
            let answers: [(String, Reply)] = [
                (
                    "trigger",
                    try await oneRequest(port: server.port, .post, "/v1/prefetch", headers: cookie, body: #"{"url": "\#(Self.page)?v=5"}"#)
                ),
                ("results view", try await server.get("/v1/prefetch/\(ticket)?wait=5000", headers: cookie)),
                (
                    "results view by read key",
                    try await server.get("/v1/prefetch/\(ticket)?wait=5000", headers: ["X-Prefetch-Key": readKey])
                ),
                ("data by ticket", try await server.get("/v1/prefetch/\(ticket)/data?name=mine&wait=5000", headers: cookie)),
                (
                    "data by read key",
                    try await server.get("/v1/data?page=\(q(Self.page + "?v=5"))&name=echo", headers: ["X-Prefetch-Key": readKey])
                ),
                ("data by page", try await server.get("/v1/data?page=\(q(Self.page + "?v=5"))&name=mine&wait=5000", headers: cookie)),
                ("data miss", try await server.get("/v1/data?page=\(q(Self.page + "?v=nothing"))&name=mine", headers: cookie)),
                (
                    "open",
                    try await oneRequest(port: server.port, .post, "/v1/open", headers: cookie, body: #"{"url": "\#(Self.page)?v=6"}"#)
                ),
                (
                    "invalidate",
                    try await oneRequest(
                        port: server.port, .post, "/v1/invalidate", headers: cookie, body: #"{"url": "\#(Self.page)?v=6"}"#)
                ),
                ("renderer", try await oneRequest(port: server.port, .post, "/v1/renderers/acquire", body: #"{"profile": "main"}"#)),
                ("unknown ticket", try await server.get("/v1/prefetch/\(String(repeating: "a", count: 32))")),
                ("bad request", try await oneRequest(port: server.port, .post, "/v1/prefetch", body: "{")),
                ("unknown route", try await server.get("/v1/nothing")),
                ("health", try await server.get("/healthz")),
                ("readiness", try await server.get("/readyz")),
                (
                    "preflight",
                    try await oneRequest(port: server.port, .options, "/v1/prefetch", headers: ["Origin": "https://m.example.test"])
                ),
            ]
            for (name, reply) in answers {
                #expect(
                    reply.header("Cache-Control") == "private, no-store",
                    "\(name) (\(reply.status)): \(reply.header("Cache-Control") ?? "none")")
            }
            #expect(try await server.get("/v1/client.js").header("Cache-Control") == "public, max-age=300")
        }
    }
}

/// The part of `GET /v1/config` these tests read.
struct ConfigStatusView: Decodable {
    var lastError: String?
    var source: String
}
