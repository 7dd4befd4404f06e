import Dispatch
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import NIOHTTPTypes
import PrefetchEngine
import PrefetchStore
import Synchronization

/// The hottest read answered on the event loop: `GET /v1/prefetch/{ticket}/data` (with the reader's credentials or
/// a read key), `GET /v1/data` with a read key, and the same-site `GET /v1/data?page=` with the page's own
/// credentials, when the entry is a response ready in this process's store.
///
/// The normal path hops from the event loop to a task and back for every request; for a stored response that hop
/// is most of the cost. This handler sits in each connection's pipeline after Hummingbird's connection-state
/// handler (so idle and quiesce bookkeeping still see every request) and before the async channel. For a request
/// it can answer it runs the same checks with the same code, in the same order, and writes the same bytes:
/// `PageGuardMiddleware`'s origin rules and headers, `TicketAccess` and the page-origin rule (`PrefetchRoutes.pageRead`
/// for a `page=` read), the interface selection, the store read
/// (`readIfReady`: a no-store response is consumed here exactly once), the replay headers, the read recorded on
/// the ticket, and the `data` and HTTP request metrics. Anything else (a refusal, a pending, failed, missing or
/// private entry, a ticket held by another replica, a Redis store, a bad parameter) goes on, untouched, to the
/// router, which answers it as always: the fast path has no error answers of its own. Pipelined requests stay in
/// order because NIO's pipelining handler releases a request only once the previous response has ended.
/// `--no-fast-handoff` turns it off.
struct FastHandoff: Sendable {
    let orchestrator: Orchestrator
    let origins: AllowedOrigins
    let requestMetrics: FastHandoffMetrics

    static let ticketDataRoute = "/v1/prefetch/{ticket}/data"
    static let pageDataRoute = "/v1/data"

    /// The answer to `head`, or nil to let the router answer it.
    func answer(_ head: HTTPRequest) -> (HTTPResponse, ByteBuffer)? {
        // A request that announces a body is routed: the answer is decided at the head and written at the end, so a
        // body that never ends would hold (a no-store entry: consume) an answer nobody gets.
        guard head.method == .get, let target = head.path, head.headerFields[.transferEncoding] == nil,
            head.headerFields[.contentLength].map({ $0 == "0" }) ?? true
        else { return nil }
        let headers = head.headerFields
        let origin = headers[.origin]
        var grant = AllowedOrigins.Grant.none
        if let origin {
            grant = origins.grant(for: origin)
            guard grant != .none else { return nil }
        } else if headers[PrefetchHeaders.secFetchSite]?.lowercased() == "cross-site" {
            return nil
        }
        let uri = URI(target)
        let path = uri.path
        let query = uri.queryParameters
        // A malformed `wait` is the router's 400 to give; a valid one does not matter for an entry already ready.
        guard Self.isValidWait(query) else { return nil }
        let asked = orchestrator.clock.now
        let started = DispatchTime.now().uptimeNanoseconds
        let route: String
        let outcome: ReadOutcome?
        let role: ConfigRole
        var ticketRead: (Ticket, Int)?
        if path == Self.pageDataRoute, headers[PrefetchHeaders.readKey] == nil {
            // Same site: the page's own cookies name the entry, checked by the routed path's own code.
            guard let read = try? PrefetchRoutes.pageRead(orchestrator, query: query, headers: headers, origin: requestOrigin(head))
            else { return nil }
            route = Self.pageDataRoute
            role = read.role
            outcome = orchestrator.store.readIfReady(read.key)
        } else {
            let ticket: Ticket
            if path == Self.pageDataRoute {
                guard let key = headers[PrefetchHeaders.readKey],
                    let opened = orchestrator.localTicket(forReadKey: key, origin: requestOrigin(head))
                else { return nil }
                ticket = opened
                route = Self.pageDataRoute
            } else if path.hasPrefix("/v1/prefetch/"), path.hasSuffix("/data") {
                let id = String(path.dropFirst("/v1/prefetch/".count).dropLast("/data".count))
                guard Ticket.isWellFormed(id), let held = orchestrator.tickets.localTicket(id),
                    (try? orchestrator.authorize(requestOrigin(head), for: held.origins)) != nil
                else { return nil }
                if let key = headers[PrefetchHeaders.readKey] {
                    guard orchestrator.localTicket(forReadKey: key, origin: requestOrigin(head))?.id == held.id else { return nil }
                } else {
                    let presented = orchestrator.credentials(in: headers)
                    guard (try? TicketAccess.authorize(held, presented: presented.identity)) != nil else { return nil }
                }
                ticket = held
                route = Self.ticketDataRoute
            } else {
                return nil
            }
            guard let index = try? PrefetchRoutes.select(ticket.requests.map { ($0.name, $0.api, $0.method) }, query: query)
            else { return nil }
            role = ticket.role
            ticketRead = (ticket, index)
            outcome = orchestrator.readIfReady(ticket, index: index)
        }
        guard case .ready(let response, let joined)? = outcome else { return nil }
        // From here on the entry has been read (a no-store one consumed): this handler answers, whatever follows.
        let served = joined ? "joined" : "hit"
        orchestrator.metrics.data(served)
        orchestrator.metrics.fastHandoff()
        orchestrator.metrics.configData(role, result: served)
        // The header order of the routed answer: the replay's, the length (set as the response is made), then the
        // guard's CORS and security headers.
        var (status, fields, body) = PrefetchRoutes.replayParts(response, joined: joined)
        fields[.contentLength] = String(body.readableBytes)
        if let origin { PageGuardMiddleware.decorate(&fields, origin: origin, grant: grant) }
        PageGuardMiddleware.secure(&fields)
        if let (ticket, index) = ticketRead {
            ticket.recordRead(index, served: served, reason: nil, askedAt: asked, answeredAt: orchestrator.clock.now)
        }
        requestMetrics.record(route: route, status: status, nanoseconds: DispatchTime.now().uptimeNanoseconds - started)
        return (HTTPResponse(status: status, headerFields: fields), body)
    }

    private static func isValidWait(_ query: Parameters) -> Bool {
        do {
            _ = try PrefetchRoutes.waitParameter(query)
            return true
        } catch {
            return false
        }
    }

    private func requestOrigin(_ head: HTTPRequest) -> TicketAccess.RequestOrigin {
        .init(origin: head.headerFields[.origin], fetchSite: head.headerFields[PrefetchHeaders.secFetchSite], authority: head.authority)
    }
}

/// The request metrics Hummingbird's `MetricsMiddleware` records, for answers it never sees: the same labels and
/// dimensions, so a fast answer counts in the same series as a routed one.
final class FastHandoffMetrics: Sendable {
    private struct Series: Sendable {
        let counter: Counter
        let timer: Timer

        init(route: String, status: Int) {
            let dimensions = [("http.route", route), ("http.request.method", "GET"), ("http.response.status_code", String(status))]
            counter = Counter(label: "hb.requests", dimensions: dimensions)
            timer = Timer(label: "http.server.request.duration", dimensions: dimensions, preferredDisplayUnit: .seconds)
        }
    }

    private struct Key: Hashable {
        var route: String
        var status: Int
    }

    /// By route and status: the replayed upstream status, a bounded set of three-digit codes. Found without
    /// building a string, so a fast answer allocates nothing here once its series exists.
    private let series = Mutex<[Key: Series]>([:])

    func record(route: String, status: HTTPResponse.Status, nanoseconds: UInt64) {
        let key = Key(route: route, status: status.code)
        let series = series.withLock { all in
            if let known = all[key] { return known }
            let made = Series(route: route, status: status.code)
            all[key] = made
            return made
        }
        series.counter.increment()
        series.timer.recordNanoseconds(Int64(nanoseconds))
    }
}

/// Answers what `FastHandoff` can, passes everything else on. One per connection, on its event loop.
///
/// Hummingbird reads pipelined requests without waiting for the previous answer, so order is kept here: while a
/// request passed to the router has not been answered (its response's end has not come back through this
/// handler), every later request goes to the router too, which answers in order.
final class FastHandoffHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let handoff: FastHandoff
    /// The answer to the request being read, written once its end arrives, and whether the connection closes after
    /// it; nil while requests pass through.
    private var answering: (head: HTTPResponse, body: ByteBuffer, close: Bool)?
    /// The request being read goes to the router.
    private var passing = false
    /// Requests passed to the router and not yet answered.
    private var routed = 0

    init(handoff: FastHandoff) {
        self.handoff = handoff
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if routed == 0, let (response, body) = handoff.answer(head) {
                // As Hummingbird's request loop does: `Connection: close` ends the connection after the answer.
                answering = (response, body, head.headerFields[.connection] == "close")
                passing = false
            } else {
                passing = true
                routed += 1
                context.fireChannelRead(data)
            }
        case .body:
            // A GET's body (if any) is not read by the data endpoints; the fast path drops it as they do.
            if passing { context.fireChannelRead(data) }
        case .end:
            if let answer = answering {
                answering = nil
                context.write(wrapOutboundOut(.head(answer.head)), promise: nil)
                context.write(wrapOutboundOut(.body(answer.body)), promise: nil)
                if answer.close {
                    context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                        context.close(mode: .output, promise: nil)
                    }
                } else {
                    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                }
            } else {
                passing = false
                context.fireChannelRead(data)
            }
        }
    }
}

extension FastHandoffHandler {
    /// The router's answers pass here on their way out; the end of one means one routed request fewer.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), routed > 0 { routed -= 1 }
        context.write(data, promise: promise)
    }
}

/// Installs a `FastHandoffHandler` right after Hummingbird's connection-state handler, then leaves. Hummingbird
/// adds its extra handlers before that handler; the fast path must sit after it, or the connection's idle timer
/// and graceful close would not see the requests it answers.
final class FastHandoffInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let handoff: FastHandoff

    init(handoff: FastHandoff) {
        self.handoff = handoff
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // The connection-state handler is added after this one in the same set-up; install once it is there.
        let loop = context.eventLoop.assumeIsolated()
        let pipeline = context.pipeline
        let handoff = handoff
        loop.execute { [self] in
            let operations = pipeline.syncOperations
            if let state = try? operations.context(handlerType: HTTPConnectionStateHandler.self) {
                try? operations.addHandler(FastHandoffHandler(handoff: handoff), position: .after(state.handler))
            }
            operations.removeHandler(self, promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }
}
