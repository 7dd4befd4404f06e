import Foundation
import HTTPTypes
// End-to-end tests of the prefetch service over real sockets.
//
// Design
// - Every test runs the very application `prefetch serve` builds (`buildApplication`) on 127.0.0.1 with a free
//   port through `withService` (ServiceTestSupport's `withLiveApplication`), so its services (the libcurl fetcher,
//   the fetch runner) run too, against an in-process `TestUpstream` whose JSON echo shows exactly what arrived
//   upstream and whose hit counters show how many fetches happened.
// - Configs are written per test with the upstream's port in the api URLs. Pages on 127.0.0.1 are same-site with
//   the api (credentials go upstream); pages on `m.example.test` are not (credentials stay back unless `include`).
// - Process-level behaviour (signals and graceful shutdown, `prefetch fetch`, `prefetch plan`) is in
//   `CommandTests.swift`, running the built executables found next to the test bundle.
// - Waits are bounded (a few seconds at most) and no test asserts a wall-clock duration.
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The HTTP API end to end: the real application on a live socket, fetching from a real upstream on 127.0.0.1.
@Suite("prefetch service API", .timeLimit(.minutes(1)))
struct PrefetchServiceTests {
    // MARK: Composition and credentials

    @Test func composedRequestsArriveAsPlannedWithCredentialsOnlyWhereAllowed() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let samePage = "\(base)/pages/compose"
            let crossPage = "https://m.example.test/compose"
            let config = TestConfig([
                TestPage(
                    samePage,
                    [
                        TestInterface(name: "c.get", api: "\(base)/compose/get?v=2", urlParam: true, headers: ["X-Client": "h5"]),
                        TestInterface(
                            name: "c.post", api: "\(base)/compose/post", method: .POST, urlParam: true, bodyParam: true,
                            body: ["cityId": 123456]),
                        TestInterface(
                            name: "c.form", api: "\(base)/compose/form", method: .POST, bodyParam: true, body: ["cityId": 123456],
                            params: ["id"], bodyType: .form),
                        TestInterface(name: "c.omit", api: "\(base)/compose/omit", credentials: .omit),
                    ]),
                TestPage(
                    crossPage,
                    [
                        TestInterface(name: "x.default", api: "\(base)/cross/default"),
                        TestInterface(name: "x.include", api: "\(base)/cross/include", credentials: .include),
                        TestInterface(name: "x.omit", api: "\(base)/cross/omit", credentials: .omit),
                    ]),
            ])
            try await withService(config: config) { service in
                let page = samePage + "?id=163&q=%E4%B8%AD+x"
                let alice = ["Cookie": "sid=alice", "Authorization": "Bearer alice"]
                let trigger = try await service.trigger(page, credentials: alice)
                #expect(trigger.status == 202)
                let answer = try trigger.decoded(TriggerAnswer.self)
                let ticket = answer.ticket
                #expect(answer.page == page)
                #expect(answer.matched == samePage)
                #expect(answer.version == "7")
                #expect(answer.requests.map(\.name) == ["c.get", "c.post", "c.form", "c.omit"])
                #expect(answer.requests.allSatisfy { $0.state == .pending && $0.flight == .leader })

                // What the service planned is what the upstream received.
                let plan = try await service.admin(.get, "/v1/plan?url=\(q(page))")
                #expect(plan.status == 200)
                let planned = plan.json["requests"] as? [[String: Any]] ?? []
                #expect(planned.count == 4)
                for request in planned {
                    let name = try #require(request["name"] as? String)
                    let reply = try await service.get("/v1/prefetch/\(ticket)/data?name=\(name)&wait=5000", headers: alice)
                    #expect(reply.status == 200, "\(name): \(reply.text)")
                    let echo = Echo(reply)
                    #expect(echo.method == request["method"] as? String)
                    let url = try #require(request["url"] as? String)
                    #expect(base + echo.path + (echo.query.map { "?" + $0 } ?? "") == url, "\(name)")
                    #expect(echo.body == request["body"] as? String, "\(name)")
                }

                let get = Echo(try await service.get("/v1/prefetch/\(ticket)/data?api=\(q("\(base)/compose/get?v=2"))", headers: alice))
                #expect(get.method == "GET")
                #expect(get.query == "v=2&id=163&q=%E4%B8%AD+x")
                #expect(get.body == nil)
                #expect(get.values("Content-Type").isEmpty)
                #expect(get.values("X-Client") == ["h5"])
                #expect(get.values("Cookie") == ["sid=alice"])
                #expect(get.values("Authorization") == ["Bearer alice"])

                let post = Echo(try await service.get("/v1/prefetch/\(ticket)/data?name=c.post", headers: alice))
                #expect(post.method == "POST")
                #expect(post.query == "id=163&q=%E4%B8%AD+x")
                #expect(post.body == #"{"cityId":123456,"id":163,"q":"中 x"}"#)
                #expect(post.values("Content-Type") == ["application/json"])
                #expect(post.values("Cookie") == ["sid=alice"])

                let form = Echo(try await service.get("/v1/prefetch/\(ticket)/data?name=c.form", headers: alice))
                #expect(form.query == nil)
                #expect(form.body == "cityId=123456&id=163")
                #expect(form.values("Content-Type") == ["application/x-www-form-urlencoded"])

                let omit = Echo(try await service.get("/v1/prefetch/\(ticket)/data?name=c.omit", headers: alice))
                #expect(omit.path == "/compose/omit")
                #expect(omit.values("Cookie").isEmpty)
                #expect(omit.values("Authorization").isEmpty)

                // The full results view reports the same responses.
                let results = try await service.get("/v1/prefetch/\(ticket)?wait=5000", headers: alice)
                #expect(results.status == 200)
                let items = try results.decoded(ResultsAnswer.Body.self).results
                #expect(items.map(\.state) == [.ready, .ready, .ready, .ready])
                #expect(items.allSatisfy { $0.status == 200 && $0.bodyEncoding == .json })
                #expect(
                    items.compactMap { $0.body?["path"]?.string } == [
                        "/compose/get", "/compose/post", "/compose/form", "/compose/omit",
                    ])

                // A page on another site: the caller's own request headers are used (no "headers" member), and
                // they go only where the interface says `include`.
                let bob = ["Cookie": "sid=bob", "Authorization": "Bearer bob"]
                let cross = try await service.trigger(crossPage, requestHeaders: bob)
                #expect(cross.status == 202)
                let crossTicket = try cross.decoded(TriggerAnswer.self).ticket
                let fallback = Echo(try await service.get("/v1/prefetch/\(crossTicket)/data?name=x.default&wait=5000", headers: bob))
                #expect(fallback.path == "/cross/default")
                #expect(fallback.values("Cookie").isEmpty)
                #expect(fallback.values("Authorization").isEmpty)
                let include = Echo(try await service.get("/v1/prefetch/\(crossTicket)/data?name=x.include&wait=5000", headers: bob))
                // A single Cookie header is the page's own host's cookies: never sent to another host, even `include`.
                #expect(include.values("Cookie").isEmpty)
                #expect(include.values("Authorization") == ["Bearer bob"])
                let never = Echo(try await service.get("/v1/prefetch/\(crossTicket)/data?name=x.omit&wait=5000", headers: bob))
                #expect(never.path == "/cross/omit")
                #expect(never.values("Cookie").isEmpty)
                #expect(never.values("Authorization").isEmpty)
            }
        }
    }

    // MARK: Single flight

    @Test func manyConsumersAndTwoTriggersCauseOneUpstreamFetchPerInterface() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/flight"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "f.a", api: "\(base)/flight/a?delay=300"),
                        TestInterface(name: "f.b", api: "\(base)/flight/b?delay=300", method: .POST, body: ["k": 1]),
                    ])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page)
                let triggerBody = #"{"url": "\#(page)"}"#
                let replies = try await withThrowingTaskGroup(of: (Int, Reply).self) { group in
                    for index in 0..<100 {
                        let name = index % 4 < 2 ? "f.a" : "f.b"
                        let uri =
                            index % 2 == 0
                            ? "/v1/data?page=\(q(page))&name=\(name)&wait=5000"
                            : "/v1/prefetch/\(ticket)/data?name=\(name)&wait=5000"
                        group.addTask { (index, try await service.separateRequest(.get, uri)) }
                    }
                    group.addTask { (100, try await service.separateRequest(.post, "/v1/prefetch", body: triggerBody)) }
                    var replies: [Int: Reply] = [:]
                    for try await (index, reply) in group { replies[index] = reply }
                    return replies
                }
                #expect(upstream.hits(path: "/flight/a") == 1)
                #expect(upstream.hits(path: "/flight/b") == 1)
                let second = try #require(replies[100])
                #expect(second.status == 202)
                let flights = try second.decoded(TriggerAnswer.self).requests.map(\.flight)
                #expect(flights.count == 2 && flights.allSatisfy { $0 == .joined || $0 == .fresh }, "\(flights)")
                for index in 0..<100 {
                    let reply = try #require(replies[index])
                    #expect(reply.status == 200, "consumer \(index): \(reply.text)")
                    #expect(["hit", "joined"].contains(reply.header("X-Prefetch")), "consumer \(index)")
                    let echo = Echo(reply)
                    #expect(echo.path == (index % 4 < 2 ? "/flight/a" : "/flight/b"))
                    #expect(echo.hit == 1)
                }
            }
        }
    }

    // MARK: Identity isolation

    @Test func identitiesAreFetchedSeparatelyAndNeverSeeEachOthersResponses() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/me"
            let onlyAlice = "\(base)/pages/only"
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "me", api: "\(base)/ident/me")]),
                TestPage(onlyAlice, [TestInterface(name: "only", api: "\(base)/ident/only")]),
                TestPage("https://m.example.test/shared", [TestInterface(name: "shared", api: "\(base)/ident/shared")]),
            ])
            try await withService(config: config) { service in
                let alice = try await service.ticket(page, credentials: ["Cookie": "sid=alice"])
                let bob = try await service.ticket(page, credentials: ["Cookie": "sid=bob"])

                // A leaked ticket is no bearer token: a reader with no credentials gets nothing of it.
                for uri in ["/v1/prefetch/\(alice)/data?name=me&wait=5000", "/v1/prefetch/\(alice)?wait=5000"] {
                    let anonymous = try await service.get(uri)
                    #expect(anonymous.status == 401, "\(uri)")
                    #expect(anonymous.errorCode == "credentials-required")
                    #expect(!anonymous.text.contains("alice"))
                }
                let aliceReply = try await service.get("/v1/prefetch/\(alice)/data?name=me&wait=5000", headers: ["Cookie": "sid=alice"])
                #expect(aliceReply.status == 200)
                #expect(Echo(aliceReply).values("Cookie") == ["sid=alice"])
                #expect(!aliceReply.text.contains("bob"))
                let bobReply = try await service.get("/v1/prefetch/\(bob)/data?name=me&wait=5000", headers: ["Cookie": "sid=bob"])
                #expect(bobReply.status == 200)
                #expect(Echo(bobReply).values("Cookie") == ["sid=bob"])
                #expect(!bobReply.text.contains("alice"))
                #expect(upstream.hits(path: "/ident/me") == 2)

                // A ticket read presenting another identity is refused; the owner's own credentials are fine.
                for uri in ["/v1/prefetch/\(alice)/data?name=me", "/v1/prefetch/\(alice)"] {
                    let stolen = try await service.get(uri, headers: ["Cookie": "sid=bob"])
                    #expect(stolen.status == 403, "\(uri)")
                    #expect(stolen.errorCode == "identity-mismatch")
                    #expect(stolen.header("X-Prefetch-Reason") == "identity-mismatch")
                    #expect(!stolen.text.contains("alice"))
                }
                let own = try await service.get("/v1/prefetch/\(alice)/data?name=me", headers: ["Cookie": "sid=alice"])
                #expect(own.status == 200)
                #expect(Echo(own).values("Cookie") == ["sid=alice"])

                // Without a ticket, the caller's own credentials choose the entry.
                let byPageAlice = try await service.get("/v1/data?page=\(q(page))&name=me", headers: ["Cookie": "sid=alice"])
                #expect(Echo(byPageAlice).values("Cookie") == ["sid=alice"])
                let byPageBob = try await service.get("/v1/data?page=\(q(page))&name=me", headers: ["Cookie": "sid=bob"])
                #expect(Echo(byPageBob).values("Cookie") == ["sid=bob"])

                // Only alice triggered this page: bob and an anonymous caller find nothing.
                _ = try await service.ticket(onlyAlice, credentials: ["Cookie": "sid=alice"])
                for headers in [["Cookie": "sid=bob"], [:]] {
                    let miss = try await service.get("/v1/data?page=\(q(onlyAlice))&name=only&wait=2000", headers: headers)
                    #expect(miss.status == 404, "\(headers)")
                    #expect(miss.errorCode == "not-triggered")
                    #expect(miss.header("X-Prefetch-Reason") == "not-triggered")
                }
                let hers = try await service.get("/v1/data?page=\(q(onlyAlice))&name=only&wait=5000", headers: ["Cookie": "sid=alice"])
                #expect(hers.status == 200)
                #expect(Echo(hers).values("Cookie") == ["sid=alice"])
                #expect(upstream.hits(path: "/ident/only") == 1)

                // An api off the page's site gets no credentials, so its response is anonymous and shared: one fetch
                // for both users, readable by anyone with the page URL.
                let sharedPage = "https://m.example.test/shared"
                let first = try await service.ticket(sharedPage, credentials: ["Cookie": "sid=alice"])
                let firstReply = try await service.get("/v1/prefetch/\(first)/data?name=shared&wait=5000", headers: ["Cookie": "sid=alice"])
                #expect(firstReply.status == 200)
                #expect(Echo(firstReply).values("Cookie").isEmpty)
                let second = try await service.trigger(sharedPage, credentials: ["Cookie": "sid=bob"])
                #expect(try second.decoded(TriggerAnswer.self).requests.first?.flight == .fresh)
                let carol = try await service.get("/v1/data?page=\(q(sharedPage))&name=shared", headers: ["Cookie": "sid=carol"])
                #expect(carol.status == 200)
                #expect(Echo(carol).hit == 1)
                #expect(upstream.hits(path: "/ident/shared") == 1)
            }
        }
    }

    // MARK: Store semantics

    /// After its TTL a response is gone: `/v1/data` answers 404 `expired` (the store remembers why), and once
    /// the ticket itself expires (TTL plus timeout after the trigger) the ticket answers 404 `unknown-ticket`.
    /// Time moves by hand: nothing depends on how fast the machine is.
    @Test func responsesExpireAfterTheirTTL() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/ttl"
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "short", api: "\(base)/ttl/short", ttl: 1, timeout: 500)])
            ])
            let clock = ManualClock()
            try await withService(config: config, clock: clock) { service in
                let ticket = try await service.ticket(page)
                let dataURI = "/v1/data?page=\(q(page))&name=short"
                let first = try await service.get(dataURI + "&wait=5000")
                #expect(first.status == 200)
                clock.advance(by: .milliseconds(999))
                #expect(try await service.get(dataURI + "&wait=0").status == 200, "still inside its TTL")

                clock.advance(by: .milliseconds(1))
                let last = try await service.get(dataURI + "&wait=0")
                #expect(last.status == 404)
                #expect(last.errorCode == "expired")
                #expect(last.header("X-Prefetch-Reason") == "expired")
                let stillKnown = try await service.get("/v1/prefetch/\(ticket)/data?name=short&wait=0")
                #expect(stillKnown.errorCode == "expired", "the ticket outlives the response by its timeout: \(stillKnown.text)")

                clock.advance(by: .milliseconds(500))
                let ticketReply = try await service.get("/v1/prefetch/\(ticket)/data?name=short&wait=0")
                #expect(ticketReply.errorCode == "unknown-ticket", "\(ticketReply.text)")
                #expect(ticketReply.status == 404)
                #expect(upstream.hits(path: "/ttl/short") == 1)
            }
        }
    }

    @Test func noStoreResponseIsHandedOutOnce() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/once"
            let config = TestConfig([
                TestPage(
                    page,
                    [TestInterface(name: "once", api: "\(base)/once?cacheControl=no-store&setCookie=t%3D1&setCookie=u%3D2")])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page)
                let first = try await service.get("/v1/prefetch/\(ticket)/data?name=once&wait=5000")
                #expect(first.status == 200)
                // Replays are never cacheable, whatever the upstream said.
                #expect(first.header("Cache-Control") == "private, no-store")
                #expect(first.headers[values: .setCookie] == ["t=1", "u=2"])
                #expect(first.header("Content-Type") == "application/json")
                #expect(Echo(first).path == "/once")

                let second = try await service.get("/v1/prefetch/\(ticket)/data?name=once&wait=1000")
                #expect(second.status == 404)
                #expect(second.errorCode == "consumed")
                #expect(second.header("X-Prefetch-Reason") == "consumed")
                // The response set cookies without credentials: it was the fetching ticket's alone, so a reader by
                // page URL gets the `private` miss, never the cookies.
                let byPage = try await service.get("/v1/data?page=\(q(page))&name=once")
                #expect(byPage.errorCode == "private")
                #expect(byPage.headers[values: .setCookie].isEmpty)
            }
        }
    }

    @Test func responsesOverTheSizeCapFailAsTooLarge() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/size"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "big", api: "\(base)/size/big?bytes=5000"),
                        TestInterface(name: "small", api: "\(base)/size/small?bytes=10"),
                    ])
            ])
            var settings = testSettings()
            settings.engine.maximumResponseBytes = 1000
            try await withService(config: config, settings: settings) { service in
                let ticket = try await service.ticket(page)
                let big = try await service.get("/v1/prefetch/\(ticket)/data?name=big&wait=5000")
                #expect(big.status == 404)
                #expect(big.errorCode == "too-large")
                #expect(big.header("X-Prefetch-Reason") == "too-large")
                let small = try await service.get("/v1/prefetch/\(ticket)/data?name=small&wait=5000")
                #expect(small.status == 200)
                #expect(small.text == "abcdefghij")
                #expect(small.header("X-Prefetch") == "hit" || small.header("X-Prefetch") == "joined")

                let results = try await service.get("/v1/prefetch/\(ticket)")
                let items = try results.decoded(ResultsAnswer.Body.self).results
                #expect(items.map(\.state) == [.failed, .ready])
                #expect(items.first?.error == "too-large")
                #expect(items.last?.bodyEncoding == .text)
                #expect(items.last?.body == .string("abcdefghij"))
            }
        }
    }

    @Test func failedInterfacesAreMissesWithTheirCodeAndLeaveTheOthersAlone() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/faults"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "slow", api: "\(base)/fault/slow?delay=2000", timeout: 200),
                        TestInterface(name: "reset", api: "\(base)/fault/reset?reset=10"),
                        TestInterface(name: "down", api: "\(base)/fault/down?status=503"),
                        TestInterface(name: "fine", api: "\(base)/fault/fine"),
                        TestInterface(name: "gone", api: "\(base)/fault/gone?status=404"),
                    ])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page)
                for (name, code) in [("slow", "timeout"), ("reset", "reset"), ("down", "upstream-5xx")] {
                    let reply = try await service.get("/v1/prefetch/\(ticket)/data?name=\(name)&wait=5000")
                    #expect(reply.status == 404, "\(name): \(reply.text)")
                    #expect(reply.errorCode == code, "\(name)")
                    #expect(reply.header("X-Prefetch-Reason") == code, "\(name)")
                }
                let fine = try await service.get("/v1/prefetch/\(ticket)/data?name=fine&wait=5000")
                #expect(fine.status == 200)
                #expect(Echo(fine).path == "/fault/fine")
                // Statuses below 500 are the upstream's answer, replayed as received.
                let gone = try await service.get("/v1/prefetch/\(ticket)/data?name=gone&wait=5000")
                #expect(gone.status == 404)
                #expect(["hit", "joined"].contains(gone.header("X-Prefetch")))
                #expect(gone.header("X-Prefetch-Reason") == nil)
                #expect(Echo(gone).path == "/fault/gone")

                let results = try await service.get("/v1/prefetch/\(ticket)?wait=5000")
                let items = try results.decoded(ResultsAnswer.Body.self).results
                #expect(items.map(\.state) == [.failed, .failed, .failed, .ready, .ready])
                #expect(items.map(\.error) == ["timeout", "reset", "upstream-5xx", nil, nil])
                #expect(items.map(\.status) == [nil, nil, 503, 200, 404])
            }
        }
    }

    // MARK: Errors

    @Test func requestErrorsAreJSONWithStableCodes() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/errors"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "e.get", api: "\(base)/errors/same"),
                        TestInterface(name: "e.post", api: "\(base)/errors/same", method: .POST),
                        TestInterface(name: "e.hang", api: "\(base)/errors/hang?hang=1", timeout: 8000),
                    ])
            ])
            var settings = testSettings()
            settings.engine.maximumWait = .milliseconds(400)
            try await withService(config: config, settings: settings) { service in
                func expectError(_ reply: Reply, _ status: Int, _ code: String, reason: Bool, _ comment: String) {
                    #expect(reply.status == status, "\(comment): \(reply.text)")
                    #expect(reply.errorCode == code, "\(comment)")
                    #expect(reply.apiError?.message.isEmpty == false, "\(comment)")
                    #expect(reply.header("Content-Type") == "application/json", "\(comment)")
                    #expect((reply.header("X-Prefetch-Reason") == code) == reason, "\(comment)")
                }
                // Trigger errors are not prefetch misses: no X-Prefetch-Reason.
                expectError(try await service.trigger("\(base)/pages/unknown"), 404, "no-config", reason: false, "no config")
                expectError(
                    try await service.request(.post, "/v1/prefetch", body: #"{"url": "#), 400, "bad-json", reason: false, "malformed")
                expectError(try await service.request(.post, "/v1/prefetch", body: "[1]"), 400, "bad-json", reason: false, "not an object")
                expectError(try await service.request(.post, "/v1/prefetch", body: "{}"), 400, "missing-url", reason: false, "no url")
                expectError(try await service.trigger("not a url"), 400, "invalid-url", reason: false, "invalid url")
                expectError(
                    try await service.request(.post, "/v1/prefetch", body: #"{"url": "\#(page)", "headers": {"Cookie": 1}}"#),
                    400, "bad-headers", reason: false, "bad headers"
                )
                let padding = String(repeating: "x", count: EngineSettings().maximumRequestBody + 1024)
                expectError(
                    try await service.separateRequest(.post, "/v1/prefetch", body: #"{"url": "\#(page)", "pad": "\#(padding)"}"#),
                    413, "too-large", reason: false, "oversized body"
                )

                // Look-up errors on the data endpoints.
                expectError(
                    try await service.get("/v1/prefetch/AAAAAAAAAAAAAAAAAAAAAA?wait=0"), 404, "unknown-ticket", reason: true,
                    "unknown ticket")
                expectError(
                    try await service.get("/v1/prefetch/nonsense/data?name=e.get"), 404, "unknown-ticket", reason: true, "junk ticket")
                expectError(
                    try await service.get("/v1/data?page=\(q("\(base)/pages/unknown"))&name=x"), 404, "no-config", reason: true,
                    "data without config")
                expectError(try await service.get("/v1/data?name=e.get"), 400, "missing-page", reason: false, "no page")
                expectError(try await service.admin(.get, "/v1/plan"), 400, "missing-url", reason: false, "plan without url")

                let ticket = try await service.ticket(page)
                let data = "/v1/prefetch/\(ticket)/data"
                expectError(try await service.get("\(data)?name=e.get&wait=abc"), 400, "invalid-wait", reason: false, "wait=abc")
                expectError(try await service.get("/v1/prefetch/\(ticket)?wait=1.5"), 400, "invalid-wait", reason: false, "wait=1.5")
                expectError(
                    try await service.get("\(data)?api=\(q("\(base)/errors/other"))"), 404, "unknown-api", reason: true, "unknown api")
                expectError(try await service.get("\(data)?name=nope"), 404, "unknown-api", reason: true, "unknown name")
                expectError(
                    try await service.get("\(data)?api=\(q("\(base)/errors/same"))"), 409, "ambiguous-api", reason: false, "ambiguous")
                expectError(
                    try await service.get("\(data)?api=\(q("\(base)/errors/same"))&method=TRACE"), 400, "invalid-method", reason: false,
                    "bad method")
                expectError(try await service.get(data), 409, "ambiguous-api", reason: false, "no api, several interfaces")

                // method= resolves the ambiguity.
                let chosen = try await eventually(within: 5) {
                    let reply = try await service.get("\(data)?api=\(q("\(base)/errors/same"))&method=post&wait=400")
                    return reply.status == 200 && Echo(reply).method == "POST"
                }
                #expect(chosen)

                // Waits are clamped to [0, maximumWait], never refused.
                let huge = try await service.get("\(data)?name=e.hang&wait=99999999999999999999999")
                expectError(huge, 404, "pending", reason: true, "huge wait")
                #expect(huge.apiError?.message.contains("after 400 ms") == true, "\(huge.text)")
                let negative = try await service.get("\(data)?name=e.hang&wait=-5")
                expectError(negative, 404, "pending", reason: true, "negative wait")
                #expect(negative.apiError?.message.contains("after 0 ms") == true, "\(negative.text)")
            }
        }
    }

    // MARK: Operations

    @Test func healthReadinessAndOpenAPI() async throws {
        let config = TestConfig(version: "v42", [TestPage("https://m.example.test/p", [TestInterface(api: "http://127.0.0.1:9/x")])])
        try await withService(config: config) { service in
            let health = try await service.get("/healthz")
            #expect(health.status == 200)
            #expect(try health.decoded(HealthAnswer.self).status == "ok")
            let ready = try await service.get("/readyz")
            #expect(ready.status == 200)
            let readiness = try ready.decoded(ReadinessAnswer.self)
            #expect(readiness.ready && readiness.code == .ok)
            let openAPI = try await service.get("/openapi.yaml")
            #expect(openAPI.status == 200)
            #expect(openAPI.text.hasPrefix("openapi:"))
        }
    }

    @Test func metricsCountTriggersFetchesAndHitsWithBoundedLabels() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/metered"
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "m.get", api: "\(base)/metered/get")])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page + "?secret=s3cr3t")
                let settled = try await service.get("/v1/prefetch/\(ticket)?wait=5000")
                #expect(try settled.decoded(ResultsAnswer.Body.self).results.first?.state == .ready)
                let hit = try await service.get("/v1/data?page=\(q(page + "?secret=s3cr3t"))&name=m.get")
                #expect(hit.status == 200)
                #expect(hit.header("X-Prefetch") == "hit")
                _ = try await service.trigger("\(base)/pages/unknown")

                let metrics = try await service.admin(.get, "/metrics")
                #expect(metrics.status == 200)
                let text = metrics.text
                #expect(text.contains(#"prefetch_triggers_total{result="accepted"} 1"#), "\(text)")
                #expect(text.contains(#"prefetch_triggers_total{result="no-config"} 1"#))
                #expect(text.contains(#"prefetch_fetches_total{interface="m.get",outcome="ok"} 1"#))
                #expect(text.contains("prefetch_store_hits_total"))
                #expect(text.contains(#"prefetch_upstream_queued_seconds_count{interface="m.get"} 1"#), "time waiting for a transfer slot")
                #expect(text.contains(#"prefetch_data_total{result="hit"} 1"#))

                let labelValues = labelValues(in: text)
                #expect(!labelValues.isEmpty)
                for value in labelValues {
                    #expect(
                        !value.contains("://") && !value.contains("127.0.0.1") && !value.contains("/pages/") && !value.contains("s3cr3t"),
                        "label value \(value)")
                }
            }
        }
    }

    @Test func dataEndpointsAllowCrossOriginReadsFromThePagesOrigins() async throws {
        try await withUpstream { upstream in
            let page = "https://m.example.test/cors"
            let config = TestConfig([TestPage(page, [TestInterface(name: "c", api: "\(upstream.base)/cors/c")])])
            var settings = testSettings()
            settings.engine.corsOrigins = ["https://shell.example.test"]
            try await withService(config: config, settings: settings) { service in
                let ticket = try await service.ticket(page)
                let data = "/v1/data?page=\(q(page))&name=c&wait=5000"
                for origin in ["https://m.example.test", "https://shell.example.test"] {
                    let reply = try await service.get(data, headers: ["Origin": origin])
                    #expect(reply.status == 200)
                    #expect(reply.header("Access-Control-Allow-Origin") == origin)
                    #expect(reply.header("Access-Control-Allow-Credentials") == "true")
                    #expect(reply.header("Access-Control-Expose-Headers")?.contains("X-Prefetch-Reason") == true)
                }
                // A miss is readable too, so the page learns why.
                let miss = try await service.get("/v1/prefetch/\(ticket)/data?name=nope", headers: ["Origin": "https://m.example.test"])
                #expect(miss.status == 404)
                #expect(miss.header("Access-Control-Allow-Origin") == "https://m.example.test")

                // Any other origin is refused outright, before anything is looked up.
                let foreign = try await service.get(data, headers: ["Origin": "https://evil.example.test"])
                #expect(foreign.status == 403)
                #expect(foreign.errorCode == "origin-not-allowed")
                #expect(foreign.header("Access-Control-Allow-Origin") == nil)
                #expect(foreign.header("Access-Control-Allow-Credentials") == nil)

                for path in ["/v1/data", "/v1/prefetch/\(ticket)/data", "/v1/prefetch/\(ticket)"] {
                    let preflight = try await service.request(
                        .options, path, headers: ["Origin": "https://m.example.test", "Access-Control-Request-Method": "GET"]
                    )
                    #expect(preflight.status == 204, "\(path)")
                    #expect(preflight.header("Access-Control-Allow-Origin") == "https://m.example.test", "\(path)")
                    #expect(preflight.header("Access-Control-Allow-Methods")?.contains("GET") == true, "\(path)")
                    #expect(preflight.header("Access-Control-Allow-Headers") != nil, "\(path)")
                }
                let refused = try await service.request(
                    .options, "/v1/data", headers: ["Origin": "https://evil.example.test", "Access-Control-Request-Method": "GET"])
                #expect(refused.status == 403)
                #expect(refused.header("Access-Control-Allow-Origin") == nil)
                #expect(refused.header("Access-Control-Allow-Methods") == nil)
            }
        }
    }

    @Test func ticketsAreURLSafe22CharactersAndDifferEveryTrigger() async throws {
        let page = "https://m.example.test/tickets"
        let config = TestConfig([
            TestPage(page, [TestInterface(name: "t", api: "http://127.0.0.1:9/t", timeout: 100)])
        ])
        try await withService(config: config) { service in
            var tickets: Set<String> = []
            for _ in 0..<20 {
                let ticket = try await service.ticket(page)
                #expect(ticket.utf8.count == 22, "\(ticket)")
                #expect(ticket.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }, "\(ticket)")
                tickets.insert(ticket)
            }
            #expect(tickets.count == 20)
        }
    }
}

/// Every label value in a Prometheus text exposition.
func labelValues(in text: String) -> [String] {
    var values: [String] = []
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        guard let open = line.firstIndex(of: "{"), let close = line.lastIndex(of: "}"), open < close else { continue }
        var rest = line[line.index(after: open)..<close]
        while let quote = rest.firstIndex(of: "\"") {
            let afterQuote = rest[rest.index(after: quote)...]
            guard let end = afterQuote.firstIndex(of: "\"") else { break }
            values.append(String(afterQuote[..<end]))
            rest = afterQuote[afterQuote.index(after: end)...]
        }
    }
    return values
}
