import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PrefetchCore
import PrefetchEngine
import PrefetchStore
import Synchronization

/// The static files pages load from the page surface: the page client (`/v1/client.js`) and the demo shell and
/// page. Static files live in `Resources/web` (plain HTML and JS, no build step) and are read once, on first use.
/// Each answer carries an `ETag` (so a revalidation is a `304`) and `X-Content-Type-Options: nosniff`.
/// `GET /v1/client.js` may be cached for 5 minutes; the HTML is revalidated on every load.
struct StaticRoutes: Sendable {
    /// The config in force, for the landing page's demo links.
    let currentConfig: @Sendable () -> PrefetchConfig?
    /// The operator surface's port as configured (0: chosen at start, not linked).
    let adminPort: Int

    var routes: RouteCollection<PageContext> {
        let router = RouteCollection(context: PageContext.self)
        router.get("/") { request, _ in landing(request) }
        for (path, file) in [
            ("/v1/client.js", "client.js"), ("/demo/shell.html", "demo/shell.html"), ("/demo/page.html", "demo/page.html"),
        ] {
            router.get(RouterPath(path)) { request, _ in WebFiles.response(file, request: request) }
        }
        router.get("/demo") { _, _ in Response(status: .found, headers: [.location: "/demo/shell.html"]) }
        return router
    }
}

extension StaticRoutes {
    /// `GET /`: what this service is, where its API is described, and, when the config in force has an entry for
    /// this service's own `/demo/page.html` (the offline demo of `scripts/run.sh`), a link that opens it through the
    /// demo shell, plus the operator surface's waterfall.
    func landing(_ request: Request) -> Response {
        let host = request.head.authority ?? "127.0.0.1"
        var demos: [String] = []
        for page in currentConfig()?.pages ?? [] {
            guard let url = try? HTTPURL(parsing: page.url), url.path == "/demo/page.html", !page.interfaces.isEmpty else { continue }
            let query = page.interfaces.map { "api=" + Self.queryValue($0.api) }.joined(separator: "&")
            let names = page.interfaces.map(\.name).joined(separator: ", ")
            demos.append(
                #"<li><a href="/demo/shell.html?\#(Self.html(query))">Open the demo page with prefetch</a> (\#(Self.html(names)))</li>"#)
        }
        let hostName = host.split(separator: ":").first.map(String.init) ?? "127.0.0.1"
        let operatorLink =
            adminPort > 0
            ? #"<a href="http://\#(Self.html(hostName)):\#(adminPort)/ui">the waterfall of recent page opens</a> on the operator surface"#
            : "the waterfall of recent page opens at <code>/ui</code> on the operator surface"
        let body = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Prefetch orchestrator</title>
            <style>body { font: 15px/1.5 system-ui, sans-serif; margin: 2em; max-width: 46em; }</style></head>
            <body>
            <h1>Prefetch orchestrator</h1>
            <p>When a user taps, the app's web shell tells this service which page is opening; the service composes the
            page's API requests from its config and fires them at once, so the page's data is ready when the page asks.</p>
            \(demos.isEmpty ? "<p>No demo page in the config in force (<code>scripts/run.sh</code> without arguments serves one).</p>" : "<ul>" + demos.joined() + "</ul>")
            <p>Then see \(operatorLink): each page open, its requests and the page's reads.</p>
            <p>The API: <a href="/openapi.yaml">/openapi.yaml</a>. The page client: <a href="/v1/client.js">/v1/client.js</a>.</p>
            </body></html>
            """
        return Response(
            status: .ok,
            headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-cache"],
            body: .init(byteBuffer: ByteBuffer(string: body))
        )
    }

    static func html(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    static func queryValue(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

/// The operator surface's view of what happened: `GET /ui` (the debug page), backed by `GET /v1/debug/opens`
/// (recent page opens with per-request timings and the page's reads) and `GET /v1/debug/status` (store,
/// renderers, config). Ticket ids there are cut to 8 characters; `?ticket=<id>` selects one open by its full id.
struct DebugRoutes: Sendable {
    let orchestrator: Orchestrator
    let renderers: RendererRoutes
    let configPath: String

    struct OpensAnswer: JSONAnswer, Codable {
        struct Read: Codable, Sendable {
            var served: String
            var reason: String?
            var askedMs: Int64
            var answeredMs: Int64
        }

        struct Request: Codable, Sendable {
            var name: String
            var api: String
            var method: String
            var flight: String
            var startMs: Int64
            var endMs: Int64?
            var status: Int?
            var bytes: Int?
            var error: String?
            var reads: [Read]
        }

        struct Open: Codable, Sendable {
            var ticket: String
            var page: String
            var matched: String
            var version: String
            var createdAt: Date
            var ageMs: Int64
            var requests: [Request]
        }

        var opens: [Open]
    }

    struct StatusAnswer: JSONAnswer, Codable {
        struct Store: Codable, Sendable {
            var bytes, budget, entries, pending, hits, joins, misses, evictions: Int
        }

        struct Tickets: Codable, Sendable {
            var count: Int
            var bytes: Int
            var budget: Int
        }

        struct Config: Codable, Sendable {
            var loaded: Bool
            var name: String?
            var version: String?
            var pages: Int?
            var interfaces: Int?
            var source: String
        }

        var store: Store
        var tickets: Tickets
        var renderers: PoolsAnswer
        var config: Config
    }

    var routes: RouteCollection<BasicRequestContext> {
        let router = RouteCollection(context: BasicRequestContext.self)
        router.get("/ui") { request, _ in WebFiles.response("ui.html", request: request) }
        router.get("/v1/debug/opens") { request, _ in try await opens(request) }
        router.get("/v1/debug/status") { _, _ in await status() }
        return router
    }

    /// `GET /v1/debug/opens?limit=N[&ticket=ID]`: the most recent page opens, newest first.
    func opens(_ request: Request) async throws(APIError) -> OpensAnswer {
        let query = request.uri.queryParameters
        var limit = 20
        if let text = query.get("limit") {
            guard let value = Int(text), value > 0 else {
                throw APIError.badRequest("invalid-limit", "limit \(quoted(text, limit: 40)) must be a positive whole number")
            }
            limit = min(value, 200)
        }
        let tickets: [Ticket]
        if let id = query.get("ticket") {
            tickets = Ticket.isWellFormed(id) ? await orchestrator.tickets.ticket(id).map { [$0] } ?? [] : []
        } else {
            tickets = orchestrator.tickets.recent(limit)
        }
        let now = orchestrator.clock.now
        return OpensAnswer(opens: tickets.map { Self.open($0, now: now) })
    }

    /// One page open with its requests in ms since the trigger.
    static func open(_ ticket: Ticket, now: ContinuousClock.Instant) -> OpensAnswer.Open {
        let timings = ticket.timings.withLock { $0 }
        let reads = ticket.reads.withLock { $0 }
        let since = { (instant: ContinuousClock.Instant) -> Int64 in (instant - ticket.createdAt).milliseconds }
        let requests = ticket.requests.indices.map { index -> OpensAnswer.Request in
            let request = ticket.requests[index]
            let timing = timings[index]
            let ownReads = reads.filter { $0.index == index }.map { read in
                OpensAnswer.Read(served: read.served, reason: read.reason, askedMs: since(read.askedAt), answeredMs: since(read.answeredAt))
            }
            return OpensAnswer.Request(
                name: request.name, api: request.api, method: request.method.rawValue, flight: timing.origin,
                startMs: since(timing.startedAt),
                endMs: timing.finishedAt.map(since), status: timing.status, bytes: timing.bytes, error: timing.error, reads: ownReads)
        }
        return OpensAnswer.Open(
            ticket: String(ticket.id.prefix(8)) + "…", page: ticket.page, matched: ticket.matched, version: ticket.version,
            createdAt: ticket.createdWallClock, ageMs: (now - ticket.createdAt).milliseconds, requests: requests)
    }

    /// `GET /v1/debug/status`: store occupancy, tickets, renderer pools and the config in force.
    func status() async -> StatusAnswer {
        let store = await orchestrator.store.snapshot()
        let loaded = orchestrator.currentConfig()
        return StatusAnswer(
            store: .init(
                bytes: store.bytes, budget: store.budget, entries: store.entries, pending: store.pending, hits: store.hits,
                joins: store.joins,
                misses: store.misses, evictions: store.evictions),
            tickets: .init(count: orchestrator.tickets.count, bytes: orchestrator.tickets.bytes, budget: orchestrator.settings.ticketBytes),
            renderers: await renderers.snapshot(),
            config: .init(
                loaded: loaded != nil, name: loaded?.name, version: loaded?.version, pages: loaded?.pages.count,
                interfaces: loaded?.interfaceCount,
                source: configPath))
    }
}

/// The static files under `Resources/web`, read once.
enum WebFiles {
    struct File: Sendable {
        var bytes: [UInt8]
        var contentType: String
        var etag: String
    }

    static let files: [String: File] = {
        guard let root = Bundle.module.url(forResource: "web", withExtension: nil) else { return [:] }
        var files: [String: File] = [:]
        for name in ["client.js", "ui.html", "demo/shell.html", "demo/page.html"] {
            guard let data = try? Data(contentsOf: root.appendingPathComponent(name)) else { continue }
            let bytes = Array(data)
            let type = name.hasSuffix(".js") ? "application/javascript; charset=utf-8" : "text/html; charset=utf-8"
            files[name] = File(bytes: bytes, contentType: type, etag: "\"\(fnv1a(bytes))\"")
        }
        return files
    }()

    static func response(_ name: String, request: Request) -> Response {
        guard let file = files[name] else {
            return Response(
                status: .notFound, headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: "\(name) is missing from this build\n")))
        }
        var headers: HTTPFields = [
            .eTag: file.etag, .cacheControl: name.hasSuffix(".js") ? "public, max-age=300" : "no-cache",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        if request.headers[.ifNoneMatch] == file.etag {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = file.contentType
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: file.bytes)))
    }

    /// A 64-bit FNV-1a hash in hex: a content fingerprint for the ETag, not a security measure.
    static func fnv1a(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16)
    }
}
