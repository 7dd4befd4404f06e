import PrefetchCore

/// A reply from Redis (RESP2), as the pool and the subscriber read it.
enum RedisValue: Sendable, Hashable {
    /// A bulk string (`$`), binary-safe.
    case string([UInt8])
    /// An integer (`:`).
    case integer(Int64)
    /// An array (`*`), possibly nested.
    case array([RedisValue])
    /// A null bulk string (`$-1`) or a null array (`*-1`).
    case null
    /// A simple string (`+`), such as `OK` or `PONG`.
    case status(String)
    /// An error reply (e.g. a script error): the server answered, so this is not an outage.
    case error(String)

    var text: String? {
        switch self {
        case .string(let bytes): String(decoding: bytes, as: UTF8.self)
        case .status(let text): text
        default: nil
        }
    }
}

/// Why a call reached no answer from Redis.
struct RedisCallError: Error, Sendable, Hashable, CustomStringConvertible {
    enum Kind: Sendable, Hashable {
        /// Redis is known to be down and the reconnect backoff has not passed: no attempt was made.
        case unavailable
        /// Connecting failed.
        case connect
        /// The connection broke (reset, closed, or timed out) during a command.
        case io
        /// The connection broke in a way that means the command never ran (the server had closed it), so
        /// retrying once on a fresh connection is safe.
        case closed
        /// The server refused the credentials (`WRONGPASS`), or wants some and got none (`NOAUTH`). Like an
        /// outage, the store serves from its fallback and retries on the reconnect backoff.
        case auth
    }

    var kind: Kind
    var message: String

    var description: String { message }

    static let unavailable = RedisCallError(kind: .unavailable, message: "Redis is down; waiting to reconnect")
}

extension RedisCallError {
    /// The error `reply` means when it is `NOAUTH` (the server at `address` wants credentials the URL does not give):
    /// the one place that reply is recognised, for both transports and the handshake. Nil for any other reply.
    init?(missingCredentials reply: RedisValue, at address: String) {
        guard case .error(let message) = reply, message.hasPrefix("NOAUTH") else { return nil }
        self.init(kind: .auth, message: "Redis at \(address) wants credentials the store URL does not give: \(message)")
    }
}

/// Whole milliseconds in `duration`, rounded up, at least 1 (Redis rejects a zero expiry): how the store hands every
/// expiry and timeout to Redis or hiredis, through PrefetchCore's `Duration.wholeMillisecondsRoundedUp`.
func milliseconds(_ duration: Duration) -> Int {
    max(1, Int(duration.wholeMillisecondsRoundedUp))
}
