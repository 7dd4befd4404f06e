import PrefetchCore

/// A store URL taken apart: the one parser of `redis://`, `redis-cluster://` and `redis-sentinel://`, whose result
/// `RedisEndpoint(url:)`, `ClusterEndpoints(url:)` and `SentinelEndpoints(url:)` consume.
///
/// Every scheme is matched case-insensitively and shares the rest of the rules: everything up to the last `@` is the
/// user information, `:password` (the `default` user, the `requirepass` form) or `user:password` (an ACL user), both
/// percent-decoded (`%40` for `@`, `%3A` for `:`); a user without a password is refused. Query strings and fragments
/// are refused. An address is `host[:port]`, an IPv6 host in brackets (`[::1]:6379`), the port 1...65535 and by
/// default the scheme's (26379 for sentinels, 6379 otherwise). Then, by scheme:
/// - `redis://[user:password@]host[:port][/db]`: one address and an optional database.
/// - `redis-cluster://[user:password@]host:port[,host:port...]`: 1 to 16 addresses; no path (a cluster has database
///   0 only), a trailing `/` aside.
/// - `redis-sentinel://[user:password@]host:port[,host:port...]/primary-name[/db]`: 1 to 16 sentinel addresses, the
///   name the sentinels know the primary by (letters, digits, `.`, `_` and `-`) and an optional database.
///
/// A URL that breaks a rule is a ``RedisStoreError`` whose message names the URL with its password masked (see
/// ``masked(_:)``), says what is wrong and shows the form expected.
struct RedisURL: Sendable, Hashable {
    /// The three kinds of store URL.
    enum Scheme: String, Sendable, Hashable, CaseIterable {
        case redis = "redis://"
        case cluster = "redis-cluster://"
        case sentinel = "redis-sentinel://"

        /// The scheme `url` starts with (in any case), nil when none of the three.
        static func of(_ url: String) -> Scheme? {
            let lowered = url.lowercased()
            return allCases.first { lowered.hasPrefix($0.rawValue) }
        }

        /// The port of an address that names none.
        var defaultPort: Int {
            self == .sentinel ? SentinelEndpoints.defaultPort : RedisEndpoint.defaultPort
        }

        /// What the deployment is called in messages.
        var name: String {
            switch self {
            case .redis: "Redis URL"
            case .cluster: "Redis Cluster URL"
            case .sentinel: "Redis Sentinel URL"
            }
        }

        /// The form the URL must have, for messages.
        var form: String {
            switch self {
            case .redis: "redis://[user:password@]host[:port][/db]"
            case .cluster: "redis-cluster://[user:password@]host:port[,host:port...]"
            case .sentinel: "redis-sentinel://[user:password@]host:port[,host:port...]/primary-name[/db]"
            }
        }

        /// What an address in the list is called in messages.
        var addressName: String {
            switch self {
            case .redis: "address"
            case .cluster: "node address"
            case .sentinel: "sentinel address"
            }
        }
    }

    /// A host (a name, an IPv4 address or an IPv6 address without brackets) and a port.
    struct Address: Sendable, Hashable {
        let host: String
        let port: Int
    }

    /// The scheme the URL was parsed as.
    let scheme: Scheme
    /// The user information, when the URL has some.
    let credentials: RedisCredentials?
    /// The addresses in the order given, each with its port or the scheme's default: one for `redis://`.
    let addresses: [Address]
    /// The logical database, 0 when the URL names none (always 0 for `redis-cluster://`).
    let database: Int
    /// The name the sentinels know the primary by; nil unless `redis-sentinel://`.
    let primaryName: String?

    /// The most addresses a cluster or sentinel URL may list.
    static let maximumAddresses = 16

    /// Parses `url` as a URL of `scheme` (see the type's notes for the rules); the error names the URL with its
    /// password masked and what is wrong.
    init(_ url: String, as scheme: Scheme) throws(RedisStoreError) {
        do throws(Problem) {
            self = try Self.parse(url, as: scheme)
        } catch {
            throw RedisStoreError(
                code: RedisStoreError.invalidURLCode,
                message: "invalid \(scheme.name) '\(Self.masked(url))': \(error.why); expected \(scheme.form)")
        }
    }

    /// What is wrong with a URL, before it is named in a ``RedisStoreError``.
    private struct Problem: Error {
        let why: String
        init(_ why: String) { self.why = why }
    }

    private init(scheme: Scheme, credentials: RedisCredentials?, addresses: [Address], database: Int, primaryName: String?) {
        self.scheme = scheme
        self.credentials = credentials
        self.addresses = addresses
        self.database = database
        self.primaryName = primaryName
    }

    private static func parse(_ url: String, as scheme: Scheme) throws(Problem) -> RedisURL {
        guard url.lowercased().hasPrefix(scheme.rawValue) else { throw Problem("the scheme must be \(scheme.rawValue)") }
        var rest = Substring(url.dropFirst(scheme.rawValue.count))

        // Everything up to the last `@` is user information: the addresses, the name and the database never contain one.
        var credentials: RedisCredentials?
        if let at = rest.lastIndex(of: "@") {
            credentials = try Self.credentials(rest[..<at])
            rest = rest[rest.index(after: at)...]
        }
        if rest.contains("?") || rest.contains("#") { throw Problem("query strings and fragments are not supported") }

        switch scheme {
        case .redis:
            var path: Substring = ""
            if let slash = rest.firstIndex(of: "/") {
                path = rest[rest.index(after: slash)...]
                rest = rest[..<slash]
            }
            let address = try Self.address(rest, defaultPort: scheme.defaultPort)
            return RedisURL(
                scheme: scheme, credentials: credentials, addresses: [address], database: try Self.database(path), primaryName: nil)
        case .cluster:
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            guard !rest.contains("/") else { throw Problem("a cluster has only database 0, so the URL takes no path") }
            guard !rest.isEmpty else { throw Problem("no node is given") }
            let addresses = try Self.addresses(rest, scheme: scheme, what: "nodes")
            return RedisURL(scheme: scheme, credentials: credentials, addresses: addresses, database: 0, primaryName: nil)
        case .sentinel:
            guard let slash = rest.firstIndex(of: "/") else { throw Problem("the primary's name is missing") }
            let path = rest[rest.index(after: slash)...].split(separator: "/", omittingEmptySubsequences: false)
            guard let name = path.first, !name.isEmpty else { throw Problem("the primary's name is missing") }
            guard name.count <= 128, name.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || "._-".contains($0) }) else {
                throw Problem("'\(name)' is not a primary name (letters, digits, '.', '_' and '-')")
            }
            guard path.count <= 2 else { throw Problem("unexpected '\(path.dropFirst(2).joined(separator: "/"))' after the database") }
            let addresses = try Self.addresses(rest[..<slash], scheme: scheme, what: "sentinels")
            return RedisURL(
                scheme: scheme, credentials: credentials, addresses: addresses,
                database: try Self.database(path.count == 2 ? path[1] : ""), primaryName: String(name))
        }
    }

    /// `user:password` or `:password`, each percent-decoded.
    private static func credentials(_ userInfo: Substring) throws(Problem) -> RedisCredentials {
        let rawUser: Substring
        let rawPassword: Substring?
        if let colon = userInfo.firstIndex(of: ":") {
            rawUser = userInfo[..<colon]
            rawPassword = userInfo[userInfo.index(after: colon)...]
        } else {
            rawUser = userInfo
            rawPassword = nil
        }
        guard let user = percentDecoded(rawUser) else { throw Problem("the user is not valid percent-encoded UTF-8") }
        guard let rawPassword, !rawPassword.isEmpty else {
            // The user is not repeated: a password written without its colon would be shown.
            throw Problem(user.isEmpty ? "the password is empty" : "a user without a password (for the default user write :password@)")
        }
        guard let password = percentDecoded(rawPassword) else { throw Problem("the password is not valid percent-encoded UTF-8") }
        return RedisCredentials(user: user.isEmpty ? nil : user, password: password)
    }

    /// A comma-separated list of 1 to 16 addresses; an address that is not valid is named, with why.
    private static func addresses(_ list: Substring, scheme: Scheme, what: String) throws(Problem) -> [Address] {
        var addresses: [Address] = []
        for part in list.split(separator: ",", omittingEmptySubsequences: false) {
            guard !part.isEmpty else { throw Problem("an address in the list is empty") }
            do throws(Problem) {
                addresses.append(try address(part, defaultPort: scheme.defaultPort))
            } catch {
                throw Problem("the \(scheme.addressName) '\(part)' is not host:port (\(error.why))")
            }
        }
        guard addresses.count <= maximumAddresses else {
            throw Problem("at most \(maximumAddresses) \(what) may be listed, got \(addresses.count)")
        }
        return addresses
    }

    /// `host[:port]`, an IPv6 host in brackets.
    private static func address(_ text: Substring, defaultPort: Int) throws(Problem) -> Address {
        let host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw Problem("the IPv6 address lacks its closing ]") }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw Problem("unexpected '\(after)' after the IPv6 address") }
                portText = after.dropFirst()
            }
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw Problem("'\(host)' is not an IPv6 address")
            }
        } else {
            if let colon = text.firstIndex(of: ":") {
                host = text[..<colon]
                portText = text[text.index(after: colon)...]
            } else {
                host = text
            }
            guard !host.isEmpty else { throw Problem("the host is missing") }
            guard host.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "." || $0 == "-" || $0 == "_" })
            else { throw Problem("'\(host)' is not a valid host name") }
        }
        var port = defaultPort
        if let portText {
            guard let parsed = decimal(portText), (1...65535).contains(parsed) else {
                throw Problem("the port '\(portText)' is not a number in 1...65535")
            }
            port = parsed
        }
        return Address(host: String(host), port: port)
    }

    /// The database of a path (`/db`): 0 when empty.
    private static func database(_ path: Substring) throws(Problem) -> Int {
        guard !path.isEmpty else { return 0 }
        guard let parsed = decimal(path), parsed <= Int(Int32.max) else {
            throw Problem("the database '\(path)' is not a non-negative number")
        }
        return parsed
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

    /// The URL with its user information shown as `user:***` (the user as written), so a password never reaches a
    /// log or an error. A leading `scheme://` (any scheme, also one that is not Redis's) is kept as it is.
    static func masked(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        var start = url.startIndex
        if let marker = url[..<at].firstRange(of: "://"), let first = url.first, first.isASCII, first.isLetter,
            url[..<marker.lowerBound].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        {
            start = marker.upperBound
        }
        let userInfo = url[start..<at]
        let user = userInfo.firstIndex(of: ":").map { userInfo[..<$0] } ?? ""
        return String(url[..<start]) + user + ":***" + String(url[at...])
    }
}
