import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PrefetchCore
import PrefetchStore
import Synchronization

/// What the service serves to browsers: the page client, the demo shell and page, and the debug view.
///
/// Design
/// - Static files live in `Resources/web` (plain HTML and JS, no build step) and are read once, on first use.
///   Each answer carries an `ETag` (so a revalidation is a `304`) and `X-Content-Type-Options: nosniff`.
///   `GET /v1/client.js` may be cached for 5 minutes; the HTML is revalidated on every load.
/// - `GET /ui` is the debug view, backed by `GET /v1/debug/opens` (recent tickets with per-request timings and
///   the page's reads) and `GET /v1/debug/status` (store, renderers, config). Ticket ids are capabilities (whoever
///   holds one may read the data), so the debug answers show only their first 8 characters; `?ticket=<id>`
///   selects one open by its full id.
/// - The page's reads of a ticket's data (hit, joined or miss with its reason) are recorded on the ticket by
///   ``Ticket/recordingRead(_:_:)``, bounded to ``Ticket/readLimit`` per ticket.
struct WebShell: Sendable {
    let prefetch: PrefetchAPI
    let renderers: RendererAPI
    let currentConfig: @Sendable () -> PrefetchConfig?
    let configPath: String

    func addRoutes(to router: Router<BasicRequestContext>) {
        for (path, file) in [("/v1/client.js", "client.js"), ("/ui", "ui.html"), ("/demo/shell.html", "demo/shell.html"), ("/demo/page.html", "demo/page.html")] {
            router.get(RouterPath(path)) { request, _ in WebFiles.response(file, request: request) }
        }
        router.get("/demo") { _, _ in Response(status: .found, headers: [.location: "/demo/shell.html"]) }
        router.get("/v1/debug/opens") { request, _ in
            await prefetch.respond { () async throws(APIError) in try await opens(request) }
        }
        router.get("/v1/debug/status") { _, _ in
            jsonResponse(.ok, await status())
        }
    }

    /// `GET /v1/debug/opens?limit=N[&ticket=ID]`: the most recent page opens, newest first.
    func opens(_ request: Request) async throws(APIError) -> Response {
        let query = request.uri.queryParameters
        var limit = 20
        if let text = query.get("limit") {
            guard let value = Int(text), value > 0 else {
                throw APIError.badRequest("invalid-limit", "limit \(JSON.quote(text, limit: 40)) must be a positive whole number")
            }
            limit = min(value, 200)
        }
        let tickets: [Ticket]
        if let id = query.get("ticket") {
            tickets = Ticket.isWellFormed(id) ? await prefetch.orchestrator.tickets.ticket(id).map { [$0] } ?? [] : []
        } else {
            tickets = prefetch.orchestrator.tickets.recent(limit)
        }
        return jsonResponse(.ok, JSON.object([("opens", .array(tickets.map(Self.openJSON)))]))
    }

    /// One page open with its requests in ms since the trigger.
    static func openJSON(_ ticket: Ticket) -> JSONValue {
        let timings = ticket.timings.withLock { $0 }
        let reads = ticket.reads.withLock { $0 }
        let since = { (instant: ContinuousClock.Instant) -> JSONValue in JSON.int64((instant - ticket.createdAt).milliseconds) }
        let requests = ticket.requests.indices.map { index -> JSONValue in
            let request = ticket.requests[index]
            let timing = timings[index]
            let ownReads = reads.filter { $0.index == index }.map { read in
                JSON.object([
                    ("served", .string(read.served)), ("reason", JSON.string(read.reason)),
                    ("askedMs", since(read.askedAt)), ("answeredMs", since(read.answeredAt)),
                ])
            }
            return JSON.object([
                ("name", .string(request.name)), ("api", .string(request.api)), ("method", .string(request.method.rawValue)),
                ("url", .string(request.url)), ("flight", .string(timing.origin)),
                ("startMs", since(timing.startedAt)), ("endMs", timing.finishedAt.map(since) ?? .null),
                ("status", JSON.int(timing.status)), ("bytes", JSON.int(timing.bytes)), ("error", JSON.string(timing.error)),
                ("reads", .array(ownReads)),
            ])
        }
        return JSON.object([
            ("ticket", .string(String(ticket.id.prefix(8)) + "…")), ("page", .string(ticket.page)), ("matched", .string(ticket.matched)),
            ("version", .string(ticket.version)), ("createdAt", .string(ticket.createdWallClock.formatted(.iso8601))),
            ("ageMs", JSON.int64((ContinuousClock.now - ticket.createdAt).milliseconds)), ("requests", .array(requests)),
        ])
    }

    /// `GET /v1/debug/status`: store occupancy, renderer pools and the config in force.
    func status() async -> JSONValue {
        let store = await prefetch.orchestrator.store.snapshot()
        let loaded = currentConfig()
        return JSON.object([
            ("store", JSON.object([
                ("bytes", JSON.int(store.bytes)), ("budget", JSON.int(store.budget)), ("entries", JSON.int(store.entries)),
                ("pending", JSON.int(store.pending)), ("hits", JSON.int(store.hits)), ("joins", JSON.int(store.joins)),
                ("misses", JSON.int(store.misses)), ("evictions", JSON.int(store.evictions)),
            ])),
            ("renderers", await renderers.snapshotJSON()),
            ("config", JSON.object([
                ("loaded", .bool(loaded != nil)), ("name", JSON.string(loaded?.name)), ("version", JSON.string(loaded?.version)),
                ("pages", JSON.int(loaded?.pages.count)), ("interfaces", JSON.int(loaded?.interfaceCount)), ("source", .string(configPath)),
            ])),
        ])
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
            return jsonResponse(.notFound, APIError(status: .notFound, code: "not-found", message: "\(name) is missing from this build").json)
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

/// One read of a ticket's data by the page: how it was served and when, for the debug view.
struct TicketRead: Sendable {
    /// The request's index in the ticket.
    var index: Int
    /// `hit`, `joined` or `miss`.
    var served: String
    /// The miss reason (the `X-Prefetch-Reason` code), nil when served.
    var reason: String?
    var askedAt: ContinuousClock.Instant
    var answeredAt: ContinuousClock.Instant
}

extension Ticket {
    /// Reads remembered per ticket; older ones are dropped first.
    static let readLimit = 32

    /// Runs a read of request `index` and records how it was served (`X-Prefetch` of the answer) or why it missed.
    func recordingRead(_ index: Int, _ read: () async throws(APIError) -> Response) async throws(APIError) -> Response {
        let asked = ContinuousClock.now
        do {
            let response = try await read()
            record(TicketRead(index: index, served: response.headers[PrefetchAPI.prefetchHeader] ?? "hit", reason: nil, askedAt: asked, answeredAt: .now))
            return response
        } catch {
            record(TicketRead(index: index, served: "miss", reason: error.code, askedAt: asked, answeredAt: .now))
            throw error
        }
    }

    private func record(_ read: TicketRead) {
        reads.withLock { reads in
            if reads.count >= Self.readLimit { reads.removeFirst() }
            reads.append(read)
        }
    }
}
