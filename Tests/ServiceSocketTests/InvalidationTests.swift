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

/// Invalidation attacked as the other security tests attack the service: real `prefetch serve`, real sockets.
@Suite("security: invalidation", .serialized, .timeLimit(.minutes(2)))
struct InvalidationSecurityTests {
    static let page = "https://m.example.test/account"

    static func config(_ base: String) -> TestConfig {
        TestConfig([
            TestPage(
                page,
                [
                    TestInterface(name: "me", api: "\(base)/inv/me", credentials: .include),
                    TestInterface(name: "cart", api: "\(base)/inv/cart?surrogateKey=cart%20catalog", credentials: .include),
                    TestInterface(name: "many", api: "\(base)/inv/many?surrogateKeys=5000"),
                ])
        ])
    }

    func withServe(_ body: @Sendable (ServeProcess, TestUpstream) async throws -> Void) async throws {
        // The page is on another site than its upstream: the user's cookies (the trigger's jar) reach it as the
        // third-party cookies a webview that accepts them sends.
        try await withServeProcess(config: Self.config, arguments: ["--third-party-cookies"], body)
    }

    /// Triggers the page for `cookie` and waits until its responses are stored.
    func open(_ server: ServeProcess, cookie: String?) async throws {
        var object: [String: Any] = ["url": Self.page]
        if let cookie { object["cookies"] = testJar(cookie) }
        let body = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
        let answer = try await oneRequest(port: server.port, .post, "/v1/prefetch", body: body)
        #expect(answer.status == 202, "\(answer.text)")
        let ticket = try answer.decoded(TriggerAnswer.self).ticket
        let headers = cookie.map { ["Cookie": $0] } ?? [:]
        let results = try await oneRequest(port: server.port, .get, "/v1/prefetch/\(ticket)?wait=5000", headers: headers)
        #expect(results.status == 200, "\(results.text)")
    }

    func read(_ server: ServeProcess, _ name: String, cookie: String) async throws -> Reply {
        try await oneRequest(port: server.port, .get, "/v1/data?page=\(q(Self.page))&name=\(name)", headers: ["Cookie": cookie])
    }

    func invalidate(_ server: ServeProcess, headers: [String: String], body: String = "{}") async throws -> Reply {
        try await oneRequest(port: server.port, .post, "/v1/invalidate", headers: headers, body: body)
    }

    /// SECURITY.md: an invalidation reaches only the caller's own identity; a cross-site page cannot log a user's
    /// prefetches out.
    @Test func aForeignOriginCannotInvalidateAndAPageOfItsOwnOriginCan() async throws {
        try await withServe { server, _ in
            try await open(server, cookie: "sid=alice")
            for headers in [
                ["Cookie": "sid=alice", "Origin": "https://evil.example"], ["Cookie": "sid=alice", "Origin": "null"],
                ["Cookie": "sid=alice", "Sec-Fetch-Site": "cross-site"],
            ] {
                let refused = try await invalidate(server, headers: headers)
                #expect(refused.status == 403, "\(headers)")
                #expect(refused.errorCode == "origin-not-allowed")
            }
            let form = try await invalidate(server, headers: ["Cookie": "sid=alice", "Content-Type": "text/plain"])
            #expect(form.status == 415)
            #expect(try await read(server, "me", cookie: "sid=alice").status == 200, "nothing was dropped")

            let own = try await invalidate(server, headers: ["Cookie": "sid=alice", "Origin": "https://m.example.test"])
            #expect(own.status == 200, "\(own.text)")
            #expect(try own.decoded(InvalidationRoutes.Dropped.self).dropped == 2)
            let gone = try await read(server, "me", cookie: "sid=alice")
            #expect(gone.status == 404 && gone.header("X-Prefetch-Reason") == "invalidated")
        }
    }

    /// SECURITY.md: an invalidation reaches only the caller's own identity.
    @Test func oneUsersInvalidationNeverTouchesAnothersOrTheSharedEntries() async throws {
        try await withServe { server, upstream in
            try await open(server, cookie: "sid=alice")
            try await open(server, cookie: "sid=bob")

            let anonymous = try await invalidate(server, headers: [:])
            #expect(anonymous.status == 401)
            #expect(anonymous.errorCode == "credentials-required")
            #expect(try await invalidate(server, headers: ["Cookie": "  "]).status == 401)

            let bob = try await invalidate(server, headers: ["Cookie": "sid=bob"])
            #expect(bob.status == 200, "\(bob.text)")
            #expect(try bob.decoded(InvalidationRoutes.Dropped.self).dropped == 2)
            #expect(try await read(server, "me", cookie: "sid=bob").header("X-Prefetch-Reason") == "invalidated")
            for name in ["me", "cart"] {
                let alice = try await read(server, name, cookie: "sid=alice")
                #expect(alice.status == 200 && alice.header("X-Prefetch") == "hit", "\(name): \(alice.text)")
            }
            // The shared (anonymous) response stays for everyone.
            #expect(try await read(server, "many", cookie: "sid=bob").status == 200)
            #expect(upstream.hits(path: "/inv/many") == 1)
        }
    }

    /// SECURITY.md: the operator surface alone drops by interface or surrogate key, and is not on the page listener.
    @Test func theOperatorInvalidationIsNotOnThePageListener() async throws {
        try await withServe { server, _ in
            try await open(server, cookie: "sid=alice")
            let onPage = try await oneRequest(port: server.port, .post, "/v1/store/invalidate", body: #"{"interface": "me"}"#)
            #expect(onPage.status == 404)
            #expect(onPage.errorCode == "not-found")
            let wrongMethod = try await oneRequest(port: server.port, .get, "/v1/invalidate")
            #expect(wrongMethod.status == 405)
            #expect(wrongMethod.header("Allow")?.contains("POST") == true)
            let pageRouteOnAdmin = try await oneRequest(
                port: server.adminPort, .post, "/v1/invalidate", headers: ["Cookie": "sid=alice"], body: "{}")
            #expect(pageRouteOnAdmin.status == 404)
            #expect(try await read(server, "me", cookie: "sid=alice").status == 200)

            let byInterface = try await oneRequest(port: server.adminPort, .post, "/v1/store/invalidate", body: #"{"interface": "me"}"#)
            #expect(byInterface.status == 200, "\(byInterface.text)")
            #expect(try byInterface.decoded(InvalidationRoutes.Dropped.self).dropped == 1)
            #expect(try await read(server, "me", cookie: "sid=alice").header("X-Prefetch-Reason") == "invalidated")
            #expect(try await read(server, "cart", cookie: "sid=alice").status == 200)

            let bySurrogateKey = try await oneRequest(
                port: server.adminPort, .post, "/v1/store/invalidate", body: #"{"surrogateKey": "catalog"}"#)
            #expect(try bySurrogateKey.decoded(InvalidationRoutes.Dropped.self).dropped == 1)
            #expect(try await read(server, "cart", cookie: "sid=alice").header("X-Prefetch-Reason") == "invalidated")

            let metrics = try await oneRequest(port: server.adminPort, .get, "/metrics")
            #expect(metrics.text.contains(#"prefetch_invalidations_total{scope="interface"} 1"#))
            #expect(metrics.text.contains(#"prefetch_invalidated_entries_total{scope="surrogate_key"} 1"#))
        }
    }

    /// SECURITY.md: buffers an outsider can grow are bounded; every error names the input.
    @Test func malformedOrOversizedBodiesAreRefusedNamingTheProblem() async throws {
        try await withServe { server, _ in
            let alice = ["Cookie": "sid=alice"]
            let page: [(String, Int, String)] = [
                (String(repeating: " ", count: EngineSettings().maximumRequestBody) + "{}", 413, "too-large"),
                ("[1]", 400, "bad-json"),
                ("{", 400, "bad-json"),
                (#"{"headers": {"Cookie": "sid=bob"}}"#, 400, "bad-json"),
                (#"{"user": "bob"}"#, 400, "bad-json"),
            ]
            for (body, status, code) in page {
                let reply = try await invalidate(server, headers: alice, body: body)
                #expect(reply.status == status && reply.errorCode == code, "\(body.prefix(40)): \(reply.text)")
            }
            #expect(try await invalidate(server, headers: alice, body: #"{"user": "bob"}"#).text.contains("user"))
            #expect(try await invalidate(server, headers: alice, body: "").status == 200, "an empty body is an empty request")

            let long = String(repeating: "k", count: 257)
            let admin: [(String, String)] = [
                ("{}", "missing-target"),
                (#"{"interface": "me", "surrogateKey": "cart"}"#, "ambiguous-target"),
                (#"{"interface": 7}"#, "bad-interface"),
                (#"{"interface": "../me"}"#, "bad-interface"),
                (#"{"interface": ""}"#, "bad-interface"),
                (#"{"surrogateKey": "a b"}"#, "bad-surrogate-key"),
                (#"{"surrogateKey": "\#(long)"}"#, "bad-surrogate-key"),
                (#"{"surrogateKey": null}"#, "bad-surrogate-key"),
                (#"{"interface": "me", "extra": 1}"#, "bad-json"),
                ("not json", "bad-json"),
            ]
            for (body, code) in admin {
                let reply = try await oneRequest(port: server.adminPort, .post, "/v1/store/invalidate", body: body)
                #expect(reply.status == 400 && reply.errorCode == code, "\(body.prefix(40)): \(reply.text)")
                #expect(reply.apiError?.message.isEmpty == false)
            }
            let huge = try await oneRequest(
                port: server.adminPort, .post, "/v1/store/invalidate",
                body: #"{"interface": ""# + String(repeating: "a", count: 5000) + #""}"#)
            #expect(huge.status == 413 && huge.errorCode == "too-large")
        }
    }

    /// SECURITY.md: a response tagged with thousands of surrogate keys records only the first 32.
    @Test func aResponseWithThousandsOfSurrogateKeysIsBounded() async throws {
        try await withServe { server, _ in
            try await open(server, cookie: nil)
            func purge(_ key: String) async throws -> Int {
                let reply = try await oneRequest(
                    port: server.adminPort, .post, "/v1/store/invalidate", body: #"{"surrogateKey": "\#(key)"}"#)
                #expect(reply.status == 200, "\(reply.text)")
                return try reply.decoded(InvalidationRoutes.Dropped.self).dropped
            }
            #expect(try await purge("key-4999") == 0, "keys past the 32nd are not recorded")
            #expect(try await purge("key-32") == 0)
            #expect(try await purge("key-31") == 1)
        }
    }
}
