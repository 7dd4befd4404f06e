import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchEngine
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The page surface's request parsing and refusals, through its one pipeline on a live service. Each refusal is the error answer `{"error", "message"}` with
/// the status and code a shell or page acts on; a miss also says why in `X-Prefetch-Reason`; nothing refused is
/// fetched.
@Suite("page routes", .timeLimit(.minutes(2)))
struct PageRouteTests {
    static func config(_ upstream: TestUpstream) -> TestConfig {
        TestConfig([
            TestPage(
                "\(upstream.base)/pages/route",
                [
                    upstream.interface("a", "/route/a", urlParam: true),
                    upstream.interface("b.get", "/route/b"),
                    upstream.interface("b.post", "/route/b", method: .POST),
                ])
        ])
    }

    /// What a refused request is answered: status, code, a message naming the problem; a miss carries its code in
    /// `X-Prefetch-Reason`, anything else does not.
    static func expectRefusal(
        _ reply: Reply, _ status: Int, _ code: FailureCode, saying text: String, miss: Bool = false, _ label: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(reply.status == status, "\(label): \(reply.text)", sourceLocation: sourceLocation)
        #expect(reply.header("Content-Type") == "application/json", "\(label)", sourceLocation: sourceLocation)
        let failure = try #require(reply.apiError, "\(label): \(reply.text)", sourceLocation: sourceLocation)
        #expect(failure.error == code.rawValue, "\(label): \(reply.text)", sourceLocation: sourceLocation)
        #expect(failure.message.contains(text), "\(label): \(failure.message)", sourceLocation: sourceLocation)
        #expect(reply.header("X-Prefetch-Reason") == (miss ? code.rawValue : nil), "\(label)", sourceLocation: sourceLocation)
        #expect(reply.header("X-Content-Type-Options") == "nosniff", "\(label)", sourceLocation: sourceLocation)
    }

    @Test func aTriggerIsAnswered202WithItsTicketAndTheRequestsItStarted() async throws {
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/route"
            try await withPageSurface(config: Self.config(upstream)) { service in
                let reply = try await service.post("/v1/prefetch", body: #"{"url": "\#(page)?id=5", "headers": {"Cookie": "sid=1"}}"#)
                #expect(reply.status == 202, "\(reply.text)")
                let answer = try reply.decoded(TriggerAnswer.self)
                #expect(Ticket.isWellFormed(answer.ticket))
                #expect(answer.page == page + "?id=5")
                #expect(answer.matched == page)
                #expect(answer.version == "7")
                #expect(!answer.readKey.isEmpty)
                #expect(answer.readKeyExpiresAt > Date())
                #expect(answer.requests.map(\.name) == ["a", "b.get", "b.post"])
                #expect(answer.requests.map(\.method) == ["GET", "GET", "POST"])
                #expect(answer.requests[0].url == "\(upstream.base)/route/a?id=5", "urlParam forwards the page's query")
                #expect(answer.requests.allSatisfy { $0.flight == .leader && $0.state == .pending })

                // Replayed through the routed read, with the trigger's credentials and with the read key.
                let byTicket = try await service.get("/v1/prefetch/\(answer.ticket)/data?name=a&wait=5000", headers: ["Cookie": "sid=1"])
                #expect(byTicket.status == 200, "\(byTicket.text)")
                #expect(["hit", "joined"].contains(byTicket.header("X-Prefetch")))
                #expect(Echo(byTicket).path == "/route/a")
                #expect(Echo(byTicket).values("Cookie") == ["sid=1"])
                let byKey = try await service.get(
                    "/v1/data?name=b.post&wait=5000", headers: ["X-Prefetch-Key": answer.readKey, "Origin": upstream.base])
                #expect(byKey.status == 200, "\(byKey.text)")
                #expect(Echo(byKey).method == "POST")
            }
            #expect(upstream.hits(path: "/route/a") == 1)
        }
    }

    @Test func triggerBodiesThatAreNotATriggerAreRefusedAndStartNothing() async throws {
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/route"
            try await withPageSurface(config: Self.config(upstream)) { service in
                let refused: [(label: String, contentType: String?, body: String, status: Int, code: FailureCode, text: String)] = [
                    ("no Content-Type", "", #"{"url": "\#(page)"}"#, 415, .unsupportedMediaType, "no Content-Type"),
                    ("a form", "text/plain", #"{"url": "\#(page)"}"#, 415, .unsupportedMediaType, "send application/json"),
                    ("not JSON", nil, "url=\(page)", 400, .badJSON, "not valid JSON"),
                    ("an array", nil, #"["\#(page)"]"#, 400, .badJSON, "must be a JSON object, got an array"),
                    ("no url", nil, "{}", 400, .missingURL, #""url" (the page URL) is required"#),
                    ("a number for url", nil, #"{"url": 7}"#, 400, .missingURL, #""url" must be a string"#),
                    ("headers not an object", nil, #"{"url": "\#(page)", "headers": ["Cookie"]}"#, 400, .badHeaders, "got an array"),
                    (
                        "a header value not a string", nil, #"{"url": "\#(page)", "headers": {"Cookie": 1}}"#, 400, .badHeaders,
                        "headers.Cookie must be a string, got a number"
                    ),
                    (
                        "a header value with CRLF", nil, #"{"url": "\#(page)", "headers": {"Cookie": "a=1\r\nX-Injected: yes"}}"#, 400,
                        .badHeaders, "control character"
                    ),
                    ("a script URL", nil, #"{"url": "javascript:alert(1)"}"#, 400, .invalidURL, "javascript:alert(1)"),
                    ("a page not in the config", nil, #"{"url": "\#(upstream.base)/pages/other"}"#, 404, .noConfig, "/pages/other"),
                    (
                        "a body over the limit", nil,
                        #"{"url": "\#(page)?big=\#(String(repeating: "y", count: EngineSettings().maximumRequestBody))"}"#, 413, .tooLarge,
                        "\(EngineSettings().maximumRequestBody)"
                    ),
                ]
                for refusal in refused {
                    let headers = refusal.contentType.map { ["Content-Type": $0] } ?? [:]
                    let reply = try await service.post("/v1/prefetch", headers: headers, body: refusal.body)
                    try Self.expectRefusal(reply, refusal.status, refusal.code, saying: refusal.text, refusal.label)
                }
            }
            #expect(upstream.requests().isEmpty, "a refused trigger fetches nothing")
        }
    }

    /// Members a trigger does not know are ignored (a newer shell may send more); the invalidation, whose body is
    /// empty by contract, refuses them.
    @Test func unknownMembersAreIgnoredByATriggerAndRefusedByAnInvalidation() async throws {
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/route"
            try await withPageSurface(config: Self.config(upstream)) { service in
                let trigger = try await service.post(
                    "/v1/prefetch", body: #"{"url": "\#(page)", "headers": {"Cookie": "sid=1"}, "shell": {"version": "9.1"}}"#)
                #expect(trigger.status == 202, "\(trigger.text)")
                let ticket = try trigger.decoded(TriggerAnswer.self).ticket
                // The results view waits until all three responses are stored.
                let results = try await service.get("/v1/prefetch/\(ticket)?wait=5000", headers: ["Cookie": "sid=1"])
                #expect(results.status == 200, "\(results.text)")

                let invalidation = try await service.post("/v1/invalidate", headers: ["Cookie": "sid=1"], body: #"{"all": true}"#)
                try Self.expectRefusal(invalidation, 400, .badJSON, saying: #"unknown member "all""#, "invalidate with a member")
                let anonymous = try await service.post("/v1/invalidate", body: "{}")
                try Self.expectRefusal(
                    anonymous, 401, .credentialsRequired, saying: "present its credentials", miss: true, "invalidate without credentials")
                let own = try await service.post("/v1/invalidate", headers: ["Cookie": "sid=1"], body: "")
                #expect(own.status == 200, "\(own.text)")
                #expect(try own.decoded(InvalidationRoutes.Dropped.self).dropped == 3, "the caller's three responses")
                let gone = try await service.get("/v1/prefetch/\(ticket)/data?name=a", headers: ["Cookie": "sid=1"])
                try Self.expectRefusal(gone, 404, .invalidated, saying: "invalidated", miss: true, "a read after the invalidation")
            }
        }
    }

    @Test func pageDataParameterErrorsAreRefusedAndMissesSayWhy() async throws {
        try await withUpstream { upstream in
            let page = q("\(upstream.base)/pages/route")
            try await withPageSurface(config: Self.config(upstream)) { service in
                let refused: [(uri: String, headers: [String: String], status: Int, code: FailureCode, text: String, miss: Bool)] = [
                    ("/v1/data?name=a", [:], 400, .missingPage, "the query parameter page", false),
                    // Without api and name a page with several interfaces names none of them.
                    ("/v1/data?page=\(page)", [:], 409, .ambiguousAPI, "several interfaces match", false),
                    ("/v1/data?page=\(page)&name=a&method=TRACE", [:], 400, .invalidMethod, #"method "TRACE""#, false),
                    ("/v1/data?page=\(page)&name=a&wait=soon", [:], 400, .invalidWait, "whole number of milliseconds", false),
                    ("/v1/data?page=\(page)&api=\(q(upstream.base + "/route/b"))", [:], 409, .ambiguousAPI, "b.get, b.post", false),
                    ("/v1/data?page=\(page)&name=nope", [:], 404, .unknownAPI, #"name "nope""#, true),
                    ("/v1/data?page=\(q(upstream.base + "/pages/other"))&name=a", [:], 404, .noConfig, "/pages/other", true),
                    ("/v1/data?page=\(page)&name=a", [:], 404, .notTriggered, "nothing was prefetched", true),
                    ("/v1/data?name=a", ["X-Prefetch-Key": "not-a-key"], 403, .invalidReadKey, "the read key is not valid", true),
                    ("/v1/prefetch/AAAAAAAAAAAAAAAAAAAAAA/data?name=a", [:], 404, .unknownTicket, "AAAAAAAAAAAAAAAAAAAAAA", true),
                ]
                for refusal in refused {
                    let reply = try await service.get(refusal.uri, headers: refusal.headers)
                    try Self.expectRefusal(reply, refusal.status, refusal.code, saying: refusal.text, miss: refusal.miss, refusal.uri)
                }
                // Adding the method settles the ambiguity.
                let chosen = try await service.get("/v1/data?page=\(page)&api=\(q(upstream.base + "/route/b"))&method=post")
                try Self.expectRefusal(chosen, 404, .notTriggered, saying: "nothing was prefetched", miss: true, "api and method")
            }
            #expect(upstream.requests().isEmpty, "a read never fetches")
        }
    }

    /// The page guard refuses callers of other sites before any route runs.
    @Test func callersFromOtherSitesAreRefusedByTheGuard() async throws {
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/route"
            try await withPageSurface(config: Self.config(upstream)) { service in
                let foreign = try await service.post(
                    "/v1/prefetch", headers: ["Origin": "https://evil.test"], body: #"{"url": "\#(page)"}"#)
                try Self.expectRefusal(foreign, 403, .originNotAllowed, saying: "https://evil.test", miss: true, "a foreign Origin")
                #expect(foreign.header("Access-Control-Allow-Origin") == nil)
                let embedded = try await service.get("/v1/data?page=\(q(page))&name=a", headers: ["Sec-Fetch-Site": "cross-site"])
                try Self.expectRefusal(embedded, 403, .originNotAllowed, saying: "cross-site", miss: true, "a cross-site embed")
                // The page's own origin is let through, with credentials.
                let own = try await service.post("/v1/prefetch", headers: ["Origin": upstream.base], body: #"{"url": "\#(page)"}"#)
                #expect(own.status == 202, "\(own.text)")
                #expect(own.header("Access-Control-Allow-Origin") == upstream.base)
                #expect(own.header("Access-Control-Allow-Credentials") == "true")
                let fetched = await eventually { upstream.requests().count == 3 }
                #expect(fetched, "the allowed trigger fetched its three requests")
            }
            #expect(upstream.requests().count == 3, "the refused ones fetched nothing")
        }
    }

    /// A method an endpoint does not have is a 405 naming the allowed ones; an unknown path a JSON 404, never the
    /// router's empty one; operator endpoints do not exist here.
    @Test func unmatchedRoutesAre405WithAllowOrAJSON404() async throws {
        let config = TestConfig([TestPage("https://m.example.test/p", [TestInterface(api: "http://127.0.0.1:9/x")])])
        try await withPageSurface(config: config) { service in
            let cases: [(HTTPRequest.Method, String, String)] = [
                (.delete, "/healthz", "GET, HEAD"), (.put, "/v1/prefetch", "POST"),
                (.get, "/v1/prefetch", "POST"), (.delete, "/v1/prefetch/AAAAAAAAAAAAAAAAAAAAAA", "GET, OPTIONS"),
                (.post, "/v1/prefetch/AAAAAAAAAAAAAAAAAAAAAA/data", "GET, OPTIONS"), (.patch, "/v1/data", "GET, OPTIONS"),
                (.get, "/v1/renderers/abc/release", "POST"), (.init("TRACE")!, "/openapi.yaml", "GET, HEAD"),
            ]
            for (method, path, allow) in cases {
                let reply = try await service.request(method, path)
                try Self.expectRefusal(reply, 405, .methodNotAllowed, saying: "allowed: \(allow)", "\(method) \(path)")
                #expect(reply.header("Allow") == allow, "\(method) \(path)")
            }
            for path in [
                "/nope", "/v1/prefetch/a/b/c", "/v1/renderers//release", "/healthz/x", "/metrics", "/v1/debug/opens", "/ui", "/v1/plan",
            ] {
                let reply = try await service.get(path)
                try Self.expectRefusal(reply, 404, .notFound, saying: "see /openapi.yaml", path)
                #expect(reply.header("Allow") == nil, "\(path)")
            }
            #expect(try await service.get("/healthz").status == 200)
        }
    }

    /// `HEAD` of a static route is the `GET` answer's head, framed so that the next pipelined request on the same
    /// connection is answered as sent.
    @Test func headIsTheGetAnswersHeadAndKeepsThePipelineFramed() async throws {
        let config = TestConfig([TestPage("https://m.example.test/p", [TestInterface(api: "http://127.0.0.1:9/x")])])
        try await withService(config: config) { service in
            let answer = try await rawExchange(
                port: service.port,
                "HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nHEAD /v1/client.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            let heads = answer.components(separatedBy: "HTTP/1.1 ").dropFirst()
            #expect(heads.count == 3, "three answers: \(answer)")
            let first = try #require(heads.first)
            #expect(
                first.hasPrefix("200") && first.lowercased().contains("content-length: 15\r\n") && first.hasSuffix("\r\n\r\n"), "\(first)")
            #expect(heads.dropFirst().first?.hasPrefix("200") == true && heads.dropFirst().first?.hasSuffix("\r\n\r\n") == true)
            #expect(heads.last?.hasPrefix("200") == true && heads.last?.hasSuffix(#"{"status":"ok"}"#) == true, "\(answer)")
        }
    }
}
