import Dispatch
package import HTTPTypes
package import NIOCore
import PrefetchCore
import PrefetchEngine
import PrefetchStore
import ResourceProvider
import Synchronization

/// The page surface's routes besides the five the event loop answers from the store (``FastHandoff``: the trigger,
/// the open, the results view and the two data reads): one typed table, matched on the path's segments, the route's
/// template being its metric label.
package enum PageRoute: Equatable, Sendable {
    /// `GET /healthz`
    case health
    /// `GET /readyz`
    case readiness
    /// `GET /openapi.yaml`
    case document
    /// `GET /`
    case landing
    /// `GET /v1/client.js`
    case clientScript
    /// `GET /demo/shell.html`, `GET /demo/page.html` (with `--demo`): the file's name under `Resources/web`.
    case demoFile(String)
    /// `GET /demo` (with `--demo`)
    case demo
    /// `GET /demo/interfaces` (with `--demo`)
    case demoInterfaces
    /// `GET /v1/resources`
    case resources
    /// `GET /v1/resources/blob/{sha256}`
    case resourceBlob(String)
    /// `POST /v1/invalidate`
    case invalidate
    /// `POST /v1/renderers/acquire`
    case acquire
    /// `POST /v1/renderers/{id}/release`
    case release(String)

    /// The route `method` takes on `path` (without its query), or nil: no such route (the path may still be an
    /// endpoint under other methods, a `405`). `HEAD` takes every `GET` route of this table (RFC 9110 9.3.2: the
    /// same head, no body); the store's read routes are not in it, and refuse `HEAD` (``FastHandoff``).
    package init?(_ method: HTTPRequest.Method, path: Substring, demo: Bool) {
        // Empty segments are dropped: `//healthz/` is `/healthz`.
        let segments = path.split(separator: "/")
        guard path.first == "/" else { return nil }
        let route: PageRoute? =
            switch (method == .head ? .get : method, segments[...]) {
            case (.get, []): .landing
            case (.get, ["healthz"]): .health
            case (.get, ["readyz"]): .readiness
            case (.get, ["openapi.yaml"]): .document
            case (.get, ["v1", "client.js"]): .clientScript
            case (.get, ["v1", "resources"]): .resources
            case (.get, let rest) where rest.count == 4 && rest.starts(with: ["v1", "resources", "blob"]) && !rest.last!.isEmpty:
                .resourceBlob(String(rest.last!))
            case (.post, ["v1", "invalidate"]): .invalidate
            case (.post, ["v1", "renderers", "acquire"]): .acquire
            case (.post, let rest)
            where rest.count == 4 && rest.first == "v1" && rest.dropFirst().first == "renderers"
                && rest.last == "release" && !rest.dropFirst(2).first!.isEmpty:
                .release(String(rest.dropFirst(2).first!))
            case (.get, ["demo"]) where demo: .demo
            case (.get, ["demo", "interfaces"]) where demo: .demoInterfaces
            case (.get, ["demo", "shell.html"]) where demo: .demoFile("demo/shell.html")
            case (.get, ["demo", "page.html"]) where demo: .demoFile("demo/page.html")
            default: nil
            }
        guard let route else { return nil }
        self = route
    }

    /// The route's template, as the request metrics name it (`http.route`).
    package var template: String {
        switch self {
        case .health: "/healthz"
        case .readiness: "/readyz"
        case .document: "/openapi.yaml"
        case .landing: "/"
        case .clientScript: "/v1/client.js"
        case .demoFile(let file): "/" + file
        case .demo: "/demo"
        case .demoInterfaces: "/demo/interfaces"
        case .resources: "/v1/resources"
        case .resourceBlob: "/v1/resources/blob/{sha256}"
        case .invalidate: "/v1/invalidate"
        case .acquire: "/v1/renderers/acquire"
        case .release: "/v1/renderers/{id}/release"
        }
    }

    /// Every operation of the page surface as `METHOD template`: the five store routes (``FastHandoff``) and this
    /// table's (the demo's only with `demo`).
    package static func operations(demo: Bool) -> [String] {
        let store = [
            "POST \(FastHandoff.triggerRoute)", "POST \(FastHandoff.openRoute)", "GET \(FastHandoff.resultsRoute)",
            "GET \(FastHandoff.ticketDataRoute)", "GET \(FastHandoff.pageDataRoute)",
        ]
        var routes: [PageRoute] = [
            .health, .readiness, .document, .landing, .clientScript, .resources, .resourceBlob("{sha256}"), .invalidate, .acquire,
            .release("{id}"),
        ]
        if demo { routes += [.demoFile("demo/shell.html"), .demoFile("demo/page.html"), .demo, .demoInterfaces] }
        return store + routes.map { "\($0.readsBody ? "POST" : "GET") \($0.template)" }
    }

    /// Whether the route reads a JSON body: its `Content-Type` must say JSON, and its body is collected (up to the
    /// request body limit) before it is answered.
    package var readsBody: Bool {
        switch self {
        case .invalidate, .acquire, .release: true
        default: false
        }
    }
}

/// The page surface's answers to every request the five store routes do not take (``PageRoute``, preflights, and
/// requests no route takes), each rule in one place: the origin guard and the headers every answer carries
/// (``AllowedOrigins/admit(_:path:)``, `Admission.decorate`), the preflight, the media type of a body, `404` and
/// `405` (from the endpoints `openapi.yaml` lists for the page surface), the routes' own answers and refusals, and
/// the request metrics. What answers is decided at the request's head: now (``Cold/now(_:)``), or once its body is
/// in (``Cold/collect(_:)``, then ``answer(_:_:body:caller:)``).
package struct PageAPI: Sendable {
    package let hot: FastHandoff
    package let statics: StaticRoutes
    package let resources: ResourceRoutes
    package let renderers: RendererRoutes
    package let invalidation: InvalidationRoutes
    /// The surface's `openapi.yaml`.
    package let document: [UInt8]
    /// The endpoints of the surface, by path: what a `405` allows.
    package let endpoints: EndpointTable

    package init(
        hot: FastHandoff, statics: StaticRoutes, resources: ResourceRoutes, renderers: RendererRoutes, invalidation: InvalidationRoutes,
        document: [UInt8], endpoints: EndpointTable
    ) {
        self.hot = hot
        self.statics = statics
        self.resources = resources
        self.renderers = renderers
        self.invalidation = invalidation
        self.document = document
        self.endpoints = endpoints
    }

    /// What the head decides.
    package enum Cold {
        /// The answer, written at once (a body, if any, is dropped).
        case now(PageAnswer)
        /// The body is collected (up to ``FastHandoff/bodyLimit``), then the route answers it.
        case collect(PageRoute)
    }

    /// The answer to `head`, or the route that reads its body.
    package func head(_ head: HTTPRequest) -> Cold {
        let started = DispatchTime.now().uptimeNanoseconds
        let target = PageTarget(head.path ?? "/")
        let path = target.path
        let route = PageRoute(head.method, path: path, demo: statics.demo)
        let label = route?.template ?? "Unknown"
        if let refusal = APIError.unknownMethod(head.method) {
            return .now(answer(refusal, to: head, origin: nil, route: label, started: started))
        }
        let origin: AllowedOrigins.Admission
        switch hot.origins.admit(head.headerFields, path: path) {
        case .success(let admitted):
            origin = admitted
        case .failure(let refusal):
            hot.orchestrator.metrics.denied(refusal.code.rawValue)
            return .now(answer(refusal, to: head, origin: nil, route: label, started: started))
        }
        if head.method == .options {
            var fields = HTTPFields()
            if origin.origin != nil {
                fields[.accessControlAllowMethods] = "GET, POST, OPTIONS"
                fields[.accessControlAllowHeaders] = "Authorization, Content-Type, \(TicketAccess.readKeyHeader)"
                fields[.accessControlMaxAge] = "600"
            }
            return .now(answer(.noContent, fields, ByteBuffer(), to: head, origin: origin, route: label, started: started))
        }
        guard let route else {
            return .now(answer(unmatched(head.method, path: path), to: head, origin: origin, route: label, started: started))
        }
        if route.readsBody {
            if let refusal = JSONBody.refusal(contentType: head.headerFields[.contentType]) {
                return .now(answer(refusal, to: head, origin: origin, route: label, started: started))
            }
            return .collect(route)
        }
        do throws(APIError) {
            let (status, fields, body) = try parts(route, head, query: target.query)
            return .now(answer(status, fields, body, to: head, origin: origin, route: label, started: started))
        } catch {
            return .now(answer(error, to: head, origin: origin, route: label, started: started))
        }
    }

    /// The answer of a route that reads its body, once the body is in. `left` says whether the caller's connection
    /// closed meanwhile (a renderer leased for it is handed back).
    package func answer(
        _ route: PageRoute, _ head: HTTPRequest, body: ByteBuffer, caller: String, left: Abandonment? = nil
    ) async -> PageAnswer {
        let started = DispatchTime.now().uptimeNanoseconds
        let origin =
            (try? hot.origins.admit(head.headerFields, path: PageTarget(head.path ?? "/").path).get()) ?? .init(origin: nil, grant: .none)
        do throws(APIError) {
            let (status, fields, bytes) = try await parts(route, head.headerFields, body: body, caller: caller, left: left)
            return answer(status, fields, bytes, to: head, origin: origin, route: route.template, started: started)
        } catch {
            return answer(error, to: head, origin: origin, route: route.template, started: started)
        }
    }

    /// The `404` (no endpoint at `path`) or `405` (an endpoint under other methods, with `Allow`).
    package func unmatched(_ method: HTTPRequest.Method, path: Substring) -> APIError {
        let methods = endpoints.allowedMethods(path: String(path))
        guard !methods.isEmpty else {
            return APIError(
                status: .notFound, code: .notFound, message: "no endpoint at \(quoted(String(path), limit: 120)); see /openapi.yaml")
        }
        var allowed = methods
        // `HEAD` is allowed wherever this table's `GET` is (not on the store's read routes: a read is counted, and a
        // no-store answer consumed, so a head without the body would lose it).
        if let get = allowed.firstIndex(of: "GET"), PageRoute(.get, path: path, demo: statics.demo) != nil {
            allowed.insert("HEAD", at: get + 1)
        }
        let allow = allowed.joined(separator: ", ")
        var error = APIError(
            status: .methodNotAllowed, code: .methodNotAllowed,
            message: "\(method.rawValue) is not allowed on \(quoted(String(path), limit: 120)); allowed: \(allow)")
        error.allow = allow
        return error
    }

    /// The answer of a route that needs no body.
    private func parts(
        _ route: PageRoute, _ head: HTTPRequest, query: PageTarget.Query
    ) throws(APIError) -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        switch route {
        case .health:
            return JSONEncoding.parts(.ok, HealthAnswer())
        case .readiness:
            let orchestrator = hot.orchestrator
            let answer =
                orchestrator.currentConfig() == nil
                ? ReadinessAnswer(ready: false, code: .noConfig)
                : ReadinessAnswer(ready: true, code: orchestrator.storeHealth == .degraded ? .degraded : .ok)
            return JSONEncoding.parts(answer.ready ? .ok : .serviceUnavailable, answer)
        case .document:
            return (.ok, [.contentType: "application/yaml"], ByteBuffer(bytes: document))
        case .landing:
            return statics.landing(authority: head.authority)
        case .clientScript:
            return WebFiles.parts("client.js", ifNoneMatch: head.headerFields[.ifNoneMatch])
        case .demoFile(let file):
            return WebFiles.parts(file, ifNoneMatch: head.headerFields[.ifNoneMatch])
        case .demo:
            return (.found, [.location: "/demo/shell.html"], ByteBuffer())
        case .demoInterfaces:
            return JSONEncoding.parts(.ok, try statics.interfaces(page: query["page"].map(String.init)))
        case .resources:
            return resources.check(version: query["version"].map(String.init))
        case .resourceBlob(let hash):
            // A `HEAD` ignores `Range` (RFC 9110 14.2: only a `GET` is ranged) and is not counted as a read.
            let isGet = head.method == .get
            let answer = resources.provider.blob(
                hash, ifNoneMatch: head.headerFields[.ifNoneMatch], range: isGet ? head.headerFields[.range] : nil, counted: isGet)
            return (answer.status, answer.headers, answer.body)
        case .invalidate, .acquire, .release:
            preconditionFailure("a route that reads its body is answered once the body is in")
        }
    }

    /// The answer of a route that reads its body.
    private func parts(
        _ route: PageRoute, _ headers: HTTPFields, body: ByteBuffer, caller: String, left: Abandonment?
    ) async throws(APIError) -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        switch route {
        case .invalidate:
            return JSONEncoding.parts(.ok, try await invalidation.invalidateCaller(headers: headers, body: body))
        case .acquire:
            let object = try PrefetchRoutes.jsonObject(body)
            let profile = try RendererRoutes.string(object, "profile") ?? "main"
            let page = try RendererRoutes.string(object, "page")
            let leased = try await renderers.acquire(
                profile: profile, page: page, caller: RendererRoutes.leaseCaller(address: caller), left: left)
            return JSONEncoding.parts(leased.status, leased.value)
        case .release(let id):
            return JSONEncoding.parts(.ok, try await renderers.release(id: id, body: body))
        default:
            preconditionFailure("a route without a body is answered at its head")
        }
    }

    /// A refusal as every answer of the surface is written (``answer(_:_:_:to:origin:route:started:)``).
    private func answer(
        _ error: APIError, to head: HTTPRequest, origin: AllowedOrigins.Admission?, route: String, started: UInt64
    ) -> PageAnswer {
        var (status, fields, body) = (try? error.parts()) ?? (.internalServerError, [:], ByteBuffer())
        // `Allow` after the length.
        if let allow = error.allow {
            fields[.contentLength] = String(body.readableBytes)
            fields[.allow] = allow
        }
        return answer(status, fields, body, to: head, origin: origin ?? .init(origin: nil, grant: .none), route: route, started: started)
    }

    /// An answer with the surface's headers (its length, the CORS headers of an admitted origin, the security
    /// headers), encoded, and counted in the request metrics. An answer to `HEAD` (a `GET` route's answer, a `405`,
    /// or the origin guard's refusal) is its head alone, its `Content-Length` the body's it would have had.
    private func answer(
        _ status: HTTPResponse.Status, _ fields: HTTPFields, _ body: ByteBuffer, to head: HTTPRequest,
        origin: AllowedOrigins.Admission, route: String, started: UInt64
    ) -> PageAnswer {
        var fields = fields
        if status.mayHaveBody { fields[.contentLength] = String(body.readableBytes) }
        origin.decorate(&fields)
        hot.requestMetrics.record(
            route: route, method: head.method, status: status, nanoseconds: DispatchTime.now().uptimeNanoseconds - started)
        let response = HTTPResponse(status: status, headerFields: fields)
        guard head.method != .head else { return PageAnswer(response, body: ByteBuffer(), headOnly: true) }
        return PageAnswer(response, body: body)
    }
}

/// Whether the caller of a request answered in a task has left (its connection closed before the answer was
/// written): set by the connection's handler, read by the task.
package final class Abandonment: Sendable {
    package init() {}

    private let left = Atomic<Bool>(false)

    /// The caller left.
    package func leave() { left.store(true, ordering: .releasing) }

    package var hasLeft: Bool { left.load(ordering: .acquiring) }
}

extension HTTPResponse.Status {
    /// Whether an answer with this status may carry a body (not 1xx, `204`, `304`).
    package var mayHaveBody: Bool { !(100..<200).contains(code) && code != 204 && code != 304 }
}
