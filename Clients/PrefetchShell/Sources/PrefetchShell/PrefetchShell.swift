public import Foundation
import HTTPTypes
import OpenAPIRuntime
import PrefetchShellAPI

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A native web shell's side of the prefetch service, for one signed-in user at a time.
///
/// The shell's day: at tap, ``pageWillOpen(_:cookies:authorization:)`` triggers the page's prefetch (and leases a
/// warm renderer when a profile is configured) and returns within its budget whatever the service does; at navigation,
/// ``documentStartScript(for:)`` hands the page its read key and ``cookiesToSync(for:)`` gives the cookies the
/// page's upstreams set, for the webview's cookie store; ``releaseRenderer(_:healthy:)`` gives a leased renderer
/// back; at logout, ``logout(cookies:authorization:)`` drops what the service holds for the user.
///
/// Fail open: every call has a budget, after which the shell goes on without the service; nothing is retried; after
/// consecutive failures a circuit breaker skips calls for a cool-down, then lets one probe through. ``counters``
/// says what happened.
///
/// What it never does: put a read key or a ticket in a URL, send the service cookies of hosts other than the
/// configured api URLs', or send an `Origin` (the service treats a request without one as a native shell's).
public actor PrefetchShell {
    /// The configuration it was made with.
    public nonisolated let configuration: PrefetchShellConfiguration
    /// What the shell has done so far.
    public private(set) var counters = PrefetchShellCounters()

    private let api: ServiceAPI
    private let now: @Sendable () -> Moment
    private let sleep: @Sendable (Duration) async throws -> Void
    private var breaker: CircuitBreaker<Moment>
    /// The credentials of the triggers since the last logout, newest last (at most ``rememberedIdentities``): a
    /// logout invalidates each, so a cookie that changed during the session leaves nothing behind.
    private var triggeredCredentials: [Credentials] = []
    private static let rememberedIdentities = 16

    /// A shell on the continuous clock.
    public init(configuration: PrefetchShellConfiguration) {
        self.init(configuration: configuration, clock: ContinuousClock())
    }

    /// A shell whose budgets and breaker cool-down run on `clock`.
    public init<C: Clock>(configuration: PrefetchShellConfiguration, clock: C) where C.Duration == Duration {
        self.configuration = configuration
        self.api = ServiceAPI(serverURL: configuration.service)
        let start = clock.now
        self.now = { Moment(offset: start.duration(to: clock.now)) }
        self.sleep = { duration in try await clock.sleep(for: duration) }
        self.breaker = CircuitBreaker(failureThreshold: configuration.breaker.failureThreshold, coolDown: configuration.breaker.coolDown)
    }

    /// The circuit breaker's state.
    public var breakerState: PrefetchShellBreakerState {
        switch breaker.state {
        case .closed: .closed
        case .open: .open
        case .halfOpen: .halfOpen
        }
    }

    // MARK: The shell's day

    /// Tells the service that `page` is opening, with the user's credentials for the configured api hosts: the
    /// `cookies` a browser would send to them (the others stay on the device) and `authorization` when the app has a
    /// token. Returns within ``PrefetchShellConfiguration/Budgets/pageOpen`` whatever the service does: open the page
    /// when it returns, with or without a prefetch.
    public func pageWillOpen(_ page: URL, cookies: [HTTPCookie], authorization: String? = nil) async -> PageOpen {
        let credentials = credentials(cookies, authorization: authorization)
        guard let pass = admit() else {
            return PageOpen(
                page: page, outcome: .skipped, ticket: nil, readKey: nil, readKeyExpiresAt: nil, interfaces: [], renderer: nil,
                rendererError: nil,
                credentials: credentials)
        }
        counters.triggersSent += 1
        remember(credentials)
        let (api, profile) = (api, configuration.rendererProfile)
        let result = await Self.withinBudget(configuration.budgets.pageOpen, sleep: sleep) {
            if let profile {
                return try await Self.open(page, profile: profile, credentials: credentials, api: api)
            }
            return try await Self.trigger(page, credentials: credentials, api: api)
        }
        switch result {
        case .success(var answer):
            // A ticket or read key not of the service's format never goes into a URL or a page (a `..` would become
            // a dot segment of the credentialed read's path): the answer is unusable.
            if let ticket = answer.ticket,
                !(PageOpen.isWellFormedTicket(ticket.ticket) && PageOpen.isWellFormedReadKey(ticket.readKey.value1))
            {
                answer = TriggerAnswer(outcome: .failed(.badAnswer), renderer: answer.renderer, rendererError: answer.rendererError)
            }
            switch answer.outcome {
            case .triggered: counters.triggersAccepted += 1
            case .refused: counters.triggersRefused += 1
            case .failed, .skipped: counters.triggersFailed += 1
            }
            if case .failed = answer.outcome { record(.failure, of: pass) } else { record(.success, of: pass) }
            return PageOpen(
                page: page, outcome: answer.outcome, ticket: answer.ticket?.ticket, readKey: answer.ticket?.readKey.value1,
                readKeyExpiresAt: answer.ticket?.readKeyExpiresAt, interfaces: answer.ticket.map(Self.interfaces) ?? [],
                renderer: answer.renderer, rendererError: answer.rendererError, credentials: credentials)
        case .failure(let failure):
            record(.failure, of: pass)
            counters.triggersFailed += 1
            return PageOpen(
                page: page, outcome: .failed(failure), ticket: nil, readKey: nil, readKeyExpiresAt: nil, interfaces: [], renderer: nil,
                rendererError: nil, credentials: credentials)
        }
    }

    /// The script that hands `open`'s read key to the page, to run at document start in the page's main frame
    /// (WKWebView: a `WKUserScript` at `.atDocumentStart`; Android: `addDocumentStartJavaScript`); nil when the
    /// open has no key. It sets `window.__PREFETCH_READ_KEY__` only in a document of the page's origin, and is
    /// escaped so that no key or URL can break out of it (``ReadKeyScript``). Counted as a read key handed over.
    public func documentStartScript(for open: PageOpen) -> String? {
        guard let readKey = open.readKey, let script = ReadKeyScript.source(readKey: readKey, page: open.page) else { return nil }
        counters.readKeysHandedOver += 1
        return script
    }

    /// The cookies the upstreams set in answer to the page's prefetched requests, for the webview's cookie store:
    /// the shell reads each replay with the trigger's credentials and turns its `Set-Cookie` headers into
    /// `HTTPCookie`s keyed by the request's host name (RFC 6265 domain and path rules; `HttpOnly`, `Secure` and
    /// expiry kept; a cookie for a domain the host is not in is dropped). Returns within
    /// ``PrefetchShellConfiguration/Budgets/cookieSync`` with the cookies of the replays read by then.
    ///
    /// Reading a replay hands it out like the page's read would: a response the upstream marked `no-store` is
    /// handed out once, so pass `names` without its interface when the page must get it.
    public func cookiesToSync(for open: PageOpen, names: Set<String>? = nil, existing: [HTTPCookie] = []) async -> [HTTPCookie] {
        guard let ticket = open.ticket, PageOpen.isWellFormedTicket(ticket) else { return [] }
        // Only the replays of interfaces on an api host this shell was configured with: an answer of the service's
        // that names another host sets no cookie for it.
        let apiOrigins = Set(configuration.apiURLs.compactMap(Self.origin))
        let interfaces = open.interfaces.filter { interface in
            (names?.contains(interface.name) ?? true)
                && (URL(string: interface.url) ?? URL(string: interface.api)).flatMap(Self.origin).map(apiOrigins.contains) == true
        }
        guard !interfaces.isEmpty else { return [] }
        guard let pass = admit() else { return [] }
        let (api, credentials, sleep) = (api, open.credentials, sleep)
        let budget = configuration.budgets.cookieSync
        // The service may wait for a response still in flight for most of the budget, and must answer within it.
        let wait = max(0, Int(budget.components.seconds) * 1000 + Int(budget.components.attoseconds / 1_000_000_000_000_000) - 200)
        let reads = await withTaskGroup(of: Result<[HTTPCookie], PrefetchShellFailure>.self) { group in
            for interface in interfaces {
                group.addTask {
                    await Self.withinBudget(budget, sleep: sleep) {
                        try await Self.replayedCookies(
                            ticket: ticket, interface: interface, wait: wait, credentials: credentials, existing: existing, api: api)
                    }
                }
            }
            var reads: [Result<[HTTPCookie], PrefetchShellFailure>] = []
            for await read in group { reads.append(read) }
            return reads
        }
        let cookies = SetCookie.boundedPerDomain(reads.flatMap { (try? $0.get()) ?? [] }, existing: existing)
        record(reads.contains { (try? $0.get()) != nil } ? .success : .failure, of: pass)
        return cookies
    }

    /// Gives a renderer leased with ``pageWillOpen(_:cookies:authorization:)`` back to the service's pool
    /// (`healthy: false` has it destroyed). Whether the service took it back within the budget; a lease not given
    /// back is reclaimed by the service after its lease timeout.
    @discardableResult
    public func releaseRenderer(_ lease: RendererLease, healthy: Bool = true) async -> Bool {
        guard let pass = admit() else { return false }
        let api = api
        let result = await Self.withinBudget(configuration.budgets.release, sleep: sleep) {
            let output = try await api.client().releaseRenderer(path: .init(id: lease.id), body: .json(.init(healthy: healthy)))
            switch output {
            case .ok: return true
            case .serviceUnavailable: throw ServiceStatus(code: 503)
            case .undocumented(let status, _) where status >= 500: throw ServiceStatus(code: status)
            default: return false
            }
        }
        record(result.isSuccess ? .success : .failure, of: pass)
        return (try? result.get()) ?? false
    }

    /// At logout, before the app forgets the user's credentials: has the service drop every response it stored for
    /// the user (`POST /v1/invalidate`, on every replica), for the identity of `cookies` and `authorization` (chosen
    /// as for a trigger) and for each other one this shell triggered with since the last logout. Never skipped by the
    /// breaker; each invalidation has the logout budget. Invalidations that failed are remembered for the next call.
    public func logout(cookies: [HTTPCookie], authorization: String? = nil) async -> LogoutResult {
        var identities = triggeredCredentials
        let current = credentials(cookies, authorization: authorization)
        if !current.isEmpty && !identities.contains(current) { identities.append(current) }
        triggeredCredentials = []
        let (api, sleep, budget) = (api, sleep, configuration.budgets.logout)
        let outcomes = await withTaskGroup(of: (Credentials, Int?).self) { group in
            for credentials in identities {
                group.addTask {
                    let result = await Self.withinBudget(budget, sleep: sleep) {
                        try await Self.invalidate(credentials: credentials, api: api)
                    }
                    return (credentials, try? result.get())
                }
            }
            var outcomes: [(Credentials, Int?)] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        let failed = outcomes.filter { $0.1 == nil }.map { $0.0 }
        for credentials in failed { remember(credentials) }
        return LogoutResult(dropped: outcomes.reduce(0) { $0 + ($1.1 ?? 0) }, identities: identities.count, failed: failed.count)
    }

    // MARK: Breaker and credentials

    private func admit() -> CircuitBreaker<Moment>.Pass? {
        switch breaker.admit(at: now()) {
        case .call(let pass): return pass
        case .skip:
            counters.skippedByBreaker += 1
            return nil
        }
    }

    private func record(_ outcome: CircuitBreaker<Moment>.Outcome, of pass: CircuitBreaker<Moment>.Pass) {
        if breaker.record(outcome, of: pass, at: now()) == .opened { counters.breakerOpenings += 1 }
    }

    private func credentials(_ cookies: [HTTPCookie], authorization: String?) -> Credentials {
        let token = authorization.flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
        let sent = CookieMatching.jarCookies(CookieMatching.sentCookies(cookies, apis: configuration.apiURLs, now: Date()))
        let jar = sent.map { cookie in
            let domain = cookie.domain.lowercased()
            return JarCookie(
                name: cookie.name, value: cookie.value, domain: domain.hasPrefix(".") ? String(domain.dropFirst()) : domain,
                hostOnly: !domain.hasPrefix("."), path: cookie.path, secure: cookie.isSecure,
                expires: cookie.expiresDate.map { $0.timeIntervalSince1970.rounded(.down) },
                sameSite: CookieMatching.sameSite(of: cookie))
        }
        return Credentials(cookie: CookieMatching.header(sent), authorization: token, jar: jar)
    }

    private func remember(_ credentials: Credentials) {
        guard !credentials.isEmpty else { return }
        triggeredCredentials.removeAll { $0 == credentials }
        triggeredCredentials.append(credentials)
        if triggeredCredentials.count > Self.rememberedIdentities { triggeredCredentials.removeFirst() }
    }
}

// MARK: Calls

extension PrefetchShell {
    /// What a trigger or an open answered.
    struct TriggerAnswer: Sendable {
        var outcome: PageOpen.Outcome
        var ticket: Components.Schemas.Ticket?
        var renderer: RendererLease?
        var rendererError: String?
    }

    /// A 5xx answer: the service is there but not serving.
    struct ServiceStatus: Error {
        var code: Int
    }

    static func trigger(_ page: URL, credentials: Credentials, api: ServiceAPI) async throws -> TriggerAnswer {
        let body = Components.Schemas.TriggerRequest(
            url: page.absoluteString, headers: credentialHeaders(credentials), cookies: cookieJar(credentials))
        switch try await api.client().triggerPrefetch(body: .json(body)) {
        case .accepted(let accepted): return TriggerAnswer(outcome: .triggered, ticket: try accepted.body.json)
        case .badRequest(let answer): return refused(answer, status: 400)
        case .forbidden(let answer): return refused(answer, status: 403)
        case .notFound(let answer): return refused(answer, status: 404)
        case .requestTimeout(let answer): return refused(answer, status: 408)
        case .contentTooLarge(let answer): return refused(answer, status: 413)
        case .requestHeaderFieldsTooLarge(let answer): return refused(answer, status: 431)
        case .unsupportedMediaType(let answer): return refused(answer, status: 415)
        case .tooManyRequests(let answer): return refused(answer, status: 429)
        case .serviceUnavailable: throw ServiceStatus(code: 503)
        case .undocumented(let status, _): return try undocumented(status)
        }
    }

    /// The trigger and a renderer lease in one round trip (`POST /v1/open`): each half is its value or its own error, so
    /// a failed trigger still returns the lease, and the caller can give it back or use it.
    static func open(_ page: URL, profile: String, credentials: Credentials, api: ServiceAPI) async throws -> TriggerAnswer {
        let body = Operations.OpenPage.Input.Body.JsonPayload(
            url: page.absoluteString, profile: profile, headers: credentialHeaders(credentials), cookies: cookieJar(credentials))
        let halves: Operations.OpenPage.Output.Ok.Body.JsonPayload
        switch try await api.client().openPage(body: .json(body)) {
        case .ok(let ok): halves = try ok.body.json
        case .badRequest(let answer): return refusedOpen(answer, status: 400)
        case .forbidden(let answer): return refusedOpen(answer, status: 403)
        case .requestTimeout(let answer): return refusedOpen(answer, status: 408)
        case .contentTooLarge(let answer): return refusedOpen(answer, status: 413)
        case .requestHeaderFieldsTooLarge(let answer): return refusedOpen(answer, status: 431)
        case .unsupportedMediaType(let answer): return refusedOpen(answer, status: 415)
        case .serviceUnavailable: throw ServiceStatus(code: 503)
        case .undocumented(let status, _): return try undocumented(status)
        }
        var answer: TriggerAnswer
        if let ticket = halves.prefetch?.value1 {
            answer = TriggerAnswer(outcome: .triggered, ticket: ticket)
        } else {
            let code = halves.prefetchError?.value1.error ?? "bad-answer"
            // The trigger's 503 refusals (`POST /v1/prefetch` answers them with that status): the service is not serving.
            let unavailable: Set<String> = ["not-ready", "overloaded", "shutdown"]
            answer = TriggerAnswer(outcome: unavailable.contains(code) ? .failed(.serviceError) : .refused(code: code))
        }
        if let lease = halves.renderer?.value1 {
            answer.renderer = RendererLease(id: lease.id.value1, profile: lease.profile, warm: lease.warm)
        } else {
            answer.rendererError = halves.rendererError?.value1.error ?? "bad-answer"
        }
        return answer
    }

    /// A whole `POST /v1/open` refused: neither a prefetch nor a renderer.
    static func refusedOpen(_ answer: some ErrorAnswer, status: Int) -> TriggerAnswer {
        let code = answer.code(status: status)
        return TriggerAnswer(outcome: .refused(code: code), rendererError: code)
    }

    /// The `Set-Cookie` of one replay of the ticket, as cookies of the interface's request host.
    static func replayedCookies(
        ticket: String, interface: PageOpen.Interface, wait: Int, credentials: Credentials, existing: [HTTPCookie], api: ServiceAPI
    ) async throws -> [HTTPCookie] {
        let heads = ResponseHeads()
        do {
            _ = try await api.client(credentials: credentials, capture: heads)
                .getTicketData(path: .init(ticket: ticket), query: .init(name: interface.name, wait: wait))
        } catch {
            // A replay's body is the upstream's and need not decode as the document says; its head is what counts.
            if await heads.heads.isEmpty { throw error }
        }
        guard let head = await heads.heads.last else { return [] }
        if head.status.code >= 500 { throw ServiceStatus(code: head.status.code) }
        // Only a replay (`X-Prefetch: hit` or `joined`) carries the upstream's cookies; a miss carries none. And only the
        // answer to a request that carried the user's credentials: a browser stores no cookie from a credentialless
        // request (a guest session must not replace the user's).
        guard head.headerFields[HTTPField.Name("X-Prefetch")!] != nil,
            head.headerFields[HTTPField.Name("X-Prefetch-Credentials")!] == "sent"
        else { return [] }
        guard let url = URL(string: interface.url) ?? URL(string: interface.api) else { return [] }
        return SetCookie.cookies(from: head.headerFields[values: .setCookie], for: url, now: Date(), existing: existing)
    }

    /// `scheme://host:port` of `url` (the port always written), or nil without a host.
    static func origin(_ url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    static func invalidate(credentials: Credentials, api: ServiceAPI) async throws -> Int {
        switch try await api.client(credentials: credentials).invalidateOwn(body: .json(.init())) {
        case .ok(let ok): return try ok.body.json.dropped
        case .serviceUnavailable: throw ServiceStatus(code: 503)
        case .undocumented(let status, _) where status >= 500: throw ServiceStatus(code: status)
        default: throw ServiceStatus(code: 400)
        }
    }

    /// The trigger's headers: `Authorization`; the cookies travel as the jar (``cookieJar(_:)``), never as one
    /// `Cookie` header for every api host.
    static func credentialHeaders(_ credentials: Credentials) -> Components.Schemas.CredentialHeaders {
        var headers: [String: String] = [:]
        for field in credentials.fields where field.name != "Cookie" { headers[field.name] = field.value }
        return .init(additionalProperties: headers)
    }

    /// The cookies for the configured api hosts with their attributes, so the service sends each upstream request
    /// only those a browser would send to its URL; nil without any.
    static func cookieJar(_ credentials: Credentials) -> Components.Schemas.CookieJar? {
        guard !credentials.jar.isEmpty else { return nil }
        return credentials.jar.map { cookie in
            Components.Schemas.CookieJarPayload(
                name: cookie.name, value: cookie.value, domain: cookie.domain, hostOnly: cookie.hostOnly, path: cookie.path,
                secure: cookie.secure, expires: cookie.expires,
                sameSite: cookie.sameSite.flatMap(Components.Schemas.CookieJarPayload.SameSitePayload.init(rawValue:)))
        }
    }

    static func refused(_ answer: some ErrorAnswer, status: Int) -> TriggerAnswer {
        TriggerAnswer(outcome: .refused(code: answer.code(status: status)))
    }

    static func undocumented(_ status: Int) throws -> TriggerAnswer {
        if status >= 500 { throw ServiceStatus(code: status) }
        return TriggerAnswer(outcome: .refused(code: "status-\(status)"))
    }

    static func interfaces(_ ticket: Components.Schemas.Ticket) -> [PageOpen.Interface] {
        ticket.requests.map { .init(name: $0.name, api: $0.api, method: $0.method.rawValue, url: $0.url) }
    }

    /// Runs `body` for at most `budget`: its value, or why there is none. A body still running at the deadline is
    /// cancelled (its request with it) and awaited, which the transport makes prompt.
    static func withinBudget<T: Sendable>(
        _ budget: Duration, sleep: @escaping @Sendable (Duration) async throws -> Void, _ body: @escaping @Sendable () async throws -> T
    ) async -> Result<T, PrefetchShellFailure> {
        await withTaskGroup(of: Result<T, PrefetchShellFailure>?.self) { group in
            group.addTask {
                do { return .success(try await body()) } catch { return .failure(failure(error)) }
            }
            group.addTask {
                try? await sleep(budget)
                return nil
            }
            defer { group.cancelAll() }
            return await group.next().flatMap { $0 } ?? .failure(.timeout)
        }
    }

    /// What went wrong in a call, as a bounded reason.
    static func failure(_ error: any Error) -> PrefetchShellFailure {
        switch error {
        case is CancellationError: return .timeout
        case is ServiceStatus: return .serviceError
        case let error as ClientError: return error.underlyingError is ClientError ? .badAnswer : failure(error.underlyingError)
        case let error as URLError: return error.code == .timedOut || error.code == .cancelled ? .timeout : .unreachable
        default:
            let nsError = error as NSError
            return nsError.domain == NSURLErrorDomain ? .unreachable : .badAnswer
        }
    }
}

/// A reading of the shell's clock: the time since the shell was made.
struct Moment: InstantProtocol {
    var offset: Duration

    func advanced(by duration: Duration) -> Moment { Moment(offset: offset + duration) }
    func duration(to other: Moment) -> Duration { other.offset - offset }
    static func < (lhs: Moment, rhs: Moment) -> Bool { lhs.offset < rhs.offset }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
