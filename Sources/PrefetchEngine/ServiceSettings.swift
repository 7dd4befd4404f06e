public import ConfigUpdater
public import PrefetchDNS
public import PrefetchFetcher
public import PrefetchStore
public import RendererPool

/// Everything `serve` can be told, with production defaults. Tests build the same application with test
/// values (port 0, small budgets).
public struct ServiceSettings: Sendable {
    /// Address of the page surface (what shells and pages call). Default `127.0.0.1`; a container sets `0.0.0.0`.
    public var host: String = "127.0.0.1"
    /// Port of the page surface; `0` picks a free one. Default 8080.
    public var port: Int = 8080
    /// Address of the operator surface (`/ui`, debug, plan, config, renderer stats, `/metrics`). Default
    /// `127.0.0.1`: operators reach it from the host, never from where pages are.
    public var adminHost: String = "127.0.0.1"
    /// Port of the operator surface; `0` picks a free one. Default 8081.
    public var adminPort: Int = 8081
    /// When set, every operator request must carry `Authorization: Bearer <token>` (compared in constant time).
    public var adminToken: String?
    /// Path of the prefetch config (as given to `serve`, for messages).
    public var configPath: String = "configs/prefetch.json"
    /// Where the config comes from and how it is followed (file or URL, fallback URL, interval, fatigue
    /// window, state directory for the last-good copy). `nil`: a fixed config given to `buildApplication`.
    public var configSource: ConfigSourceSettings?
    /// `redis://[user[:password]@]host:port[/db]`: share stored responses, single flights and tickets with other
    /// replicas through Redis. `nil`: the in-memory store (the default).
    public var storeURL: String?
    /// Connections to Redis (each with its own thread) when `storeURL` is set; `nil`: the Redis store's default.
    /// Calls that meet a busy connection are pipelined into its next round trip, so a few connections carry the load.
    public var storeConnections: Int?
    /// Byte budget of the in-memory response store. Default 64 MiB.
    public var storeBytes: Int = 64 * 1024 * 1024
    /// The secret identities are keyed with (HMAC). Default: a random key for this process; replicas sharing a
    /// store must share one (`--identity-key`).
    public var identityKey: IdentityKey = .random()
    /// Request headers that carry a user's credentials: forwarded upstream per the credentials rule and hashed
    /// into the identity that keys stored responses.
    public var credentialHeaders: [String] = ["Cookie", "Authorization"]
    /// Extra origins allowed to call the page surface cross-origin, besides the origins of the config's pages.
    /// `*` lets any origin read, without credentials.
    public var corsOrigins: [String] = []
    /// The longest `wait` honoured on any endpoint. Default 10 s.
    public var maximumWait: Duration = .seconds(10)
    /// How long a failed fetch is remembered (and shared) before the next trigger fetches again. Default 5 s.
    public var negativeTTL: Duration = .seconds(5)
    /// After this age an unfinished flight may be taken over by another trigger. Default 10 s.
    public var lockAge: Duration = .seconds(10)
    /// The largest request body accepted by the API. Default 64 KiB.
    public var maximumRequestBody: Int = 64 * 1024
    /// The longest page URL accepted (bytes). Default 8 KiB.
    public var maximumPageURLBytes: Int = 8 * 1024
    /// How many tickets are remembered at most; the oldest go first. Default 100,000.
    public var ticketCapacity: Int = 100_000
    /// Bytes tickets may hold in this process (page URL, names, key digests, timings); the oldest go first.
    /// Default 16 MiB.
    public var ticketBytes: Int = 16 * 1024 * 1024
    /// How long a read key handed to a page stays valid (capped by its ticket's lifetime). Default 60 s.
    public var readKeyLifetime: Duration = .seconds(60)
    /// Triggers one identity may make per second, sustained. `0` turns every trigger rate limit off. Default 10.
    public var triggerRate: Double = 10
    /// Triggers one identity may make in a burst. Default 40.
    public var triggerBurst: Int = 40
    /// Triggers one client address may make per second, whatever credentials it sends (credentials are only
    /// claims: a client inventing a cookie per request is still one address). `nil`: 10 x `triggerRate`.
    public var addressTriggerRate: Double?
    /// Triggers one client address may make in a burst. `nil`: 10 x `triggerBurst`.
    public var addressTriggerBurst: Int?
    /// The largest upstream response kept. Default 2 MiB.
    public var maximumResponseBytes: Int = 2 * 1024 * 1024
    /// Bytes all upstream responses still being received may hold together. A transfer that would grow past it
    /// fails with `too-large`, and triggers answer `503 overloaded` while it is nearly full. Default 64 MiB.
    public var inFlightBytes: Int = 64 * 1024 * 1024
    /// How long a connection may stay idle, and the longest a request head may take to arrive. Default 30 s.
    public var idleTimeout: Duration = .seconds(30)
    /// The longest a request body may take to arrive once its head is in, on every route of both listeners; a
    /// later body ends its connection (`408 body-timeout` unless the route answered already). Default 10 s.
    public var bodyTimeout: Duration = .seconds(10)
    /// Client connections the page listener holds open at once; more are closed as they arrive. Keep it under
    /// the process's open-file limit, less what upstream and Redis connections need. Default 4096.
    public var maxConnections: Int = 4096
    /// Client connections the operator listener holds open at once; more are closed as they arrive. Default 64.
    public var adminMaxConnections: Int = 64
    /// DNS prefetch and the optional HTTPDNS resolver for api hosts.
    public var dns = DNSSettings()
    /// The upstream transport (its `caBundlePath` adds a CA bundle for private upstreams).
    public var fetcher = FetcherConfiguration()
    /// The renderer pool's named profiles (`main` for first-party pages, `plain` for third-party ones).
    public var renderers: [String: RendererProfile] = RendererSettings.defaultProfiles
    /// Answer the hottest read (a ready entry through a data endpoint) on the event loop, without a hop to a task.
    /// Default on; off sends every request through the router.
    public var fastHandoff = true
    /// How long graceful shutdown may take before in-flight work is cancelled. Default 10 s.
    public var shutdownGrace: Duration = .seconds(10)

    /// The defaults.
    public init() {}
}
