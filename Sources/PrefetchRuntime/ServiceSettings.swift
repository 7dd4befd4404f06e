public import ConfigUpdater
public import PrefetchDNS
public import PrefetchEngine
public import PrefetchFetcher
public import PrefetchService
import RedisStore
public import RendererPool
public import ResourceProvider
public import Telemetry

/// Everything `serve` can be told, with production defaults: each component's own settings, which the
/// composition root (``buildApplication(settings:config:registry:logger:onServerRunning:onAdminRunning:clock:tracer:)``)
/// hands to the component it configures. Tests build the same application with test values (port 0, small budgets).
public struct ServiceSettings: Sendable {
    /// The engine's: credentials, admission, waits, TTLs, budgets.
    public var engine = EngineSettings()
    /// The two HTTP listeners'.
    public var listeners = ListenerSettings()
    /// Where stored responses live.
    public var store = StoreSettings()
    /// Path of the prefetch config (as given to `serve`, for messages).
    public var configPath: String = "configs/prefetch.json"
    /// Where the config comes from and how it is followed (file or URL, fallback URL, interval, fatigue
    /// window, state directory for the last-good copy). `nil`: a fixed config given to `buildApplication`.
    public var configSource: ConfigSourceSettings?
    /// DNS prefetch and the optional HTTPDNS resolver for api hosts.
    public var dns = DNSSettings()
    /// The upstream transport (its `caBundlePath` adds a CA bundle for private upstreams).
    public var fetcher = FetcherConfiguration()
    /// The renderer pool's named profiles (`main` for first-party pages, `plain` for third-party ones).
    public var renderers: [String: RendererProfile] = RendererSettings.defaultProfiles
    /// How long graceful shutdown may take before in-flight work is cancelled. Default 10 s.
    public var shutdownGrace: Duration = .seconds(10)
    /// The offline-package provider's manifest and store (`--resources`); nil: the empty map, version "0".
    public var resources: ResourceSettings?
    /// Where traces and metrics are also exported over OTLP/HTTP (``OTLPExport``), read from the environment when
    /// asked for (`--otlp`); nil, the default: no export.
    public var otlp: OTLPConfiguration?

    /// The defaults.
    public init() {}
}

/// Where stored responses, single flights and shared tickets live: this process's memory, or Redis.
public struct StoreSettings: Sendable {
    /// `redis://[user[:password]@]host:port[/db]`: share stored responses, single flights and tickets with other
    /// replicas through Redis; `redis-sentinel://[user[:password]@]host:port[,host:port...]/primary-name[/db]`: the
    /// same, on the primary the sentinels name, followed through failovers; `redis-cluster://[user[:password]@]host:port[,...]`:
    /// the same, sharded over a Redis Cluster's primaries. `nil`: the in-memory store (the default).
    public var url: String?
    /// Pooled connections to Redis (NIO channels on the event loops) when `url` is set; `nil`: the Redis store's
    /// default. Calls are pipelined behind whatever is outstanding on a connection, so a few carry the load.
    public var connections: Int?
    /// Byte budget of the in-memory response store. Default 64 MiB.
    public var bytes: Int = 64 * 1024 * 1024
    /// After this age an unfinished flight may be taken over by another trigger. Default 10 s.
    public var lockAge: Duration = .seconds(10)

    /// The defaults.
    public init() {}

    /// Why `url` cannot be a store URL (anything but the in-memory store), by the Redis store's rules and without
    /// connecting, with any password masked; nil when it can. What a bad `--store` is told before the service starts.
    public static func problem(withURL url: String) -> String? {
        do {
            try RedisStore.check(url: url)
            return nil
        } catch {
            return error.message
        }
    }
}
