public import Foundation

/// How a shell talks to the prefetch service.
public struct PrefetchShellConfiguration: Sendable {
    /// The service's page surface, e.g. `https://prefetch.example.com` (the operator surface is never called).
    public var service: URL

    /// The api URLs of the pages the shell opens, as the service's config names them in its interfaces (or their
    /// origins, e.g. `https://api.example.com`). The user's cookies that a browser would send to at least one of
    /// them (RFC 6265: domain, path, `Secure`, expiry) are the credentials the service fetches with, reads with and
    /// invalidates; no other cookie of the shell ever goes to the service. Empty: no cookies are sent at all.
    public var apiURLs: [URL]

    /// The renderer profile to lease a warm renderer of with each page open (`POST /v1/open`: the trigger and the lease
    /// in one round trip), or nil to only trigger (`POST /v1/prefetch`).
    public var rendererProfile: String?

    /// How long each kind of call may take before the shell gives up on it and goes on without the service.
    public var budgets: Budgets

    /// When the shell stops calling a failing service, and for how long.
    public var breaker: BreakerPolicy

    /// A configuration with the defaults: no renderer lease, the default budgets and breaker.
    public init(
        service: URL, apiURLs: [URL], rendererProfile: String? = nil, budgets: Budgets = Budgets(), breaker: BreakerPolicy = BreakerPolicy()
    ) {
        self.service = service
        self.apiURLs = apiURLs
        self.rendererProfile = rendererProfile
        self.budgets = budgets
        self.breaker = breaker
    }

    /// The most each call may take. A call that has not answered by then is abandoned (its request cancelled), counts
    /// as a failure, and is never retried.
    public struct Budgets: Sendable, Equatable {
        /// `pageWillOpen`: the trigger (or the open with a renderer lease). Keep it small: the shell opens the page
        /// when it returns.
        public var pageOpen: Duration
        /// `cookiesToSync`: the shell's reads of the page's replays, all of them together; each read asks the service
        /// to wait for a response still in flight for most of it.
        public var cookieSync: Duration
        /// `releaseRenderer`.
        public var release: Duration
        /// `logout`: each invalidation.
        public var logout: Duration

        /// 300 ms to open, 2 s to read the cookies, 1 s to release a renderer, 2 s for each invalidation at logout.
        public init(
            pageOpen: Duration = .milliseconds(300), cookieSync: Duration = .seconds(2), release: Duration = .seconds(1),
            logout: Duration = .seconds(2)
        ) {
            self.pageOpen = pageOpen
            self.cookieSync = cookieSync
            self.release = release
            self.logout = logout
        }
    }

    /// The circuit breaker: after `failureThreshold` consecutive failed calls (no answer within the budget, a
    /// transport error, a 5xx), every call but a logout is skipped for `coolDown`; then one probe call decides whether
    /// calls resume.
    public struct BreakerPolicy: Sendable, Equatable {
        /// Consecutive failures that open the breaker (at least 1).
        public var failureThreshold: Int
        /// How long an open breaker skips calls before it lets a probe through.
        public var coolDown: Duration

        /// 3 failures, 30 seconds.
        public init(failureThreshold: Int = 3, coolDown: Duration = .seconds(30)) {
            self.failureThreshold = failureThreshold
            self.coolDown = coolDown
        }
    }
}
