public import Foundation

/// What `pageWillOpen` got from the service for one page open. The page opens whatever it says.
public struct PageOpen: Sendable {
    /// How the trigger went.
    public enum Outcome: Sendable, Equatable {
        /// The service is prefetching the page: `ticket` and `readKey` are set.
        case triggered
        /// The service answered without prefetching, with its error code: `no-config` (the page is not in its
        /// config), `rate-limited`, `invalid-url`, ...
        case refused(code: String)
        /// No usable answer within the budget.
        case failed(PrefetchShellFailure)
        /// Not sent: the circuit breaker is open.
        case skipped
    }

    /// One of the page's requests the service is prefetching.
    public struct Interface: Sendable, Equatable {
        /// Its name in the service's config.
        public var name: String
        /// The api URL as the config writes it (what the page asks the service for).
        public var api: String
        /// The HTTP method.
        public var method: String
        /// The request URL the service composed from the page URL (its host is the cookies' host).
        public var url: String
    }

    /// The page URL as opened.
    public let page: URL
    /// How the trigger went.
    public let outcome: Outcome
    /// The ticket, for the shell's own reads (never hand it to the page or put it in a URL).
    public let ticket: String?
    /// The key the page reads its data with, when triggered. Hand it over with ``PrefetchShell/documentStartScript(for:)``.
    public let readKey: String?
    /// When the service stops accepting the read key.
    public let readKeyExpiresAt: Date?
    /// The requests being prefetched, in config order.
    public let interfaces: [Interface]
    /// The warm renderer leased with the open, when a profile was configured and the service had one.
    public let renderer: RendererLease?
    /// Why no renderer was leased, when one was asked for and the service answered (`unknown-profile`,
    /// `caller-limit`, `timeout`, ...).
    public let rendererError: String?

    /// The credentials the trigger carried: the shell's reads of this open present the very same ones, which is
    /// what the service checks them against.
    let credentials: Credentials
}

/// A renderer leased from the service's warm pool.
public struct RendererLease: Sendable, Equatable {
    /// The lease id: the capability to release it.
    public var id: String
    /// The renderer profile.
    public var profile: String
    /// Whether an idle pre-created renderer was handed out.
    public var warm: Bool
}

/// Why a call to the service got no usable answer. A bounded set, safe as a metric label.
public enum PrefetchShellFailure: String, Error, Sendable, Equatable, CaseIterable {
    /// No answer within the call's budget.
    case timeout
    /// The service could not be reached (connection refused, reset, DNS, TLS).
    case unreachable
    /// The service answered with a 5xx (overloaded, not ready, shutting down).
    case serviceError = "service-error"
    /// The service answered something the page API does not describe.
    case badAnswer = "bad-answer"
}

/// What `logout` did.
public struct LogoutResult: Sendable, Equatable {
    /// Stored responses the service dropped, over every identity invalidated.
    public var dropped: Int
    /// Identities invalidated: the one of the cookies given, and each other one this shell triggered with since the
    /// last logout.
    public var identities: Int
    /// Of those, the invalidations that did not complete (no answer within the budget, or an error); call `logout`
    /// again for them while the cookies are still at hand.
    public var failed: Int
}

/// What the shell has done since it was made: counts an app can report or assert on.
public struct PrefetchShellCounters: Sendable, Equatable {
    /// Triggers (or opens) sent to the service.
    public var triggersSent = 0
    /// Of those, the ones the service accepted (a ticket and a read key came back).
    public var triggersAccepted = 0
    /// Of those, the ones the service answered without a prefetch (no config for the page, rate limited, ...).
    public var triggersRefused = 0
    /// Of those, the ones with no usable answer within the budget.
    public var triggersFailed = 0
    /// Calls of any kind not sent because the breaker was open.
    public var skippedByBreaker = 0
    /// Read keys handed to a page (document-start scripts produced).
    public var readKeysHandedOver = 0
    /// Times the breaker opened.
    public var breakerOpenings = 0
}

/// The circuit breaker's state, as the app sees it.
public enum PrefetchShellBreakerState: Sendable, Equatable {
    /// Calls go through.
    case closed
    /// Calls are skipped (the service failed repeatedly).
    case open
    /// One probe call is in flight after the cool-down.
    case halfOpen
}

extension PageOpen {
    /// Whether `text` has the shape of a ticket id (the service's `RandomID`: 22 URL-safe base64 characters).
    static func isWellFormedTicket(_ text: String) -> Bool { isURLSafeBase64(text, count: 22) }

    /// Whether `text` has the shape of a read key (64 URL-safe base64 characters).
    static func isWellFormedReadKey(_ text: String) -> Bool { isURLSafeBase64(text, count: 64) }

    private static func isURLSafeBase64(_ text: String, count: Int) -> Bool {
        text.utf8.count == count
            && text.utf8.allSatisfy { byte in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            }
    }
}

/// The user's credentials as the service sees them: the cookies for the configured api hosts (`jar`, sent with the
/// trigger so each upstream request gets only its URL's; `cookie`, all of them as one value in the jar's order, is
/// what the shell presents when it reads its tickets or logs out), and an `Authorization` value when the app has one.
struct Credentials: Hashable, Sendable {
    var cookie: String?
    var authorization: String?
    var jar: [JarCookie] = []

    static let none = Credentials(cookie: nil, authorization: nil)

    /// The header fields, in a fixed order.
    var fields: [(name: String, value: String)] {
        [("Cookie", cookie), ("Authorization", authorization)].compactMap { name, value in value.map { (name, $0) } }
    }

    var isEmpty: Bool { fields.isEmpty }
}

/// One cookie of the jar a trigger carries: what the service needs to choose it per request URL.
struct JarCookie: Hashable, Sendable {
    var name: String
    var value: String
    /// The host (host-only) or the domain, lowercased, without a leading dot.
    var domain: String
    var hostOnly: Bool
    var path: String
    var secure: Bool
    /// Seconds since 1970; nil for a session cookie.
    var expires: Double?
    /// `strict`, `lax` or `none`; nil when the store does not say (the service then counts it as `lax`).
    var sameSite: String? = nil
}
