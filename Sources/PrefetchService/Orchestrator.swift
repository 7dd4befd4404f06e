import CoreMetrics
import HTTPTypes
import Logging
import PrefetchCore
import PrefetchDNS
import PrefetchFetcher
import PrefetchStore
import ServiceLifecycle
import Synchronization

/// The product's core loop: a page is opening, so plan its requests, start each one unless it is already
/// stored or in flight for the same user, and hand the results to whoever asks.
///
/// Design
/// - A trigger plans the page with the config current at that moment (an immutable value, so a config swap
///   never changes a plan that already started), computes one store key per request and asks the store for
///   the single flight. Only leaders fetch; everyone else joins. The HTTP answer does not wait for any upstream.
/// - Fetches run as child tasks of ``FetchRunner``, a long-running `Service`, never as unstructured tasks:
///   a trigger hands the job over an `AsyncStream`. On graceful shutdown the runner stops taking jobs and
///   lets the running ones finish (each bounded by its own timeout) before the fetcher itself stops.
/// - Identity: the store key carries the identity of the credentials actually sent upstream. A request
///   that sends none (credentials `omit`, or an api off the page's site) is fetched anonymously and may be
///   shared; a request that sends credentials is keyed by them and never reaches another identity.
/// - DNS: api hosts are resolved ahead of time by the ``HostResolver`` (system resolver or HTTPDNS) and
///   each transfer is pinned to the cached address with CURLOPT_CONNECT_TO, so the URL, Host, SNI,
///   certificate checks and cookie domains keep the host name; a host without a fresh answer resolves
///   through libcurl as usual.
/// - Upstream status: responses below 500 are stored and replayed as received. A 5xx, like a transport
///   failure, is stored as a failure (`upstream_5xx`) for the negative TTL only: the page then makes its own
///   request, and the next trigger fetches again.
final class Orchestrator: Sendable {
    let settings: ServiceSettings
    let store: any ResponseStore
    let fetcher: Fetcher
    let resolver: HostResolver
    let runner: FetchRunner
    let tickets: any TicketRegistry
    let metrics: ServiceMetrics
    let logger: Logger
    let currentConfig: @Sendable () -> PrefetchConfig?
    private let credentialNames: Set<String>

    init(
        settings: ServiceSettings,
        store: any ResponseStore,
        fetcher: Fetcher,
        resolver: HostResolver,
        tickets: any TicketRegistry,
        metrics: ServiceMetrics,
        logger: Logger,
        currentConfig: @escaping @Sendable () -> PrefetchConfig?
    ) {
        self.settings = settings
        self.store = store
        self.fetcher = fetcher
        self.resolver = resolver
        self.runner = FetchRunner(logger: logger)
        self.tickets = tickets
        self.metrics = metrics
        self.logger = logger
        self.currentConfig = currentConfig
        self.credentialNames = Set(settings.credentialHeaders.map { $0.lowercased() })
    }

    /// The credential headers among `headers`, in order.
    func credentials(in headers: [(name: String, value: String)]) -> Credentials {
        let picked = headers.filter { credentialNames.contains($0.name.lowercased()) }
        return Credentials(headers: picked, identity: Identity(headers: picked, credentialHeaderNames: Array(credentialNames)))
    }

    /// The plan for `page` under the current config.
    func plan(page: String) throws(APIError) -> Plan {
        guard let config = currentConfig() else { throw .notReady }
        do {
            return try Plan.make(page: page, config: config)
        } catch {
            switch error {
            case .invalidPageURL: throw APIError(status: .badRequest, code: "invalid-url", message: error.description)
            case .noMatch: throw APIError(status: .notFound, code: "no-config", message: error.description)
            }
        }
    }

    /// What a planned request is keyed by, and the headers it is sent with, for a caller with `credentials`.
    func keyAndHeaders(for request: PlannedRequest, page: HTTPURL, credentials: Credentials) -> (StoreKey, [HTTPHeader]) {
        let sendCredentials = !credentials.headers.isEmpty && SiteRule.allowsCredentials(request.interface.credentials, page: page, api: request.interface.apiURL)
        var headers = request.headers.map { HTTPHeader(name: $0.name, value: $0.value) }
        var identity = Identity.anonymous
        if sendCredentials {
            headers += credentials.headers.map { HTTPHeader(name: $0.name, value: $0.value) }
            identity = credentials.identity
        }
        let key = StoreKey(identity: identity, method: request.method.rawValue, url: request.url, body: request.body.map { Array($0.utf8) })
        return (key, headers)
    }

    /// Starts the page's prefetch and returns its ticket at once.
    func trigger(page: String, headers: [(name: String, value: String)]) async throws(APIError) -> Ticket {
        let plan: Plan
        do {
            plan = try self.plan(page: page)
        } catch {
            metrics.trigger(error.code == "no-config" ? "no-config" : error.code == "not-ready" ? "not-ready" : "invalid")
            throw error
        }
        let credentials = credentials(in: headers)
        let now = ContinuousClock.now
        var requests: [TicketRequest] = []
        var jobs: [(index: Int, FetchRequest, StoreKey, FlightToken)] = []
        var timings: [RequestTiming] = []
        for (index, planned) in plan.requests.enumerated() {
            let (key, sendHeaders) = keyAndHeaders(for: planned, page: plan.pageURL, credentials: credentials)
            let interface = planned.interface
            let policy = StorePolicy(ttl: .seconds(interface.ttlSeconds), negativeTTL: settings.negativeTTL, label: interface.name)
            let timeout = Duration.milliseconds(interface.timeoutMilliseconds)
            requests.append(TicketRequest(name: interface.name, api: interface.api, method: interface.method, url: planned.url, key: key, policy: policy, timeout: timeout))
            let role: String
            switch await store.begin(key, policy: policy) {
            case .leader(let token):
                role = "leader"
                let fetch = FetchRequest(
                    method: interface.method.rawValue, url: planned.url, headers: sendHeaders, body: planned.body.map { Array($0.utf8) },
                    timeout: timeout, maxResponseBytes: settings.maximumResponseBytes,
                    connectTo: resolver.connectTo(url: planned.url)
                )
                jobs.append((index, fetch, key, token))
            case .joined: role = "joined"
            case .fresh: role = "fresh"
            }
            metrics.flight(interface.name, role: role)
            timings.append(RequestTiming(origin: role, startedAt: now, finishedAt: role == "leader" ? nil : now))
        }
        let ticket = Ticket(
            id: Ticket.newID(), page: page, matched: plan.matched, version: plan.version,
            identity: credentials.identity, requests: requests, timings: timings
        )
        await tickets.insert(ticket)
        metrics.tickets.record(tickets.count)
        metrics.trigger("accepted")
        for (index, request, key, token) in jobs {
            let label = requests[index].name
            let policy = requests[index].policy
            let accepted = runner.submit { [self] in
                await self.execute(request, key: key, token: token, policy: policy, label: label, ticket: ticket, index: index)
            }
            if !accepted {
                await store.complete(key, token: token, result: .failure(StoreFailure(code: FetchErrorCode.shutdown.rawValue, message: "the service is shutting down")))
                ticket.record(index) { $0.finishedAt = .now; $0.error = FetchErrorCode.shutdown.rawValue }
            }
        }
        return ticket
    }

    /// Runs one leader fetch and publishes its result.
    private func execute(_ request: FetchRequest, key: StoreKey, token: FlightToken, policy: StorePolicy, label: String, ticket: Ticket, index: Int) async {
        metrics.inFlight.record(fetcher.inFlight + 1)
        defer { metrics.inFlight.record(fetcher.inFlight) }
        ticket.record(index) { $0.startedAt = .now }
        do {
            let response = try await fetcher.fetch(request)
            let headers = response.headers.filter { !Self.hopByHop.contains($0.name.lowercased()) }.map { StoredHeader(name: $0.name, value: $0.value) }
            let noStore = response.headers.contains { $0.name.lowercased() == "cache-control" && $0.value.lowercased().contains("no-store") }
            ticket.record(index) {
                $0.finishedAt = .now
                $0.status = response.status
                $0.bytes = response.body.count
            }
            metrics.upstreamDuration(label, response.elapsed)
            if response.status >= 500 {
                // A prefetched 5xx is worth nothing to the page: it is a failure the page retries itself, and is
                // kept only for the negative TTL.
                let failure = StoreFailure(code: "upstream_5xx", message: "the upstream answered \(response.status)")
                await store.complete(key, token: token, result: .failure(failure))
                metrics.fetch(label, outcome: "upstream_5xx")
                ticket.record(index) { $0.error = failure.code }
                logger.info("fetch failed", metadata: ["interface": "\(label)", "error": "upstream_5xx", "status": "\(response.status)"])
                return
            }
            let stored = StoredResponse(status: response.status, headers: headers, body: response.body, fetchedAt: .now, noStore: noStore, elapsed: response.elapsed)
            await store.complete(key, token: token, result: .success(stored))
            metrics.fetch(label, outcome: "ok")
            logger.info("fetch completed", metadata: ["interface": "\(label)", "status": "\(response.status)", "bytes": "\(response.body.count)", "ms": "\(response.elapsed.milliseconds)"])
        } catch {
            if error.code == .connect && !request.connectTo.isEmpty, let host = try? HTTPURL(parsing: request.url).host {
                // The pinned address refused: give the host back to libcurl's own resolution until the next lookup.
                resolver.invalidate(host: host)
            }
            if error.code == .cancelled {
                await store.abandon(key, token: token)
            } else {
                await store.complete(key, token: token, result: .failure(StoreFailure(code: error.code.rawValue, message: error.message)))
            }
            metrics.fetch(label, outcome: error.code.rawValue)
            ticket.record(index) {
                $0.finishedAt = .now
                $0.error = error.code.rawValue
            }
            logger.info("fetch failed", metadata: ["interface": "\(label)", "error": "\(error.code.rawValue)", "message": "\(error.message)"])
        }
    }

    /// Hop-by-hop and framing headers: the transport's, never replayed.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "content-length",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// Clamps a requested wait to `[0, maximumWait]`.
    func clampWait(_ milliseconds: Int?, default fallback: Duration) -> Duration {
        guard let milliseconds else { return min(fallback, settings.maximumWait) }
        return min(.milliseconds(max(0, milliseconds)), settings.maximumWait)
    }
}

/// A caller's credential headers, in order, and their identity, hashed once per request.
struct Credentials: Sendable {
    var headers: [(name: String, value: String)]
    var identity: Identity
}

/// Runs leader fetches as child tasks until graceful shutdown, then lets the running ones finish.
final class FetchRunner: Service, Sendable {
    typealias Job = @Sendable () async -> Void

    private let stream: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation
    private let logger: Logger

    init(logger: Logger) {
        (stream, continuation) = AsyncStream.makeStream(of: Job.self)
        self.logger = logger
    }

    /// Queues a job; `false` once the runner has stopped taking jobs.
    func submit(_ job: @escaping Job) -> Bool {
        if case .enqueued = continuation.yield(job) { return true }
        return false
    }

    func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await job in stream {
                    group.addTask { await job() }
                }
            }
        } onGracefulShutdown: { [continuation, logger] in
            logger.info("draining in-flight fetches")
            continuation.finish()
        }
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
