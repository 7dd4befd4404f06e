/// Why a `RedisStore` could not be created. `code` is from a small fixed vocabulary, safe as a metric label.
public struct RedisStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A bounded code; today only `invalid_url`.
    public var code: String
    /// A human explanation naming the offending input (credentials, if any, are never repeated).
    public var message: String

    /// Creates an error. Callers must keep `code` to a bounded vocabulary.
    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    /// Code of the error for a Redis URL that cannot be used.
    public static let invalidURLCode = "invalid_url"

    /// A `description` of the form `code: message`.
    public var description: String { "\(code): \(message)" }
}

/// Where the Redis server is: a host, a TCP port and a logical database, parsed from `redis://host[:port][/db]`.
public struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The port used when the URL names none.
    public static let defaultPort = 6379

    /// A host name, an IPv4 address or an IPv6 address (without brackets).
    public let host: String
    /// The TCP port, 1...65535.
    public let port: Int
    /// The logical database selected on every connection (`SELECT`), 0 when the URL has no path.
    public let database: Int

    /// Creates an endpoint from its parts.
    public init(host: String, port: Int = RedisEndpoint.defaultPort, database: Int = 0) {
        self.host = host
        self.port = port
        self.database = database
    }

    /// Parses `redis://host[:port][/db]`. IPv6 hosts go in brackets (`redis://[::1]:6379`). Credentials, query
    /// strings and fragments are rejected, and so is anything else that is not exactly this form; the error names
    /// the URL (with any credentials masked) and what is wrong with it.
    public init(url: String) throws(RedisStoreError) {
        func invalid(_ why: String) -> RedisStoreError {
            RedisStoreError(
                code: RedisStoreError.invalidURLCode,
                message: "invalid Redis URL '\(Self.masked(url))': \(why); expected redis://host[:port][/db]")
        }
        let scheme = "redis://"
        guard url.lowercased().hasPrefix(scheme) else { throw invalid("the scheme must be redis://") }
        var rest = Substring(url.dropFirst(scheme.count))
        if rest.contains("@") { throw invalid("credentials in the URL are not supported") }
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
        self.init(host: String(host), port: port, database: database)
    }

    /// `redis://host:port/db`.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "redis://\(shownHost):\(port)/\(database)"
    }

    private static func decimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }

    /// The URL with anything before an `@` in its authority replaced, so a password never reaches a log.
    private static func masked(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        let scheme = "redis://"
        let prefix = url.lowercased().hasPrefix(scheme) ? String(url.prefix(scheme.count)) : ""
        return prefix + "***" + String(url[at...])
    }
}
