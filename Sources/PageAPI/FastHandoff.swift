import Dispatch
package import HTTPTypes
import Logging
import Metrics
package import NIOCore
import PrefetchCore
package import PrefetchEngine
package import PrefetchStore
package import RendererPool
import Synchronization

/// The five store routes of the page API, each a function from a parsed request (`HTTPRequest`, its body, the
/// caller's address) to an answer, run on the caller's event loop: the trigger (`POST /v1/prefetch`), the open
/// (`POST /v1/open`, a renderer to create leased in one task), the results view (`GET /v1/prefetch/{ticket}`) and
/// the data reads by every route a page uses (`GET /v1/prefetch/{ticket}/data` with the reader's credentials or a
/// read key, `GET /v1/data` with a read key, and the same-site `GET /v1/data?page=` with the page's own
/// credentials), whatever their entries' state. Every other page route is ``PageAPI``'s.
///
/// Each rule is called from its one home: the origin guard and its headers (`AllowedOrigins.admit`,
/// `Admission.decorate`), the media type (`JSONBody.refusal`), the trigger's body (`PrefetchRoutes.TriggerRequest`),
/// `Orchestrator.trigger(page:...:then:)` (its checks, rate limits, claims and page open, without a task), the ticket
/// entitlement (`PrefetchRoutes.entitledTicket` over `Orchestrator.entitle`), the page-origin rule of a `page=` read
/// (`PrefetchRoutes.pageRead`), the interface selection and `wait`, the reads (`Orchestrator.readAll(_:canWait:notify:)`,
/// `Orchestrator.read(_:indices:canWait:notify:)`: a no-store response is consumed exactly once), the answers
/// (`TriggerAnswer`, `ResultsAnswer`, a data read's answer and bookkeeping `PrefetchRoutes.answer`, an engine refusal
/// as `APIError`), and the request metrics (``FastHandoffMetrics``).
///
/// An answer is ready at once (``Answer/now(_:)``), or comes through the caller's delivery: a read that must wait
/// registers its wait with the store (no task) and is answered when its flights settle (on the thread that settles
/// them; the delivery brings it to the connection's event loop) or when its wait ends (``expire(_:after:on:)``); with
/// the Redis store the trigger's and the open's round trips run on the pool's event loops through callbacks
/// (``Answer/underway``). A ticket or read key another replica holds is fetched from the shared registry by callback
/// and the read goes on on the caller's event loop once it is in (``Resume``). The page pipeline
/// (`FastHandoffHandler` in `PrefetchService`) parses, keeps pipelining order and writes.
package struct FastHandoff: Sendable {
    package let orchestrator: Orchestrator
    package let origins: AllowedOrigins
    package let requestMetrics: FastHandoffMetrics
    /// The renderer pools `POST /v1/open` leases from (nil: `POST /v1/open` is not a route).
    package var renderers: RendererPools?

    package init(orchestrator: Orchestrator, origins: AllowedOrigins, requestMetrics: FastHandoffMetrics, renderers: RendererPools? = nil) {
        self.orchestrator = orchestrator
        self.origins = origins
        self.requestMetrics = requestMetrics
        self.renderers = renderers
    }

    package static let ticketDataRoute = "/v1/prefetch/{ticket}/data"
    package static let resultsRoute = "/v1/prefetch/{ticket}"
    package static let pageDataRoute = "/v1/data"
    package static let triggerRoute = "/v1/prefetch"
    package static let openRoute = "/v1/open"
    /// Every target this path may answer starts with one of these (the results view and the ticket's data read start
    /// with the trigger's).
    package static let takenPrefixes = [triggerRoute, pageDataRoute, openRoute]

    /// The requests whose body this path collects and then answers.
    package enum Posted {
        case trigger
        case open
        /// A read (`GET`) that announces a body: the body is read and dropped, and the
        /// read is answered at its end (deciding at the head would hold, or for a no-store entry consume, an answer
        /// behind a body that never ends).
        case read
        /// A route of ``PageAPI`` that reads its body (invalidation, renderer leases).
        case cold(PageRoute)

        /// A trigger's or an open's route as the request metrics name it, and its `prefetch_event_loop_answers_total`
        /// label (a read is counted by its own route).
        package var counted: (route: String, label: String) {
            switch self {
            case .trigger: (FastHandoff.triggerRoute, "trigger")
            case .open: (FastHandoff.openRoute, "open")
            case .read: preconditionFailure("a read is counted by its read route")
            case .cold(let route): (route.template, "")
            }
        }
    }

    package typealias Deliver = @Sendable (PageAnswer) -> Void

    /// A read's next step, run on the connection's event loop once a ticket another replica may hold has been
    /// fetched: given the connection's delivery and its resumption, as ``answer(_:deliver:resume:known:started:)`` is.
    package typealias Step = @Sendable (() -> Deliver, () -> Resume) -> Answer

    /// Brings a read's next step to the connection's event loop, where the handler runs it (unless the connection
    /// has moved on: closed, or its answer already written).
    package struct Resume: Sendable {
        package let run: @Sendable (@escaping Step) -> Void

        package init(run: @escaping @Sendable (@escaping Step) -> Void) {
            self.run = run
        }
    }

    /// An answer of the fast path: written now, or once `wait` is fulfilled, or once the shared store answered.
    package enum Answer {
        case now(PageAnswer)
        /// A read waiting on flights in progress (a results view, a data read): the store's wait (expired at
        /// `deadline`) calls the handler's delivery.
        case later(StoreWait, deadline: Duration)
        /// A trigger or an open whose claims and ticket record are on their way to Redis: the handler's delivery is
        /// called with the answer once both are back (bounded by the store's command timeout).
        case underway
    }

    /// The page-surface origin rule (``AllowedOrigins/admit(_:path:)``), or nil when it refuses.
    private func grant(_ head: HTTPRequest) -> AllowedOrigins.Admission? {
        try? origins.admit(head.headerFields, path: PageTarget(head.path ?? "").path).get()
    }

    /// A refusal as every answer of the surface is written: the error's JSON, the CORS headers of an admitted origin (none for the
    /// origin guard's own refusal), the security headers; and its request metrics.
    private func refused(
        _ error: APIError, origin: AllowedOrigins.Admission?, route: String, method: HTTPRequest.Method, started: UInt64
    ) -> PageAnswer {
        let (status, fields, body) = (try? error.parts()) ?? (.internalServerError, [:], ByteBuffer())
        return finish(
            status, fields, body, origin: origin ?? AllowedOrigins.Admission(origin: nil, grant: .none), route: route, method: method,
            started: started)
    }

    /// The answer's final headers: its own, the length, then the guard's CORS and
    /// security headers.
    static func finalFields(_ fields: HTTPFields, length: Int, origin: AllowedOrigins.Admission) -> HTTPFields {
        var fields = fields
        fields[.contentLength] = String(length)
        origin.decorate(&fields)
        return fields
    }

    /// The answer with its final headers (``finalFields(_:length:origin:)``); and its request metrics.
    private func finish(
        _ status: HTTPResponse.Status, _ fields: HTTPFields, _ body: ByteBuffer, origin: AllowedOrigins.Admission,
        route: String, method: HTTPRequest.Method, started: UInt64
    ) -> PageAnswer {
        let fields = Self.finalFields(fields, length: body.readableBytes, origin: origin)
        requestMetrics.record(route: route, method: method, status: status, nanoseconds: DispatchTime.now().uptimeNanoseconds - started)
        return PageAnswer(HTTPResponse(status: status, headerFields: fields), body: body)
    }

    /// A ready entry's replay (``PageAnswer/init(replaying:_:)``: ``PrefetchRoutes/replayParts(_:joined:)`` with
    /// ``finalFields(_:length:origin:)``, built only when the transport has not kept the same head); and its request
    /// metrics.
    private func replay(
        _ stored: StoredResponse, joined: Bool, origin: AllowedOrigins.Admission, route: String, started: UInt64
    ) -> PageAnswer {
        requestMetrics.record(
            route: route, method: .get, status: HTTPResponse.Status(code: stored.status),
            nanoseconds: DispatchTime.now().uptimeNanoseconds - started)
        return PageAnswer(replaying: stored, PageAnswer.ReplayVariant(joined: joined, origin: origin))
    }

    /// The answer to a request head over `limit` bytes: `431 too-large`, no CORS (the head, `Origin` included, was
    /// never read), the security headers; and its request metrics under the route `NotFound` (a request no route could read).
    package func headTooLarge(limit: Int) -> PageAnswer {
        closing(.headTooLarge(limit: limit), route: "NotFound")
    }

    /// The answer to a request that cannot be read as one (a method that is not a token, a head the parser
    /// refuses): `400 malformed-request` naming what was wrong, the security headers, and the close (what follows
    /// cannot be framed).
    package func malformed(_ message: String) -> PageAnswer {
        closing(.badRequest(.malformedRequest, message), route: "Unknown")
    }

    /// `error` written before its request could be read: no CORS, the security headers, `Connection: close`.
    private func closing(_ error: APIError, route: String) -> PageAnswer {
        let (status, fields, body) = (try? error.parts()) ?? (error.status, [:], ByteBuffer())
        var head = fields
        head[.connection] = "close"
        return finish(
            status, head, body, origin: AllowedOrigins.Admission(origin: nil, grant: .none), route: route, method: .get,
            started: DispatchTime.now().uptimeNanoseconds)
    }

    /// The answer to a request a store route took and then could not answer (its origin no longer admitted between
    /// its head and its end, its answer not encodable): `500`, counted under its route.
    package func unanswerable(_ head: HTTPRequest) -> PageAnswer {
        refused(
            APIError(status: .internalServerError, code: .other, message: "the request could not be answered"), origin: grant(head),
            route: ReadRoute(PageTarget(head.path ?? "/").path)?.label ?? "Unknown", method: head.method,
            started: DispatchTime.now().uptimeNanoseconds)
    }

    // MARK: Trigger

    /// What this path does with a `POST` head it takes.
    package enum Taken {
        /// Its body is collected (at most ``bodyLimit``, whatever its framing), then handed to
        /// ``trigger(_:body:caller:deliver:)`` or ``open(_:body:caller:deliver:)``.
        case collect(Posted)
        /// Refused at the head, before any body (the origin guard, the media type), the
        /// answer is written at once and the body, if any, dropped under the body timeout.
        case refused(PageAnswer)
    }

    /// Whether `head` is a trigger or an open this path takes (nil: not one): refused at the head, or its body
    /// collected.
    package func takes(_ head: HTTPRequest) -> Taken? {
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
        // The order: the origin guard, then the media type; both at the head, whatever the body's framing.
        let started = DispatchTime.now().uptimeNanoseconds
        switch origins.admit(head.headerFields, path: target) {
        case .failure(let refusal):
            orchestrator.metrics.denied(refusal.code.rawValue)
            orchestrator.metrics.eventLoopAnswer(label)
            return .refused(refused(refusal, origin: nil, route: route, method: .post, started: started))
        case .success(let origin):
            if let refusal = JSONBody.refusal(contentType: head.headerFields[.contentType]) {
                orchestrator.metrics.eventLoopAnswer(label)
                return .refused(refused(refusal, origin: origin, route: route, method: .post, started: started))
            }
        }
        return .collect(posted)
    }

    /// The most bytes of a trigger's or an open's body, as `readBody` on the operator listener takes them.
    package var bodyLimit: Int { orchestrator.settings.maximumRequestBody }

    /// The answer to a trigger or an open whose body passed ``bodyLimit``, once its bytes passed it (chunked or
    /// announced by `Content-Length`, as they arrive): `413 too-large`, and its request metrics.
    package func bodyTooLarge(_ head: HTTPRequest, _ posted: Posted) -> PageAnswer {
        bodyRefused(.bodyTooLarge(limit: bodyLimit), head, posted)
    }

    /// The answer to a trigger or an open whose next bytes would pass the listener's budget for bodies
    /// (`Orchestrator.requestBodies`): `503 overloaded` with `Retry-After`, and its request metrics.
    package func bodiesOverloaded(_ head: HTTPRequest, _ posted: Posted) -> PageAnswer {
        bodyRefused(.bodiesOverloaded(budget: orchestrator.requestBodies.limit), head, posted)
    }

    /// A posted request refused while its body arrives, with its request metrics.
    private func bodyRefused(_ error: APIError, _ head: HTTPRequest, _ posted: Posted) -> PageAnswer {
        let started = DispatchTime.now().uptimeNanoseconds
        let (route, label) = posted.counted
        if case .cold = posted {} else { orchestrator.metrics.eventLoopAnswer(label) }
        return refused(error, origin: grant(head), route: route, method: .post, started: started)
    }

    /// Whether `head` is a read this path answers that announces a body (``Posted/read``).
    package func drains(_ head: HTTPRequest) -> Bool {
        guard head.method == .get, let target = head.path,
            head.headerFields[.transferEncoding] != nil || (head.headerFields[.contentLength].map { $0 != "0" } ?? false)
        else { return false }
        return ReadRoute(PageTarget(target).path) != nil
    }

    /// `head` without its body's framing: a read whose body was dropped, as the read sees it.
    package static func withoutBody(_ head: HTTPRequest) -> HTTPRequest {
        var head = head
        head.headerFields[.contentLength] = nil
        head.headerFields[.transferEncoding] = nil
        return head
    }

    /// The trigger's answer, or nil when its origin is no longer admitted (answered `500` by the caller). With a shared
    /// store the answer is `.underway`, and goes to the function `deliver()` made.
    package func trigger(_ head: HTTPRequest, body: ByteBuffer, caller: String, deliver: () -> Deliver) -> Answer? {
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
        let answer: @Sendable (Triggered) -> PageAnswer = { [self] triggered in
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
            // An engine refusal, counted once: answered here.
            guard let (status, fields, bytes) = try? APIError(error).parts() else { return nil }
            orchestrator.metrics.eventLoopAnswer("trigger")
            return .now(finish(status, fields, bytes, origin: origin, route: Self.triggerRoute, method: .post, started: started))
        }
    }

    // MARK: Open

    /// `POST /v1/open`: the open's body parsed by `RendererRoutes.openRequest`, its
    /// refusals answered here; then the lease and the trigger, each answered
    /// (`LeaseAnswer`, `RendererRoutes.leaseRefusal`, `failsTheOpen`, `OpenAnswer`). A warm renderer is leased at
    /// once (`RendererPool.acquireWithoutSuspending`); one that must be waited for or created is leased by the pool
    /// in one task (cold: a renderer to start), and the answer is delivered when both halves are in (`.underway`,
    /// ``OpenJoin``). The trigger goes first: a refusal that fails the whole open (the page URL) is answered at once
    /// and no renderer is leased for it. With a shared store the trigger itself may be `.underway`, as the trigger's.
    ///
    /// `onGone` registers what the handler runs if the connection closes before an `.underway` answer is written:
    /// a renderer leased after that is handed back, not left to the pool's reclaim.
    package func open(
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
        let answer: @Sendable (Result<Triggered, PrefetchError>, Result<Lease, APIError>?) -> PageAnswer = { [self] triggered, lease in
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
        // The lease: at once from a warm renderer, else by the pool (`RendererPools.acquire`) in one task.
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

    /// The answer to a `GET` head, or nil when it is not a read of the three read routes. A read that must wait calls
    /// `deliver()` once for the function its answer goes to (called once, from whichever thread settles it; the
    /// handler's function brings it to the connection's event loop).
    ///
    /// A ticket (or a read key's ticket) another replica may hold is fetched from the shared registry
    /// (``TicketRegistry/ticket(_:then:)``, no task) and the read goes on on the connection's event loop once it is
    /// in (`resume()`: the answer is `.underway` meanwhile), with the fetched tickets `known`.
    package func answer(
        _ head: HTTPRequest, deliver: () -> Deliver, resume: () -> Resume, known: [String: Ticket?] = [:],
        started: UInt64 = DispatchTime.now().uptimeNanoseconds
    ) -> Answer? {
        // A request that announces a body is answered at its end (`Posted.read`): the answer is decided at the head and written at the end, so a
        // body that never ends would hold (a no-store entry: consume) an answer nobody gets.
        guard head.method == .get, let target = head.path, head.headerFields[.transferEncoding] == nil,
            head.headerFields[.contentLength].map({ $0 == "0" }) ?? true
        else { return nil }
        let parsed = PageTarget(target)
        let path = parsed.path
        guard let route = ReadRoute(path) else { return nil }
        let origin: AllowedOrigins.Admission
        switch origins.admit(head.headerFields, path: path) {
        case .success(let admitted):
            origin = admitted
        case .failure(let refusal):
            orchestrator.metrics.denied(refusal.code.rawValue)
            return .now(refused(refusal, origin: nil, route: route.label, method: .get, started: started))
        }
        let query = parsed.query
        let read: Read =
            switch route {
            case .results(let id): results(head, id: id, query: query, origin: origin, known: known, started: started, deliver: deliver)
            case .ticketData, .pageData:
                data(head, route: route, query: query, origin: origin, known: known, started: started, deliver: deliver)
            }
        switch read {
        case .answer(let answer):
            return answer
        case .fetch(let id):
            let resumption = resume()
            orchestrator.tickets.ticket(id) { [self] fetched in
                resumption.run { deliver, resume in
                    var known = known
                    known[id] = .some(fetched)
                    // The same head takes the same way again, so it is answered here. The request's time includes the
                    // fetch.
                    guard let answer = answer(head, deliver: deliver, resume: resume, known: known, started: started) else {
                        assertionFailure("a read that fetched a ticket was no longer a read")
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

    /// What a read decided: its answer (nil: not a read), or a ticket to fetch from another replica first.
    private enum Read {
        case answer(Answer?)
        case fetch(String)
    }

    /// The reads answered here, by the path of a `GET`.
    package enum ReadRoute {
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
        package init?(_ path: Substring) {
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

        /// The route as the request metrics name it.
        package var label: String {
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
        _ head: HTTPRequest, id: Substring, query: PageTarget.Query, origin: AllowedOrigins.Admission, known: [String: Ticket?],
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
        let answer: @Sendable ([ReadOutcome]) -> PageAnswer = { [self] outcomes in
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
    package func expire(_ wait: StoreWait, after deadline: Duration, on loop: any EventLoop) -> Scheduled<Void> {
        let clock = orchestrator.clock
        return clock.schedule(at: clock.now.advanced(by: deadline), on: loop) { wait.expire() }
    }

    /// The data reads: the entry now when it is settled (a response, or the miss saying why), else once it settles
    /// or the read's `wait` ends (``Answer/later(_:deadline:)``); with the Redis store, once Redis has answered.
    /// What is read, its answer and its bookkeeping have one home each (`PrefetchRoutes.pageRead`,
    /// ``Orchestrator/read(_:indices:canWait:notify:)``, `PrefetchRoutes.answer`), and so are its refusals (the
    /// `page=` checks, entitlement, the read key, the selection, `wait`), answered here; a ticket or read key another
    /// replica may hold is fetched first (`.fetch`).
    private func data(
        _ head: HTTPRequest, route readRoute: ReadRoute, query: PageTarget.Query, origin: AllowedOrigins.Admission,
        known: [String: Ticket?],
        started: UInt64, deliver: () -> Deliver
    ) -> Read {
        let headers = head.headerFields
        let asked = orchestrator.clock.now
        let route = readRoute.label
        let refuse: (APIError) -> Read = { .answer(.now(refused($0, origin: origin, route: route, method: .get, started: started))) }
        let what: PrefetchRoutes.DataRead
        let timeout: Duration
        if case .pageData = readRoute, headers[PrefetchHeaders.readKey] == nil {
            // Same site: the page's own cookies name the entry, checked by `PrefetchRoutes.pageRead`.
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
        // Its answer from the outcome, now or later (on the thread that has it).
        let answer: @Sendable (Result<ReadOutcome, APIError>) -> PageAnswer = { [self] outcome in
            orchestrator.metrics.fastHandoff()
            switch PrefetchRoutes.answer(
                outcome, wait: (try? wait.get()) ?? .zero, of: what, askedAt: asked, orchestrator: orchestrator)
            {
            case .success(let ready):
                return replay(ready.response, joined: ready.joined, origin: origin, route: route, started: started)
            case .failure(let error):
                let (status, fields, body) = (try? error.parts()) ?? (.internalServerError, [:], ByteBuffer())
                return finish(status, fields, body, origin: origin, route: route, method: .get, started: started)
            }
        }
        guard case .success(let duration) = wait else { return .answer(.now(answer(wait.map { _ in .pending }))) }
        let delivery = deliver()
        let notify: @Sendable ([ReadOutcome]) -> Void = { delivery(answer(.success($0[0]))) }
        let read =
            switch what {
            case .page(let key, _): orchestrator.read(key, canWait: duration > .zero, notify: notify)
            case .ticket(let ticket, let index): orchestrator.read(ticket, indices: [index], canWait: duration > .zero, notify: notify)
            }
        switch read {
        case .done(let outcomes): return .answer(.now(answer(.success(outcomes[0]))))
        case .waiting(let storeWait): return .answer(.later(storeWait, deadline: duration))
        }
    }

    private func requestOrigin(_ head: HTTPRequest) -> TicketAccess.RequestOrigin {
        .init(head.headerFields, authority: head.authority)
    }
}

/// The two halves of an open answered on the event loop, the trigger and the lease, each coming in once from
/// whichever thread has it: the open is answered by the one that comes in second.
package final class OpenJoin: Sendable {
    package enum Step {
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

    package func triggered(_ outcome: Result<Triggered, PrefetchError>) -> Step {
        halves.withLock { halves in
            halves.triggered = outcome
            guard !halves.gone, let lease = halves.lease else { return .wait }
            halves.answered = true
            return .answer(outcome, lease)
        }
    }

    package func leased(_ lease: Result<Lease, APIError>) -> Step {
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
    package func cancel() -> Lease? {
        halves.withLock { halves in
            halves.gone = true
            guard !halves.answered, case .success(let held)? = halves.lease else { return nil }
            halves.lease = nil
            return held
        }
    }
}

/// The request metrics Hummingbird's `MetricsMiddleware` records, for answers it never sees: the same labels and
/// dimensions, so the page listener's answers count in the series the operator listener's do.
package final class FastHandoffMetrics: Sendable {
    package init() {}

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

    package func record(route: String, method: HTTPRequest.Method, status: HTTPResponse.Status, nanoseconds: UInt64) {
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
