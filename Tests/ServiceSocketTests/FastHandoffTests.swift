import Foundation
import HTTPTypes
import NIOCore
import NIOPosix
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The page pipeline over real sockets (`PageChannel`, `FastHandoff`, `PageAPI`): each answer as a client sees it
/// (its status, the error's code, the surface's headers, its framing), no-store handed out once, pipelined requests
/// in order, what is counted on the event loop.
@Suite struct FastHandoffTests {
    static let page = "https://m.example.com/item"

    /// The page's entries live 10 minutes, so its ticket and read key outlive the longest run of these tests (the
    /// differential test compares answers to the same reads on two services opened seconds apart).
    static func config(_ port: Int) -> TestConfig {
        let api = "http://127.0.0.1:\(port)"
        return TestConfig([
            TestPage(
                page,
                [
                    TestInterface(
                        name: "plain", api: "\(api)/plain?body=%7B%22ok%22%3Atrue%7D&cacheControl=max-age%3D60", urlParam: true, ttl: 600),
                    TestInterface(
                        name: "cookie", api: "\(api)/cookie?body=%7B%22me%22%3A1%7D&setCookie=sid%3Dabc%3B%20HttpOnly", urlParam: true,
                        ttl: 600),
                    TestInterface(
                        name: "once", api: "\(api)/once?body=%7B%22n%22%3A1%7D&cacheControl=no-store", urlParam: true, ttl: 600),
                    TestInterface(name: "slow", api: "\(api)/slow?hang=1", urlParam: true, timeout: 10000),
                ]),
            TestPage(
                "https://m.example.com/later",
                [
                    TestInterface(name: "soon", api: "\(api)/soon?body=%7B%22a%22%3A1%7D&cacheControl=max-age%3D60", urlParam: true),
                    TestInterface(name: "later", api: "\(api)/later?delay=300&body=%7B%22b%22%3A2%7D", urlParam: true),
                ]),
            TestPage(
                "https://m.example.com/account", [TestInterface(name: "me", api: "https://api.example.com/me", credentials: .include)]),
        ])
    }

    /// Runs `body` against a service with this suite's config.
    func withOne(_ body: @Sendable (LiveService) async throws -> Void) async throws {
        try await withUpstream { upstream in
            try await withService(config: Self.config(upstream.port), settings: testSettings(), body)
        }
    }

    /// `withOne` on a redis-server of its own (started and stopped here).
    func withOneOnRedis(_ body: @Sendable (LiveService) async throws -> Void) async throws {
        try await withUpstream { upstream in
            let redis = try await RedisServer.start()
            do {
                var settings = testSettings()
                settings.store.url = "redis://127.0.0.1:\(redis.port)"
                try await withService(config: Self.config(upstream.port), settings: settings, body)
            } catch {
                await redis.stop()
                throw error
            }
            await redis.stop()
        }
    }

    /// What every answer of the page surface is, checked on a raw answer: `status`, the security headers, a
    /// `Content-Length` that frames the body exactly, and for an error the API's JSON with `code` (and
    /// `X-Prefetch-Reason` for a miss).
    func expectAnswer(
        _ answer: String, _ status: Int, code: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(rawStatus(answer) == status, "\(answer)", sourceLocation: sourceLocation)
        let parts = answer.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        let body = parts.dropFirst().joined(separator: "\r\n\r\n")
        for field in ["X-Content-Type-Options: nosniff", "Referrer-Policy: no-referrer", "Cache-Control: "] {
            #expect(head.contains(field), "\(field) missing: \(answer)", sourceLocation: sourceLocation)
        }
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length: ") }.map {
            Int($0.dropFirst("content-length: ".count)) ?? -1
        }
        #expect(length == body.utf8.count, "the length does not frame the body: \(answer)", sourceLocation: sourceLocation)
        if let code {
            #expect(head.contains("Content-Type: application/json"), "\(answer)", sourceLocation: sourceLocation)
            #expect(body.hasPrefix(#"{"error":"\#(code)","message":""#), "\(answer)", sourceLocation: sourceLocation)
        }
    }

    /// Triggers the page and waits (on the operator's debug view, which reads nothing) until every request but the
    /// hanging one has its answer; returns the ticket and its read key.
    func openPage(_ service: LiveService) async throws -> (ticket: String, readKey: String) {
        let reply = try await service.trigger(Self.page)
        let triggered = try reply.decoded(TriggerAnswer.self)
        let ticket = triggered.ticket
        let readKey = triggered.readKey
        let settled = try await eventually {
            let view = try await service.admin(.get, "/v1/debug/opens?ticket=\(ticket)")
            let requests = (try? view.decoded(DebugRoutes.OpensAnswer.self))?.opens.first?.requests ?? []
            return requests.filter { $0.status != nil }.count == 3
        }
        #expect(settled, "the three answering interfaces did not answer")
        return (ticket, readKey)
    }

    /// Reads the shared entry `name` of `ticket` until it is handed out (no-store entries excepted: this reads them).
    func waitReady(_ service: LiveService, _ ticket: String, _ name: String) async throws {
        let ready = try await eventually {
            try await service.separateRequest(.get, "/v1/prefetch/\(ticket)/data?name=\(name)").status == 200
        }
        #expect(ready, "\(name) was not handed out")
    }

    func fastCount(_ service: LiveService) async throws -> Int {
        let text = try await service.admin(.get, "/metrics").text
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("prefetch_data_fast_total ") }) else { return 0 }
        return Int(line.split(separator: " ").last ?? "") ?? -1
    }

    /// A raw answer without its `Date` line (the only header that depends on when it was written).
    func raw(_ service: LiveService, _ target: String, headers: [String: String] = [:], body: String = "") async throws -> String {
        let extra = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
        let answer = try await rawExchange(
            port: service.port, "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(service.port)\r\n\(extra)Connection: close\r\n\r\n\(body)")
        return answer.split(separator: "\r\n", omittingEmptySubsequences: false).filter { !$0.lowercased().hasPrefix("date:") }.joined(
            separator: "\r\n")
    }

    /// Reads of a ready entry by every route a page uses, each answered on the event loop with the stored bytes and
    /// the headers its reader's kind gets: CORS for an allowed origin, none for a foreign one (refused).
    @Test func everyReadRouteHandsOutTheStoredAnswer() async throws {
        try await withOne { service in
            let page = try await openPage(service)
            for name in ["plain", "cookie"] { try await waitReady(service, page.ticket, name) }
            let before = try await fastCount(service)
            let plain = try await raw(service, "/v1/prefetch/\(page.ticket)/data?name=plain")
            expectAnswer(plain, 200)
            #expect(plain.contains("X-Prefetch: hit") && plain.hasSuffix(#"{"ok":true}"#), "\(plain)")
            #expect(plain.contains("Cache-Control: private, no-store"), "a user's data is never kept by an HTTP cache: \(plain)")
            let cookie = try await raw(service, "/v1/prefetch/\(page.ticket)/data?name=cookie")
            expectAnswer(cookie, 200)
            // The shell's read replays the upstream's cookie to the webview (`HttpOnly`: no script reads it).
            #expect(cookie.hasSuffix(#"{"me":1}"#) && cookie.contains("Set-Cookie: sid=abc; HttpOnly"), "\(cookie)")
            // The page's own read, cross-origin with the read key: CORS headers for that origin, with credentials.
            let pageHeaders = ["Origin": "https://m.example.com"]
            let keyed = try await raw(service, "/v1/data?name=plain", headers: pageHeaders.merging(["X-Prefetch-Key": page.readKey]) { $1 })
            expectAnswer(keyed, 200)
            #expect(keyed.contains("Access-Control-Allow-Origin: https://m.example.com"), "\(keyed)")
            #expect(keyed.contains("Access-Control-Allow-Credentials: true") && keyed.contains("Vary: Origin"), "\(keyed)")
            // The same-site read by page=, with the page's own cookies.
            let pageRead = "/v1/data?page=\(q(Self.page))&name=plain"
            let sameSite = try await raw(service, pageRead, headers: pageHeaders.merging(["Cookie": "visitor=1"]) { $1 })
            expectAnswer(sameSite, 200)
            #expect(sameSite.hasSuffix(#"{"ok":true}"#), "\(sameSite)")
            // Another origin's page= read: refused, without CORS headers.
            let foreign = try await raw(service, pageRead, headers: ["Origin": "https://evil.example.com"])
            expectAnswer(foreign, 403, code: "origin-not-allowed")
            #expect(!foreign.contains("Access-Control-Allow-Origin"), "\(foreign)")
            // Four reads above were answered from the store on the event loop.
            #expect(try await fastCount(service) == before + 4)
        }
    }

    /// A GET that announces a body is answered on the event loop once its body has ended (the body dropped).
    @Test func aGetThatAnnouncesABodyIsAnsweredAtItsEnd() async throws {
        try await withOne { service in
            let opened = try await openPage(service)
            let answer = try await raw(
                service, "/v1/prefetch/\(opened.ticket)/data?name=plain",
                headers: ["Transfer-Encoding": "chunked"], body: "5\r\nhello\r\n0\r\n\r\n")
            expectAnswer(answer, 200)
            #expect(answer.hasSuffix(#"{"ok":true}"#), "\(answer)")
            #expect(try await fastCount(service) == 1, "the read was answered from the store on the event loop")
        }
    }

    /// A GET whose body never ends gets the body timeout's `408` and reads nothing: the no-store entry it named is
    /// still there for the next reader.
    @Test func aGetWhoseBodyNeverEndsConsumesNothing() async throws {
        try await withUpstream { upstream in
            var settings = testSettings()
            settings.listeners.bodyTimeout = .seconds(1)
            try await withService(config: Self.config(upstream.port), settings: settings) { service in
                let opened = try await openPage(service)
                let stalled = try await rawExchange(
                    port: service.port,
                    "GET /v1/prefetch/\(opened.ticket)/data?name=once HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nhello")
                #expect(rawStatus(stalled) == 408, "\(stalled)")
                let read = try await raw(service, "/v1/prefetch/\(opened.ticket)/data?name=once")
                #expect(rawStatus(read) == 200 && read.contains(#"{"n":1}"#), "the no-store entry was not consumed: \(read)")
            }
        }
    }

    /// A trigger refused at its head (a media type that is not JSON, a foreign origin) is answered at once, on the
    /// event loop, whatever its body's framing: a body that never ends does not hold the refusal (it would be the
    /// body timeout's `408` then), triggers nothing, and the connection closes once the body timeout passes.
    @Test func aRefusalAtTheHeadIsNotHeldByABodyThatNeverEnds() async throws {
        try await withUpstream { upstream in
            var settings = testSettings()
            settings.listeners.bodyTimeout = .seconds(1)
            try await withService(config: Self.config(upstream.port), settings: settings) { service in
                let before = try await eventLoopAnswers(service, "trigger")
                // Every trigger the engine saw, by any result.
                let triggers = { () async throws -> Double in
                    try await service.admin(.get, "/metrics").text.split(separator: "\n").filter {
                        $0.hasPrefix("prefetch_triggers_total{")
                    }
                    .reduce(0) { $0 + (Double($1.split(separator: " ").last ?? "") ?? 0) }
                }
                let opens = try await triggers()
                let host = "Host: 127.0.0.1:\(service.port)\r\n"
                let stalled = [
                    ("POST /v1/prefetch HTTP/1.1\r\n\(host)Content-Type: text/plain\r\nContent-Length: 100\r\n\r\nhello", 415),
                    (
                        "POST /v1/prefetch HTTP/1.1\r\n\(host)Origin: https://evil.example.com\r\nContent-Type: application/json\r\n"
                            + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"url\"\r\n", 403
                    ),
                ]
                for (request, status) in stalled {
                    let answer = try await rawExchange(port: service.port, request)
                    #expect(rawStatus(answer) == status, "\(answer)")
                    #expect(!answer.contains(" 408 "), "the refusal waited for the body: \(answer)")
                }
                #expect(try await eventLoopAnswers(service, "trigger") == before + 2)
                #expect(try await triggers() == opens, "a refused trigger reached the engine")
                // The connection is fine for the next request when the refused body does end.
                let refusedThenRead = try await rawExchange(
                    port: service.port,
                    "POST /v1/prefetch HTTP/1.1\r\n\(host)Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}"
                        + "GET /healthz HTTP/1.1\r\n\(host)Connection: close\r\n\r\n")
                #expect(
                    refusedThenRead.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) } == ["415", "200"],
                    "\(refusedThenRead)")
            }
        }
    }

    /// A trigger's body is taken on the event loop whatever its framing: chunked, and up to the limit (256 KiB); past
    /// it, `413 too-large` once the bytes received pass it, announced or chunked. Every answer written on the event
    /// loop.
    @Test func aTriggerBodyOfAnyFramingIsTakenUpToTheLimit() async throws {
        try await withOne { fast in
            let page = #"{"url": "https://m.example.com/item?id=8"}"#
            let over =
                #"{"url": "https://m.example.com/item?id=9", "pad": ""# + String(repeating: "x", count: EngineSettings().maximumRequestBody)
                + #""}"#
            func chunked(_ body: String) -> String {
                var text = ""
                var rest = Substring(body)
                while !rest.isEmpty {
                    let chunk = rest.prefix(1000)
                    rest = rest.dropFirst(chunk.count)
                    text += String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n"
                }
                return text + "0\r\n\r\n"
            }
            func request(_ port: Int, _ body: String, chunk: Bool) -> String {
                "POST /v1/prefetch HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\n"
                    + (chunk ? "Transfer-Encoding: chunked\r\n" : "Content-Length: \(body.utf8.count)\r\n")
                    + "Connection: close\r\n\r\n" + (chunk ? chunked(body) : body)
            }
            let before = try await eventLoopAnswers(fast, "trigger")
            for (body, chunk, status) in [(page, true, 202), (over, false, 413), (over, true, 413)] {
                let answer = try await rawExchange(port: fast.port, request(fast.port, body, chunk: chunk))
                expectAnswer(answer, status, code: status == 413 ? "too-large" : nil)
                if status == 202 { #expect(answer.contains(#""page":"https://m.example.com/item?id=8""#), "\(answer)") }
            }
            #expect(try await eventLoopAnswers(fast, "trigger") == before + 3)
        }
    }

    @Test func noStoreIsHandedOutOnceAndMissesSayWhy() async throws {
        try await withOne { service in
            let ticket = try await openPage(service).ticket
            let once = try await raw(service, "/v1/prefetch/\(ticket)/data?name=once")
            expectAnswer(once, 200)
            #expect(once.hasSuffix(#"{"n":1}"#), "\(once)")
            let again = try await raw(service, "/v1/prefetch/\(ticket)/data?name=once")
            expectAnswer(again, 404, code: "consumed")
            #expect(again.contains("X-Prefetch-Reason: consumed"), "\(again)")
            let pending = try await raw(service, "/v1/prefetch/\(ticket)/data?name=slow&wait=0")
            expectAnswer(pending, 404, code: "pending")
            expectAnswer(try await raw(service, "/v1/prefetch/\(ticket)/data?name=plain&wait=soon"), 400, code: "invalid-wait")
            expectAnswer(try await raw(service, "/v1/prefetch/\(ticket)/data?name=nope"), 404, code: "unknown-api")
        }
    }

    @Test func aCredentialedTicketIsRefusedWithoutItsCredentials() async throws {
        try await withOne { service in
            let reply = try await service.trigger("https://m.example.com/account", credentials: ["Cookie": "session=alice"])
            let ticket = try reply.decoded(TriggerAnswer.self).ticket
            let mallory = try await raw(service, "/v1/prefetch/\(ticket)/data?name=me", headers: ["Cookie": "session=mallory"])
            expectAnswer(mallory, 403, code: "identity-mismatch")
            expectAnswer(try await raw(service, "/v1/prefetch/\(ticket)/data?name=me"), 401, code: "credentials-required")
        }
    }

    /// Counts of `prefetch_event_loop_answers_total` by route.
    func eventLoopAnswers(_ service: LiveService, _ route: String) async throws -> Int {
        let text = try await service.admin(.get, "/metrics").text
        let prefix = "prefetch_event_loop_answers_total{route=\"\(route)\"} "
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return 0 }
        return Int(line.dropFirst(prefix.count)) ?? -1
    }

    func rawPost(_ service: LiveService, _ target: String, body: String, headers: [String: String] = [:]) async throws -> String {
        let extra = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
        return try await rawExchange(
            port: service.port,
            "POST \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(service.port)\r\n\(extra)Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        )
    }

    /// The trigger answered on the event loop, and its refusals, all written there: the engine's, a body that is not
    /// JSON or has no page URL, and at the head, before any body, a media type that is not JSON or a foreign origin.
    @Test func theTriggerAndItsRefusalsAreWrittenOnTheEventLoop() async throws {
        try await withOne { fast in
            let json = ["Content-Type": "application/json", "Origin": "https://m.example.com"]
            let cases: [(String, [String: String], Int, String?)] = [
                (#"{"url": "https://m.example.com/item?id=7"}"#, json, 202, nil),
                (#"{"url": "https://m.example.com/nowhere"}"#, json, 404, "no-config"),
                (#"{"nope": 1}"#, json, 400, "missing-url"),
                (#"{"url": "#, json, 400, "bad-json"),
            ]
            let refusedAtTheHead: [(String, [String: String], Int, String?)] = [
                (#"{"url": "https://m.example.com/item"}"#, ["Content-Type": "text/plain"], 415, "unsupported-media-type"),
                (
                    #"{"url": "https://m.example.com/item"}"#, ["Content-Type": "application/json", "Origin": "https://evil.example.com"],
                    403, "origin-not-allowed"
                ),
            ]
            let before = try await eventLoopAnswers(fast, "trigger")
            for (body, headers, status, code) in cases + refusedAtTheHead {
                let answer = try await rawPost(fast, "/v1/prefetch", body: body, headers: headers)
                expectAnswer(answer, status, code: code)
                if status == 202 {
                    #expect(answer.contains(#""page":"https://m.example.com/item?id=7""#) && answer.contains(#""readKey":""#), "\(answer)")
                    #expect(answer.contains("Access-Control-Allow-Origin: https://m.example.com"), "\(answer)")
                }
            }
            // Every one was written on the event loop, the refusals at the head too.
            #expect(try await eventLoopAnswers(fast, "trigger") == before + cases.count + refusedAtTheHead.count)
        }
    }

    /// With the Redis store the trigger is answered on the event loop too, once Redis has the claims and the ticket's
    /// record (no task), and requests pipelined behind it answered after it, in order. (`ServeReplicaTests` reads
    /// such a ticket on another replica right after its answer.)
    @Test func onRedisTheTriggerIsAnsweredOnTheEventLoop() async throws {
        try await withOneOnRedis { fast in
            let json = ["Content-Type": "application/json", "Origin": "https://m.example.com"]
            let cases: [(String, Int, String?)] = [
                (#"{"url": "https://m.example.com/item?id=7"}"#, 202, nil),
                (#"{"url": "https://m.example.com/nowhere"}"#, 404, "no-config"),
            ]
            let before = try await eventLoopAnswers(fast, "trigger")
            for (body, status, code) in cases {
                expectAnswer(try await rawPost(fast, "/v1/prefetch", body: body, headers: json), status, code: code)
            }
            #expect(try await eventLoopAnswers(fast, "trigger") == before + 2)

            // A trigger, then a health check and a second trigger in the same write: three answers, in order.
            let host = "Host: 127.0.0.1:\(fast.port)\r\n"
            let first = #"{"url": "https://m.example.com/item?id=1"}"#
            let second = #"{"url": "https://m.example.com/item?id=2"}"#
            let post = { (body: String, last: Bool) in
                "POST /v1/prefetch HTTP/1.1\r\n\(host)Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
                    + (last ? "Connection: close\r\n" : "") + "\r\n" + body
            }
            let answer = try await rawExchange(
                port: fast.port, post(first, false) + "GET /healthz HTTP/1.1\r\n\(host)\r\n" + post(second, true))
            let pages = answer.ranges(of: #""page":"https://m.example.com/item?id="#).map { answer[$0.upperBound...].prefix(1) }
            #expect(pages == ["1", "2"], "\(answer)")
            let health = try #require(answer.range(of: #""status":"ok""#), "\(answer)")
            let ids = answer.ranges(of: #""page":"https://m.example.com/item?id="#).map(\.lowerBound)
            #expect(ids.count == 2 && ids[0] < health.lowerBound && health.lowerBound < ids[1], "\(answer)")
            // Both on the event loop: the health check between them is the page API's, on the same connection, in order.
            #expect(try await eventLoopAnswers(fast, "trigger") == before + 4)

            // The results view: Redis's answers, waited for on the event loop.
            let fastTicket = try await fast.trigger(Self.page).decoded(TriggerAnswer.self).ticket
            let viewsBefore = try await eventLoopAnswers(fast, "results")
            for wait in ["0", "300"] {
                try await waitReady(fast, fastTicket, "plain")
                let view = try await raw(fast, "/v1/prefetch/\(fastTicket)?wait=\(wait)")
                expectAnswer(view, 200)
                #expect(view.contains(#""name":"plain""#) && view.contains(#""state":"ready""#), "\(view)")
            }
            #expect(try await eventLoopAnswers(fast, "results") == viewsBefore + 2)
        }
    }

    /// The results view on the event loop: settled now; waiting, written when the ticket's flights settle; a wait
    /// that ends first shows what is still in flight as pending.
    @Test func theResultsViewIsWrittenWhenItsFlightsSettle() async throws {
        try await withOne { fast in
            let fastPage = try await openPage(fast)
            try await waitReady(fast, fastPage.ticket, "plain")
            let a = try await raw(fast, "/v1/prefetch/\(fastPage.ticket)?wait=0")
            expectAnswer(a, 200)
            #expect(a.contains(#""state":"pending""#) && a.contains(#""body":{"ok":true}"#), "\(a)")
            let before = try await eventLoopAnswers(fast, "results")
            // `slow` never answers: a wait of 200 ms ends with it pending, everything else ready.
            let ended = try await raw(fast, "/v1/prefetch/\(fastPage.ticket)?wait=200")
            #expect(ended.contains(#""name":"slow","api""#) && ended.contains(#""state":"pending""#), "\(ended)")
            #expect(ended.components(separatedBy: #""state":"ready""#).count == 3, "plain and cookie ready: \(ended)")

            // A page whose second interface answers after 300 ms: the view waits for it and shows both ready.
            let later = try await fast.trigger("https://m.example.com/later")
            let ticket = try later.decoded(TriggerAnswer.self).ticket
            let waited = try await raw(fast, "/v1/prefetch/\(ticket)?wait=5000")
            #expect(waited.components(separatedBy: #""state":"ready""#).count == 3, "\(waited)")
            #expect(waited.contains(#"{"b":2}"#), "\(waited)")
            #expect(try await eventLoopAnswers(fast, "results") == before + 2)
        }
    }

    /// A results view waiting on the event loop holds the requests pipelined behind it: they are answered after it,
    /// in order, whichever path answers them.
    @Test func requestsPipelinedBehindAWaitingResultsViewKeepTheirOrder() async throws {
        try await withOne { fast in
            let opened = try await openPage(fast)
            try await waitReady(fast, opened.ticket, "plain")
            let later = try await fast.trigger("https://m.example.com/later")
            let ticket = try later.decoded(TriggerAnswer.self).ticket
            let host = "Host: 127.0.0.1:\(fast.port)\r\n"
            let text =
                "GET /v1/prefetch/\(ticket)?wait=5000 HTTP/1.1\r\n\(host)\r\n"
                + "GET /v1/prefetch/\(opened.ticket)/data?name=plain HTTP/1.1\r\n\(host)\r\n"
                + "GET /healthz HTTP/1.1\r\n\(host)\r\n"
                + "GET /v1/prefetch/\(opened.ticket)/data?name=cookie HTTP/1.1\r\n\(host)Connection: close\r\n\r\n"
            let answer = try await rawExchange(port: fast.port, text)
            let results = try #require(answer.range(of: #"{"b":2}"#), "\(answer)")
            let plain = try #require(answer.range(of: #"{"ok":true}"#), "\(answer)")
            let health = try #require(answer.range(of: #""status":"ok""#), "\(answer)")
            let cookie = try #require(answer.range(of: #"{"me":1}"#), "\(answer)")
            #expect(results.lowerBound < plain.lowerBound && plain.lowerBound < health.lowerBound && health.lowerBound < cookie.lowerBound)
            #expect(answer.components(separatedBy: "HTTP/1.1 200 OK").count == 5)
        }
    }

    /// Three requests in one write, each answered on the event loop: a data read, the results view, a data read.
    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await withOne { fast in
            let opened = try await openPage(fast)
            try await waitReady(fast, opened.ticket, "plain")
            try await waitReady(fast, opened.ticket, "cookie")
            let host = "Host: 127.0.0.1:\(fast.port)\r\n"
            let text =
                "GET /v1/prefetch/\(opened.ticket)/data?name=plain HTTP/1.1\r\n\(host)\r\n"
                + "GET /v1/prefetch/\(opened.ticket) HTTP/1.1\r\n\(host)\r\n"
                + "GET /v1/prefetch/\(opened.ticket)/data?name=cookie HTTP/1.1\r\n\(host)Connection: close\r\n\r\n"
            let answer = try await rawExchange(port: fast.port, text)
            let plain = try #require(answer.range(of: #"{"ok":true}"#), "\(answer)")
            let results = try #require(answer.range(of: #""results":"#), "\(answer)")
            let cookie = try #require(answer.range(of: #"{"me":1}"#), "\(answer)")
            #expect(plain.lowerBound < results.lowerBound && results.lowerBound < cookie.lowerBound)
            #expect(answer.components(separatedBy: "HTTP/1.1 200 OK").count == 4)
            // Both reads are counted as hits.
            let metrics = try await fast.admin(.get, "/metrics").text
            #expect(metrics.contains(#"prefetch_data_total{result="hit"} 4"#), "\(metrics.count) bytes of metrics")
        }
    }

    /// The fast path keeps the connection's idle timeout for the requests it answers (Hummingbird's connection-state
    /// handler never sees them): `prefetch serve`'s idle timeout reaches the handler the installer puts on a live
    /// connection, and a connection whose fast reads were answered closes by itself once idle. The close is waited
    /// for as an event (bounded at 30 s so a server that never closes fails instead of hanging). How long it waits,
    /// and that a busy connection stays open, is `FastHandoffClockTests`' on a virtual clock: nothing here depends on
    /// how fast the machine runs.
    static let fastReads = 5

    @Test func aConnectionOfFastReadsClosesOnceIdle() async throws {
        let settings = {
            var settings = testSettings()
            settings.listeners.idleTimeout = .seconds(2)
            return settings
        }()
        try await withUpstream { upstream in
            try await withService(config: Self.config(upstream.port), settings: settings) { service in
                let opened = try await openPage(service)
                try await waitReady(service, opened.ticket, "plain")
                let before = try await fastCount(service)
                let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connect(host: "127.0.0.1", port: service.port) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                        }
                    }
                // Bounded, so a server that never closes the idle connection fails the test instead of hanging it.
                let outcome = try await withThrowingTaskGroup(of: (answered: Int, closed: Bool)?.self) { group in
                    group.addTask {
                        try await channel.executeThenClose { inbound, outbound in
                            var received = inbound.makeAsyncIterator()
                            var text = ""
                            for round in 1...Self.fastReads {
                                let request =
                                    "GET /v1/prefetch/\(opened.ticket)/data?name=plain HTTP/1.1\r\nHost: 127.0.0.1:\(service.port)\r\n\r\n"
                                try await outbound.write(ByteBuffer(string: request))
                                while text.components(separatedBy: #"{"ok":true}"#).count - 1 < round {
                                    guard let buffer = try await received.next() else { return (round - 1, true) }
                                    text += String(buffer: buffer)
                                }
                            }
                            // Then idle: the server closes it.
                            while try await received.next() != nil {}
                            return (Self.fastReads, true)
                        }
                    }
                    group.addTask {
                        try await Task.sleep(for: .seconds(30))
                        return nil
                    }
                    let first = try await group.next() ?? nil
                    group.cancelAll()
                    return first
                }
                let (answered, closedByServer) = outcome ?? (Self.fastReads, false)
                // Sent back to back, the reads are all answered unless the machine stalls for the whole idle timeout
                // between two of them; whatever was answered was answered on the fast path.
                #expect(answered >= 1, "the connection was closed before its first read")
                #expect(closedByServer, "an idle connection was kept open past its idle timeout")
                #expect(try await fastCount(service) - before == answered, "the reads were answered on the fast path")
            }
        }
    }
}
