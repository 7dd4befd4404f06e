import ConfigUpdater
import PrefetchDNS
import PrefetchFetcher
import RendererPool

/// Everything `serve` can be told, with production defaults. Tests build the same application with test
/// values (port 0, small budgets).
public struct ServiceSettings: Sendable {
    /// Address to listen on. Default `127.0.0.1`; a container sets `0.0.0.0`.
    public var host: String = "127.0.0.1"
    /// Port to listen on; `0` picks a free one. Default 8080.
    public var port: Int = 8080
    /// Path of the prefetch config (as given to `serve`, for messages).
    public var configPath: String = "configs/prefetch.json"
    /// Where the config comes from and how it is followed (file or URL, fallback URL, interval, fatigue
    /// window, state directory for the last-good copy). `nil`: a fixed config given to `buildApplication`.
    public var configSource: ConfigSourceSettings?
    /// `redis://host:port[/db]`: share stored responses, single flights and tickets with other replicas
    /// through Redis. `nil`: the in-memory store (the default).
    public var storeURL: String?
    /// Byte budget of the in-memory response store. Default 64 MiB.
    public var storeBytes: Int = 64 * 1024 * 1024
    /// Request headers that carry a user's credentials: forwarded upstream per the credentials rule and hashed
    /// into the identity that keys stored responses.
    public var credentialHeaders: [String] = ["Cookie", "Authorization"]
    /// Extra origins allowed to read the data endpoints cross-origin, besides the origins of the config's pages.
    /// `*` allows any origin.
    public var corsOrigins: [String] = []
    /// The longest `wait` honoured on any endpoint. Default 10 s.
    public var maximumWait: Duration = .seconds(10)
    /// How long a failed fetch is remembered (and shared) before the next trigger fetches again. Default 5 s.
    public var negativeTTL: Duration = .seconds(5)
    /// After this age an unfinished flight may be taken over by another trigger. Default 10 s.
    public var lockAge: Duration = .seconds(10)
    /// The largest request body accepted by the API. Default 64 KiB.
    public var maximumRequestBody: Int = 64 * 1024
    /// How many tickets are remembered at most; the oldest go first. Default 100,000.
    public var ticketCapacity: Int = 100_000
    /// The largest upstream response kept. Default 2 MiB.
    public var maximumResponseBytes: Int = 2 * 1024 * 1024
    /// DNS prefetch and the optional HTTPDNS resolver for api hosts.
    public var dns = DNSSettings()
    /// The upstream transport (its `caBundlePath` adds a CA bundle for private upstreams).
    public var fetcher = FetcherConfiguration()
    /// The renderer pool's named profiles (`main` for first-party pages, `plain` for third-party ones).
    public var renderers: [String: RendererProfile] = RendererSettings.defaultProfiles
    /// How long graceful shutdown may take before in-flight work is cancelled. Default 10 s.
    public var shutdownGrace: Duration = .seconds(10)

    /// The defaults.
    public init() {}
}
