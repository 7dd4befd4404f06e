/// A Redis Cluster: the nodes to start from (any of its primaries or replicas; the rest is discovered with
/// `CLUSTER SHARDS`) and what every connection presents. Parsed from
/// `redis-cluster://[user:password@]host:port[,host:port...]`; its `description` never shows the password.
public struct ClusterEndpoints: Sendable, Hashable, CustomStringConvertible {
    /// The nodes given in the URL, in order.
    public let seeds: [RedisEndpoint]
    /// The credentials every node is connected with (a cluster has database 0 only).
    public let template: RedisEndpoint

    /// Parses `redis-cluster://[user:password@]host:port[,host:port...]` (see `RedisURL` for the rules). Each
    /// address follows `redis://`'s rules (IPv6 in brackets; the port defaults to 6379); the credentials go to every
    /// node; a cluster has no database but 0, so a path is refused. The error names the URL (password masked) and what
    /// is wrong.
    public init(url: String) throws(RedisStoreError) {
        let parsed = try RedisURL(url, as: .cluster)
        // The credentials' holder (the host is a stand-in, never used).
        let template = RedisEndpoint(host: "cluster-node", credentials: parsed.credentials)
        self.seeds = parsed.addresses.map { RedisEndpoint(host: $0.host, port: $0.port, credentials: template.credentials) }
        self.template = template
    }

    /// The node at `address`, with the URL's credentials.
    func node(_ address: ClusterNode) -> RedisEndpoint {
        RedisEndpoint(host: address.host, port: address.port, credentials: template.credentials)
    }

    /// `redis-cluster://user:***@a:6379,b:6379`: never the password.
    public var description: String {
        let shownCredentials = template.credentials.map { "\($0)@" } ?? ""
        return "redis-cluster://\(shownCredentials)\(seeds.map(\.address).joined(separator: ","))"
    }
}

/// A cluster node's address.
struct ClusterNode: Sendable, Hashable, CustomStringConvertible {
    let host: String
    let port: Int

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    init(_ endpoint: RedisEndpoint) {
        self.init(host: endpoint.host, port: endpoint.port)
    }

    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Parses `host:port` as Redis writes it in a redirection (`MOVED 3999 127.0.0.1:6381`; an IPv6 host unbracketed,
    /// the port after the last colon).
    init?(redirection text: Substring) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = text[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        // `?`: a node announcing hostnames whose own is not known yet (`cluster-preferred-endpoint-type hostname`):
        // no address to go to, so the error stands and the map is refreshed.
        guard !host.isEmpty, host != "?", host.utf8.count <= 255 else { return nil }
        self.init(host: String(host), port: port)
    }
}

/// Redis Cluster's key placement: CRC16 (XMODEM) of the key, or of its hash tag (the text between the first `{` and
/// the first `}` after it, when not empty), modulo 16384.
enum HashSlot {
    static let count = 16384

    /// The slot of `key`.
    static func of(_ key: some Collection<UInt8>) -> Int {
        var hashed = key[...]
        if let open = key.firstIndex(of: UInt8(ascii: "{")) {
            let after = key.index(after: open)
            if let close = key[after...].firstIndex(of: UInt8(ascii: "}")), close != after {
                hashed = key[after..<close]
            }
        }
        var crc: UInt16 = 0
        for byte in hashed {
            crc = (crc << 8) ^ table[Int((crc >> 8) ^ UInt16(byte))]
        }
        return Int(crc) & (count - 1)
    }

    /// The slot of `key`.
    static func of(_ key: String) -> Int {
        of(Array(key.utf8))
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }
}

/// Which primary serves each hash slot, as far as this replica knows: filled from `CLUSTER SHARDS` and patched by
/// every `MOVED`. A value with no I/O, so each rule has a unit test (`ClusterRuleTests`); `ClusterPool` does the I/O.
struct SlotMap: Sendable, Hashable {
    /// For each slot, 1 + the index of its primary in `nodes`; 0 while unknown.
    private var owners: [UInt16]
    /// The primaries named so far.
    private(set) var nodes: [ClusterNode]

    /// Nothing known: every command goes to a seed until a redirection or `CLUSTER SHARDS` says where.
    init() {
        owners = Array(repeating: 0, count: HashSlot.count)
        nodes = []
    }

    /// The map `CLUSTER SHARDS` describes: for each shard its slot ranges and its nodes, of which the primary
    /// (`role master`) serves the ranges. Nil when the reply is not of that shape.
    init?(shards reply: RedisValue) {
        guard case .array(let shards) = reply, shards.count <= HashSlot.count else { return nil }
        self.init()
        for shard in shards {
            guard case .array(let fields) = shard, let slots = Self.field("slots", in: fields),
                case .array(let bounds) = slots, bounds.count % 2 == 0, let nodeList = Self.field("nodes", in: fields),
                case .array(let members) = nodeList
            else { return nil }
            // The shard's primary; of two that say so (a failed one not yet demoted), the one that is online.
            let primaries = members.compactMap { member -> (node: ClusterNode, online: Bool)? in
                guard case .array(let nodeFields) = member, Self.field("role", in: nodeFields)?.text == "master",
                    let node = Self.address(nodeFields)
                else { return nil }
                return (node, Self.field("health", in: nodeFields)?.text == "online")
            }
            let primary = (primaries.first { $0.online } ?? primaries.first)?.node
            guard let primary else { continue }
            var index = 0
            while index < bounds.count {
                guard let low = Self.integer(bounds[index]), let high = Self.integer(bounds[index + 1]), 0 <= low, low <= high,
                    high < HashSlot.count
                else { return nil }
                for slot in low...high { assign(slot, to: primary) }
                index += 2
            }
        }
    }

    /// The primary serving `slot`, if known.
    func owner(of slot: Int) -> ClusterNode? {
        let owner = Int(owners[slot])
        return owner == 0 ? nil : nodes[owner - 1]
    }

    /// Whether every slot has a known primary.
    var isComplete: Bool { !owners.contains(0) }

    /// The primaries that serve at least one slot.
    var primaries: [ClusterNode] {
        var used = Set<UInt16>(owners)
        used.remove(0)
        return used.sorted().map { nodes[Int($0) - 1] }
    }

    /// `MOVED slot node`: the slot is served by `node` from now on.
    mutating func moved(_ slot: Int, to node: ClusterNode) {
        assign(slot, to: node)
    }

    /// Which primary serves each of the store's key groups (see `KeySpace`): for each primary the groups whose slot
    /// it serves. Groups whose slot has no known primary are left out.
    func groupsByPrimary(namespace: String) -> [ClusterNode: [String]] {
        var assignment: [ClusterNode: [String]] = [:]
        for group in KeySpace.groups {
            if let owner = owner(of: HashSlot.of("\(namespace):{\(group)}")) { assignment[owner, default: []].append(group) }
        }
        return assignment
    }

    private mutating func assign(_ slot: Int, to node: ClusterNode) {
        let index: Int
        if let known = nodes.firstIndex(of: node) {
            index = known
        } else {
            nodes.append(node)
            index = nodes.count - 1
        }
        owners[slot] = UInt16(index + 1)
    }

    /// The value after `name` in a flat list of name/value pairs.
    private static func field(_ name: String, in fields: [RedisValue]) -> RedisValue? {
        var index = 0
        while index + 1 < fields.count {
            if fields[index].text == name { return fields[index + 1] }
            index += 2
        }
        return nil
    }

    private static func integer(_ value: RedisValue) -> Int? {
        switch value {
        case .integer(let number): Int(exactly: number)
        default: value.text.flatMap { Int($0) }
        }
    }

    /// A node's address from its fields: its `endpoint` unless unknown (`?` or empty), else its `ip`; and its `port`.
    private static func address(_ fields: [RedisValue]) -> ClusterNode? {
        guard let port = field("port", in: fields).flatMap(integer), (1...65535).contains(port) else { return nil }
        var host = field("endpoint", in: fields)?.text
        if host == nil || host == "?" || host == "" { host = field("ip", in: fields)?.text }
        guard let host, !host.isEmpty, host != "?" else { return nil }
        return ClusterNode(host: host, port: port)
    }
}

/// What a cluster node's error reply asks of the client (the Cluster specification's redirections).
enum Redirection: Sendable, Hashable {
    /// `MOVED slot node`: the slot lives on `node` now; update the map and send there.
    case moved(slot: Int, node: ClusterNode)
    /// `ASK slot node`: this one command goes to `node`, preceded by `ASKING`; the map stays.
    case ask(slot: Int, node: ClusterNode)
    /// `TRYAGAIN`: the keys of a script are split by a migration in progress; send again shortly.
    case tryAgain

    /// The redirection an error reply asks for; nil for any other error.
    init?(_ message: String) {
        if message.hasPrefix("TRYAGAIN") {
            self = .tryAgain
            return
        }
        let parts = message.split(separator: " ")
        guard parts.count == 3, let slot = Int(parts[1]), (0..<HashSlot.count).contains(slot),
            let node = ClusterNode(redirection: parts[2])
        else { return nil }
        switch parts[0] {
        case "MOVED": self = .moved(slot: slot, node: node)
        case "ASK": self = .ask(slot: slot, node: node)
        default: return nil
        }
    }

    /// The key a command is routed by: a script's first key (the store's scripts touch one slot), or the command's
    /// first argument (`GET`, `SET`, `SPUBLISH`); nil for commands with none (`PING`, a script without keys).
    static func routingKey(of command: [[UInt8]]) -> [UInt8]? {
        guard let name = command.first else { return nil }
        if name.elementsEqual("EVALSHA".utf8) || name.elementsEqual("EVAL".utf8) {
            guard command.count > 3, let count = Int(String(decoding: command[2], as: UTF8.self)), count > 0 else { return nil }
            return command[3]
        }
        return command.count > 1 ? command[1] : nil
    }
}
