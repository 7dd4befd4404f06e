import CoreMetrics
public import HTTPTypes
public import Logging
import NIOCore
public import PrefetchCore
public import PrefetchDNS
public import PrefetchFetcher
public import PrefetchStore
import ServiceLifecycle
import Synchronization
public import Tracing

/// The product's core loop: a page is opening, so plan its requests, start each one unless it is already
/// stored or in flight for the same user, and hand the results to whoever is entitled to them.
///
/// **A page open, step by step** (each a call in this file unless named):
/// 1. *Trigger*: ``trigger(page:headers:caller:trace:requestHeaders:origin:)`` (awaited, routed) or
///    ``trigger(page:headers:caller:trace:requestHeaders:origin:then:)`` (the event loop's, no task).
/// 2. *Plan and admission*: ``prepare(page:headers:caller:trace:requestHeaders:origin:cookies:)``: the caller's config
///    (`ServedConfigs`, in `ConfigSelection.swift`), the plan (`Plan.make`), the page-origin rule (`TicketAccess.swift`),
///    the rate limits and the in-flight budget; then one ``PreparedRequest`` per planned request (its store key from
///    ``keys(for:credentials:)``, its headers, whether it sends credentials) and the ``Ticket``.
/// 3. *Claims*: `ResponseStore.begin` for every key at once, overlapped with the ticket's insert in the registry.
/// 4. *Fetch*: ``start(_:outcomes:)`` hands the leaders to ``PageOpen`` (`PageOpen.send`: one post to the fetcher).
/// 5. *Store*: the fetcher's loop calls `PageOpen.finished` with each batch of results, which settles them in the
///    store (`ResponseStore.settle(_:then:)`) and sends the dependents whose inputs are in.
/// 6. *Read*: ``read(_:index:wait:)``, ``readAll(_:wait:)`` and ``readAll(_:canWait:notify:)``,
///    for readers the HTTP layer has entitled (`TicketAccess`).
///
/// The engine knows no HTTP: it throws ``PrefetchError`` and returns store outcomes; the HTTP layer maps them.
/// See `docs/ARCHITECTURE.md` for the data path and `SECURITY.md` for who may read what.
///
/// - A trigger plans the page with the config current at that moment (an immutable value, so a config swap
///   never changes a plan that already started), computes one store key per request and asks the store for
///   the single flight. Only leaders fetch; everyone else joins. The answer does not wait for any upstream.
/// - A page open's fetches are one unit of work (``PageOpen``): all its leaders go to the fetcher in one post and
///   their results come back in batches on the fetcher's loop thread, where they are settled in the store. The
///   ``FetchRunner``, a long-running `Service`, keeps the live page opens and the few tasks they need (a shared
///   store's settlements, a dependent waiting on another page open's flight) and drains them on shutdown; nothing
///   runs as an unstructured task.
/// - Identity: the store key carries the keyed identity of the credentials actually sent upstream. A request
///   that sends none is fetched anonymously and may be shared, unless its response sets a cookie or is
///   `Cache-Control: private`: such a response is kept only for the ticket that fetched it.
/// - Admission: triggers are rate limited per caller, refused while responses in flight fill their byte
///   budget, and page URLs are bounded in length.
/// - Upstream status: responses below 500 are stored and replayed as received. A 5xx, like a transport
///   failure, is stored as a failure (`upstream-5xx`) for the negative TTL only.
public final class Orchestrator: Sendable {
    public let settings: EngineSettings
    let store: any ResponseStore
    public let fetcher: Fetcher
    let resolver: HostResolver
    public let runner: FetchRunner
    public let tickets: any TicketRegistry
    public let metrics: EngineMetrics
    let logger: Logger
    /// Where the config comes from (see ``ConfigProvider``).
    public let configs: any ConfigProvider
    let limiter: RateLimiter
    let addressLimiter: RateLimiter
    /// Every time-based decision (ticket expiry, rate limits, timings) is made by this clock.
    public let clock: any ServiceClock
    /// Where each upstream request's span goes (swift-distributed-tracing): the bootstrapped tracer by default,
    /// which is a no-op until a deployment bootstraps one.
    let tracer: any Tracer
    /// Whether `tracer` records anything: without it a page open makes no span of its own and its ticket no read spans.
    let isTracing: Bool
    private let credentialNames: Set<String>
    /// The `--cors-origin` origins (normalised; `*` excluded): an operator's grant of every page's data.
    let trustedOrigins: Set<String>
    /// The request bodies the page listener holds while they arrive (``EngineSettings/requestBodyBytes``).
    public let requestBodies: BodyBudget

    public init(
        settings: EngineSettings,
        store: any ResponseStore,
        fetcher: Fetcher,
        resolver: HostResolver,
        tickets: any TicketRegistry,
        metrics: EngineMetrics,
        logger: Logger,
        clock: any ServiceClock = ContinuousClock(),
        tracer: any Tracer = InstrumentationSystem.tracer,
        configs: any ConfigProvider
    ) {
        self.settings = settings
        self.clock = clock
        self.tracer = tracer
        self.isTracing = !(tracer is NoOpTracer)
        self.store = store
        self.fetcher = fetcher
        self.resolver = resolver
        self.runner = FetchRunner(logger: logger)
        self.tickets = tickets
        self.metrics = metrics
        self.logger = logger
        self.configs = configs
        metrics.registerConfigSeries()
        self.limiter = RateLimiter(rate: settings.triggerRate, burst: settings.triggerBurst)
        self.addressLimiter = RateLimiter(
            rate: settings.addressTriggerRate ?? settings.triggerRate * 10,
            burst: settings.addressTriggerBurst ?? settings.triggerBurst * 10)
        self.credentialNames = Set(settings.credentialHeaders.map { $0.lowercased() })
        self.trustedOrigins = Set(settings.corsOrigins.filter { $0 != "*" }.compactMap { try? HTTPURL(parsing: $0).origin })
        self.requestBodies = BodyBudget(limit: settings.requestBodyBytes)
    }

    /// The active config, nil until a valid one is loaded.
    public func currentConfig() -> PrefetchConfig? { configs.current }

    /// The active config and a canary candidate beside it (see `ConfigSelection.swift`).
    public func servedConfigs() -> ServedConfigs? { configs.served }

    // MARK: The store, as the HTTP layer reaches it

    /// The store's health, for readiness.
    public var storeHealth: StoreHealth { store.health }

    /// The store's counters and sizes (the debug view).
    public func storeSnapshot() async -> StoreSnapshot { await store.snapshot() }

    /// Reads the entry under `key` (a same-site `page=` read, whose key the caller's credentials make), waiting up to
    /// `wait` while it is in flight.
    public func read(_ key: StoreKey, wait: Duration) async -> ReadOutcome { await store.read(key, wait: wait) }

    /// ``read(_:wait:)`` for an event loop: the outcome now, or a wait whose outcome goes to `notify` (as
    /// ``ResponseStore/read(_:canWait:notify:)``).
    public func read(_ key: StoreKey, canWait: Bool, notify: @escaping @Sendable ([ReadOutcome]) -> Void) -> ImmediateRead {
        store.read([key], canWait: canWait, notify: notify)
    }

    /// Records a same-site `page=` read of `key` on the ticket of this replica that fetched it (the latest holding
    /// the key), as a read by ticket or read key is recorded: the waterfall, the debug view and the waste metric
    /// count it. A key no ticket here holds (fetched on another replica, or its ticket gone) records nothing.
    public func recordPageRead(
        _ key: StoreKey, served: ReadResult, reason: FailureCode?, askedAt: ContinuousClock.Instant
    ) {
        guard let (ticket, index) = tickets.localTicket(forKey: key) else { return }
        ticket.recordRead(index, served: served, reason: reason, askedAt: askedAt, answeredAt: clock.now)
    }

    /// Drops every stored response of `identity` (a logout), on every replica.
    public func invalidate(identity: Identity) async throws(StoreUnavailable) -> Int {
        try await store.invalidate(identity: identity)
    }

    /// Drops every stored response of interface `label` (an operator's invalidation).
    public func invalidate(label: String) async throws(StoreUnavailable) -> Int {
        try await store.invalidate(label: label)
    }

    /// Drops every stored response tagged with `surrogateKey` (an operator's invalidation).
    public func invalidate(surrogateKey: String) async throws(StoreUnavailable) -> Int {
        try await store.invalidate(surrogateKey: surrogateKey)
    }

    /// Brings the gauges `/metrics` shows up to date: transfers in flight, tickets held and their bytes, and the
    /// store's own (its snapshot records them).
    public func recordGauges() async {
        metrics.inFlight.record(fetcher.inFlight)
        metrics.tickets.record(tickets.count)
        metrics.ticketBytes.record(tickets.bytes)
        _ = await store.snapshot()
    }

    /// The credential headers among `headers`, in order, and their keyed identity.
    ///
    /// A credential header with a blank value is no credential: it is dropped here, as the identity ignores it, so
    /// "sends credentials" and "keyed by an identity" never disagree (an empty `Cookie` from a fresh cookie jar
    /// must not make a guest's private answer look credentialed, and so shared).
    public func credentials(in headers: HTTPFields) -> Credentials {
        let picked = Credentials.headers(in: headers, named: credentialNames)
        // No credential at all (most reads): anonymous, as `Identity` would find, without its work.
        guard !picked.isEmpty else { return Credentials(headers: picked, identity: .anonymous) }
        return Credentials(headers: picked, identity: Identity(headers: picked, wanted: credentialNames, key: settings.identityKey))
    }

    /// The caller's credentials with a cookie jar: the jar replaces any `Cookie` among `headers`; the whole jar, as
    /// one `Cookie` value, is the identity the ticket is entitled by.
    /// A deployment whose credential headers leave `Cookie` out ignores the jar, as it ignores a `Cookie` header.
    public func credentials(in headers: HTTPFields, jar: CookieJar?) -> Credentials {
        guard let jar, credentialNames.contains("cookie") else { return credentials(in: headers) }
        var whole = headers
        whole[.cookie] = nil
        // One field, as a reader's request carries it (the subscript would split a cookie value at its semicolons).
        if let value = jar.wholeHeader { whole.append(HTTPField(name: .cookie, value: value)) }
        var made = credentials(in: whole)
        made.jar = jar
        made.thirdPartyCookies = settings.thirdPartyCookies
        return made
    }

    /// The plan for `page` under the current config.
    public func plan(page: String) throws(PrefetchError) -> Plan {
        guard let config = currentConfig() else { throw .notReady(reason: "no valid prefetch config is loaded") }
        return try plan(page: page, in: config)
    }

    /// The store key of each of `plan`'s requests for a caller with `credentials`, in plan order.
    ///
    /// A key covers everything the request's answer is made of (see ``StoreKey``): the composed request, and the
    /// identity of the credentials that shaped it. A request sends the caller's credentials by its interface's
    /// rule (``SiteRule``); a dependent request also carries the keys of the answers it takes values from, and
    /// the caller's identity when any of those was keyed by it, whatever its own `credentials` say: a value from
    /// Alice's answer makes the request Alice's. An answer kept for one page open alone (it set a cookie, or said
    /// `private`) makes whatever takes values from it kept for that page open alone too, which is decided when
    /// the answer is in (`PageOpen.settle`).
    public func keys(for plan: Plan, credentials: Credentials) -> [StoreKey] {
        var keys = [StoreKey?](repeating: nil, count: plan.requests.count)
        return plan.requests.indices.map { key(of: $0, in: plan, credentials: credentials, known: &keys) }
    }

    /// The store key of `plan`'s request `index` alone (and of what it needs, no more): what a reader of one
    /// interface computes. The same key ``keys(for:credentials:)`` gives for it.
    public func key(of index: Int, in plan: Plan, credentials: Credentials) -> StoreKey {
        var keys = [StoreKey?](repeating: nil, count: plan.requests.count)
        return key(of: index, in: plan, credentials: credentials, known: &keys)
    }

    /// Request `index`'s key, with the keys computed so far in `known`. Dependencies form a DAG (cycles are refused
    /// at load), so the recursion ends.
    private func key(of index: Int, in plan: Plan, credentials: Credentials, known: inout [StoreKey?]) -> StoreKey {
        if let done = known[index] { return done }
        let request = plan.requests[index]
        let inputs = request.dependencies.map { key(of: $0, in: plan, credentials: credentials, known: &known) }
        let shaped =
            sendsCredentials(request, page: plan.pageURL, credentials: credentials) || inputs.contains { $0.identity != .anonymous }
        let parts = keyedParts(request)
        // Keyed by the caller's whole identity (with a jar, the whole jar: what the request sends is a function of it).
        // Which of the identity's cookies go depends on the page too (its site for SameSite, its host for a single
        // Cookie header): a credentialed key covers the page's scheme and host.
        let made = StoreKey(
            identity: shaped ? credentials.identity : .anonymous, method: parts.method, url: parts.url, headers: parts.headers,
            body: parts.body, inputs: inputs, credentialScope: shaped ? "\(plan.pageURL.scheme)://\(plan.pageURL.host)" : nil)
        known[index] = made
        return made
    }

    /// Whether `request` is made with the caller's credentials (its key then carries their identity): the
    /// interface's rule lets them go and the caller has some. Which of them travel is decided per URL
    /// (``Credentials/sentHeaders(for:page:)``: a jar's cookies for that URL, a single `Cookie` to the page's own
    /// host only); a request that ends up carrying none is still keyed by the identity, so a reader presenting the
    /// same identity without the jar (a page reading with `page=` and its cookies) computes the same key, and the
    /// answer is never shared beyond that identity.
    func sendsCredentials(_ request: PlannedRequest, page: HTTPURL, credentials: Credentials) -> Bool {
        SiteRule.allowsCredentials(request.interface.credentials, page: page, api: request.interface.apiURL)
            && !credentials.headers.isEmpty
    }

    /// The parts of a composed request that its store key covers, and that ``UpstreamRequest`` sends: method, URL,
    /// the config's headers (and `Content-Type`), `Sec-Purpose` when the interface sends it, the body.
    struct KeyedParts: Sendable {
        var method: String
        var url: String
        var headers: HTTPFields
        var body: [UInt8]?
    }

    /// `request`'s keyed parts: the one function both the key and the request sent upstream are made from.
    func keyedParts(_ request: PlannedRequest) -> KeyedParts {
        var headers = request.headers
        if request.interface.secPurpose { headers[.secPurpose] = "prefetch" }
        return KeyedParts(method: request.method.rawValue, url: request.url, headers: headers, body: request.body.map { Array($0.utf8) })
    }

    /// The request that goes upstream for `request`, keyed by `key` (see ``UpstreamRequest``): the caller's
    /// `credentials` when the interface's rule sends them, the trigger's `trace` only for a per-identity key.
    func upstreamRequest(
        _ request: PlannedRequest, key: StoreKey, credentials: Credentials?, page: HTTPURL, trace: TraceParent.Context?,
        timeout: Duration, group: String
    ) -> UpstreamRequest {
        UpstreamRequest(
            parts: keyedParts(request), key: key, credentials: credentials, page: page, callerTrace: trace, timeout: timeout,
            maxResponseBytes: settings.maximumResponseBytes, pinning: resolver, group: group)
    }

    /// Starts the page's prefetch and returns its ticket and what each request is doing, at once.
    ///
    /// - Parameters:
    ///   - caller: the client address. Rate limits apply per identity and per address (credentials are claims a
    ///     client can invent, its address it cannot), and the address owns the ticket for the ticket budget.
    ///   - trace: the W3C trace context the trigger arrived with (`traceparent`, and `tracestate` passed on as is):
    ///     each upstream request of this page open carries a child span of it.
    ///   - requestHeaders: the trigger's own headers, from which the tracer extracts the context its spans (one
    ///     per upstream request) continue.
    ///   - origin: where a browser says the trigger comes from: a page origin may trigger only its own pages (and
    ///     those whose config entry names it a partner), see ``authorize(_:for:)``.
    public func trigger(
        page: String, headers: HTTPFields, caller: String, trace: (parent: TraceParent, state: String?)? = nil,
        requestHeaders: HTTPFields = [:], origin: TicketAccess.RequestOrigin = .unknown, cookies: CookieJar? = nil
    ) async throws(PrefetchError) -> Triggered {
        let open = try prepare(
            page: page, headers: headers, caller: caller, trace: trace, requestHeaders: requestHeaders, origin: origin, cookies: cookies)
        return await withCheckedContinuation { continuation in
            if let triggered = start(open, then: { continuation.resume(returning: $0) }) {
                continuation.resume(returning: triggered)
            }
        }
    }

    /// ``trigger(page:headers:caller:trace:requestHeaders:origin:cookies:)`` without a task, for an event loop: the
    /// same checks (a refusal is thrown at once), then the same claims and page open, by the same code. Returns the
    /// triggered page open when the store and the registry answered before returning (in process); otherwise nil,
    /// and `done` gets it on the thread of the later of their replies (a shared store: the claims and the ticket's
    /// record go in one round trip each, overlapped). `done` is called only when nil is returned; it must not
    /// block.
    public func trigger(
        page: String, headers: HTTPFields, caller: String, trace: (parent: TraceParent, state: String?)? = nil,
        requestHeaders: HTTPFields = [:], origin: TicketAccess.RequestOrigin = .unknown, cookies: CookieJar? = nil,
        then done: @escaping @Sendable (Triggered) -> Void
    ) throws(PrefetchError) -> Triggered? {
        let open = try prepare(
            page: page, headers: headers, caller: caller, trace: trace, requestHeaders: requestHeaders, origin: origin, cookies: cookies)
        return start(open, then: done)
    }

    /// The claims of a prepared page open and its ticket's record, then the page open: what every trigger does
    /// after its checks. The record and the claims overlap (with a shared store the two round trips do); whichever
    /// answer comes second starts the page open, whose timings are filled in before anyone learns the ticket's id.
    /// Flights the page open refused are released before the trigger is answered. The answer is returned when it is
    /// in before this returns, else it goes to `done`.
    private func start(_ open: PreparedOpen, then done: @escaping @Sendable (Triggered) -> Void) -> Triggered? {
        let join = TriggerJoin()
        let proceed: @Sendable ([BeginOutcome]) -> Void = { [self] outcomes in
            let (triggered, refused) = start(open, outcomes: outcomes)
            guard let refused else { return join.answer(triggered, done) }
            store.settle(refused) { join.answer(triggered, done) }
        }
        tickets.insert(open.ticket) { if let outcomes = join.inserted() { proceed(outcomes) } }
        // Every request's single flight is claimed in one call: one round trip to a shared store, not one each.
        store.begin(open.ticket.requests.map { (key: $0.key, policy: $0.policy) }) { outcomes in
            if join.began(outcomes) { proceed(outcomes) }
        }
        return join.returning()
    }

    /// A trigger's page open before its flights are claimed: checked, planned, keyed, its ticket made.
    struct PreparedOpen: Sendable {
        var plan: Plan
        var role: ConfigRole
        var credentials: Credentials
        var trace: (parent: TraceParent, state: String?)?
        var traceContext: ServiceContext
        var ticket: Ticket
        /// One per planned request, in the plan's order.
        var requests: [PreparedRequest]
        var now: ContinuousClock.Instant
    }

    /// One request of a prepared page open: as planned (its composed URL and body), as the ticket keeps it (name,
    /// store key, policy, timeout), and what goes upstream for it: made from its key now when it needs no other
    /// answer; a dependent's is made once the answers it needs are in (`PageOpen`).
    struct PreparedRequest: Sendable {
        var planned: PlannedRequest
        var ticketRequest: TicketRequest
        var upstream: UpstreamRequest?
    }

    /// Every check of a trigger (plan, page origin, rate limits, overload), then the page open's requests, keys and
    /// ticket. Throws the refusal, counted.
    func prepare(
        page: String, headers: HTTPFields, caller: String, trace: (parent: TraceParent, state: String?)?,
        requestHeaders: HTTPFields, origin: TicketAccess.RequestOrigin, cookies: CookieJar? = nil
    ) throws(PrefetchError) -> PreparedOpen {
        var extracted = ServiceContext.topLevel
        tracer.extract(requestHeaders, into: &extracted, using: HTTPFieldsExtractor())
        let credentials = credentials(in: headers, jar: cookies)
        // The caller's identity picks the active config or a canary candidate, the same one for as long as it stands.
        let plan: Plan
        let role: ConfigRole
        do {
            (plan, role) = try self.plan(page: page, identity: credentials.identity)
            try authorize(origin, for: plan.origins)
        } catch {
            metrics.trigger(error.code.rawValue)
            throw error
        }
        if settings.triggerRate > 0 {
            let retry =
                addressLimiter.admit(caller, now: clock.now)
                ?? (credentials.identity == .anonymous ? nil : limiter.admit(credentials.identity.digest, now: clock.now))
            if let retry {
                metrics.trigger(PrefetchError.rateLimited(retryAfter: retry).code.rawValue)
                throw .rateLimited(retryAfter: retry)
            }
        }
        if fetcher.bufferedBytes > settings.inFlightBytes / 10 * 9 {
            metrics.trigger(PrefetchError.overloaded(retryAfter: .seconds(1)).code.rawValue)
            throw .overloaded(retryAfter: .seconds(1))
        }
        let now = clock.now
        let ticketID = Ticket.newID()
        let prepared = zip(plan.requests, keys(for: plan, credentials: credentials)).map { planned, key in
            let interface = planned.interface
            let policy = StorePolicy(ttl: .seconds(interface.ttlSeconds), negativeTTL: settings.negativeTTL, label: interface.name)
            let timeout = Duration.milliseconds(interface.timeoutMilliseconds)
            let sends = sendsCredentials(planned, page: plan.pageURL, credentials: credentials)
            return PreparedRequest(
                planned: planned,
                ticketRequest: TicketRequest(
                    name: interface.name, api: interface.api, method: interface.method, key: key, policy: policy, timeout: timeout),
                upstream: planned.dependencies.isEmpty
                    ? upstreamRequest(
                        planned, key: key, credentials: sends ? credentials : nil, page: plan.pageURL, trace: trace, timeout: timeout,
                        group: ticketID)
                    : nil)
        }
        let requests = prepared.map(\.ticketRequest)
        // The page open's span (a child of the shell's when the trigger carried its context): the parent of each
        // upstream request's span and of the page's reads (recorded on the ticket).
        var traceContext = extracted
        if isTracing {
            let openSpan = tracer.startSpan("prefetch open", context: extracted, ofKind: .server)
            openSpan.attributes["prefetch.page"] = plan.matched
            openSpan.attributes["prefetch.config.version"] = plan.version
            openSpan.attributes["prefetch.requests"] = plan.requests.count
            traceContext = openSpan.context
            openSpan.end()
        }
        let ticket = Ticket(
            id: ticketID, page: page, pageOrigin: plan.pageURL.origin, partnerOrigins: plan.origins.partners, matched: plan.matched,
            version: plan.version,
            identity: credentials.identity, owner: caller, requests: requests, role: role,
            timings: requests.map { _ in RequestTiming(origin: .leader, startedAt: now) }, now: now,
            dependents: plan.requests.reduce(into: [Int: Int]()) { counts, request in
                for index in request.dependencies { counts[index, default: 0] += 1 }
            },
            trace: isTracing ? Ticket.Trace(tracer: tracer, context: traceContext) : nil
        )
        return PreparedOpen(
            plan: plan, role: role, credentials: credentials, trace: trace, traceContext: traceContext, ticket: ticket, requests: prepared,
            now: now)
    }

    /// Starts a prepared page open whose flights were claimed with `outcomes`: its ticket's timings, the metrics, and
    /// its leaders handed to the fetcher. Returns what settles every flight as refused when the runner is draining
    /// (the caller hands it to the store).
    func start(_ open: PreparedOpen, outcomes: [BeginOutcome]) -> (Triggered, refused: [Settlement]?) {
        let (plan, role, ticket, now) = (open.plan, open.role, open.ticket, open.now)
        let (credentials, trace, traceContext) = (open.credentials, open.trace, open.traceContext)
        let requests = ticket.requests
        var timings: [RequestTiming] = []
        var flights: [PageOpen.Flight?] = []
        var sends: [PageOpen.Send] = []
        for (index, prepared) in open.requests.enumerated() {
            let (planned, request) = (prepared.planned, prepared.ticketRequest)
            let interface = planned.interface
            let role: FlightRole
            switch outcomes[index] {
            case .leader(let token):
                role = .leader
                flights.append(
                    PageOpen.Flight(
                        key: request.key, token: token, policy: request.policy, label: request.name,
                        deadline: now.advanced(by: request.timeout)))
                // A dependent is sent once what it needs has arrived: composed again then, keyed by its form as written.
                if let upstream = prepared.upstream {
                    sends.append(PageOpen.Send(index: index, request: upstream))
                }
            case .joined:
                role = .joined
                flights.append(nil)
            case .fresh:
                role = .fresh
                flights.append(nil)
            }
            metrics.flight(interface.name, role: role)
            var timing = RequestTiming(origin: role, startedAt: now, finishedAt: role == .leader ? nil : now)
            timing.needs = interface.dependsOn
            timings.append(timing)
        }
        ticket.timings.withLock { $0 = timings }
        // Which leading dependents wait in a task of their own (see `PageOpen`); every other dependent takes no
        // answer from the ticket's board.
        var waitingInTasks: [Int] = []
        var fromCompletions: Set<Int> = []
        for (index, planned) in plan.requests.enumerated() where !planned.dependencies.isEmpty {
            if flights[index] != nil && !PageOpen.sendsFromCompletions(index, plan: plan, flights: flights) {
                waitingInTasks.append(index)
            } else {
                if flights[index] != nil { fromCompletions.insert(index) }
                ticket.answers.withdraw(planned.dependencies)
            }
        }
        metrics.tickets.record(tickets.count)
        metrics.trigger("accepted")
        metrics.configTrigger(role, requests: requests.count)
        var refused: [Settlement]?
        if flights.contains(where: { $0 != nil }) {
            let unit = PageOpen(
                orchestrator: self, ticket: ticket, plan: plan, credentials: credentials, trace: trace, context: traceContext,
                flights: flights, completionDependents: fromCompletions)
            if runner.enter() {
                for index in waitingInTasks {
                    _ = runner.submit { await unit.runDependent(index) }
                }
                unit.send(sends)
            } else {
                refused = unit.refuse()
            }
        }
        return (Triggered(ticket: ticket, urls: open.requests.map(\.planned.url), readKey: readKey(for: ticket)), refused)
    }

    /// The body of request `index`'s answer for a dependent, and whether it is kept for this page open alone: posted by this page open's own leader, or else read
    /// from the store (a flight another page open leads, or a stored entry).
    func answer(
        of index: Int, in ticket: Ticket, for label: String, until deadline: ContinuousClock.Instant
    ) async throws(DependencyError) -> (body: ByteBuffer, ownOnly: Bool) {
        let needed = ticket.requests[index].name
        if ticket.timings.withLock({ $0[index].origin }) == .leader {
            switch await ticket.answers.answer(for: index, until: deadline, clock: clock) {
            case .body(let body, let ownOnly): return (body, ownOnly)
            case .failed(let code):
                throw DependencyError(code: .dependencyFailed, message: "\(label) needs \(needed), which failed (\(code))")
            case nil:
                throw DependencyError(code: .dependencyFailed, message: "\(label) needs \(needed), which was not in before its deadline")
            }
        }
        let (outcome, own) = await readTrackingOwnCopy(ticket, index: index, wait: max(.zero, clock.now.duration(to: deadline)))
        switch outcome {
        case .ready(let response, _) where (200..<300).contains(response.status): return (response.bodyBuffer, own)
        case .ready(let response, _):
            throw DependencyError(
                code: .dependencyFailed, message: "\(label) needs \(needed), whose upstream answered \(response.status)")
        case .failed(let failure, _):
            throw DependencyError(code: .dependencyFailed, message: "\(label) needs \(needed), which failed (\(failure.code))")
        case .pending:
            throw DependencyError(code: .dependencyFailed, message: "\(label) needs \(needed), which was not in before its deadline")
        case .absent(let reason):
            throw DependencyError(code: .dependencyFailed, message: "\(label) needs \(needed), which is gone (\(reason.rawValue))")
        }
    }

    /// The key under which a response that may not be shared is kept for `ticket` alone.
    func privateKey(_ key: StoreKey, ticket id: String) -> StoreKey {
        key.with(identity: Identity(digest: "ticket-" + settings.identityKey.digest(domain: "prefetch-ticket-scope-v1", [Array(id.utf8)])))
    }

    /// Reads request `index` of `ticket` for a reader already entitled to the ticket (see ``TicketAccess``): the
    /// shared entry, or the ticket's own copy of a response that may not be shared. It is
    /// ``read(_:indices:canWait:notify:)`` for a caller that is async by nature.
    public func read(_ ticket: Ticket, index: Int, wait: Duration) async -> ReadOutcome {
        await readTrackingOwnCopy(ticket, index: index, wait: wait).outcome
    }

    /// `read(_:index:wait:)`, and whether the outcome is the ticket's own copy of a response kept for it alone.
    private func readTrackingOwnCopy(_ ticket: Ticket, index: Int, wait: Duration) async -> (outcome: ReadOutcome, own: Bool) {
        let own = OwnCopyFlag()
        let outcomes = await ImmediateRead.awaited(wait: wait, clock: clock) { canWait, notify in
            let read = readRequests(ticket, indices: [index], canWait: canWait) { outcomes, flags in
                own.set(flags[0])
                notify(outcomes)
            }
            switch read {
            case .done(let outcomes, let flags):
                own.set(flags[0])
                return .done(outcomes)
            case .waiting(let wait): return .waiting(wait)
            }
        }
        return (outcomes[0], own.value)
    }

    /// Reads requests `indices` of `ticket`, in that order, for a reader already entitled to the ticket: the one
    /// read of a ticket's requests, for a data read (one index) and a results view (every index). Each comes from
    /// the shared entry or from the ticket's own copy of a response that may not be shared (kept by this page open,
    /// or found under the shared entry's `private` marker: another ticket's reader keeps the `private` miss). The
    /// outcomes now, or a wait whose outcomes go to `notify` (as ``readAll(_:canWait:notify:)``). Records nothing:
    /// the caller books what it hands out.
    public func read(
        _ ticket: Ticket, indices: [Int], canWait: Bool, notify: @escaping @Sendable ([ReadOutcome]) -> Void
    ) -> ImmediateRead {
        switch readRequests(ticket, indices: indices, canWait: canWait, notify: { outcomes, _ in notify(outcomes) }) {
        case .done(let outcomes, _): return .done(outcomes)
        case .waiting(let wait): return .waiting(wait)
        }
    }

    /// What ``readRequests(_:indices:canWait:notify:)`` answers: ``ImmediateRead`` with, for each outcome, whether
    /// it is the ticket's own copy.
    private enum RequestsRead {
        case done([ReadOutcome], own: [Bool])
        case waiting(StoreWait)
    }

    /// ``read(_:indices:canWait:notify:)`` with, for each outcome, whether it is the ticket's own copy.
    private func readRequests(
        _ ticket: Ticket, indices: [Int], canWait: Bool, notify: @escaping @Sendable ([ReadOutcome], [Bool]) -> Void
    ) -> RequestsRead {
        let (keys, keptPrivate) = readKeys(of: ticket, indices)
        let withOwnCopies: @Sendable ([ReadOutcome]) -> Void = { [self] outcomes in
            if let (done, own) = ownCopies(ticket, keys: keys, keptPrivate: keptPrivate, outcomes, then: notify) { notify(done, own) }
        }
        switch store.read(keys, canWait: canWait, notify: withOwnCopies) {
        case .done(let outcomes):
            guard let (done, own) = ownCopies(ticket, keys: keys, keptPrivate: keptPrivate, outcomes, then: notify) else {
                // The store must ask Redis for the ticket's own copies: the outcomes come to `notify`.
                return .waiting(StoreWait {})
            }
            return .done(done, own: own)
        case .waiting(let wait): return .waiting(wait)
        }
    }

    /// Reads every request of `ticket` at once, waiting up to `wait` for those in flight, for a reader already
    /// entitled to the ticket: what `read(_:index:wait:)` gives for each index, with one wait for the page. The
    /// outcomes are recorded as the ticket's reads (``recordResultsView(_:_:askedAt:)``). It is
    /// ``readAll(_:canWait:notify:)`` for a caller that is async by nature: the wait ends at `wait` on the
    /// orchestrator's clock or when the reader's task is cancelled.
    public func readAll(_ ticket: Ticket, wait: Duration) async -> [ReadOutcome] {
        await ImmediateRead.awaited(wait: wait, clock: clock) { readAll(ticket, canWait: $0, notify: $1) }
    }

    /// Records what a results view handed out as reads of the ticket's responses, as a data read records one: a ready
    /// response `hit` (or `joined`), a failed or absent one a `miss` with its reason, each on the ticket (the waterfall,
    /// the debug opens, the waste metric) and in `prefetch_config_data_total`. The store counted the same reads; one
    /// still pending was not read.
    func recordResultsView(_ ticket: Ticket, _ outcomes: [ReadOutcome], askedAt: ContinuousClock.Instant) {
        let answered = clock.now
        for (index, outcome) in outcomes.enumerated() {
            let served: ReadResult
            let reason: FailureCode?
            switch outcome {
            case .ready(_, let joined): (served, reason) = (ReadResult(joined: joined), nil)
            case .failed(let failure, _): (served, reason) = (.miss, failure.code)
            case .absent(let why): (served, reason) = (.miss, FailureCode(rawValue: why.rawValue))
            case .pending: continue
            }
            ticket.recordRead(index, served: served, reason: reason, askedAt: askedAt, answeredAt: answered)
            metrics.configData(ticket.role, result: served)
        }
    }

    /// ``readAll(_:wait:)`` without a task, for an event loop: the outcomes now (and `notify` is never called), or
    /// a wait whose outcomes go to `notify`, on the thread that settles the last of them, answers the last of them
    /// (Redis) or ends the wait (`StoreWait.expire()`). With `canWait` what is in flight is waited for until
    /// `expire()`; a store that must ask Redis first answers `.waiting` even without it (unless Redis answered before
    /// the call returned). `notify` must not block.
    public func readAll(
        _ ticket: Ticket, canWait: Bool, notify: @escaping @Sendable ([ReadOutcome]) -> Void
    ) -> ImmediateRead {
        let asked = clock.now
        let read = read(ticket, indices: Array(ticket.requests.indices), canWait: canWait) { [self] outcomes in
            recordResultsView(ticket, outcomes, askedAt: asked)
            notify(outcomes)
        }
        if case .done(let outcomes) = read { recordResultsView(ticket, outcomes, askedAt: asked) }
        return read
    }

    /// `outcomes` with the ticket's own copies read where it may have kept them (see ``ownCopiesToRead(_:_:)``),
    /// and for each whether it is the ticket's own copy: now, or nil when the store answers later, and then the
    /// result goes to `then`.
    private func ownCopies(
        _ ticket: Ticket, keys: [StoreKey], keptPrivate: [Bool], _ outcomes: [ReadOutcome],
        then: @escaping @Sendable ([ReadOutcome], [Bool]) -> Void
    ) -> ([ReadOutcome], [Bool])? {
        let indices = ownCopiesToRead(keptPrivate, outcomes)
        guard !indices.isEmpty else { return (outcomes, keptPrivate) }
        let merge: @Sendable ([ReadOutcome]) -> ([ReadOutcome], [Bool]) = { own in
            var merged = outcomes
            var isOwn = keptPrivate
            for (index, copy) in zip(indices, own) {
                if case .absent(.notFound) = copy { continue }
                merged[index] = copy
                isOwn[index] = true
            }
            return (merged, isOwn)
        }
        let privateKeys = indices.map { privateKey(keys[$0], ticket: ticket.id) }
        switch store.read(
            privateKeys, canWait: false,
            notify: { own in
                let (merged, isOwn) = merge(own)
                then(merged, isOwn)
            })
        {
        case .done(let own): return merge(own)
        case .waiting: return nil
        }
    }

    /// The keys requests `indices` of a ticket are read under: the shared key, or the ticket's own for a response
    /// it kept.
    private func readKeys(of ticket: Ticket, _ indices: [Int]) -> (keys: [StoreKey], keptPrivate: [Bool]) {
        let keptPrivate = ticket.timings.withLock { timings in indices.map { timings[$0].keptPrivate } }
        let keys = zip(indices, keptPrivate).map { index, kept in
            kept ? privateKey(ticket.requests[index].key, ticket: ticket.id) : ticket.requests[index].key
        }
        return (keys, keptPrivate)
    }

    /// The requests read under their shared key whose entry holds the `private` marker (as in
    /// `read(_:index:wait:)`): this ticket may have kept the response under its own key.
    private func ownCopiesToRead(_ keptPrivate: [Bool], _ outcomes: [ReadOutcome]) -> [Int] {
        outcomes.indices.filter { index in
            guard !keptPrivate[index], case .failed(let failure, _) = outcomes[index] else { return false }
            return failure.code == FailureCode.private
        }
    }

    /// Hop-by-hop and framing headers: the transport's, never replayed.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "content-length",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// Clamps a requested wait to `[0, maximumWait]`.
    public func clampWait(_ milliseconds: Int?, default fallback: Duration) -> Duration {
        guard let milliseconds else { return min(fallback, settings.maximumWait) }
        return min(.milliseconds(max(0, milliseconds)), settings.maximumWait)
    }
}

/// What a trigger started: the ticket, the composed URL of each request (not kept by the ticket), and the read
/// key a shell may hand its page.
public struct Triggered: Sendable {
    public var ticket: Ticket
    public var urls: [String]
    public var readKey: ReadKey
}

/// Where a trigger's two replies (its ticket's record kept, its flights claimed) meet, and where its answer meets
/// the caller: returned when it is in before the trigger returns, else handed to the caller's function.
final class TriggerJoin: Sendable {
    private struct State {
        var inserted = false
        var outcomes: [BeginOutcome]?
        var returned = false
        var answer: Triggered?
    }

    private let state = Mutex(State())

    /// The ticket's record is kept: the claims' outcomes when they came first (then the caller starts the page
    /// open), else nil.
    func inserted() -> [BeginOutcome]? {
        state.withLock { state in
            state.inserted = true
            return state.outcomes
        }
    }

    /// The claims are in: whether the ticket's record came first (then the caller starts the page open).
    func began(_ outcomes: [BeginOutcome]) -> Bool {
        state.withLock { state in
            state.outcomes = outcomes
            return state.inserted
        }
    }

    /// The trigger's answer: kept for ``returning()`` while the trigger has not returned, else handed to `done`.
    func answer(_ triggered: Triggered, _ done: @Sendable (Triggered) -> Void) {
        let late = state.withLock { state -> Bool in
            guard !state.returned else { return true }
            state.answer = triggered
            return false
        }
        if late { done(triggered) }
    }

    /// The trigger returns: its answer when it is in, else nil (it goes to the caller's function when it comes).
    func returning() -> Triggered? {
        state.withLock { state in
            state.returned = true
            return state.answer
        }
    }
}

/// Whether a dependent's read got the ticket's own copy, from whichever thread the read completed on.
private final class OwnCopyFlag: Sendable {
    private let flag = Mutex(false)
    func set(_ own: Bool) { flag.withLock { $0 = own } }
    var value: Bool { flag.withLock { $0 } }
}
