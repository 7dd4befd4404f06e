/// Why something failed or was refused: the one vocabulary of failure codes, in one casing (kebab-case). A code is
/// the `error` of every JSON error answer, the `X-Prefetch-Reason` of a miss, a failure kept in the store (and in
/// Redis), a metric label and a log field, so the set is closed: a new code is a new case here.
public enum FailureCode: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    // An upstream request (the fetcher's `FetchError`).
    /// The request's timeout elapsed (including time spent queued); also a renderer that was not free in time.
    case timeout
    /// The host name could not be resolved.
    case dns
    /// No connection could be established (refused, unreachable).
    case connect
    /// TLS handshake or certificate verification failed.
    case tls
    /// The connection broke mid-exchange: reset, nothing received, or a body shorter than announced.
    case reset
    /// A body over its limit: an upstream response over the fetcher's cap or the store's budget, or a request body.
    case tooLarge = "too-large"
    /// The upstream did not speak valid HTTP, or the URL's protocol is not http(s).
    case `protocol`
    /// The calling task was cancelled.
    case cancelled
    /// The service (or its fetcher) is shutting down.
    case shutdown
    /// Anything else an upstream request can fail of.
    case other

    // A stored outcome.
    /// The upstream answered 5xx: kept as a failure for the negative TTL.
    case upstream5xx = "upstream-5xx"
    /// The response may not be shared: it is kept under the ticket's own key.
    case `private`
    /// The store could not hold the response even empty.
    case storeFull = "store-full"
    /// A dependent request could not be composed: an input failed or did not arrive.
    case dependencyFailed = "dependency-failed"
    /// A dependent's input is not JSON.
    case dependencyNotJSON = "dependency-not-json"
    /// A dependent's input lacks a value it needs, or has one of the wrong kind.
    case dependencyValue = "dependency-value"

    // A data read that found no response (a miss).
    /// The response was still in flight when the read's wait ended.
    case pending
    /// Nothing was prefetched for this interface and these credentials.
    case notTriggered = "not-triggered"
    /// The response's TTL passed before it was read.
    case expired
    /// A no-store response was already handed out.
    case consumed
    /// The store dropped the response to stay within its budget, or a config update removed its interface.
    case evicted
    /// An invalidation dropped the response.
    case invalidated
    /// The page has no interface with the given name or api.
    case unknownAPI = "unknown-api"
    /// The name or api matches more than one interface.
    case ambiguousAPI = "ambiguous-api"

    // The engine's refusals (`PrefetchError`).
    /// No valid config is loaded yet (or the canary has no candidate state to act on).
    case notReady = "not-ready"
    /// The page URL is not an absolute http(s) URL the service accepts.
    case invalidURL = "invalid-url"
    /// The page URL is over the length limit.
    case urlTooLong = "url-too-long"
    /// No config entry matches the page.
    case noConfig = "no-config"
    /// Too many triggers from this caller.
    case rateLimited = "rate-limited"
    /// Responses in flight fill the service's budget.
    case overloaded
    /// The ticket is unknown or expired.
    case unknownTicket = "unknown-ticket"
    /// The ticket was triggered with credentials this request does not present.
    case credentialsRequired = "credentials-required"
    /// This request's credentials are not the ticket's.
    case identityMismatch = "identity-mismatch"
    /// The read key is not valid.
    case invalidReadKey = "invalid-read-key"
    /// The request's origin is not the ticket's page origin.
    case originMismatch = "origin-mismatch"
    /// The origin may not use this surface or this page's data.
    case originNotAllowed = "origin-not-allowed"

    // The HTTP surfaces' own refusals.
    /// No endpoint at this path.
    case notFound = "not-found"
    /// The endpoint does not answer this method.
    case methodNotAllowed = "method-not-allowed"
    /// The method is none this service implements (RFC 9110's, `PATCH` and `QUERY`), on any path.
    case notImplemented = "not-implemented"
    /// The request's media type is not JSON.
    case unsupportedMediaType = "unsupported-media-type"
    /// The request body did not arrive within the body timeout.
    case bodyTimeout = "body-timeout"
    /// The body is not valid JSON, or not the expected shape.
    case badJSON = "bad-json"
    case badBody = "bad-body"
    /// The request is not an HTTP/1.1 message the parser reads (a malformed request line or header field).
    case malformedRequest = "malformed-request"
    case badTrigger = "bad-trigger"
    case badHeaders = "bad-headers"
    case badHost = "bad-host"
    case badInterface = "bad-interface"
    case badSurrogateKey = "bad-surrogate-key"
    case missingURL = "missing-url"
    case missingPage = "missing-page"
    case missingTarget = "missing-target"
    case ambiguousTarget = "ambiguous-target"
    case invalidWait = "invalid-wait"
    case invalidLimit = "invalid-limit"
    case invalidMethod = "invalid-method"
    /// The operator surface was asked without its bearer token.
    case adminUnauthorized = "admin-unauthorized"
    /// The operator surface was asked under a host name other than its own.
    case hostNotAllowed = "host-not-allowed"
    /// The service runs a fixed config: nothing to check, promote or roll back.
    case fixedConfig = "fixed-config"
    /// No canary is running.
    case noCanary = "no-canary"
    /// A store invalidation could not reach the shared store.
    case storeUnavailable = "store-unavailable"
    /// A renderer lease or profile the service does not know.
    case unknownLease = "unknown-lease"
    case unknownProfile = "unknown-profile"
    /// The caller holds its most renderers.
    case callerLimit = "caller-limit"
    /// A renderer could not be created.
    case createFailed = "create-failed"

    public var description: String { rawValue }

    /// A code as stored by a replica of an earlier version (snake_case), read in today's spelling; nil when unknown.
    public init?(stored text: String) {
        if let code = FailureCode(rawValue: text) {
            self = code
        } else if let code = FailureCode(rawValue: String(text.map { $0 == "_" ? "-" : $0 })) {
            self = code
        } else {
            return nil
        }
    }
}
