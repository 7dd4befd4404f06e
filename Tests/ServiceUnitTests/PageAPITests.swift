import HTTPTypes
import Logging
import NIOCore
import PrefetchCore
import PrefetchDNS
import PrefetchEngine
import PrefetchFetcher
import PrefetchStore
import PrefetchTestSupport
import Prometheus
import RendererPool
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The page API's routes in process, no socket: each request's answer as the page pipeline writes it (status, the
/// fields a client acts on, the body), from the same functions the event loop calls (`PageAPI.head`, then
/// `PageAPI.answer` for a route that reads its body).
@Suite("page API in process")
struct PageAPITests {
    static let page = "https://m.example.com/item"

    /// A page API over an engine whose config (when given) has one page on `m.example.com`, with the demo or not.
    static func api(config: Bool = true, demo: Bool = false) throws -> PageAPI {
        let logger = Logger(label: "page-api-test")
        let registry = PrometheusCollectorRegistry()
        let factory = PrometheusMetricsFactory(registry: registry)
        let fetcher = Fetcher(logger: logger)
        let loaded =
            config
            ? try TestConfig([TestPage(page, [TestInterface(name: "a", api: "https://api.example.com/a", urlParam: true)])]).loaded() : nil
        let orchestrator = Orchestrator(
            settings: EngineSettings(), store: MemoryStore(logger: logger), fetcher: fetcher,
            resolver: try HostResolver(fetcher: fetcher, logger: logger), tickets: LocalTicketRegistry(capacity: 10),
            metrics: EngineMetrics(factory: factory), logger: logger, configs: ConfigHolder(loaded))
        let handoff = FastHandoff(
            orchestrator: orchestrator, origins: AllowedOrigins(extra: [], servedConfigs: { orchestrator.servedConfigs() }),
            requestMetrics: FastHandoffMetrics(), renderers: nil)
        var listeners = ListenerSettings()
        listeners.demo = demo
        let parts = ServiceParts(
            orchestrator: orchestrator, renderers: try RendererPools(profiles: [:], logger: logger), listeners: listeners,
            configSource: nil, configPath: "", updater: nil, registry: registry, logger: logger)
        return PageAPI(parts, handoff: handoff, routes: RouteSets(parts, factory: factory))
    }

    /// An answer as the client reads it.
    struct Written {
        var status: Int
        var head: String
        var body: String

        /// `answer` as the page pipeline writes it (``EncodedAnswer``).
        init(_ answer: PageAnswer) {
            let answer = EncodedAnswer(answer, heads: nil)
            switch answer.head {
            case .bytes(let bytes): head = String(buffer: bytes)
            case .framedByEncoder(let response):
                head =
                    "HTTP/1.1 \(response.status.code) \(response.status.reasonPhrase)\r\n"
                    + response.headerFields.map { "\($0.name.rawName): \($0.value)\r\n" }.joined() + "\r\n"
            }
            status = Int(head.dropFirst("HTTP/1.1 ".count).prefix(3)) ?? 0
            body = String(buffer: answer.body)
        }

        /// The value of the field `name`, if the head has it.
        func field(_ name: String) -> String? {
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ": ") }.map {
                String($0.dropFirst(name.count + 2))
            }
        }
    }

    static func request(_ method: HTTPRequest.Method, _ target: String, _ fields: HTTPFields = [:]) -> HTTPRequest {
        HTTPRequest(method: method, scheme: "http", authority: "127.0.0.1:8080", path: target, headerFields: fields)
    }

    /// The answer `api` gives at the head; fails the test when it wants the body first.
    static func answer(_ api: PageAPI, _ request: HTTPRequest, sourceLocation: SourceLocation = #_sourceLocation) -> Written? {
        guard case .now(let answer) = api.head(request) else {
            Issue.record("\(request.method) \(request.path ?? "") wants its body", sourceLocation: sourceLocation)
            return nil
        }
        return Written(answer)
    }

    /// Every answer carries the security headers, and a `Content-Length` that frames its body.
    static func expectSurface(_ written: Written, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(written.field("X-Content-Type-Options") == "nosniff", "\(written.head)", sourceLocation: sourceLocation)
        #expect(written.field("Referrer-Policy") == "no-referrer", "\(written.head)", sourceLocation: sourceLocation)
        #expect(written.field("Cache-Control") != nil, "\(written.head)", sourceLocation: sourceLocation)
    }

    @Test func healthReadinessAndTheDocumentAreAnsweredAtTheHead() throws {
        let api = try Self.api()
        let health = try #require(Self.answer(api, Self.request(.get, "/healthz")))
        #expect(health.status == 200 && health.body == #"{"status":"ok"}"#)
        #expect(health.field("Content-Length") == "15" && health.field("Cache-Control") == "private, no-store")
        Self.expectSurface(health)
        let ready = try #require(Self.answer(api, Self.request(.get, "/readyz")))
        #expect(ready.status == 200 && ready.body == #"{"code":"ok","ready":true}"#, "\(ready.body)")
        let notReady = try #require(Self.answer(try Self.api(config: false), Self.request(.get, "/readyz")))
        #expect(notReady.status == 503 && notReady.body == #"{"code":"no-config","ready":false}"#, "\(notReady.body)")
        let document = try #require(Self.answer(api, Self.request(.get, "/openapi.yaml")))
        #expect(document.status == 200 && document.field("Content-Type") == "application/yaml")
        #expect(
            document.body.hasPrefix("openapi: ") && !document.body.contains("\n  /v1/debug/opens:"),
            "the operator's operations are not on the page surface")
        // Empty segments are dropped, as every route is matched.
        #expect(Self.answer(api, Self.request(.get, "//healthz/"))?.status == 200)
    }

    @Test func aRequestNoRouteTakesIs404Or405InTheAPIsShape() throws {
        let api = try Self.api()
        let missing = try #require(Self.answer(api, Self.request(.get, "/nowhere")))
        #expect(
            missing.status == 404 && missing.body == #"{"error":"not-found","message":"no endpoint at \"/nowhere\"; see /openapi.yaml"}"#)
        Self.expectSurface(missing)
        let put = try #require(Self.answer(api, Self.request(.put, "/healthz")))
        #expect(put.status == 405 && put.field("Allow") == "GET, HEAD", "\(put.head)")
        #expect(put.body.contains(#""error":"method-not-allowed""#) && put.body.contains("allowed: GET, HEAD"), "\(put.body)")
        // `HEAD` of a static route: the `GET` answer's head alone, its length the body's the `GET` has.
        let head = try #require(Self.answer(api, Self.request(.head, "/healthz")))
        #expect(head.status == 200 && head.body.isEmpty && head.field("Content-Length") == "15", "\(head.head)")
        let document = try #require(Self.answer(api, Self.request(.head, "/openapi.yaml")))
        let full = try #require(Self.answer(api, Self.request(.get, "/openapi.yaml")))
        #expect(document.status == 200 && document.body.isEmpty && document.field("Content-Length") == String(full.body.utf8.count))
        // A store read route refuses it (a read is counted, a no-store answer consumed): its `405`'s head alone.
        let read = try #require(Self.answer(api, Self.request(.head, "/v1/data")))
        #expect(read.status == 405 && read.body.isEmpty && read.field("Allow") == "GET, OPTIONS", "\(read.head)")
        // A method no listener implements: `501` on any path, before the route table.
        for path in ["/healthz", "/nowhere"] {
            let purge = try #require(Self.answer(api, Self.request(HTTPRequest.Method("PURGE")!, path)))
            #expect(purge.status == 501 && purge.body.contains(#""error":"not-implemented""#), "\(purge.head)\(purge.body)")
            #expect(purge.field("Allow") == nil)
            Self.expectSurface(purge)
        }
        // The demo is not served without `--demo`.
        #expect(Self.answer(api, Self.request(.get, "/demo/shell.html"))?.status == 404)
        #expect(Self.answer(try Self.api(demo: true), Self.request(.get, "/demo"))?.field("Location") == "/demo/shell.html")
    }

    @Test func theOriginGuardAndThePreflightComeFirst() throws {
        let api = try Self.api()
        let foreign = try #require(Self.answer(api, Self.request(.get, "/healthz", [.origin: "https://evil.example.com"])))
        #expect(foreign.status == 403 && foreign.body.contains(#""error":"origin-not-allowed""#), "\(foreign.body)")
        #expect(foreign.field("Access-Control-Allow-Origin") == nil)
        Self.expectSurface(foreign)
        let crossSite = HTTPFields([HTTPField(name: PrefetchHeaders.secFetchSite, value: "cross-site")])
        #expect(Self.answer(api, Self.request(.get, "/healthz", crossSite))?.status == 403)
        // The page client is a public asset: another site's script tag loads it.
        let script = try #require(Self.answer(api, Self.request(.get, "/v1/client.js", crossSite)))
        #expect(script.status == 200 && script.field("Cache-Control") == "public, max-age=300", "\(script.head)")
        let revalidated = try #require(Self.answer(api, Self.request(.get, "/v1/client.js", [.ifNoneMatch: script.field("ETag") ?? ""])))
        #expect(revalidated.status == 304 && revalidated.body.isEmpty)
        // A preflight, for any path: the CORS grant only for the config's page origin.
        let own = try #require(Self.answer(api, Self.request(.options, "/v1/prefetch", [.origin: "https://m.example.com"])))
        #expect(own.status == 204 && own.field("Access-Control-Allow-Origin") == "https://m.example.com", "\(own.head)")
        #expect(own.field("Access-Control-Allow-Methods") == "GET, POST, OPTIONS" && own.field("Access-Control-Max-Age") == "600")
        let bare = try #require(Self.answer(api, Self.request(.options, "/anything")))
        #expect(bare.status == 204 && bare.field("Access-Control-Allow-Methods") == nil, "\(bare.head)")
    }

    @Test func aRouteThatReadsABodyWantsJSONAndThenItsBody() async throws {
        let api = try Self.api()
        let text = try #require(Self.answer(api, Self.request(.post, "/v1/invalidate", [.contentType: "text/plain"])))
        #expect(text.status == 415 && text.body.contains(#""error":"unsupported-media-type""#), "\(text.body)")
        let json: HTTPFields = [.contentType: "application/json"]
        guard case .collect(let route) = api.head(Self.request(.post, "/v1/invalidate", json)) else {
            Issue.record("an invalidation with a JSON body was answered before its body")
            return
        }
        #expect(route == .invalidate)
        let anonymous = Written(
            await api.answer(route, Self.request(.post, "/v1/invalidate", json), body: ByteBuffer(), caller: "127.0.0.1"))
        #expect(anonymous.status == 401 && anonymous.field("X-Prefetch-Reason") == "credentials-required", "\(anonymous.head)")
        var withCookie = json
        withCookie[.cookie] = "sid=1"
        let member = Written(
            await api.answer(
                route, Self.request(.post, "/v1/invalidate", withCookie), body: ByteBuffer(string: #"{"x":1}"#), caller: "127.0.0.1"))
        #expect(member.status == 400 && member.body.contains(#""error":"bad-json""#), "\(member.body)")
        let dropped = Written(
            await api.answer(route, Self.request(.post, "/v1/invalidate", withCookie), body: ByteBuffer(), caller: "127.0.0.1"))
        #expect(dropped.status == 200 && dropped.body == #"{"dropped":0}"#, "\(dropped.body)")
        Self.expectSurface(dropped)

        guard case .collect(let release) = api.head(Self.request(.post, "/v1/renderers/abc/release", json)) else {
            Issue.record("a release with a JSON body was answered before its body")
            return
        }
        #expect(release == .release("abc"))
        let unknown = Written(
            await api.answer(release, Self.request(.post, "/v1/renderers/abc/release", json), body: ByteBuffer(), caller: "127.0.0.1"))
        #expect(unknown.status == 404 && unknown.body.contains(#""error":"unknown-lease""#), "\(unknown.body)")
        let acquire = Written(
            await api.answer(
                .acquire, Self.request(.post, "/v1/renderers/acquire", json), body: ByteBuffer(string: #"{"profile":"nope"}"#),
                caller: "127.0.0.1"))
        #expect(acquire.status == 404 && acquire.body.contains(#""error":"unknown-profile""#), "\(acquire.body)")
    }

    /// The table matches what `openapi.yaml` lists: each template with a value in its parameters, and nothing else.
    @Test(arguments: [
        ("GET", "/v1/resources/blob/abc", PageRoute.resourceBlob("abc")),
        ("POST", "/v1/renderers/x/release", .release("x")),
        ("GET", "/", .landing),
        ("GET", "/v1/resources", .resources),
    ])
    func theTableMatchesByTemplate(_ method: String, _ path: String, _ route: PageRoute) {
        #expect(PageRoute(HTTPRequest.Method(method)!, path: Substring(path), demo: false) == route)
        #expect(PageRoute(HTTPRequest.Method(method)!, path: Substring(path + "/extra"), demo: false) == nil)
    }
}
