import Dispatch
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import PrefetchCore
import PrefetchEngine
import PrefetchStore
import RendererPool
import Synchronization

/// The hot requests of the page surface, answered on the event loop, below Hummingbird's router: the trigger
/// (`POST /v1/prefetch`), the open (`POST /v1/open`, a renderer to create leased in one task), the results view
/// (`GET /v1/prefetch/{ticket}`) and the data reads by every route a page uses (`GET /v1/prefetch/{ticket}/data`
/// with the reader's credentials or a read key, `GET /v1/data` with a read key, and the same-site
/// `GET /v1/data?page=` with the page's own credentials), whatever their entries' state: a read of a flight in
/// progress waits here for it to settle, within its `wait`, and a settled miss gets its answer here.
///
/// The routed path hops from the event loop to a task and back for every request; for these that hop is most of the
/// cost. Its handler (``FastHandoffHandler``) sits in each connection's pipeline right after NIO's HTTP/1 decoder,
/// below Hummingbird's `HTTPTypes` codec, and keeps the connection's idle timeout and graceful close for every
/// request (``ConnectionState``). For a request it can answer it runs the same rules as the router, each from its
/// one home (`PageRules.swift`): the origin guard and its headers (`AllowedOrigins.admit`, `Admission.decorate`),
/// `JSONBodyMiddleware`'s media type, the trigger's body parsing (`PrefetchRoutes.jsonObject`, `pageURL`,
/// `credentialHeaders`), `Orchestrator.trigger(page:...:then:)` (the routed trigger's own checks, claims and page
/// open, run without a task), the ticket entitlement (`Orchestrator.entitle`), the page-origin rule
/// (`PrefetchRoutes.pageRead` for a `page=` read), the interface selection and `wait`, the reads
/// (`Orchestrator.readAll(_:canWait:notify:)`, `Orchestrator.read(_:indices:canWait:notify:)`: a no-store response
/// is consumed exactly once), the answers (`TriggerAnswer`, `ResultsAnswer`, a data read's answer and bookkeeping
/// `PrefetchRoutes.answer`, an engine refusal as `APIError`), and the request metrics. A read that must wait
/// registers its wait with the store (no task) and is written when its flights settle (on the curl loop's thread,
/// handed back to this event loop) or when its wait ends (a timer on this event loop).
///
/// With the Redis store the trigger, the open, the results view and the data reads are answered here too: their
/// round trips to Redis run on the pool's event loops through callbacks, and the answer is handed back to this
/// connection's loop when Redis has answered (``Answer/underway``, ``Answer/later(_:deadline:)``).
///
/// Refusals on these routes (the origin guard, the media type, a body that is not a trigger, entitlement, a read
/// key, a ticket id that is not well formed, a `wait` or a selection the request gets wrong) are answered here too,
/// as the router answers them. A ticket or read key another replica holds is fetched from the shared registry by
/// callback and the read goes on on this event loop once it is in (``Resume``). Pipelining keeps its order: while an
/// answer is outstanding, later requests wait (see `FastHandoffHandler`).
struct FastHandoff: Sendable {
    let orchestrator: Orchestrator
    let origins: AllowedOrigins
    let requestMetrics: FastHandoffMetrics
    /// The renderer pools `POST /v1/open` leases from (nil: every open is routed).
    var renderers: RendererPools?

    static let ticketDataRoute = "/v1/prefetch/{ticket}/data"
    static let resultsRoute = "/v1/prefetch/{ticket}"
    static let pageDataRoute = "/v1/data"
    static let triggerRoute = "/v1/prefetch"
    static let openRoute = "/v1/open"
    /// Every target this path may answer starts with one of these (the results view and the ticket's data read start
    /// with the trigger's).
    static let takenPrefixes = [triggerRoute, pageDataRoute, openRoute]

    /// The requests whose body this path collects and then answers.
    enum Posted {
        case trigger
        case open
        /// A read (`GET`) that announces a body: the body is read and dropped, as the router's reads drop it, and the
        /// read is answered at its end (deciding at the head would hold, or for a no-store entry consume, an answer
        /// behind a body that never ends).
        case read
        /// A route of ``PageAPI`` that reads its body (invalidation, renderer leases).
        case cold(PageRoute)

        /// A trigger's or an open's route as the request metrics name it, and its `prefetch_event_loop_answers_total`
        /// label (a read is counted by its own route).
        var counted: (route: String, label: String) {
            switch self {
            case .trigger: (FastHandoff.triggerRoute, "trigger")
            case .open: (FastHandoff.openRoute, "open")
            case .read: preconditionFailure("a read is counted by its read route")
            case .cold(let route): (route.template, "")
            }
        }
    }

    typealias Deliver = @Sendable (EncodedAnswer) -> Void

    /// A read's next step, run on the connection's event loop once a ticket another replica may hold has been
    /// fetched: given the connection's replay heads, its delivery and its resumption, as ``answer(_:heads:deliver:resume:known:)`` is.
    typealias Step = @Sendable (ReplayHeads, () -> Deliver, () -> Resume) -> Answer

    /// Brings a read's next step to the connection's event loop, where the handler runs it (unless the connection
    /// has moved on: closed, or its answer already written).
    struct Resume: Sendable {
        let run: @Sendable (@escaping Step) -> Void
    }

    /// An answer of the fast path: written now, or once `wait` is fulfilled, or once the shared store answered.
    enum Answer {
        case now(EncodedAnswer)
        /// A read waiting on flights in progress (a results view, a data read): the store's wait (expired at
        /// `deadline`) calls the handler's delivery.
        case later(StoreWait, deadline: Duration)
        /// A trigger or an open whose claims and ticket record are on their way to Redis: the handler's delivery is
        /// called with the answer once both are back (bounded by the store's command timeout).
        case underway
    }

    /// The page-surface origin rule (``AllowedOrigins/admit(_:path:)``), or nil when it refuses.
    private func grant(_ head: HTTPRequest) -> AllowedOrigins.Admission? {
        try? origins.admit(head.headerFields, path: (head.path ?? "").prefix { $0 != "?" }).get()
    }

    /// A refusal as the router writes it: the error's JSON, the CORS headers of an admitted origin (none for the
    /// origin guard's own refusal), the security headers; and its request metrics.
    private func refused(
        _ error: APIError, origin: AllowedOrigins.Admission?, route: String, method: HTTPRequest.Method, started: UInt64
    ) -> EncodedAnswer {
        let (status, fields, body) = (try? error.parts()) ?? (.internalServerError, [:], ByteBuffer())
        return finish(
            status, fields, body, origin: origin ?? AllowedOrigins.Admission(origin: nil, grant: .none), route: route, method: method,
            started: started)
    }

    /// The answer's final headers, as the router's answer has them: its own, the length, then the guard's CORS and
    /// security headers.
    private func finalFields(_ fields: HTTPFields, length: Int, origin: AllowedOrigins.Admission) -> HTTPFields {
        var fields = fields
        fields[.contentLength] = String(length)
        origin.decorate(&fields)
        return fields
    }

    /// The answer with its final headers (``finalFields(_:length:origin:)``), encoded; and its request metrics.
    private func finish(
        _ status: HTTPResponse.Status, _ fields: HTTPFields, _ body: ByteBuffer, origin: AllowedOrigins.Admission,
        route: String, method: HTTPRequest.Method, started: UInt64
    ) -> EncodedAnswer {
        let fields = finalFields(fields, length: body.readableBytes, origin: origin)
        requestMetrics.record(route: route, method: method, status: status, nanoseconds: DispatchTime.now().uptimeNanoseconds - started)
        return EncodedAnswer(HTTPResponse(status: status, headerFields: fields), body: body)
    }

    /// A ready entry's replay (``PrefetchRoutes/replayParts(_:joined:)`` with ``finalFields(_:length:origin:)``),
    /// its head taken from the connection's `heads` when it wrote one for the same entry and the same kind of reader
    /// (the same `X-Prefetch`, the same origin's CORS headers), else encoded and kept there; and its request metrics.
    private func replay(
        _ stored: StoredResponse, joined: Bool, origin: AllowedOrigins.Admission, route: String, started: UInt64,
        heads: ReplayHeads?
    ) -> EncodedAnswer {
        requestMetrics.record(
            route: route, method: .get, status: HTTPResponse.Status(code: stored.status),
            nanoseconds: DispatchTime.now().uptimeNanoseconds - started)
        let variant = ReplayHeads.Variant(joined: joined, origin: origin.origin, grant: origin.grant)
        if let head = heads?.head(stored.token, variant) { return EncodedAnswer(head: head, body: stored.bodyBuffer) }
        let (status, fields, body) = PrefetchRoutes.replayParts(stored, joined: joined)
        let answer = EncodedAnswer(
            HTTPResponse(status: status, headerFields: finalFields(fields, length: body.readableBytes, origin: origin)), body: body)
        if case .bytes(let head) = answer.head { heads?.keep(head, stored.token, variant) }
        return answer
    }

    /// The answer to a request head over `limit` bytes: `431 too-large`, no CORS (the head, `Origin` included, was
    /// never read), the security headers; and its request metrics under the route `NotFound` (as the router counts a request it could not route).
    func headTooLarge(limit: Int) -> EncodedAnswer {
        closing(.headTooLarge(limit: limit), route: "NotFound")
    }

    /// The answer to a request that cannot be read as one (a method that is not a token, a head the parser
    /// refuses): `400 malformed-request` naming what was wrong, the security headers, and the close (what follows
    /// cannot be framed).
    func malformed(_ message: String) -> EncodedAnswer {
        closing(.badRequest(.malformedRequest, message), route: "Unknown")
    }

    /// `error` written before its request could be read: no CORS, the security headers, `Connection: close`.
    private func closing(_ error: APIError, route: String) -> EncodedAnswer {
        let (status, fields, body) = (try? error.parts()) ?? (error.status, [:], ByteBuffer())
        var head = fields
        head[.connection] = "close"
        return finish(
            status, head, body, origin: AllowedOrigins.Admission(origin: nil, grant: .none), route: route, method: .get,
            started: DispatchTime.now().uptimeNanoseconds)
    }

    /// The answer to a request a store route took and then could not answer (its origin no longer admitted between
    /// its head and its end, its answer not encodable): `500`, counted under its route.
    func unanswerable(_ head: HTTPRequest) -> EncodedAnswer {
        refused(
            APIError(status: .internalServerError, code: .other, message: "the request could not be answered"), origin: grant(head),
            route: ReadRoute(URI(head.path ?? "/").path)?.label ?? "Unknown", method: head.method,
            started: DispatchTime.now().uptimeNanoseconds)
    }

    // MARK: Trigger

    /// What this path does with a `POST` head it takes.
    enum Taken {
        /// Its body is collected (at most the routed path's limit, announced by `Content-Length`), then handed to
        /// ``trigger(_:body:caller:deliver:)`` or ``open(_:body:caller:deliver:)``.
        case collect(Posted)
        /// Refused at the head, before any body (the origin guard, the media type), as the router refuses it: the
        /// answer is written at once and the body, if any, dropped under the body timeout.
        case refused(EncodedAnswer)
    }

    /// Whether `head` is a trigger or an open this path takes (nil: the router's): refused at the head, or its body
    /// collected.
    func takes(_ head: HTTPRequest) -> Taken? {
        // The path without the query: the query of a trigger or an open means nothing and is dropped.
        guard head.method == .post, let full = head.path else { return nil }
        let target = full[..<(full.utf8.firstIndex(of: UInt8(ascii: "?")) ?? full.endIndex)]
        let posted: Posted
        if target.utf8.elementsEqual(Self.triggerRoute.utf8) {
            posted = .trigger
        } else if renderers != nil, target.utf8.elementsEqual(Self.openRoute.utf8) {
            posted = .open
        } else {
            return nil
        }
        let (route, label) = posted.counted
        // The router's order: the origin guard, then the media type; both at the head, whatever the body's framing.
        let started = DispatchTime.now().uptimeNanoseconds
        switch origins.admit(head.headerFields, path: target) {
        case .failure(let refusal):
            orchestrator.metrics.denied(refusal.code.rawValue)
            orchestrator.metrics.eventLoopAnswer(label)
            return .refused(refused(refusal, origin: nil, route: route, method: .post, started: started))
        case .success(let origin):
            if let refusal = JSONBodyMiddleware<BasicRequestContext>.refusal(contentType: head.headerFields[.contentType]) {
                orchestrator.metrics.eventLoopAnswer(label)
                return .refused(refused(refusal, origin: origin, route: route, method: .post, started: started))
            }
        }
        return .collect(posted)
    }

    /// The most bytes of a trigger's or an open's body, as the router's `readBody` takes them.
    var bodyLimit: Int { orchestrator.settings.maximumRequestBody }

    /// The answer to a trigger or an open whose body passed ``bodyLimit``, once its bytes passed it (chunked or
    /// announced by `Content-Length`, as the router counts them): `413 too-large`, and its request metrics.
    func bodyTooLarge(_ head: HTTPRequest, _ posted: Posted) -> EncodedAnswer {
        let started = DispatchTime.now().uptimeNanoseconds
        let (route, label) = posted.counted
        if case .cold = posted {} else { orchestrator.metrics.eventLoopAnswer(label) }
        return refused(.bodyTooLarge(limit: bodyLimit), origin: grant(head), route: route, method: .post, started: started)
    }

    /// Whether `head` is a read this path answers that announces a body (``Posted/read``).
    func drains(_ head: HTTPRequest) -> Bool {
        guard head.method == .get, let target = head.path,
            head.headerFields[.transferEncoding] != nil || (head.headerFields[.contentLength].map { $0 != "0" } ?? false)
        else { return false }
        return ReadRoute(URI(target).path) != nil
    }

    /// `head` without its body's framing: a read whose body was dropped, as the read sees it.
    static func withoutBody(_ head: HTTPRequest) -> HTTPRequest {
        var head = head
        head.headerFields[.contentLength] = nil
        head.headerFields[.transferEncoding] = nil
        return head
    }

    /// The trigger's answer, or nil to hand the request (head and body as received) to the router. With a shared
    /// store the answer is `.underway`, and goes to the function `deliver()` made.
    func trigger(_ head: HTTPRequest, body: ByteBuffer, caller: String, deliver: () -> Deliver) -> Answer? {
        let started = DispatchTime.now().uptimeNanoseconds
        // The head passed the origin guard and the media type (`takes`); the body's members are checked here.
        guard let origin = grant(head) else { return nil }
        let asked: PrefetchRoutes.TriggerRequest
        do throws(APIError) {
            asked = try PrefetchRoutes.TriggerRequest(try PrefetchRoutes.jsonObject(body), requestHeaders: head.headerFields)
        } catch {
            orchestrator.metrics.eventLoopAnswer("trigger")
            return .now(refused(error, origin: origin, route: Self.triggerRoute, method: .post, started: started))
        }
        let answer: @Sendable (Triggered) -> EncodedAnswer = { [self] triggered in
            let (status, fields, bytes) = TriggerResponse(answer: TriggerAnswer(triggered)).parts()
            orchestrator.metrics.eventLoopAnswer("trigger")
            return finish(status, fields, bytes, origin: origin, route: Self.triggerRoute, method: .post, started: started)
        }
        let delivery = deliver()
        do {
            let triggered = try orchestrator.trigger(
                page: asked.page, headers: asked.headers, caller: caller, trace: PrefetchRoutes.traceContext(head.headerFields),
                requestHeaders: head.headerFields, origin: requestOrigin(head), cookies: asked.cookies, then: { delivery(answer($0)) })
            return triggered.map { .now(answer($0)) } ?? .underway
        } catch {
            // An engine refusal, counted once: answered here as the router would answer it.
            guard let (status, fields, bytes) = try? APIError(error).parts() else { return nil }
            orchestrator.metrics.eventLoopAnswer("trigger")
            return .now(finish(status, fields, bytes, origin: origin, route: Self.triggerRoute, method: .post, started: started))
        }
    }

    // MARK: Open

    /// `POST /v1/open`: the open's body parsed by the routed open's code (`RendererRoutes.openRequest`), its
    /// refusals answered here; then the lease and the trigger, each answered as the routed open answers them
    /// (`LeaseAnswer`, `RendererRoutes.leaseRefusal`, `failsTheOpen`, `OpenAnswer`). A warm renderer is leased at
    /// once (`RendererPool.acquireWithoutSuspending`); one that must be waited for or created is leased by the pool
    /// in one task (cold: a renderer to start), and the answer is delivered when both halves are in (`.underway`,
    /// ``OpenJoin``). The trigger goes first: a refusal that fails the whole open (the page URL) is answered at once
    /// and no renderer is leased for it. With a shared store the trigger itself may be `.underway`, as the trigger's.
    ///
    /// `onGone` registers what the handler runs if the connection closes before an `.underway` answer is written:
    /// a renderer leased after that is handed back, not left to the pool's reclaim.
    func open(
        _ head: HTTPRequest, body: ByteBuffer, caller: String, deliver: () -> Deliver, onGone: (@escaping @Sendable () -> Void) -> Void
    ) -> Answer? {
        let started = DispatchTime.now().uptimeNanoseconds
        guard let renderers, let origin = grant(head) else { return nil }
        let request: (page: String, headers: HTTPFields, cookies: CookieJar?, profile: String)
        do throws(APIError) {
            request = try RendererRoutes.openRequest(
                try PrefetchRoutes.jsonObject(body), requestHeaders: head.headerFields, orchestrator: orchestrator)
        } catch {
            orchestrator.metrics.eventLoopAnswer("open")
            return .now(refused(error, origin: origin, route: Self.openRoute, method: .post, started: started))
        }
        let leaseCaller = RendererRoutes.leaseCaller(address: caller)
        // The open's answer once both halves are in, or once the trigger failed the whole open.
        let answer: @Sendable (Result<Triggered, PrefetchError>, Result<Lease, APIError>?) -> EncodedAnswer = { [self] triggered, lease in
            var answer = OpenAnswer()
            var failed: APIError?
            switch triggered {
            case .success(let triggered):
                answer.prefetch = TriggerAnswer(triggered)
            case .failure(let error):
                answer.prefetchError = APIError(error).body
                failed = RendererRoutes.failsTheOpen(error) ? APIError(error) : nil
            }
            switch lease {
            case .success(let granted)?: answer.renderer = LeaseAnswer(granted)
            case .failure(let error)?: answer.rendererError = error.body
            case nil: break
            }
            let parts = failed.map { try? $0.parts() } ?? (try? answer.parts())
            if failed != nil || parts == nil, case .success(let granted)? = lease { Task { await renderers.release(granted) } }
            orchestrator.metrics.eventLoopAnswer("open")
            let (status, fields, bytes) = parts ?? (.internalServerError, [:], ByteBuffer())
            return finish(status, fields, bytes, origin: origin, route: Self.openRoute, method: .post, started: started)
        }
        let join = OpenJoin()
        let delivery = deliver()
        // The trigger first: a page it refuses fails the whole open, answered at once, and no renderer is leased.
        var step = OpenJoin.Step.wait
        do throws(PrefetchError) {
            let triggered = try orchestrator.trigger(
                page: request.page, headers: request.headers, caller: caller, origin: requestOrigin(head), cookies: request.cookies,
                then: { triggered in
                    if case .answer(let triggered, let lease) = join.triggered(.success(triggered)) { delivery(answer(triggered, lease)) }
                })
            if let triggered { step = join.triggered(.success(triggered)) }
        } catch {
            if RendererRoutes.failsTheOpen(error) { return .now(answer(.failure(error), nil)) }
            step = join.triggered(.failure(error))
        }
        // The lease: at once from a warm renderer, else by the pool (the routed open's `acquire`) in one task.
        if let pool = renderers.pool(named: request.profile) {
            if let lease = pool.acquireWithoutSuspending(page: request.page, caller: leaseCaller) {
                step = join.leased(.success(lease))
            } else {
                let (profile, page) = (request.profile, request.page)
                Task {
                    let lease: Result<Lease, APIError>
                    do throws(PoolError) {
                        lease = .success(try await renderers.acquire(profile: profile, page: page, caller: leaseCaller))
                    } catch {
                        lease = .failure(RendererRoutes.leaseRefusal(error, profile: profile))
                    }
                    switch join.leased(lease) {
                    case .answer(let triggered, let lease): delivery(answer(triggered, lease))
                    case .returnLease: if case .success(let granted) = lease { await renderers.release(granted) }
                    case .wait: break
                    }
                }
            }
        } else {
            step = join.leased(.failure(RendererRoutes.unknownProfile(request.profile, in: renderers)))
        }
        if case .answer(let triggered, let lease) = step { return .now(answer(triggered, lease)) }
        onGone {
            if let held = join.cancel() { Task { await renderers.release(held) } }
        }
        return .underway
    }

    // MARK: Reads

    /// The answer to a `GET` head, or nil to let the router answer it. A read that must wait calls
    /// `deliver()` once for the function its answer goes to (called once, from whichever thread settles it; the
    /// handler's function brings it to the connection's event loop).
    ///
    /// A ticket (or a read key's ticket) another replica may hold is fetched from the shared registry
    /// (``TicketRegistry/ticket(_:then:)``, no task) and the read goes on on the connection's event loop once it is
    /// in (`resume()`: the answer is `.underway` meanwhile), with the fetched tickets `known`.
    func answer(
        _ head: HTTPRequest, heads: ReplayHeads, deliver: () -> Deliver, resume: () -> Resume, known: [String: Ticket?] = [:],
        started: UInt64 = DispatchTime.now().uptimeNanoseconds
    ) -> Answer? {
        // A request that announces a body is routed: the answer is decided at the head and written at the end, so a
        // body that never ends would hold (a no-store entry: consume) an answer nobody gets.
        guard head.method == .get, let target = head.path, head.headerFields[.transferEncoding] == nil,
            head.headerFields[.contentLength].map({ $0 == "0" }) ?? true
        else { return nil }
        let uri = URI(target)
        let path = uri.path
        guard let route = ReadRoute(path) else { return nil }
        let origin: AllowedOrigins.Admission
        switch origins.admit(head.headerFields, path: path) {
        case .success(let admitted):
            origin = admitted
        case .failure(let refusal):
            orchestrator.metrics.denied(refusal.code.rawValue)
            return .now(refused(refusal, origin: nil, route: route.label, method: .get, started: started))
        }
        let query = uri.queryParameters
        let read: Read =
            switch route {
            case .results(let id): results(head, id: id, query: query, origin: origin, known: known, started: started, deliver: deliver)
            case .ticketData, .pageData:
                data(head, route: route, query: query, origin: origin, known: known, started: started, heads: heads, deliver: deliver)
            }
        switch read {
        case .answer(let answer):
            return answer
        case .fetch(let id):
            let resumption = resume()
            orchestrator.tickets.ticket(id) { [self] fetched in
                resumption.run { heads, deliver, resume in
                    var known = known
                    known[id] = .some(fetched)
                    // The same head takes the same way again, so it is answered here. The request's time includes the
                    // fetch.
                    guard let answer = answer(head, heads: heads, deliver: deliver, resume: resume, known: known, started: started) else {
                        assertionFailure("a read that fetched a ticket was handed to the router")
                        return .now(
                            refused(
                                APIError(PrefetchError.notReady(reason: "the ticket could not be read")), origin: origin,
                                route: route.label,
                                method: .get, started: started))
                    }
                    return answer
                }
            }
            return .underway
        }
    }

    /// What a read decided: its answer (nil: the router's), or a ticket to fetch from another replica first.
    private enum Read {
        case answer(Answer?)
        case fetch(String)
    }

    /// The reads answered here, by the path of a `GET`.
    enum ReadRoute {
        /// `/v1/prefetch/{ticket}`
        case results(Substring)
        /// `/v1/prefetch/{ticket}/data`
        case ticketData(Substring)
        /// `/v1/data`
        case pageData

        /// Parsed on the path's bytes: a character-by-character walk of a `String` cost more than the rest of a
        /// ready read's decision (a handoff profile, 2026-11-29).
        ///
        /// Segments are split at the `/` bytes, whatever the bytes between (a combining mark after a `/` does not join
        /// it to the segment, as a split by characters would).
        init?(_ path: String) {
            let bytes = path.utf8
            if bytes.elementsEqual(FastHandoff.pageDataRoute.utf8) {
                self = .pageData
                return
            }
            let prefix = "/v1/prefetch/".utf8
            guard bytes.starts(with: prefix) else { return nil }
            let start = bytes.index(bytes.startIndex, offsetBy: prefix.count)
            // The id runs to the next `/` byte.
            guard let slash = bytes[start...].firstIndex(of: UInt8(ascii: "/")) else {
                guard start < bytes.endIndex else { return nil }
                self = .results(path[start...])
                return
            }
            guard start < slash, bytes[slash...].elementsEqual("/data".utf8) else { return nil }
            self = .ticketData(path[start..<slash])
        }

        /// The route as the router's metrics name it.
        var label: String {
            switch self {
            case .results: FastHandoff.resultsRoute
            case .ticketData: FastHandoff.ticketDataRoute
            case .pageData: FastHandoff.pageDataRoute
            }
        }
    }

    /// The ticket named in a path if the reader is entitled to it (``PrefetchRoutes/entitledTicket(_:headers:origin:orchestrator:lookUp:)``),
    /// with the ticket and a read key's ticket found here or among those `known`.
    private func entitledTicket(_ id: Substring, _ head: HTTPRequest, known: [String: Ticket?]) -> PrefetchRoutes.Entitled {
        PrefetchRoutes.entitledTicket(
            String(id), headers: head.headerFields, origin: requestOrigin(head), orchestrator: orchestrator,
            lookUp: { orchestrator.tickets.lookUp($0, known: known) })
    }

    /// `GET /v1/prefetch/{ticket}`: every result of the ticket, now when none is in flight (or `wait` is zero),
    /// else once they settle or the wait ends; with the Redis store, once Redis has answered (and the wait ended).
    private func results(
        _ head: HTTPRequest, id: Substring, query: Parameters, origin: AllowedOrigins.Admission, known: [String: Ticket?],
        started: UInt64, deliver: () -> Deliver
    ) -> Read {
        let ticket: Ticket
        let wait: Duration
        switch entitledTicket(id, head, known: known) {
        case .fetch(let id): return .fetch(id)
        case .refused(let refusal):
            return .answer(.now(refused(refusal, origin: origin, route: Self.resultsRoute, method: .get, started: started)))
        case .ticket(let held):
            ticket = held
        }
        do throws(APIError) {
            wait = orchestrator.clampWait(try PrefetchRoutes.waitParameter(query), default: .zero)
        } catch {
            return .answer(.now(refused(error, origin: origin, route: Self.resultsRoute, method: .get, started: started)))
        }
        let answer: @Sendable ([ReadOutcome]) -> EncodedAnswer = { [self] outcomes in
            let (status, fields, body) = ResultsAnswer(ticket: ticket, outcomes: outcomes, timings: ticket.timings.withLock { $0 }).parts()
            orchestrator.metrics.eventLoopAnswer("results")
            return finish(status, fields, body, origin: origin, route: Self.resultsRoute, method: .get, started: started)
        }
        let canWait = wait > .zero
        // Answered now (and the delivery unused), or through the delivery once the flights settle or the store
        // answers.
        let delivery = deliver()
        switch orchestrator.readAll(ticket, canWait: canWait, notify: { delivery(answer($0)) }) {
        case .done(let outcomes):
            return .answer(.now(answer(outcomes)))
        case .waiting(let storeWait):
            return .answer(.later(storeWait, deadline: wait))
        }
    }

    /// Ends a waiting read's store wait after `deadline`, by the orchestrator's clock (`ServiceClock.schedule`).
    func expire(_ wait: StoreWait, after deadline: Duration, on loop: any EventLoop) -> Scheduled<Void> {
        let clock = orchestrator.clock
        return clock.schedule(at: clock.now.advanced(by: deadline), on: loop) { wait.expire() }
    }

    /// The data reads: the entry now when it is settled (a response, or the miss saying why), else once it settles
    /// or the read's `wait` ends (``Answer/later(_:deadline:)``); with the Redis store, once Redis has answered.
    /// What is read, its answer and its bookkeeping are the routed read's own (`PrefetchRoutes.pageRead`,
    /// ``Orchestrator/read(_:indices:canWait:notify:)``, `PrefetchRoutes.answer`), and so are its refusals (the
    /// `page=` checks, entitlement, the read key, the selection, `wait`), answered here; a ticket or read key another
    /// replica may hold is fetched first (`.fetch`).
    private func data(
        _ head: HTTPRequest, route readRoute: ReadRoute, query: Parameters, origin: AllowedOrigins.Admission, known: [String: Ticket?],
        started: UInt64, heads: ReplayHeads, deliver: () -> Deliver
    ) -> Read {
        let headers = head.headerFields
        let asked = orchestrator.clock.now
        let route = readRoute.label
        let refuse: (APIError) -> Read = { .answer(.now(refused($0, origin: origin, route: route, method: .get, started: started))) }
        let what: PrefetchRoutes.DataRead
        let timeout: Duration
        if case .pageData = readRoute, headers[PrefetchHeaders.readKey] == nil {
            // Same site: the page's own cookies name the entry, checked by the routed path's own code.
            switch Result(catching: { () throws(APIError) in
                try PrefetchRoutes.pageRead(orchestrator, query: query, headers: headers, origin: requestOrigin(head))
            }) {
            case .success(let read):
                what = .page(read.key, role: read.role)
                timeout = read.timeout
            case .failure(let error):
                if error.status == .forbidden { orchestrator.metrics.denied(error.code.rawValue) }
                return refuse(error)
            }
        } else {
            let ticket: Ticket
            switch readRoute {
            case .ticketData(let id):
                switch entitledTicket(id, head, known: known) {
                case .fetch(let id): return .fetch(id)
                case .refused(let error):
                    if case .found(let held) = orchestrator.tickets.lookUp(String(id), known: known) {
                        PrefetchRoutes.recordRefusedReader(held, query: query, error, orchestrator: orchestrator)
                    }
                    return refuse(error)
                case .ticket(let held): ticket = held
                }
            default:
                // `/v1/data` with a read key.
                let key = headers[PrefetchHeaders.readKey] ?? ""
                switch orchestrator.ticket(
                    forReadKey: key, origin: requestOrigin(head), lookUp: { orchestrator.tickets.lookUp($0, known: known) })
                {
                case .elsewhere(let id): return .fetch(id)
                case .opened(.failure(let error)):
                    orchestrator.metrics.denied(error.code.rawValue)
                    return refuse(APIError(error))
                case .opened(.success(let opened)): ticket = opened
                }
            }
            switch Result(catching: { () throws(APIError) in try PrefetchRoutes.select(PrefetchRoutes.candidates(ticket), query: query) }) {
            case .success(let index):
                what = .ticket(ticket, index: index)
                timeout = ticket.requests[index].timeout
            case .failure(let error):
                return refuse(error)
            }
        }
        let wait = PrefetchRoutes.wait(query, default: timeout, orchestrator: orchestrator)
        // Its answer from the outcome, now (with the connection's replay heads) or later (on the thread that has it).
        let answer: @Sendable (Result<ReadOutcome, APIError>, ReplayHeads?) -> EncodedAnswer = { [self] outcome, heads in
            orchestrator.metrics.fastHandoff()
            switch PrefetchRoutes.answer(
                outcome, wait: (try? wait.get()) ?? .zero, of: what, askedAt: asked, orchestrator: orchestrator)
            {
            case .success(let ready):
                return replay(ready.response, joined: ready.joined, origin: origin, route: route, started: started, heads: heads)
            case .failure(let error):
                let (status, fields, body) = (try? error.parts()) ?? (.internalServerError, [:], ByteBuffer())
                return finish(status, fields, body, origin: origin, route: route, method: .get, started: started)
            }
        }
        guard case .success(let duration) = wait else { return .answer(.now(answer(wait.map { _ in .pending }, heads))) }
        let delivery = deliver()
        let notify: @Sendable ([ReadOutcome]) -> Void = { delivery(answer(.success($0[0]), nil)) }
        let read =
            switch what {
            case .page(let key, _): orchestrator.read(key, canWait: duration > .zero, notify: notify)
            case .ticket(let ticket, let index): orchestrator.read(ticket, indices: [index], canWait: duration > .zero, notify: notify)
            }
        switch read {
        case .done(let outcomes): return .answer(.now(answer(.success(outcomes[0]), heads)))
        case .waiting(let storeWait): return .answer(.later(storeWait, deadline: duration))
        }
    }

    private func requestOrigin(_ head: HTTPRequest) -> TicketAccess.RequestOrigin {
        .init(head.headerFields, authority: head.authority)
    }
}

/// The two halves of an open answered on the event loop, the trigger and the lease, each coming in once from
/// whichever thread has it: the open is answered by the one that comes in second.
final class OpenJoin: Sendable {
    enum Step {
        /// Answer the open with these.
        case answer(Result<Triggered, PrefetchError>, Result<Lease, APIError>)
        /// The other half is still out.
        case wait
        /// The connection is gone: hand this lease back.
        case returnLease
    }

    private struct Halves {
        var triggered: Result<Triggered, PrefetchError>?
        var lease: Result<Lease, APIError>?
        var answered = false
        var gone = false
    }

    private let halves = Mutex(Halves())

    func triggered(_ outcome: Result<Triggered, PrefetchError>) -> Step {
        halves.withLock { halves in
            halves.triggered = outcome
            guard !halves.gone, let lease = halves.lease else { return .wait }
            halves.answered = true
            return .answer(outcome, lease)
        }
    }

    func leased(_ lease: Result<Lease, APIError>) -> Step {
        halves.withLock { halves in
            if halves.gone { return .returnLease }
            halves.lease = lease
            guard let triggered = halves.triggered else { return .wait }
            halves.answered = true
            return .answer(triggered, lease)
        }
    }

    /// The open's connection closed before its answer was written: the lease it holds and no answer carries, to hand
    /// back now; a lease that comes later is `.returnLease`.
    func cancel() -> Lease? {
        halves.withLock { halves in
            halves.gone = true
            guard !halves.answered, case .success(let held)? = halves.lease else { return nil }
            halves.lease = nil
            return held
        }
    }
}

/// The request metrics Hummingbird's `MetricsMiddleware` records, for answers it never sees: the same labels and
/// dimensions, so a fast answer counts in the same series as a routed one.
final class FastHandoffMetrics: Sendable {
    private struct Series: Sendable {
        let counter: Counter
        let timer: Timer

        init(route: String, method: HTTPRequest.Method, status: Int) {
            let dimensions = [
                ("http.route", route), ("http.request.method", method.rawValue), ("http.response.status_code", String(status)),
            ]
            counter = Counter(label: "hb.requests", dimensions: dimensions)
            timer = Timer(label: "http.server.request.duration", dimensions: dimensions, preferredDisplayUnit: .seconds)
        }
    }

    private struct Key: Hashable {
        var route: String
        var method: HTTPRequest.Method
        var status: Int
    }

    /// By route, method and status (the replayed upstream status: a bounded set of three-digit codes). Found without
    /// building a string, so a fast answer allocates nothing here once its series exists.
    private let series = Mutex<[Key: Series]>([:])

    /// The `http.request.method` of every method outside ``APIError/knownMethods`` (OpenTelemetry's HTTP
    /// conventions' name), so a client sending made-up methods cannot add a series for each.
    private static let other = HTTPRequest.Method("_OTHER")!

    func record(route: String, method: HTTPRequest.Method, status: HTTPResponse.Status, nanoseconds: UInt64) {
        let series = series.withLock { all in
            // A known method's series is found under its own key; no series is ever made under an unknown one.
            if let known = all[Key(route: route, method: method, status: status.code)] { return known }
            let method = APIError.knownMethods.contains(method) ? method : Self.other
            let key = Key(route: route, method: method, status: status.code)
            if let known = all[key] { return known }
            let made = Series(route: route, method: method, status: status.code)
            all[key] = made
            return made
        }
        series.counter.increment()
        series.timer.recordNanoseconds(Int64(nanoseconds))
    }
}

/// Answers what `FastHandoff` can, passes everything else on. One per connection, on its event loop, right after
/// NIO's HTTP/1 request decoder and before Hummingbird's `HTTPTypes` codec: a request it answers is never
/// converted to `HTTPTypes` by the codec, nor carried through the guard, the connection-state handler and the async
/// channel, and its answer goes straight to NIO's response encoder.
///
/// Since it sees every request of the connection and every answer (the router's come back through its `write`,
/// already converted), it keeps the connection's idle timeout and graceful close (``ConnectionState``) for all of
/// them, in place of Hummingbird's connection-state handler, which the requests it answers would bypass. A trigger
/// body it collects has the listener's body timeout, with the guard's `408` (``ConnectionGuards``). Both timers run
/// on the event loop's clock (`EventLoop.now`, `scheduleTask`): an `EmbeddedEventLoop` drives them in tests
/// (`FastHandoffClockTests`).
///
/// Order is kept whatever the mix: Hummingbird reads pipelined requests without waiting for the previous answer,
/// so while a request passed to the router has not been answered (its response's end has not come back through
/// this handler), every later request goes to the router too, which answers in order; and while an answer of this
/// handler is outstanding (a read waiting on flights in progress), every later request's parts are held here, and
/// the connection is not read further, until that answer is written.
final class FastHandoffHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The request being read or answered.
    private enum Current {
        /// Between requests.
        case idle
        /// Answered at its head; written at its end.
        case answered(EncodedAnswer, close: Bool)
        /// A trigger or an open whose body is being collected (under the body timer); decided at its end.
        case collecting(FastHandoff.Posted, HTTPRequest, ByteBuffer, Scheduled<Void>?, close: Bool)
        /// Answered before its end (a refusal at the head, a body over the limit); its body is dropped until its end,
        /// under the body timer. With `close`, the answer ended the connection's output: nothing after the end is
        /// read.
        case draining(Scheduled<Void>?, close: Bool)
        /// A read waiting on flights in progress (its wait given), or a trigger or open underway in the
        /// shared store (none): `ended` once its end arrived, `ready` once its answer did.
        case waiting(StoreWait?, Scheduled<Void>?, close: Bool, ended: Bool, ready: EncodedAnswer?)
        /// The connection is closing after the guard's `408`: nothing more is read or answered.
        case closing
    }

    private let handoff: FastHandoff
    /// The surface's other routes.
    private let api: PageAPI
    private let guards: ConnectionGuards
    /// Where answers encoded here are written, below NIO's response encoder.
    private let writer: EncodedAnswerWriter
    /// The heads of this connection's last replays.
    private let heads = ReplayHeads()
    private var current = Current.idle
    /// Parts of later requests that arrived while an answer of this handler was outstanding.
    private var held = CircularBuffer<HTTPServerRequestPart>()
    /// A read was asked for while holding; it is passed on once the answer is written.
    private var readWanted = false
    /// The answer to a request the decoder could not read behind an outstanding one: written after it, then the close.
    private var unreadable: EncodedAnswer?
    /// The client closed its side: once every request read is answered, the connection closes.
    private var inputEnded = false
    /// Request heads seen on this connection: a read's resumption belongs to the request it was made for.
    private var headsSeen: UInt64 = 0
    /// What to do if the connection closes while the current answer is underway (an open's lease to hand back).
    private var onGone: (@Sendable () -> Void)?
    private var state: ConnectionState
    private var idleTimer: Scheduled<Void>?

    /// The most bytes of a request head (request line and header fields) the decoder reads.
    private let headLimit: Int

    init(
        handoff: FastHandoff, api: PageAPI, guards: ConnectionGuards, idleTimeout: TimeAmount?, writer: EncodedAnswerWriter,
        headLimit: Int
    ) {
        self.handoff = handoff
        self.api = api
        self.guards = guards
        self.writer = writer
        self.headLimit = headLimit
        // Restarted at `handlerAdded`, on the event loop's clock; nothing reads it before.
        self.state = ConnectionState(idleTimeout: idleTimeout, now: .uptimeNanoseconds(0))
    }

    /// The current request is fully read and its answer not yet written: later parts wait.
    private var holding: Bool {
        if case .waiting(_, _, _, true, _) = current { return true }
        return false
    }

    func handlerAdded(context: ChannelHandlerContext) {
        state = ConnectionState(idleTimeout: state.idleTimeout, now: context.eventLoop.now)
        if context.channel.isActive { perform(state.activated(now: context.eventLoop.now), context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        perform(state.activated(now: context.eventLoop.now), context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head: state.requestHead(now: context.eventLoop.now)
        case .body: state.requestBody(now: context.eventLoop.now)
        case .end: state.requestEnd(now: context.eventLoop.now)
        }
        if case .closing = current { return }
        // Behind an outstanding answer, or while the socket takes no more (the client does not read its answers),
        // later parts wait here and the connection is not read further: what a client can make this connection hold
        // is bounded by one read, never by the answers it would pile up.
        if holding || !held.isEmpty || !context.channel.isWritable {
            held.append(part)
            return
        }
        process(part, context: context)
    }

    /// The held parts, in order, while nothing holds them (an answer outstanding, a socket that takes no more);
    /// then the answer to a request the decoder could not read, if one waits; then the next read, if one was asked
    /// for.
    private func replayHeld(context: ChannelHandlerContext) {
        while !holding, context.channel.isWritable, let part = held.popFirst() {
            process(part, context: context)
        }
        if case .idle = current, held.isEmpty, let answer = unreadable {
            unreadable = nil
            current = .closing
            write(answer, close: true, context: context)
            return
        }
        if readWanted && !holding && held.isEmpty && context.channel.isWritable {
            readWanted = false
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { replayHeld(context: context) }
        context.fireChannelWritabilityChanged()
    }

    /// Whether a head may be one of the store's routes (`FastHandoff`); the rest are `PageAPI`'s.
    private static func isCandidate(_ head: HTTPRequestHead, target: String) -> Bool {
        (head.method == .GET || head.method == .POST) && FastHandoff.takenPrefixes.contains { target.utf8.starts(with: $0.utf8) }
    }

    /// The head as `HTTPTypes` has it, its path the target in origin form: as sent, or an absolute-form target's
    /// path and query (`http://host/healthz` is `/healthz`; RFC 9112 §3.2.2 has a server accept it); nil when the
    /// method is not one `HTTPTypes` takes.
    private static func request(_ head: HTTPRequestHead) -> HTTPRequest? {
        guard let method = try? HTTPRequest.Method(head.method) else { return nil }
        return HTTPRequest(
            method: method, scheme: "http", authority: head.headers.first(name: "host"), path: originForm(head.uri),
            headerFields: HTTPFields(head.headers, splitCookie: false))
    }

    /// `target` in origin form: an absolute-form target (`scheme://authority/path?query`) without its scheme and
    /// authority; any other target as sent (an origin-form one, or `*`, which no route takes).
    static func originForm(_ target: String) -> String {
        let bytes = target.utf8
        guard bytes.first != UInt8(ascii: "/"), let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
            bytes[colon...].starts(with: "://".utf8)
        else { return target }
        let authority = bytes.index(colon, offsetBy: 3)
        guard let start = bytes[authority...].firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) else {
            return "/"
        }
        return bytes[start] == UInt8(ascii: "?") ? "/" + target[start...] : String(target[start...])
    }

    /// `target` with its path's empty segments dropped (`//v1/data/` is `/v1/data`), its query kept: every route
    /// is matched on the segments that have something in them.
    static func canonical(_ target: String) -> String {
        let bytes = target.utf8
        let pathEnd = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
        var previous: UInt8 = 0
        var empty = false
        for byte in bytes[..<pathEnd] {
            if byte == UInt8(ascii: "/") && previous == byte { empty = true }
            previous = byte
        }
        let trailing = previous == UInt8(ascii: "/") && bytes.distance(from: bytes.startIndex, to: pathEnd) > 1
        guard empty || trailing else { return target }
        let segments = target[..<pathEnd].split(separator: "/")
        return "/" + segments.joined(separator: "/") + target[pathEnd...]
    }

    private func process(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let nioHead):
            headsSeen &+= 1
            guard let sent = Self.request(nioHead) else {
                current = .closing
                write(
                    handoff.malformed("the request method \(quoted(nioHead.method.rawValue, limit: 40)) is not a token"), close: true,
                    context: context)
                return
            }
            do {
                // `Connection: close`, or HTTP/1.0 without keep-alive, ends the connection after the answer.
                let close = !nioHead.isKeepAlive
                // The store's routes are matched on the target without empty segments (`//v1/data/` is `/v1/data`).
                // (Set only when it differs: setting a path validates and stores a new field.)
                var head = sent
                let target = sent.path ?? "/"
                let canonical = Self.canonical(target)
                let rewritten = canonical.utf8.count != target.utf8.count
                if rewritten { head.path = canonical }
                if Self.isCandidate(nioHead, target: canonical) {
                    let taken = handoff.takes(head) ?? (handoff.drains(head) ? .collect(.read) : nil)
                    if case .refused(let answer) = taken {
                        // Written at once; its body, if any, is dropped as it arrives (the router's refusal is written
                        // before the body too, which Hummingbird then drains).
                        // With `Connection: close` too: the body still has the body timeout, as the router's guard gives it.
                        write(answer, close: close, context: context)
                        let timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
                            drainTimedOut(context: context)
                        }
                        current = .draining(timer, close: close)
                        return
                    }
                    if case .collect(let posted) = taken {
                        let timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
                            bodyTimedOut(context: context)
                        }
                        current = .collecting(posted, head, context.channel.allocator.buffer(capacity: 0), timer, close: close)
                        return
                    }
                    let answer = handoff.answer(
                        head, heads: heads, deliver: { delivery(context: context) }, resume: { resumption(context: context) })
                    switch answer {
                    case .now(let answer)?:
                        current = .answered(answer, close: close)
                        return
                    case .later(let wait, let deadline)?:
                        let timer = handoff.expire(wait, after: deadline, on: context.eventLoop)
                        current = .waiting(wait, timer, close: close, ended: false, ready: nil)
                        return
                    case .underway?:
                        // A ticket is on its way from another replica: the read goes on in `resume`.
                        current = .waiting(nil, nil, close: close, ended: false, ready: nil)
                        return
                    case nil:
                        break
                    }
                }
                cold(api.head(sent), sent, close: close, context: context)
            }
        case .body(let buffer):
            switch current {
            case .collecting(.read, _, _, _, _), .draining:
                // A read's body is dropped, as the router's reads drop it; so is a refused request's.
                break
            case .collecting(let posted, let head, var body, let timer, let close):
                // Bounded: past the router's limit it is refused at once, and the rest dropped as it arrives.
                current = .idle
                guard body.readableBytes + buffer.readableBytes <= handoff.bodyLimit else {
                    write(handoff.bodyTooLarge(head, posted), close: close, context: context)
                    current = .draining(timer, close: close)
                    return
                }
                body.writeImmutableBuffer(buffer)
                current = .collecting(posted, head, body, timer, close: close)
            default:
                // A GET's body (if any) is not read by the endpoints answered here; dropped as they drop it.
                break
            }
        case .end:
            switch current {
            case .idle:
                break
            case .answered(let answer, let close):
                current = .idle
                write(answer, close: close, context: context)
            case .draining(let timer, let close):
                current = close ? .closing : .idle
                timer?.cancel()
            case .collecting(.read, let head, _, let timer, let close):
                current = .idle
                timer?.cancel()
                read(head, close: close, context: context)
            case .collecting(let posted, let head, let body, let timer, let close):
                current = .idle
                timer?.cancel()
                let caller = context.channel.remoteAddress?.ipAddress ?? "unknown"
                let makeDelivery = { self.delivery(context: context) }
                let answered =
                    switch posted {
                    case .trigger: handoff.trigger(head, body: body, caller: caller, deliver: makeDelivery)
                    case .open:
                        handoff.open(head, body: body, caller: caller, deliver: makeDelivery, onGone: { self.onGone = $0 })
                    case .read: preconditionFailure("a read is answered by read(_:_:close:context:)")
                    case .cold(let route):
                        cold(route, head, body: body, caller: caller, deliver: makeDelivery(), onGone: { self.onGone = $0 })
                    }
                switch answered {
                case .now(let answer)?:
                    write(answer, close: close, context: context)
                case .underway?:
                    // Its end is in: later requests are held until the answer is written.
                    current = .waiting(nil, nil, close: close, ended: true, ready: nil)
                case .later?:
                    preconditionFailure("a trigger never waits on a ticket")
                case nil:
                    write(handoff.unanswerable(head), close: close, context: context)
                }
            case .waiting(let wait, let timer, let close, _, let ready):
                if let answer = ready {
                    current = .idle
                    write(answer, close: close, context: context)
                } else {
                    current = .waiting(wait, timer, close: close, ended: true, ready: nil)
                }
            case .closing:
                break
            }
        }
    }

    /// A request of ``PageAPI``, decided at its head: its answer is written at its end (at once when it announces a
    /// body, which is then dropped under the body timeout), or its body is collected first.
    private func cold(
        _ decided: PageAPI.Cold, _ head: HTTPRequest, close: Bool, context: ChannelHandlerContext
    ) {
        switch decided {
        case .now(let answer):
            let announcesBody =
                head.headerFields[.transferEncoding] != nil || (head.headerFields[.contentLength].map { $0 != "0" } ?? false)
            guard announcesBody else {
                current = .answered(answer, close: close)
                return
            }
            write(answer, close: close, context: context)
            let timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
                drainTimedOut(context: context)
            }
            current = .draining(timer, close: close)
        case .collect(let route):
            let timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
                bodyTimedOut(context: context)
            }
            current = .collecting(.cold(route), head, context.channel.allocator.buffer(capacity: 0), timer, close: close)
        }
    }

    /// A request of ``PageAPI`` whose body is in: answered by a task of its own (these routes wait on the renderer
    /// pool or a shared store, and are not on a page open's path), the answer handed back to this event loop.
    private func cold(
        _ route: PageRoute, _ head: HTTPRequest, body: ByteBuffer, caller: String, deliver: @escaping FastHandoff.Deliver,
        onGone: (@escaping @Sendable () -> Void) -> Void
    ) -> FastHandoff.Answer? {
        let api = api
        let left = Abandonment()
        onGone { left.leave() }
        Task { deliver(await api.answer(route, head, body: body, caller: caller, left: left)) }
        return .underway
    }

    /// A read whose body ended (dropped): answered as its head alone would be, now or later.
    private func read(_ head: HTTPRequest, close: Bool, context: ChannelHandlerContext) {
        let head = FastHandoff.withoutBody(head)
        let answer = handoff.answer(head, heads: heads, deliver: { delivery(context: context) }, resume: { resumption(context: context) })
        switch answer {
        case .now(let answer)?:
            write(answer, close: close, context: context)
        case .later(let wait, let deadline)?:
            let timer = handoff.expire(wait, after: deadline, on: context.eventLoop)
            current = .waiting(wait, timer, close: close, ended: true, ready: nil)
        case .underway?:
            current = .waiting(nil, nil, close: close, ended: true, ready: nil)
        case nil:
            write(handoff.unanswerable(head), close: close, context: context)
        }
    }

    /// The function an answer that comes later goes to: it brings the answer to this connection's event loop.
    private func delivery(context: ChannelHandlerContext) -> FastHandoff.Deliver {
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        return { answer in
            loop.execute {
                let (handler, context) = bound.value
                handler.ready(answer, context: context)
            }
        }
    }

    /// How a read goes on once what it waited for is in: its next step runs on this connection's event loop.
    private func resumption(context: ChannelHandlerContext) -> FastHandoff.Resume {
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        let request = headsSeen
        return FastHandoff.Resume { step in
            loop.execute {
                let (handler, context) = bound.value
                handler.resume(step, request: request, context: context)
            }
        }
    }

    /// Runs a read's next step, unless the connection has moved on (closed, or on to another request): then nothing
    /// is read, so nothing is consumed for a reader who has gone.
    private func resume(_ step: FastHandoff.Step, request: UInt64, context: ChannelHandlerContext) {
        guard request == headsSeen, case .waiting(nil, nil, let close, let ended, nil) = current else { return }
        let answer = step(heads, { self.delivery(context: context) }, { self.resumption(context: context) })
        switch answer {
        case .now(let answer):
            ready(answer, context: context)
        case .later(let wait, let deadline):
            let timer = handoff.expire(wait, after: deadline, on: context.eventLoop)
            current = .waiting(wait, timer, close: close, ended: ended, ready: nil)
        case .underway:
            break
        }
    }

    /// A trigger body collected here missed the body timeout: the guard's `408`, then the connection closes (as
    /// ``ConnectionGuardHandler`` does for a routed request; nothing else is outstanding while one is collected).
    /// A body being dropped after its request's answer (over the limit) closes the connection instead.
    private func bodyTimedOut(context: ChannelHandlerContext) {
        if case .draining = current { return drainTimedOut(context: context) }
        guard case .collecting = current else { return }
        current = .closing
        guards.bodyTimedOut()
        let answer = guards.timeoutAnswer
        context.write(wrapOutboundOut(.head(HTTPResponseHead(answer.head))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(answer.body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        // A client that does not read could hold the answer in the socket: one more body timeout, then it closes.
        context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { context.close(promise: nil) }
    }

    /// The body of a request refused at its head missed the body timeout: its answer is written, so the connection
    /// closes (as ``ConnectionGuardHandler`` closes one whose answered request's body stops arriving).
    private func drainTimedOut(context: ChannelHandlerContext) {
        guard case .draining = current else { return }
        current = .closing
        guards.bodyTimedOut()
        context.close(promise: nil)
    }

    /// A waiting read's answer, on the event loop.
    private func ready(_ answer: EncodedAnswer, context: ChannelHandlerContext) {
        guard case .waiting(let wait, let timer, let close, let ended, nil) = current else { return }
        timer?.cancel()
        guard ended else {
            current = .waiting(wait, nil, close: close, ended: false, ready: answer)
            return
        }
        current = .idle
        onGone = nil
        write(answer, close: close, context: context)
        // Later requests that waited behind it, in order; one of them may wait in turn.
        replayHeld(context: context)
    }

    /// Writes an answer of this path: an encoded head and the body below NIO's response encoder, in one `writev`
    /// (``EncodedAnswerWriter``); a head the encoder must frame through it, as the router's are.
    private func write(_ answer: EncodedAnswer, close: Bool, context: ChannelHandlerContext) {
        switch answer.head {
        case .bytes(let head):
            guard let wire = writer.context else {
                preconditionFailure("the encoded-answer writer left the pipeline before its connection closed")
            }
            wire.write(NIOAny(IOData.byteBuffer(head)), promise: nil)
            if close {
                _ = state.answerEnd(now: context.eventLoop.now)
                wire.writeAndFlush(NIOAny(IOData.byteBuffer(answer.body))).assumeIsolated().whenComplete { _ in
                    context.close(mode: .output, promise: nil)
                }
                return
            }
            switch state.answerEnd(now: context.eventLoop.now) {
            case .close:
                wire.writeAndFlush(NIOAny(IOData.byteBuffer(answer.body)), promise: nil)
                context.close(promise: nil)
            case .armTimer(let deadline):
                armIdleTimer(deadline, context: context)
                fallthrough
            case .none:
                wire.writeAndFlush(NIOAny(IOData.byteBuffer(answer.body)), promise: nil)
            }
        case .framedByEncoder(let response):
            context.write(wrapOutboundOut(.head(HTTPResponseHead(response))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(answer.body))), promise: nil)
            let end = wrapOutboundOut(.end(nil))
            if close {
                _ = state.answerEnd(now: context.eventLoop.now)
                context.writeAndFlush(end).assumeIsolated().whenComplete { _ in
                    context.close(mode: .output, promise: nil)
                }
            } else {
                writeEnd(end, promise: nil, flush: true, context: context)
            }
        }
    }

    /// An answer's end, with the connection's bookkeeping: the idle timer re-armed, or the close a graceful
    /// shutdown waits for.
    private func writeEnd(_ end: NIOAny?, promise: EventLoopPromise<Void>?, flush: Bool, context: ChannelHandlerContext) {
        // An end that writes nothing (a bodiless answer's) completes at once; what precedes it is flushed.
        let send = { (flush: Bool) in
            if let end {
                if flush { context.writeAndFlush(end, promise: promise) } else { context.write(end, promise: promise) }
            } else {
                if flush { context.flush() }
                promise?.succeed(())
            }
        }
        switch state.answerEnd(now: context.eventLoop.now) {
        case .close:
            send(true)
            context.close(promise: nil)
        case .armTimer(let deadline):
            armIdleTimer(deadline, context: context)
            fallthrough
        case .none:
            send(flush)
        }
    }

    private func perform(_ action: ConnectionState.Action, context: ChannelHandlerContext) {
        switch action {
        case .none: break
        case .armTimer(let deadline): armIdleTimer(deadline, context: context)
        case .close: context.close(promise: nil)
        }
    }

    private func armIdleTimer(_ deadline: NIODeadline, context: ChannelHandlerContext) {
        guard idleTimer == nil else { return }
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            idleTimer = nil
            perform(state.timerFired(now: context.eventLoop.now), context: context)
        }
    }

    /// A request the decoder cannot read is answered in the API's JSON shape with the page surface's security
    /// headers, and the connection closes (nothing after it can be framed): a head over the limit `431 too-large`,
    /// any other `400 malformed-request`. Behind an answer still outstanding it is written after that answer, in
    /// order. Any other error (the socket's) closes the connection.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parser = error as? HTTPParserError else {
            context.close(promise: nil)
            return
        }
        let answer =
            parser == .headerOverflow
            ? handoff.headTooLarge(limit: headLimit) : handoff.malformed("the request is not an HTTP/1.1 message: \(parser)")
        switch current {
        case .idle where held.isEmpty:
            current = .closing
            write(answer, close: true, context: context)
        case .collecting(_, _, _, let timer, _):
            // A body that cannot be read (a malformed chunk): refused now, not at the body timeout.
            timer?.cancel()
            current = .closing
            write(answer, close: true, context: context)
        case .draining(let timer, _):
            // Its answer is written; the rest cannot be framed.
            timer?.cancel()
            current = .closing
            context.close(promise: nil)
        case .answered(let written, _):
            // Answered at its head; its body cannot be framed: the answer, then the close.
            current = .closing
            write(written, close: true, context: context)
        case .closing:
            break
        default:
            // Written once the outstanding answer is (`ready`), or the held requests are (`replayHeld`); nothing
            // more is read.
            unreadable = answer
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        state.deactivated()
        endWait()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = nil
        endWait()
    }

    /// The connection is gone: a waiting read's wait ends now (its readers leave the store's flights), and a
    /// collected body's timer stops.
    private func endWait() {
        if case .waiting(_, _, _, _, nil) = current, let gone = onGone { gone() }
        onGone = nil
        switch current {
        case .waiting(let wait, let timer, _, _, _):
            current = .idle
            timer?.cancel()
            wait?.expire()
        case .collecting(_, _, _, let timer, _), .draining(let timer, _):
            current = .idle
            timer?.cancel()
        default:
            break
        }
    }
}

extension FastHandoffHandler {
    /// No further read while later requests are held behind an outstanding answer.
    func read(context: ChannelHandlerContext) {
        if holding || !held.isEmpty || !context.channel.isWritable {
            readWanted = true
        } else {
            context.read()
        }
    }

    /// A graceful shutdown: this handler keeps the connection's graceful close (the state handler above it does
    /// not see the requests answered here), so the event stops here.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            // The client closed its side: with nothing outstanding the connection closes once the answers written are
            // flushed; with an answer still to come the client is taken as gone (as a proxy takes a client's close),
            // so nothing is kept or leased for it (`endWait`).
            inputEnded = true
            if case .idle = current, held.isEmpty {
                closeIfInputEnded(context: context)
            } else {
                context.close(promise: nil)
            }
            return
        }
        guard event is ChannelShouldQuiesceEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        perform(state.quiesce(), context: context)
    }

    /// The client closed its side and every request it sent is answered: the connection closes once the answers are
    /// flushed.
    private func closeIfInputEnded(context: ChannelHandlerContext) {
        guard inputEnded, case .idle = current, held.isEmpty else { return }
        current = .closing
        // An empty write completes after every write before it.
        guard let wire = writer.context else { return context.close(promise: nil) }
        wire.writeAndFlush(NIOAny(IOData.byteBuffer(ByteBuffer()))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}

/// The connection's outbound end right below NIO's response encoder: ``FastHandoffHandler`` writes the answers it
/// encoded itself (head and body, as bytes) through this handler's context, so they reach the socket without
/// passing the encoder. Everything the encoder writes passes through untouched.
final class EncodedAnswerWriter: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// Its place in the pipeline while it is there.
    private(set) var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }
}
