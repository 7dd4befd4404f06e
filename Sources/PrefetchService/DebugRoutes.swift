import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PageAPI
import PrefetchCore
import PrefetchEngine
import PrefetchStore
import Synchronization

/// The operator surface's view of what happened: `GET /ui` (the debug page), backed by `GET /v1/debug/opens`
/// (recent page opens with per-request timings and the page's reads) and `GET /v1/debug/status` (store,
/// renderers, config). Ticket ids there are cut to 8 characters; `?ticket=<id>` selects one open by its full id.
struct DebugRoutes: Sendable {
    let orchestrator: Orchestrator
    let renderers: RendererRoutes
    let configPath: String

    struct OpensAnswer: JSONAnswer, ResponseGenerator, Codable {
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
            var needs: [String]
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

    struct StatusAnswer: JSONAnswer, ResponseGenerator, Codable {
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
                throw APIError.badRequest(.invalidLimit, "limit \(quoted(text, limit: 40)) must be a positive whole number")
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
        let reads = ticket.reads
        let since = { (instant: ContinuousClock.Instant) -> Int64 in (instant - ticket.createdAt).milliseconds }
        let requests = ticket.requests.indices.map { index -> OpensAnswer.Request in
            let request = ticket.requests[index]
            let timing = timings[index]
            let ownReads = reads.filter { $0.index == index }.map { read in
                OpensAnswer.Read(
                    served: read.served.rawValue, reason: read.reason?.rawValue, askedMs: since(read.askedAt),
                    answeredMs: since(read.answeredAt))
            }
            return OpensAnswer.Request(
                name: request.name, api: request.api, method: request.method.rawValue, flight: timing.origin.rawValue,
                startMs: since(timing.startedAt), needs: timing.needs,
                endMs: timing.finishedAt.map(since), status: timing.status, bytes: timing.bytes, error: timing.error?.rawValue,
                reads: ownReads)
        }
        return OpensAnswer.Open(
            ticket: String(ticket.id.prefix(8)) + "…", page: ticket.page, matched: ticket.matched, version: ticket.version,
            createdAt: ticket.createdWallClock, ageMs: (now - ticket.createdAt).milliseconds, requests: requests)
    }

    /// `GET /v1/debug/status`: store occupancy, tickets, renderer pools and the config in force.
    func status() async -> StatusAnswer {
        let store = await orchestrator.storeSnapshot()
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
