public import PrefetchStore

/// What the engine is told: credentials, admission, waits, TTLs and budgets, with production defaults. The
/// composition root's `ServiceSettings` (`PrefetchRuntime`) carries it beside the other components' settings.
public struct EngineSettings: Sendable {
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
    /// Upstream statuses that refuse the request itself rather than answer it: such an answer is kept for the page
    /// open that fetched it alone, never served to another caller from the store. Default: 400, 408, 413, 414, 429
    /// and 431 (a malformed or oversized request, a timeout or a rate limit of this one request; what another
    /// caller's request would get is not known from it). `prefetch serve --unshared-status` adds more.
    public var unsharedStatuses: Set<Int> = Self.refusalStatuses
    /// Whether the shells' webviews accept third-party cookies (Android's `setAcceptThirdPartyCookies(true)`): then a
    /// jar's `SameSite=None` cookies go to an api on another site than the page, as a browser that allows them
    /// sends them. Default false: across sites no cookie goes, as in a WKWebView (Intelligent Tracking
    /// Prevention), an Android WebView by default and Chromium as shipped. `prefetch serve --third-party-cookies`.
    public var thirdPartyCookies = false
    /// The statuses that are never shared whatever the settings say.
    public static let refusalStatuses: Set<Int> = [400, 408, 413, 414, 429, 431]
    /// The largest request body accepted by the page API. Default 256 KiB: a trigger or an open carries the user's
    /// cookie jar, and a browser keeps at least 50 cookies of 4,096 bytes for each domain (RFC 6265 section 6.1),
    /// so a jar of one domain's cookies at that size, in JSON, fits with the page URL and the other headers.
    public var maximumRequestBody: Int = 256 * 1024
    /// Bytes of request bodies the page listener may hold at once, over all its connections (bodies still arriving or
    /// being answered, each at most ``maximumRequestBody``), past each body's first 16 KiB (``BodyBudget/allowance``).
    /// A body that would pass it is `503 overloaded` with `Retry-After`, so thousands of connections each sending most
    /// of a body cannot take the service's memory. Default 64 MiB.
    public var requestBodyBytes: Int = 64 * 1024 * 1024
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

    /// The defaults.
    public init() {}
}
