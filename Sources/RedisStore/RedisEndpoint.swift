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

    /// Parses `redis://[user[:password]@]host[:port][/db]`. IPv6 hosts go in brackets (`redis://[::1]:6379`).
    /// `redis://:password@host` authenticates as the `default` user (the `requirepass` form),
    /// `redis://user:password@host` as an ACL user; user and password are percent-decoded (`%40` for `@`,
    /// `%3A` for `:`). A user without a password, query strings and fragments are rejected, and so is anything
    /// else that is not exactly this form; the error names the URL (with any password masked) and what is wrong.
    public init(url: String) throws(RedisStoreError) {
        func invalid(_ why: String) -> RedisStoreError {
            RedisStoreError(
                code: RedisStoreError.invalidURLCode,
                message: "invalid Redis URL '\(Self.masked(url))': \(why); expected redis://[user:password@]host[:port][/db]")
        }
        let scheme = "redis://"
        guard url.lowercased().hasPrefix(scheme) else { throw invalid("the scheme must be redis://") }
        var rest = Substring(url.dropFirst(scheme.count))

        // Everything up to the last `@` is user information: the host, port and database never contain one.
        var credentials: RedisCredentials?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let rawUser: Substring
            let rawPassword: Substring?
            if let colon = userInfo.firstIndex(of: ":") {
                rawUser = userInfo[..<colon]
                rawPassword = userInfo[userInfo.index(after: colon)...]
            } else {
                rawUser = userInfo
                rawPassword = nil
            }
            guard let user = Self.percentDecoded(rawUser) else {
                throw invalid("the user is not valid percent-encoded UTF-8")
            }
            guard let rawPassword, !rawPassword.isEmpty else {
                // The user is not repeated: a password written without its colon would be shown.
                throw invalid(user.isEmpty ? "the password is empty" : "a user without a password (for the default user write :password@)")
            }
            guard let password = Self.percentDecoded(rawPassword) else {
                throw invalid("the password is not valid percent-encoded UTF-8")
            }
            credentials = RedisCredentials(user: user.isEmpty ? nil : user, password: password)
        }
        if rest.contains("?") || rest.contains("#") { throw invalid("query strings and fragments are not supported") }

        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }

        let host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("the IPv6 address lacks its closing ]") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("unexpected '\(after)' after the IPv6 address") }
                portText = after.dropFirst()
            }
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw invalid("'\(host)' is not an IPv6 address")
            }
        } else {
            if let colon = rest.firstIndex(of: ":") {
                host = rest[..<colon]
                portText = rest[rest.index(after: colon)...]
            } else {
                host = rest
            }
            guard !host.isEmpty else { throw invalid("the host is missing") }
            guard host.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "." || $0 == "-" || $0 == "_" })
            else { throw invalid("'\(host)' is not a valid host name") }
        }

        var port = Self.defaultPort
        if let portText {
            guard let parsed = Self.decimal(portText), (1...65535).contains(parsed) else {
                throw invalid("the port '\(portText)' is not a number in 1...65535")
            }
            port = parsed
        }

        var database = 0
        if !path.isEmpty {
            guard let parsed = Self.decimal(path), parsed <= Int(Int32.max) else {
                throw invalid("the database '\(path)' is not a non-negative number")
            }
            database = parsed
        }
        self.init(host: String(host), port: port, database: database, credentials: credentials)
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

    private static func decimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }

    /// `text` with `%XX` escapes decoded; nil when an escape is malformed or the bytes are not UTF-8.
    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Hex.value(of:)), let low = iterator.next().flatMap(Hex.value(of:)) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The URL with its user information shown as `user:***` (the user as written), so a password never
    /// reaches a log or an error.
    static func masked(_ url: String, scheme: String = "redis://") -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        let hasScheme = url.lowercased().hasPrefix(scheme)
        let start = hasScheme ? url.index(url.startIndex, offsetBy: scheme.count) : url.startIndex
        let userInfo = url[start..<at]
        let user = userInfo.firstIndex(of: ":").map { userInfo[..<$0] } ?? ""
        return String(url[..<start]) + user + ":***" + String(url[at...])
    }
}
