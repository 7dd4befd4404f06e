import Synchronization

/// A Redis deployment managed by Sentinel: the sentinels to ask, the name of the primary they watch, and what every
/// connection to a data node presents (credentials, database). Parsed from
/// `redis-sentinel://[user:password@]host:port[,host:port...]/primary-name[/db]`; its `description` never shows the
/// password.
public struct SentinelEndpoints: Sendable, Hashable, CustomStringConvertible {
    /// A sentinel's address.
    public struct Address: Sendable, Hashable, CustomStringConvertible {
        public let host: String
        public let port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// The port of a sentinel whose address names none (Sentinel's default).
    public static let defaultPort = 26379

    /// The sentinels, in the order given.
    public let sentinels: [Address]
    /// The name the sentinels know the primary by (`sentinel monitor <name> ...`).
    public let primaryName: String
    /// What the primary is connected with: its credentials and database (host and port come from the sentinels).
    public let template: RedisEndpoint

    /// Parses `redis-sentinel://[user:password@]host:port[,host:port...]/primary-name[/db]` (see `RedisURL` for the
    /// rules). Each address follows `redis://`'s rules (IPv6 in brackets; the port defaults to 26379); the credentials
    /// are the data nodes' (`AUTH` on the primary; the sentinels are asked without them); the name is letters, digits,
    /// `.`, `_` and `-`. The error names the URL (password masked) and what is wrong.
    public init(url: String) throws(RedisStoreError) {
        let parsed = try RedisURL(url, as: .sentinel)
        self.sentinels = parsed.addresses.map { Address(host: $0.host, port: $0.port) }
        self.primaryName = parsed.primaryName ?? ""
        // The credentials and the database of the primary (the host is a stand-in, never used).
        self.template = RedisEndpoint(host: "sentinel-primary", database: parsed.database, credentials: parsed.credentials)
    }

    /// The primary at `host:port`, with the URL's credentials and database.
    func primary(at address: Address) -> RedisEndpoint {
        RedisEndpoint(host: address.host, port: address.port, database: template.database, credentials: template.credentials)
    }

    /// `redis-sentinel://user:***@a:26379,b:26379/name/db`: never the password.
    public var description: String {
        let shownCredentials = template.credentials.map { "\($0)@" } ?? ""
        return
            "redis-sentinel://\(shownCredentials)\(sentinels.map(\.description).joined(separator: ","))/\(primaryName)/\(template.database)"
    }
}

/// Where the store's connections go: the one endpoint of a `redis://` URL, or the primary the sentinels name now.
/// Read by every new connection (the pool's, the subscriber's); written only by the subscriber's thread when the
/// sentinels name another primary.
final class PrimaryLocator: Sendable {
    private let primary: Mutex<RedisEndpoint?>
    /// How many times the primary was set: a connection opened under an earlier generation goes to a server that is
    /// no longer the primary (read without a lock on every pool call).
    private let changes = Atomic<Int>(0)

    /// A fixed endpoint (`redis://`).
    init(fixed endpoint: RedisEndpoint) {
        primary = Mutex(endpoint)
    }

    /// Not known until the sentinels are asked.
    init() {
        primary = Mutex(nil)
    }

    /// The endpoint to connect to now; nil while no primary is known.
    var current: RedisEndpoint? { primary.withLock { $0 } }

    /// Which primary is current: it changes whenever ``set(_:)`` is called.
    var generation: Int { changes.load(ordering: .acquiring) }

    func set(_ endpoint: RedisEndpoint?) {
        primary.withLock { $0 = endpoint }
        changes.add(1, ordering: .releasing)
    }
}

/// What the store does with what the sentinels say, as a value: no I/O, so every rule has a unit test
/// (`SentinelRuleTests`). Each round the subscriber's thread asks every sentinel for the primary's address; the
/// address a majority of all the configured sentinels name (``majority(_:of:)``) is asked its `ROLE`, and both come
/// here. One stale or lying sentinel cannot move the store: it takes as many as Sentinel's own failover needs.
struct PrimaryDiscovery: Sendable {
    /// What a server said of itself (`ROLE`'s first element).
    enum Role: Sendable, Equatable {
        case primary
        case replica
        /// No answer, or not one of the above.
        case unknown
    }

    enum Decision: Sendable, Equatable {
        /// Nothing changes: the same primary, or nothing verified to move to.
        case keep
        /// A verified primary other than the current one (or the first one): connect there from now on.
        case switchTo(SentinelEndpoints.Address)
    }

    /// The primary connections go to (nil before the first one is known).
    private(set) var current: SentinelEndpoints.Address?

    /// The address more than half of `total` sentinels reported (each report: the address one sentinel named, nil
    /// when it named none or did not answer); nil when no address has a majority.
    static func majority(_ reports: [SentinelEndpoints.Address?], of total: Int) -> SentinelEndpoints.Address? {
        var counts: [SentinelEndpoints.Address: Int] = [:]
        for case let address? in reports { counts[address, default: 0] += 1 }
        return counts.first { $0.value * 2 > total }?.key
    }

    /// A majority of the sentinels named `named` (nil: no majority), and that server's `ROLE` said `role`. Only a
    /// server that says it is the primary is moved to.
    mutating func observed(named: SentinelEndpoints.Address?, role: Role) -> Decision {
        guard let named, role == .primary, named != current else { return .keep }
        current = named
        return .switchTo(named)
    }
}
