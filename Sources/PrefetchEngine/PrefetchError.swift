public import PrefetchCore

/// What the engine refuses, and why. Each case has a stable, bounded `code` (a metric label and the wire
/// `error` code) and a `message` naming the offending input; the HTTP layer maps cases to statuses in one place.
public enum PrefetchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No valid prefetch config is loaded.
    case notReady(reason: String)
    /// The page URL is not an absolute http(s) URL the matcher accepts.
    case invalidPageURL(message: String)
    /// The page URL is longer than the service accepts.
    case pageURLTooLong(length: Int, limit: Int)
    /// No config entry matches the page.
    case noConfig(message: String)
    /// This caller triggered more than its rate allows.
    case rateLimited(retryAfter: Duration)
    /// Responses in flight fill their byte budget; try again shortly.
    case overloaded(retryAfter: Duration)
    /// The service is shutting down.
    case shuttingDown
    /// The ticket is unknown, expired, or not well formed.
    case unknownTicket(id: String)
    /// The ticket was triggered with credentials and the reader presented none.
    case credentialsRequired
    /// The reader presented credentials other than the ticket's.
    case identityMismatch
    /// A read key that is malformed, forged, expired, or for a ticket that no longer exists.
    case invalidReadKey(reason: String)
    /// A read key used from an origin other than the one it was issued for.
    case originMismatch(origin: String?)
    /// A browser request from an origin that is neither the page's own, nor one of its config entry's
    /// `partnerOrigins`, nor a `--cors-origin`: a page origin acts on its own pages' data only.
    case pageOriginNotAllowed(origin: String, page: String)

    /// The stable code.
    public var code: FailureCode {
        switch self {
        case .notReady: .notReady
        case .invalidPageURL: .invalidURL
        case .pageURLTooLong: .urlTooLong
        case .noConfig: .noConfig
        case .rateLimited: .rateLimited
        case .overloaded: .overloaded
        case .shuttingDown: .shutdown
        case .unknownTicket: .unknownTicket
        case .credentialsRequired: .credentialsRequired
        case .identityMismatch: .identityMismatch
        case .invalidReadKey: .invalidReadKey
        case .originMismatch: .originMismatch
        case .pageOriginNotAllowed: .originNotAllowed
        }
    }

    /// A message naming the input and what was wrong with it (never a credential or a whole ticket).
    public var message: String {
        switch self {
        case .notReady(let reason): reason
        case .invalidPageURL(let message): message
        case .pageURLTooLong(let length, let limit): "the page URL has \(length) bytes; the limit is \(limit)"
        case .noConfig(let message): message
        case .rateLimited(let retry): "too many triggers from this caller; retry in \(retry.wholeSecondsRoundedUp) s"
        case .overloaded(let retry): "responses in flight fill the service's budget; retry in \(retry.wholeSecondsRoundedUp) s"
        case .shuttingDown: "the service is shutting down"
        case .unknownTicket(let id): "the ticket \(quoted(id, limit: 40)) is unknown or expired"
        case .credentialsRequired: "the ticket was triggered with credentials: present the same credentials, or a read key"
        case .identityMismatch: "the credentials of this request are not those the ticket was triggered with"
        case .invalidReadKey(let reason): "the read key is not valid: \(reason)"
        case .originMismatch(let origin):
            origin.map { "the read key was not issued for the origin \(quoted($0, limit: 80))" }
                ?? "a read key is only accepted from the page's origin (the request has no Origin)"
        case .pageOriginNotAllowed(let origin, let page):
            "the origin \(quoted(origin, limit: 80)) may not act on the data of a page of \(quoted(page, limit: 80)); "
                + "a page's data is for its own origin and the partnerOrigins its config entry names"
        }
    }

    /// How long the caller should wait before trying again, for refusals that pass.
    public var retryAfter: Duration? {
        switch self {
        case .rateLimited(let retry), .overloaded(let retry): retry
        default: nil
        }
    }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }
}

extension Duration {
    /// Whole seconds, rounded up, at least 1 (a `Retry-After` value).
    public var wholeSecondsRoundedUp: Int64 {
        max(1, (milliseconds + 999) / 1000)
    }
}

/// Quotes untrusted text for a message, bounded in length.
public func quoted(_ text: String, limit: Int = 200) -> String {
    var cut = ""
    var count = 0
    for character in text.unicodeScalars {
        if count == limit {
            cut += "..."
            break
        }
        switch character {
        case "\"": cut += "\\\""
        case "\\": cut += "\\\\"
        case _ where character.value < 0x20 || character.value == 0x7F:
            cut += "\\u" + String(repeating: "0", count: 4 - String(character.value, radix: 16).count) + String(character.value, radix: 16)
        default: cut.unicodeScalars.append(character)
        }
        count += 1
    }
    return "\"" + cut + "\""
}
