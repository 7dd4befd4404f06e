import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PrefetchService

/// Dependent requests through a real upstream: the second request of a page takes a value from the first one's
/// answer, and the upstream shows what it received.
@Suite struct DependentRequestTests {
    /// The first interface's answer: JSON whose `uid` needs encoding everywhere it goes.
    static let userJSON = #"{"data":{"uid":"u&1 2/é","n":42,"tags":["a","b"]}}"#

    static func user(_ base: String, extra: String = "") -> String {
        "\(base)/dep/user?contentType=application%2Fjson&body=" + q(userJSON) + extra
    }

    static func orders(_ base: String, user: String = "user.info") -> TestInterface {
        let uid = "${\(user):/data/uid}"
        return TestInterface(
            name: "orders", api: "\(base)/dep/orders?v=2", method: .POST,
            body: ["uid": .string(uid), "n": .string("${\(user):/data/n}"), "note": .string("for \(uid)"), "fixed": 1],
            headers: ["X-Uid": uid], query: ["uid": .string(uid)])
    }

    @Test func aDependentRequestCarriesTheValueItNeeds() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/dependent"
            let config = TestConfig([
                TestPage(
                    page,
                    [TestInterface(name: "user.info", api: Self.user(base, extra: "&delay=150")), Self.orders(base)])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page)
                let reply = try await service.get("/v1/prefetch/\(ticket)/data?name=orders&wait=5000")
                #expect(reply.status == 200, "\(reply.text)")
                let echo = Echo(reply)
                #expect(echo.path == "/dep/orders")
                #expect(echo.query == "v=2&uid=u%261+2%2F%C3%A9", "form-encoded after the api's own query")
                #expect(echo.values("X-Uid") == ["u&1 2/é"])
                let body = try #require(echo.body.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
                #expect(body["uid"] as? String == "u&1 2/é")
                #expect(body["n"] as? Int == 42, "a whole-string reference takes the value itself: a number stays a number")
                #expect(body["note"] as? String == "for u&1 2/é")
                #expect(body["fixed"] as? Int == 1)
                #expect(upstream.hits(path: "/dep/user") == 1)
                #expect(upstream.hits(path: "/dep/orders") == 1)
                // The page reads both; the dependent's timing shows what it waited for.
                #expect(try await service.get("/v1/prefetch/\(ticket)/data?name=user.info&wait=0").status == 200)
                let opens = try await service.admin(.get, "/v1/debug/opens?limit=1")
                let requests = try #require(try opens.decoded(DebugRoutes.OpensAnswer.self).opens.first?.requests)
                let timing = try #require(requests.first { $0.name == "orders" })
                #expect(timing.needs == ["user.info"])
                let started = timing.startMs
                #expect(started >= 150, "its fetch started after user.info's 150 ms answer, at \(started) ms")
            }
        }
    }

    @Test(arguments: [
        ("&status=503", "dependency-failed"),
        ("&status=404", "dependency-failed"),
        ("&contentType=text%2Fplain&body=not+json", "dependency-not-json"),
    ])
    func aDependentFailsWithItsDependency(_ extra: String, _ code: String) async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/dependent-fails"
            let user = extra.contains("body=") ? "\(base)/dep/user?x=1\(extra)" : Self.user(base, extra: extra)
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "user.info", api: user), Self.orders(base)])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page)
                let reply = try await service.get("/v1/prefetch/\(ticket)/data?name=orders&wait=5000")
                #expect(reply.status == 404, "\(reply.text)")
                #expect(reply.errorCode == code, "\(reply.text)")
                #expect(reply.header("X-Prefetch-Reason") == code)
                #expect(upstream.hits(path: "/dep/orders") == 0, "nothing is sent without what it needs")
            }
        }
    }

    @Test func aMissingValueFailsTheDependentWithItsReference() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/dependent-missing"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "user.info", api: Self.user(base)),
                        TestInterface(name: "orders", api: "\(base)/dep/orders", query: ["uid": "${user.info:/data/missing}"]),
                        TestInterface(name: "tags", api: "\(base)/dep/tags", query: ["t": "${user.info:/data/tags}"]),
                    ])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page)
                for name in ["orders", "tags"] {
                    let reply = try await service.get("/v1/prefetch/\(ticket)/data?name=\(name)&wait=5000")
                    #expect(reply.status == 404 && reply.errorCode == "dependency-value", "\(name): \(reply.text)")
                    #expect(reply.text.contains("${user.info:/data/"), "the message names the reference: \(reply.text)")
                }
                #expect(upstream.hits(path: "/dep/orders") == 0 && upstream.hits(path: "/dep/tags") == 0)
            }
        }
    }

    /// Values from an answer can never change the target: whatever the first answer says, the second request goes
    /// to its configured host and path, and a value that tries to add parameters stays one encoded value.
    @Test func anAnswerCannotRedirectTheDependent() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let hostile = #"{"data":{"uid":"x&role=admin#@evil.example/","n":"http://evil.example/"}}"#
            let user = "\(base)/dep/user?contentType=application%2Fjson&body=" + q(hostile)
            let page = "\(base)/pages/dependent-hostile"
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "user.info", api: user), Self.orders(base)])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page)
                let echo = Echo(try await service.get("/v1/prefetch/\(ticket)/data?name=orders&wait=5000"))
                #expect(echo.path == "/dep/orders")
                #expect(echo.query == "v=2&uid=x%26role%3Dadmin%23%40evil.example%2F")
                #expect(upstream.requests().allSatisfy { $0.host == "127.0.0.1:\(upstream.port)" })
            }
        }
    }

    /// A chain of three: each is sent once the answer before it is in (from the page open's own completions), with
    /// the value it takes; a failure at the head fails every request below it, and none of them is sent.
    @Test func aChainIsSentLinkByLinkAndAFailureAtItsHeadFailsItAll() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            func chain(_ extra: String) -> [TestInterface] {
                [
                    TestInterface(name: "user.info", api: Self.user(base, extra: extra)),
                    TestInterface(name: "account", api: "\(base)/dep/account", query: ["uid": "${user.info:/data/uid}"]),
                    TestInterface(name: "ledger", api: "\(base)/dep/ledger", query: ["q": "${account:/query}"]),
                ]
            }
            let good = "\(base)/pages/chain"
            let bad = "\(base)/pages/chain-broken"
            let config = TestConfig([TestPage(good, chain("&delay=50")), TestPage(bad, chain("&status=503"))])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(good)
                let ledger = try await service.get("/v1/prefetch/\(ticket)/data?name=ledger&wait=5000")
                #expect(ledger.status == 200, "\(ledger.text)")
                // account's answer is the upstream's echo of its own request; ledger took its query from there.
                #expect(Echo(ledger).query == "q=" + q("uid=u%261+2%2F%C3%A9"))

                let broken = try await service.ticket(bad)
                for name in ["account", "ledger"] {
                    let reply = try await service.get("/v1/prefetch/\(broken)/data?name=\(name)&wait=5000")
                    #expect(reply.status == 404 && reply.errorCode == "dependency-failed", "\(name): \(reply.text)")
                }
                #expect(upstream.hits(path: "/dep/account") == 1 && upstream.hits(path: "/dep/ledger") == 1, "only the good chain was sent")
            }
        }
    }

    /// A dependent whose needed request may take longer than the dependent's own timeout fails at its own deadline
    /// (the answer it needs is still in flight then), not whenever that answer comes.
    @Test func aDependentFailsAtItsOwnDeadlineWhileWhatItNeedsIsStillInFlight() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/dependent-deadline"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        // Still in flight for the read of it below: 5 s to send the trigger and two reads in (the
                        // service's graceful stop waits this transfer out, so it is not longer).
                        TestInterface(name: "user.info", api: "\(Self.user(base, extra: "&delay=5000"))", timeout: 8000),
                        TestInterface(name: "orders", api: "\(base)/dep/orders", timeout: 300, query: ["uid": "${user.info:/data/uid}"]),
                    ])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page)
                let reply = try await service.get("/v1/prefetch/\(ticket)/data?name=orders&wait=5000")
                #expect(reply.status == 404 && reply.errorCode == "dependency-failed", "\(reply.text)")
                #expect(reply.text.contains("before its deadline"), "\(reply.text)")
                let head = try await service.get("/v1/prefetch/\(ticket)/data?name=user.info&wait=0")
                #expect(head.status == 404 && head.errorCode == "pending", "what it needed is still in flight: \(head.status) \(head.text)")
                #expect(upstream.hits(path: "/dep/orders") == 0)
            }
        }
    }

    /// The plan shows what each request needs, from whom.
    @Test func thePlanShowsTheGraph() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/dependent-plan"
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "user.info", api: Self.user(base)), Self.orders(base)])
            ])
            try await withService(config: config) { service in
                let plan = try await service.admin(.get, "/v1/plan?url=\(q(page))")
                #expect(plan.status == 200, "\(plan.text)")
                let requests = try #require(plan.json["requests"] as? [[String: Any]])
                #expect((requests[0]["needs"] as? [Any])?.isEmpty == true)
                let needs = try #require(requests[1]["needs"] as? [[String: String]])
                #expect(needs.count == 5, "uid, n and note in the body, X-Uid, the query's uid")
                #expect(Set(needs.map { $0["interface"] ?? "" }) == ["user.info"])
                #expect(Set(needs.map { $0["pointer"] ?? "" }) == ["/data/uid", "/data/n"])
                #expect(upstream.hits(path: "/dep/user") == 0, "planning fetches nothing")
            }
        }
    }
}
