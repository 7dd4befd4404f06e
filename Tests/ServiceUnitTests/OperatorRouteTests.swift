import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The operator surface's door and refusals, through its router in process (RouterSupport.swift). That the
/// surface is a listener of its own, and refuses requests addressed to a name other than its own, needs a socket
/// and an authority the router client cannot set: SecurityTests.
@Suite("operator routes", .timeLimit(.minutes(2)))
struct OperatorRouteTests {
    static let config = TestConfig([
        TestPage("https://m.example.test/p", [TestInterface(name: "p.a", api: "https://api.example.test/a", urlParam: true)])
    ])

    static func tokenSettings() -> ServiceSettings {
        var settings = testSettings()
        settings.listeners.adminToken = "operator-secret"
        return settings
    }

    /// The operator document describes the listener as configured: with a token every operation but none asks for
    /// the bearer token and may answer `401`; without one, no operation asks for a credential or documents a `401`,
    /// as the server then answers without one (a plain schemathesis run checks exactly that).
    @Test func theOperatorDocumentAsksForTheTokenOnlyWhenOneIsConfigured() async throws {
        for withToken in [true, false] {
            try await withOperatorRouter(config: Self.config, settings: withToken ? Self.tokenSettings() : testSettings()) { service in
                let reply = try await service.get("/openapi.yaml", headers: withToken ? ["Authorization": "Bearer operator-secret"] : [:])
                #expect(reply.status == 200)
                let document = reply.text
                let requirements = document.components(separatedBy: "- adminToken: []").count - 1
                let unauthorized = document.components(separatedBy: "/AdminUnauthorized\"").count - 1
                #expect(document.contains("/v1/config:") && document.contains("/metrics:"), "the operator operations are there")
                if withToken {
                    #expect(requirements >= 10 && unauthorized >= 10, "\(requirements) requirements, \(unauthorized) 401s")
                } else {
                    #expect(requirements == 0 && unauthorized == 0, "\(requirements) requirements, \(unauthorized) 401s")
                    #expect(!document.contains("      security:"))
                    // Still the same operations, each with its responses.
                    #expect(document.contains("operationId: metrics"))
                }
            }
        }
    }

    @Test func withATokenEveryRouteNeedsTheBearerToken() async throws {
        try await withOperatorRouter(config: Self.config, settings: Self.tokenSettings()) { service in
            for (label, headers) in [
                ("no Authorization", [:]), ("a wrong token", ["Authorization": "Bearer operator-secreT"]),
                ("another scheme", ["Authorization": "Basic b3BlcmF0b3Itc2VjcmV0"]), ("a bare token", ["Authorization": "operator-secret"]),
            ] {
                for path in ["/v1/config", "/metrics", "/v1/plan?url=\(q("https://m.example.test/p"))", "/nope"] {
                    let reply = try await service.get(path, headers: headers)
                    #expect(reply.status == 401, "\(label) \(path): \(reply.text)")
                    #expect(try reply.failure().code == .adminUnauthorized, "\(label) \(path)")
                    #expect(reply.header("WWW-Authenticate") == #"Bearer realm="prefetch-admin""#, "\(label) \(path)")
                }
            }
            let status = try await service.get("/v1/config", headers: ["Authorization": "Bearer operator-secret"])
            #expect(status.status == 200, "\(status.text)")
            let fixed = try status.decoded(ConfigRoutes.FixedStatus.self)
            #expect(fixed.version == "7")
            #expect(fixed.ready)
            #expect(fixed.active == "primary")
            #expect(fixed.source == "fixed")
        }
    }

    /// Without a token the operator surface still refuses a browser page of another origin (so a page cannot drive
    /// it through a user's browser) and a request with a second `Host`.
    @Test func withoutATokenPagesOfOtherOriginsAndASecondHostAreRefused() async throws {
        try await withOperatorRouter(config: Self.config) { service in
            let foreign = try await service.post("/v1/config/refresh", headers: ["Origin": "https://m.example.test"], body: "")
            #expect(foreign.status == 403, "\(foreign.text)")
            #expect(try foreign.failure().code == .originNotAllowed)
            #expect(try foreign.failure().message.contains("other origins"))
            let ownOrigin = try await service.get("/v1/config", headers: ["Origin": "http://localhost"])
            #expect(ownOrigin.status == 200, "the listener's own origin (the router client's authority is localhost)")
            let twoHosts = try await service.get("/v1/config", headers: ["Host": "evil.test"])
            #expect(twoHosts.status == 400, "\(twoHosts.text)")
            #expect(try twoHosts.failure().code == .badHost)
            #expect(try await service.get("/v1/config").status == 200)
        }
    }

    @Test func operatorRequestsThatNameNothingOrTooMuchAreRefused() async throws {
        try await withOperatorRouter(config: Self.config) { service in
            let refused: [(method: HTTPRequest.Method, uri: String, body: String?, status: Int, code: FailureCode, text: String)] = [
                (.get, "/v1/plan", nil, 400, .missingURL, "the query parameter url"),
                (.get, "/v1/plan?url=\(q("https://m.example.test/other"))", nil, 404, .noConfig, "https://m.example.test/other"),
                (.get, "/v1/plan?url=\(q("ftp://m.example.test/p"))", nil, 400, .invalidURL, "ftp"),
                (.post, "/v1/store/invalidate", "[]", 400, .badJSON, "must be a JSON object"),
                (.post, "/v1/store/invalidate", "{}", 400, .missingTarget, #"give one of "interface""#),
                (
                    .post, "/v1/store/invalidate", #"{"interface": "p.a", "surrogateKey": "k"}"#, 400, .ambiguousTarget,
                    "give only one"
                ),
                (.post, "/v1/store/invalidate", #"{"interface": "p.a", "all": true}"#, 400, .badJSON, #"unknown member "all""#),
                (.post, "/v1/config/refresh", #"{"trigger": "cron"}"#, 400, .badTrigger, #"trigger "cron" is not one of"#),
                (.post, "/v1/config/refresh", "", 409, .fixedConfig, "fixed config"),
                (.post, "/v1/config/canary/promote", "", 409, .fixedConfig, "no canary to change"),
                (.post, "/v1/config/canary/rollback", #"{"force": true}"#, 400, .badJSON, #"unknown member "force""#),
                (.post, "/v1/config/refresh", nil, 415, .unsupportedMediaType, "send application/json"),
            ]
            for refusal in refused {
                // A POST without a body goes without Content-Type: the JSON body rule's case.
                let headers = refusal.method == .post && refusal.body == nil ? ["Content-Type": "text/plain"] : [:]
                let reply = try await service.request(refusal.method, refusal.uri, headers: headers, body: refusal.body)
                let label = "\(refusal.method) \(refusal.uri) \(refusal.body ?? "")"
                #expect(reply.status == refusal.status, "\(label): \(reply.text)")
                #expect(reply.header("Content-Type") == "application/json", "\(label)")
                let failure = try reply.failure()
                #expect(failure.code == refusal.code, "\(label): \(reply.text)")
                #expect(failure.message.contains(refusal.text), "\(label): \(failure.message)")
                #expect(reply.header("X-Prefetch-Reason") == nil, "not a prefetch miss: \(label)")
            }
            let dropped = try await service.post("/v1/store/invalidate", body: #"{"interface": "p.a"}"#)
            #expect(dropped.status == 200, "\(dropped.text)")
            #expect(try dropped.decoded(InvalidationRoutes.Dropped.self).dropped == 0, "nothing was stored")
        }
    }

    /// The operator surface answers unknown paths and methods in the API's error shape too; the page endpoints are
    /// not there.
    @Test func unmatchedOperatorRoutesAre405WithAllowOrAJSON404() async throws {
        try await withOperatorRouter(config: Self.config) { service in
            for (method, path, allow) in [
                (HTTPRequest.Method.post, "/metrics", "GET"), (.delete, "/v1/config/refresh", "POST"), (.post, "/v1/plan", "GET"),
            ] {
                let reply = try await service.request(method, path)
                #expect(reply.status == 405, "\(method) \(path): \(reply.text)")
                #expect(reply.header("Allow") == allow, "\(method) \(path)")
                #expect(try reply.failure().code == .methodNotAllowed)
            }
            for path in ["/v1/prefetch", "/v1/data", "/healthz", "/nope"] {
                let reply = try await service.get(path)
                #expect(reply.status == 404, "page endpoints are not on the operator surface: \(path): \(reply.text)")
                #expect(try reply.failure().code == .notFound, "\(path)")
            }
        }
    }
}
