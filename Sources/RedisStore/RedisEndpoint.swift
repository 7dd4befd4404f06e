import PrefetchCore

/// Why a `RedisStore` could not be created. `code` is from a small fixed vocabulary, safe as a metric label.
public struct RedisStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A bounded code; today only `invalid-url`.
    public var code: String
    /// A human explanation naming the offending input (credentials, if any, are never repeated).
    public var message: String

    /// Creates an error. Callers must keep `code` to a bounded vocabulary.
    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    /// Code of the error for a Redis URL that cannot be used.
    public static let invalidURLCode = "invalid-url"

    /// A `description` of the form `code: message`.
    public var description: String { "\(code): \(message)" }
}

/// What a connection sends in `AUTH`: a password, and the ACL user it belongs to (none for the legacy
/// `requirepass` form). Its `description` and its mirror never show the password.
public struct RedisCredentials: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The ACL user (`AUTH user password`), or `nil` for the `default` user (`AUTH password`).
    public let user: String?
    /// The password, sent only in `AUTH`.
    public let password: String

    /// Credentials for `user` (or the `default` user when nil).
    public init(user: String? = nil, password: String) {
        self.user = user
        self.password = password
    }

    /// The `AUTH` command that presents these credentials.
    var authCommand: [String] {
        if let user { ["AUTH", user, password] } else { ["AUTH", password] }
    }

    /// How the user is named in messages: `user 'name'` or `the default user`.
    var who: String {
        user.map { "user '\($0)'" } ?? "the default user"
    }

    /// `user:***` (or `:***`), never the password.
    public var description: String { "\(user ?? ""):***" }

    /// Shows the user and `***`, so `dump` and debuggers do not reveal the password either.
    public var customMirror: Mirror {
        Mirror(self, children: ["user": user as Any, "password": "***"])
    }

    /// `text` with every occurrence of the password replaced by `***` (for messages that came from elsewhere).
    func redacting(_ text: String) -> String {
        password.isEmpty ? text : text.replacing(password, with: "***")
    }
}

/// Where the Redis server is: a host, a TCP port, a logical database and optional credentials, parsed from
/// `redis://[user[:password]@]host[:port][/db]`. Its `description` never shows the password.
public struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The port used when the URL names none.
    public static let defaultPort = 6379

    /// A host name, an IPv4 address or an IPv6 address (without brackets).
    public let host: String
    /// The TCP port, 1...65535.
    public let port: Int
    /// The logical database selected on every connection (`SELECT`), 0 when the URL has no path.
    public let database: Int
    /// Sent in `AUTH` on every connection before anything else, when set.
    public let credentials: RedisCredentials?

    /// Creates an endpoint from its parts.
    public init(
        host: String, port: Int = RedisEndpoint.defaultPort, database: Int = 0, credentials: RedisCredentials? = nil
    ) {
        self.host = host
        self.port = port
        self.database = database
        self.credentials = credentials
    }

    /// Parses `redis://[user[:password]@]host[:port][/db]` (see `RedisURL` for the rules). IPv6 hosts go in brackets
    /// (`redis://[::1]:6379`). `redis://:password@host` authenticates as the `default` user (the `requirepass` form),
    /// `redis://user:password@host` as an ACL user; user and password are percent-decoded (`%40` for `@`, `%3A` for
    /// `:`). A user without a password, query strings and fragments are rejected, and so is anything else that is not
    /// exactly this form; the error names the URL (with any password masked) and what is wrong.
    public init(url: String) throws(RedisStoreError) {
        let parsed = try RedisURL(url, as: .redis)
        self.init(
            host: parsed.addresses[0].host, port: parsed.addresses[0].port, database: parsed.database,
            credentials: parsed.credentials)
    }

    /// `redis://host:port/db`, or `redis://user:***@host:port/db` with credentials: never the password.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let shownCredentials = credentials.map { "\($0)@" } ?? ""
        return "redis://\(shownCredentials)\(shownHost):\(port)/\(database)"
    }

    /// `host:port`, for messages that should name the server but not the user.
    var address: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
