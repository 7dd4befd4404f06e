import ArgumentParser
import ConfigUpdater
import Foundation
import PrefetchCore
import PrefetchDNS
import PrefetchEngine
import PrefetchFetcher
import PrefetchRuntime
import PrefetchService

// `prefetch serve`'s options, one group per component's settings. Each group reads its flags, falls back to its
// environment variables, checks every value (a `ValidationError` naming the flag or variable) and writes the
// component's settings; `Serve.settings(environment:)` only composes them.

/// The two listeners: addresses, the operator token, timeouts, connection caps, the fast path, the demo pages.
struct ListenerOptions: ParsableArguments {
    @Option(help: "Address to listen on (default 127.0.0.1, env PREFETCH_HOST).")
    var host: String?

    @Option(help: "Port to listen on, 0 for any free port (default 8080, env PREFETCH_PORT).")
    var port: Int?

    @Option(name: .customLong("admin-host"), help: "Address of the operator surface (default 127.0.0.1, env PREFETCH_ADMIN_HOST).")
    var adminHost: String?

    @Option(
        name: .customLong("admin-port"),
        help: "Port of the operator surface, 0 for any free port (default 8081, env PREFETCH_ADMIN_PORT).")
    var adminPort: Int?

    @Option(
        name: .customLong("admin-token"),
        help: "Require 'Authorization: Bearer TOKEN' on the operator surface (env PREFETCH_ADMIN_TOKEN; prefer the env).")
    var adminToken: String?

    @Option(
        name: .customLong("idle-timeout"),
        help: "Seconds a connection may idle, and the longest a request head may take (default 30, env PREFETCH_IDLE_TIMEOUT).")
    var idleTimeout: Int?

    @Option(
        name: .customLong("body-timeout"),
        help: "Seconds a request body may take once its head is in, on every route (default 10, env PREFETCH_BODY_TIMEOUT).")
    var bodyTimeout: Int?

    @Option(
        name: .customLong("max-connections"),
        help:
            "Client connections the page listener holds at once; more are closed on arrival (default 4096, env PREFETCH_MAX_CONNECTIONS)."
    )
    var maxConnections: Int?

    @Option(
        name: .customLong("admin-max-connections"),
        help: "Client connections the operator listener holds at once (default 64, env PREFETCH_ADMIN_MAX_CONNECTIONS).")
    var adminMaxConnections: Int?

    @Flag(
        name: .customLong("demo"),
        help:
            "Also serve the demo pages (/demo/*) on the page listener: for a local try-out only, never in production (env PREFETCH_DEMO=1)."
    )
    var demo = false

    func apply(to listeners: inout ListenerSettings, environment: Environment) throws {
        listeners.host = host ?? environment.value("PREFETCH_HOST") ?? listeners.host
        if let port = try environment.integer(port, "PREFETCH_PORT", flag: "--port", in: 0...65535) { listeners.port = port }
        listeners.adminHost = adminHost ?? environment.value("PREFETCH_ADMIN_HOST") ?? listeners.adminHost
        if let port = try environment.integer(adminPort, "PREFETCH_ADMIN_PORT", flag: "--admin-port", in: 0...65535) {
            listeners.adminPort = port
        }
        if listeners.port != 0, listeners.port == listeners.adminPort, listeners.host == listeners.adminHost {
            throw ValidationError("--admin-port \(listeners.adminPort) is the page port: the operator surface needs a listener of its own")
        }
        listeners.adminToken = adminToken ?? environment.value("PREFETCH_ADMIN_TOKEN")
        if let token = listeners.adminToken, token.utf8.count < 16 {
            throw ValidationError("--admin-token has \(token.utf8.count) characters; use at least 16")
        }
        if let seconds = try environment.integer(
            idleTimeout, "PREFETCH_IDLE_TIMEOUT", flag: "--idle-timeout", in: 1...3600, unit: "seconds")
        {
            listeners.idleTimeout = .seconds(seconds)
        }
        if let seconds = try environment.integer(
            bodyTimeout, "PREFETCH_BODY_TIMEOUT", flag: "--body-timeout", in: 1...3600, unit: "seconds")
        {
            listeners.bodyTimeout = .seconds(seconds)
        }
        if let count = try environment.integer(maxConnections, "PREFETCH_MAX_CONNECTIONS", flag: "--max-connections", in: 1...1_000_000) {
            listeners.maxConnections = count
        }
        if let count = try environment.integer(
            adminMaxConnections, "PREFETCH_ADMIN_MAX_CONNECTIONS", flag: "--admin-max-connections", in: 1...1_000_000)
        {
            listeners.adminMaxConnections = count
        }
        listeners.demo = demo || environment.value("PREFETCH_DEMO") == "1"
    }
}

/// The orchestrator: rate limits, the ticket and in-flight budgets, the negative TTL, cookies, unshared statuses,
/// CORS origins.
struct EngineOptions: ParsableArguments {
    @Option(
        name: .customLong("trigger-rate"),
        help: "Triggers per second one caller may sustain, 0 for no limit (default 10, env PREFETCH_TRIGGER_RATE).")
    var triggerRate: Double?

    @Option(
        name: .customLong("trigger-burst"), help: "Triggers one caller may make in a burst (default 40, env PREFETCH_TRIGGER_BURST).")
    var triggerBurst: Int?

    @Option(
        name: .customLong("ticket-bytes"),
        help: "Bytes tickets may hold; the oldest go first (default 16777216, env PREFETCH_TICKET_BYTES).")
    var ticketBytes: Int?

    @Option(
        name: .customLong("in-flight-bytes"),
        help: "Bytes all responses still arriving may hold together (default 67108864, env PREFETCH_IN_FLIGHT_BYTES).")
    var inFlightBytes: Int?

    @Option(
        name: .customLong("request-body-bytes"),
        help:
            "Bytes of request bodies the page listener may hold at once past each body's first 16 KiB, over all its connections; a body that would pass it is 503 overloaded (default 67108864, env PREFETCH_REQUEST_BODY_BYTES)."
    )
    var requestBodyBytes: Int?

    @Option(
        name: .customLong("negative-ttl"),
        help: """
            Seconds a failed fetch, and the `private` marker of a response kept for the page open that fetched it, \
            are kept before the next trigger fetches again (default 5, env PREFETCH_NEGATIVE_TTL).
            """)
    var negativeTTL: Int?

    @Option(name: .customLong("cors-origin"), help: "An extra origin allowed to read data cross-origin; repeatable; * for any.")
    var corsOrigins: [String] = []

    @Flag(
        name: .customLong("third-party-cookies"),
        help:
            "The shells' webviews accept third-party cookies: send a jar's SameSite=None cookies to apis on another site than the page (default: no cookie across sites, as WKWebView and Android WebView do; env PREFETCH_THIRD_PARTY_COOKIES=1)."
    )
    var thirdPartyCookies = false

    @Option(
        name: .customLong("unshared-status"),
        help:
            "An upstream status kept for the page open that fetched it alone, never served to others from the store; repeatable. Always: 400, 408, 413, 414, 429, 431."
    )
    var unsharedStatuses: [Int] = []

    func apply(to engine: inout EngineSettings, environment: Environment) throws {
        if let rate = try triggerRate ?? environment.double("PREFETCH_TRIGGER_RATE") {
            guard rate >= 0 else { throw ValidationError("--trigger-rate \(rate) must not be negative") }
            engine.triggerRate = rate
        }
        if let burst = try environment.integer(triggerBurst, "PREFETCH_TRIGGER_BURST", flag: "--trigger-burst", in: 1...Int.max) {
            engine.triggerBurst = burst
        }
        if let bytes = try environment.integer(ticketBytes, "PREFETCH_TICKET_BYTES", flag: "--ticket-bytes", in: 65536...Int.max) {
            engine.ticketBytes = bytes
        }
        if let bytes = try environment.integer(
            inFlightBytes, "PREFETCH_IN_FLIGHT_BYTES", flag: "--in-flight-bytes", in: engine.maximumResponseBytes...Int.max,
            unit: "(one response's cap)")
        {
            engine.inFlightBytes = bytes
        }
        if let bytes = try environment.integer(
            requestBodyBytes, "PREFETCH_REQUEST_BODY_BYTES", flag: "--request-body-bytes", in: engine.maximumRequestBody...Int.max,
            unit: "(one request body's cap)")
        {
            engine.requestBodyBytes = bytes
        }
        if let seconds = try environment.integer(
            negativeTTL, "PREFETCH_NEGATIVE_TTL", flag: "--negative-ttl", in: 1...3600, unit: "seconds")
        {
            engine.negativeTTL = .seconds(seconds)
        }
        engine.thirdPartyCookies = thirdPartyCookies || environment.value("PREFETCH_THIRD_PARTY_COOKIES") == "1"
        for status in unsharedStatuses {
            guard (100...599).contains(status) else { throw ValidationError("--unshared-status \(status) is not an HTTP status (100-599)") }
            engine.unsharedStatuses.insert(status)
        }
        engine.corsOrigins =
            corsOrigins
            + (environment.value("PREFETCH_CORS_ORIGINS")?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? [])
        for origin in engine.corsOrigins where origin != "*" {
            guard let parsed = try? HTTPURL(parsing: origin), parsed.origin == origin.lowercased() else {
                throw ValidationError(
                    "--cors-origin \"\(origin)\" must be an origin like https://m.example.com (scheme, host, optional port) or *")
            }
        }
    }
}

/// The way upstream: transfer and connection caps, the CA bundle, HTTPDNS.
struct UpstreamOptions: ParsableArguments {
    @Option(
        name: .customLong("max-transfers"),
        help: "Upstream transfers at once; more wait, fairly across page opens (default 512, env PREFETCH_MAX_TRANSFERS).")
    var maxTransfers: Int?

    @Option(
        name: .customLong("max-connections-per-host"),
        help: "Connections to one upstream host (default: --max-transfers, env PREFETCH_MAX_CONNECTIONS_PER_HOST).")
    var maxConnectionsPerHost: Int?

    @Option(
        name: .customLong("ca-bundle"),
        help: "Extra CA bundle (PEM) for private upstreams; TLS verification is never off (env PREFETCH_CA_BUNDLE).")
    var caBundle: String?

    @Option(
        name: .customLong("httpdns"),
        help: "HTTPDNS endpoint (GET <url>?host=NAME answering {\"host\",\"ips\",\"ttl\"}); default off, env PREFETCH_HTTPDNS.")
    var httpdns: String?

    @Flag(
        name: .customLong("httpdns-allow-private"),
        help: "Accept HTTPDNS answers pointing at loopback, private or link-local addresses (env PREFETCH_HTTPDNS_ALLOW_PRIVATE=1).")
    var httpdnsAllowPrivate = false

    func apply(to fetcher: inout FetcherConfiguration, _ dns: inout DNSSettings, environment: Environment) throws {
        if let count = try environment.integer(maxTransfers, "PREFETCH_MAX_TRANSFERS", flag: "--max-transfers", in: 1...100_000) {
            fetcher.maxTransfers = count
        }
        if let count = try environment.integer(
            maxConnectionsPerHost, "PREFETCH_MAX_CONNECTIONS_PER_HOST", flag: "--max-connections-per-host", in: 1...Int.max)
        {
            fetcher.maxConnectionsPerHost = count
        }
        if let bundle = caBundle ?? environment.value("PREFETCH_CA_BUNDLE") {
            guard FileManager.default.isReadableFile(atPath: bundle) else {
                throw ValidationError("--ca-bundle \(bundle) is not a readable file")
            }
            fetcher.caBundlePath = bundle
        }
        dns.httpdns = httpdns ?? environment.value("PREFETCH_HTTPDNS")
        dns.allowPrivateAddresses = httpdnsAllowPrivate || environment.value("PREFETCH_HTTPDNS_ALLOW_PRIVATE") == "1"
        do {
            try dns.validate()
        } catch {
            throw ValidationError("\(error)")
        }
    }
}

/// The response store: memory or a Redis deployment, its connections, its byte budget.
struct StoreOptions: ParsableArguments {
    @Option(
        help:
            "Response store: memory (default), redis://[user[:password]@]host:port[/db] shared by replicas, redis-sentinel://[user[:password]@]host:port[,host:port...]/primary-name[/db] for a Sentinel-managed primary, or redis-cluster://[user[:password]@]host:port[,host:port...] for a Redis Cluster (env PREFETCH_STORE; prefer the env for a password)."
    )
    var store: String?

    @Option(
        name: .customLong("store-connections"),
        help:
            "Connections to the Redis store, spread over the event loops (a page request's calls use its own loop's; calls meeting a busy one are pipelined); one per core keeps every loop's calls on its loop (default: the core count, at least 2; env PREFETCH_STORE_CONNECTIONS)."
    )
    var storeConnections: Int?

    @Option(name: .customLong("store-bytes"), help: "Byte budget of the response store (default 67108864, env PREFETCH_STORE_BYTES).")
    var storeBytes: Int?

    func apply(to settings: inout StoreSettings, environment: Environment) throws {
        let choice = store ?? environment.value("PREFETCH_STORE") ?? "memory"
        if choice != "memory" {
            // The store's own parser decides, as it will when the service starts; its message masks a password.
            if let problem = StoreSettings.problem(withURL: choice) {
                throw ValidationError("--store must be memory or a Redis store URL: \(problem)")
            }
            settings.url = choice
        }
        if let count = try environment.integer(storeConnections, "PREFETCH_STORE_CONNECTIONS", flag: "--store-connections", in: 1...64) {
            settings.connections = count
        }
        if let bytes = try environment.integer(storeBytes, "PREFETCH_STORE_BYTES", flag: "--store-bytes", in: 1_048_576...Int.max) {
            settings.bytes = bytes
        }
    }
}

/// How the config is followed: the fallback copy, the check interval and fatigue window, the state directory.
struct ConfigFollowOptions: ParsableArguments {
    @Option(
        name: .customLong("config-fallback"),
        help: "CDN copy of a URL config, used after repeated abnormal answers (env PREFETCH_CONFIG_FALLBACK).")
    var configFallback: String?

    @Option(name: .customLong("config-interval"), help: "Seconds between config checks (default 60, env PREFETCH_CONFIG_INTERVAL).")
    var configInterval: Int?

    @Option(
        name: .customLong("config-fatigue"),
        help: "Minimum seconds between two checks of a URL config, whatever triggers them (default 30, env PREFETCH_CONFIG_FATIGUE).")
    var configFatigue: Int?

    @Option(name: .customLong("state-dir"), help: "Directory for the last-good config copy (env PREFETCH_STATE_DIR; default none).")
    var stateDirectory: String?

    func settings(source path: String, environment: Environment) throws -> ConfigSourceSettings {
        var source = ConfigSourceSettings(source: path)
        source.fallbackURL = configFallback ?? environment.value("PREFETCH_CONFIG_FALLBACK")
        if let seconds = try environment.integer(
            configInterval, "PREFETCH_CONFIG_INTERVAL", flag: "--config-interval", in: 1...Int.max, unit: "second")
        {
            source.interval = .seconds(seconds)
        }
        if let seconds = try environment.integer(configFatigue, "PREFETCH_CONFIG_FATIGUE", flag: "--config-fatigue", in: 0...Int.max) {
            source.fatigueWindow = .seconds(seconds)
        }
        source.stateDirectory = stateDirectory ?? environment.value("PREFETCH_STATE_DIR")
        return source
    }
}

extension Environment {
    /// A whole number from `given` (the flag's value) or else variable `name`, within `range`: nil when neither is
    /// set. A variable that is not a whole number, or a value outside `range`, is a `ValidationError` naming `flag`
    /// and the value (`--port 70000 must be between 0 and 65535`, `--config-interval 0 must be at least 1 second`).
    func integer(_ given: Int?, _ name: String, flag: String, in range: ClosedRange<Int>, unit: String? = nil) throws -> Int? {
        guard let value = try given ?? integer(name) else { return nil }
        guard range.contains(value) else {
            let bound =
                range.upperBound == Int.max
                ? "must be at least \(range.lowerBound)" : "must be between \(range.lowerBound) and \(range.upperBound)"
            throw ValidationError("\(flag) \(value) \(bound)\(unit.map { " \($0)" } ?? "")")
        }
        return value
    }
}
