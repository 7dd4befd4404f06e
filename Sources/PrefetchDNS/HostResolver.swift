// DNS prefetch and HTTPDNS for upstream requests: every api host of the config is resolved ahead of time and
// kept by TTL; a transfer is pinned to the cached address (`AddressPin`, applied by the fetcher; the URL, Host,
// SNI and certificate checks keep the host name). Request-time lookups never block; a host without a fresh answer is
// left to libcurl.
// Design notes: docs/design/dns.md
import HTTPTypes
public import Logging
public import Metrics
public import PrefetchCore
public import PrefetchFetcher
public import ServiceLifecycle
import Synchronization

/// Resolves the upstream hosts ahead of time and pins transfers to a resolved address (``AddressPin``) without
/// changing the host name anything else sees.
///
/// Run it as a `Service`. `prefetch(hosts:)` sets the hosts to keep resolved (call it when a config is loaded and
/// on every update); as a `FetchRequest`'s `pinning` it gives each fetch its pin and learns of refused ones. Both are
/// cheap, never block and may be called from any thread, before or while `run()` runs. Lookups happen only while
/// `run()` runs.
public final class HostResolver: Service, AddressPinning, Sendable {
    private struct State {
        var cache: ResolverCache
        var started = false
        var stopping = false
    }

    /// The validated settings in use.
    public let settings: DNSSettings
    private let fetcher: Fetcher?
    private let logger: Logger
    private let metrics: DNSMetrics
    private let system: SystemResolver
    private let state: Mutex<State>
    private let wakeup = Wakeup<Never>()
    /// Answers' lifetimes, refresh times and retries are measured on this clock (lookup durations, a metric, on the
    /// real one).
    private let clock: any ServiceClock

    /// Creates a resolver. With `settings.httpdns` set, `fetcher` is required: HTTPDNS requests go through it
    /// (it must be running for them to complete).
    ///
    /// - Parameters:
    ///   - metricsFactory: where metrics go; the bootstrapped `MetricsSystem.factory` when nil.
    /// - Throws: `DNSError` `.invalidSettings` naming the offending setting.
    public init(
        settings: DNSSettings = .init(),
        fetcher: Fetcher? = nil,
        logger: Logger,
        metricsFactory: (any MetricsFactory)? = nil,
        clock: any ServiceClock = ContinuousClock()
    ) throws(DNSError) {
        self.clock = clock
        try settings.validate()
        if settings.httpdns != nil, fetcher == nil {
            throw DNSError(code: .invalidSettings, message: "dns.httpdns is set but no Fetcher was given to reach it")
        }
        self.settings = settings
        self.fetcher = fetcher
        self.logger = logger
        self.metrics = DNSMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        // Threads stuck in getaddrinfo past their timeout are bounded at twice the lookup concurrency.
        self.system = SystemResolver(maxBlocked: settings.maxConcurrentLookups * 2)
        self.state = Mutex(State(cache: ResolverCache(maxInFlight: settings.maxConcurrentLookups)))
    }

    /// Makes `hosts` the set kept resolved: new names are looked up in the background at once, names no longer
    /// listed are forgotten. IP literals and empty names are skipped (they need no resolving); names are compared
    /// case-insensitively. Returns at once.
    public func prefetch(hosts: some Sequence<String>) {
        var names = Set<String>()
        for host in hosts {
            let name = normalizedHost(host)
            if !name.isEmpty, !IPLiteral.isLiteral(name) { names.insert(name) }
        }
        let (added, cached) = state.withLock { state in
            let now = clock.now
            return (state.cache.watch(names, now: now), state.cache.cachedCount(now: now))
        }
        metrics.cached(cached)
        logger.debug("dns prefetch hosts set", metadata: ["hosts": "\(names.count)", "new": "\(added)"])
        wakeup.signal()
    }

    /// The pin for a transfer to `host:port`: the first address of the unexpired cached answer, else nil (libcurl
    /// then resolves the name itself, through its shared DNS cache). Never blocks.
    public func pin(host: String, port: Int) -> AddressPin? {
        let name = normalizedHost(host)
        let now = clock.now
        guard let address = state.withLock({ $0.cache.answer(for: name, now: now) })?.addresses.first else {
            return nil
        }
        return AddressPin(host: name, port: port, address: address)
    }

    /// The pinned address refused a connection: the host goes back to libcurl's own resolution (which tries every
    /// address) until the next lookup, which is asked for at once.
    public func connectFailed(_ pin: AddressPin) {
        if invalidate(host: pin.host) {
            logger.info("pinned address refused; host resolved by libcurl until the next lookup", metadata: ["host": "\(pin.host)"])
        }
    }

    /// The cached, unexpired answer for `host`, if any.
    public func answer(for host: String) -> DNSAnswer? {
        let name = normalizedHost(host)
        let now = clock.now
        return state.withLock { $0.cache.answer(for: name, now: now) }
    }

    /// Drops the cached answer for `host` so transfers resolve through libcurl again, and asks for a new lookup at
    /// once; for a caller whose pinned transfer failed to connect. Returns whether an answer was dropped.
    @discardableResult
    public func invalidate(host: String) -> Bool {
        let name = normalizedHost(host)
        let now = clock.now
        let dropped = state.withLock { $0.cache.invalidate(name, now: now) }
        if dropped { wakeup.signal() }
        return dropped
    }

    /// Lookups running right now.
    public var lookupsInFlight: Int {
        state.withLock { $0.cache.inFlight }
    }

    /// Keeps the watched hosts resolved until graceful shutdown or cancellation, then returns after abandoning
    /// running lookups (their results are dropped). Throws if called a second time.
    public func run() async throws {
        let first = state.withLock { state in
            defer { state.started = true }
            return !state.started
        }
        guard first else {
            throw DNSError(code: .invalidSettings, message: "HostResolver.run() was called more than once")
        }
        if let endpoint = settings.httpdns, let url = try? HTTPURL(parsing: endpoint), url.scheme == "http" {
            // Only host and port: an HTTPDNS query string may carry an account key.
            logger.warning(
                "HTTPDNS endpoint is plain http://: anyone on the path can forge its answers; prefer https://",
                metadata: ["httpdns": "http://\(url.host):\(url.effectivePort)"])
        }
        logger.debug(
            "dns resolver starting",
            metadata: ["httpdns": "\(settings.httpdns != nil)", "max_concurrent_lookups": "\(settings.maxConcurrentLookups)"]
        )
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await loop()
            } onCancel: {
                self.wakeup.signal()
            }
        } onGracefulShutdown: {
            self.state.withLock { $0.stopping = true }
            self.wakeup.signal()
        }
        logger.debug("dns resolver stopped")
    }

    private func loop() async {
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                let now = clock.now
                let step: (due: [String], deadline: ContinuousClock.Instant?, cached: Int)? = state.withLock { state in
                    guard !state.stopping else { return nil }
                    let due = state.cache.takeDue(now: now)
                    return (due, state.cache.nextDeadline, state.cache.cachedCount(now: now))
                }
                guard let step else { break }
                metrics.cached(step.cached)
                for host in step.due {
                    group.addTask {
                        await self.refresh(host)
                        self.wakeup.signal()
                    }
                }
                await wakeup.wait(until: step.deadline, clock: clock)
            }
            group.cancelAll()
        }
    }

    /// One lookup of `host`: HTTPDNS first when configured, the system resolver otherwise or as its fallback.
    private func refresh(_ host: String) async {
        if let endpoint = settings.httpdns, let fetcher {
            let started = ContinuousClock.now
            do {
                let answer = try await httpdnsLookup(host, endpoint: endpoint, fetcher: fetcher)
                metrics.duration(.httpdns, started.duration(to: .now))
                metrics.lookup(.httpdns, .ok)
                record(host, addresses: answer.addresses, source: .httpdns, ttl: answer.ttl ?? settings.systemTTL)
                return
            } catch {
                if error.code == .cancelled || Task.isCancelled { return }
                metrics.duration(.httpdns, started.duration(to: .now))
                metrics.lookup(.httpdns, error.code == .timeout ? .timeout : .error)
                metrics.lookup(.httpdns, .fallback)
                logger.warning(
                    "HTTPDNS lookup failed, falling back to the system resolver",
                    metadata: ["host": "\(host)", "code": "\(error.code.rawValue)", "error": "\(error.message)"]
                )
            }
        }
        let started = ContinuousClock.now
        do {
            let addresses = try await system.lookup(host, timeout: .milliseconds(settings.systemTimeoutMs))
            metrics.duration(.system, started.duration(to: .now))
            metrics.lookup(.system, .ok)
            record(host, addresses: addresses, source: .system, ttl: settings.systemTTL)
        } catch {
            if error.code == .cancelled || Task.isCancelled { return }
            metrics.duration(.system, started.duration(to: .now))
            metrics.lookup(.system, error.code == .timeout ? .timeout : .error)
            logger.warning(
                "dns lookup failed",
                metadata: ["host": "\(host)", "code": "\(error.code.rawValue)", "error": "\(error.message)"]
            )
            let retry = Duration.milliseconds(Int64((settings.failureRetry * 1000).rounded()))
            let now = clock.now
            state.withLock { $0.cache.failed(host, retryAfter: retry, now: now) }
        }
    }

    private func record(_ host: String, addresses: [String], source: DNSSource, ttl: Double) {
        let lifetime = settings.clampedLifetime(ttl)
        let now = clock.now
        state.withLock { state in
            state.cache.resolved(
                host,
                addresses: addresses,
                source: source,
                lifetime: lifetime,
                refreshAhead: settings.refreshAhead,
                now: now
            )
        }
        logger.debug(
            "dns answer cached",
            metadata: ["host": "\(host)", "source": "\(source.rawValue)", "addresses": "\(addresses)", "lifetime": "\(lifetime)"]
        )
    }

    private func httpdnsLookup(_ host: String, endpoint: String, fetcher: Fetcher) async throws(DNSError) -> HTTPDNSAnswer {
        let separator = endpoint.contains("?") ? "&" : "?"
        let request = FetchRequest(
            url: endpoint + separator + "host=" + queryEncoded(host),
            headers: [.accept: "application/json"],
            timeout: .milliseconds(settings.timeoutMs),
            maxResponseBytes: 64 * 1024
        )
        let response: FetchResponse
        do {
            response = try await fetcher.fetch(request)
        } catch {
            switch error.code {
            case .timeout:
                throw DNSError(code: .timeout, message: "HTTPDNS lookup of \(host) exceeded \(settings.timeoutMs) ms")
            case .cancelled, .shutdown:
                throw DNSError(code: .cancelled, message: "HTTPDNS lookup of \(host) abandoned: \(error)")
            default:
                throw DNSError(code: .httpdnsFailed, message: "HTTPDNS lookup of \(host) failed: \(error)")
            }
        }
        guard response.status == 200 else {
            throw DNSError(code: .httpdnsFailed, message: "HTTPDNS lookup of \(host) answered status \(response.status)")
        }
        let answer = try HTTPDNSAnswer.parse(response.body, host: host)
        if !settings.allowPrivateAddresses {
            for address in answer.addresses {
                guard let reason = NonPublicAddress(literal: address) else { continue }
                metrics.rejected(reason)
                throw DNSError(
                    code: .invalidAnswer,
                    message: "HTTPDNS answer for \(host) rejected: \(address) is \(reason.phrase) (dns.allowPrivateAddresses is off)")
            }
        }
        return answer
    }
}

/// `text` percent-encoded for a query value (unreserved characters kept).
private func queryEncoded(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            out.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            let hex = String(byte, radix: 16, uppercase: true)
            out += "%" + (hex.count == 1 ? "0" + hex : hex)
        }
    }
    return out
}
