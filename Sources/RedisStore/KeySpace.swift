import Digests
import PrefetchCore
import PrefetchStore

/// Names in Redis for one store: keys per store key, and the announcement channels.
///
/// Every name of a stored value carries a hash tag `{g}`, its group: the first two hex digits of the value's digest
/// (256 groups). Redis Cluster places a name by its hash tag alone, so a value, its lock, its tombstone, the index
/// sets its completion joins and the channel announcing it share one slot: every script touches one slot, as a
/// cluster requires, and on a single Redis the tags change nothing. A page open's keys fall in as many groups as it
/// has interfaces (at most).
struct KeySpace: Sendable, Hashable {
    struct Keys: Sendable, Hashable {
        let digest: String
        /// The group's two hex digits: the hash tag shared by every name below.
        let group: String
        let entry: String
        let lock: String
        let tombstone: String
    }

    enum Kind {
        case entry
        case lock
    }

    /// Hex digits in a key digest.
    static let digestLength = 64

    /// Hex digits of a digest that name its group.
    static let groupLength = 2

    /// Every group, `00` to `ff`.
    static let groups: [String] = (0..<256).map { Hex.encode([UInt8($0)]) }

    let namespace: String
    /// Pub/sub ignores the database number, so the channels carry it.
    let database: Int

    init(namespace: String, database: Int) {
        self.namespace = namespace
        self.database = database
    }

    /// The group of `digest`: its first two hex digits.
    static func group(of digest: String) -> String {
        String(digest.utf8.prefix(groupLength).map { Character(Unicode.Scalar($0)) })
    }

    /// `<ns>:{g}`: what every name of group `group` starts with.
    func prefix(group: String) -> String {
        "\(namespace):{\(group)}"
    }

    /// The channel announcing completions and drops of group `group` (`<ns>:{g}:done:<db>`, a shard channel in the
    /// group's slot: `SPUBLISH` from the group's scripts, `SSUBSCRIBE` by every replica).
    func channel(group: String) -> String {
        "\(prefix(group: group)):done:\(database)"
    }

    /// The channel invalidations are announced on (any group's would do: every replica listens to all of them).
    var invalidationChannel: String { channel(group: Self.groups[0]) }

    func keys(for key: StoreKey) -> Keys {
        keys(digest: Self.digest(of: key))
    }

    /// The names for the key whose digest is `digest`.
    func keys(digest: String) -> Keys {
        let group = Self.group(of: digest)
        let prefix = prefix(group: group)
        return Keys(
            digest: digest, group: group, entry: "\(prefix):e:\(digest)", lock: "\(prefix):lock:\(digest)",
            tombstone: "\(prefix):t:\(digest)")
    }

    /// The key of record `name` (`<ns>:r:<name>`): outside the entries, locks and tombstones, so `retain` and the
    /// invalidations never touch it. A record is one key, so on a cluster it goes wherever its name hashes.
    func record(_ name: String) -> String {
        "\(namespace):r:\(name)"
    }

    /// What a name found by a scan is, from its shape `<ns>:{gg}:e:<digest>` or `<ns>:{gg}:lock:<digest>`.
    func kind(of name: String) -> Kind? {
        guard let (_, rest) = split(name) else { return nil }
        if rest.hasPrefix("e:") { return .entry }
        if rest.hasPrefix("lock:") { return .lock }
        return nil
    }

    /// The group of a name of this key space, nil for any other name.
    func group(ofName name: String) -> String? {
        split(name)?.group
    }

    /// `<ns>:{gg}:rest` split into the group and `rest`.
    private func split(_ name: String) -> (group: String, rest: Substring)? {
        let head = namespace + ":{"
        guard name.hasPrefix(head) else { return nil }
        let tail = name.dropFirst(head.count)
        guard tail.utf8.count > Self.groupLength + 2 else { return nil }
        let group = tail.prefix(Self.groupLength)
        let after = tail.dropFirst(Self.groupLength)
        guard after.hasPrefix("}:") else { return nil }
        return (String(group), after.dropFirst(2))
    }

    /// The tombstone key for a value or lock key; nil for any other name.
    func tombstone(forValueOrLock name: String) -> String? {
        guard kind(of: name) != nil, name.utf8.count > Self.digestLength, let group = group(ofName: name) else { return nil }
        return "\(prefix(group: group)):t:\(name.suffix(Self.digestLength))"
    }

    /// The set of value digests of group `group` kept for `identity` (`<ns>:{g}:i:<identity digest>`, the digest
    /// being already keyed with the deployment's identity key); nil for the anonymous identity, whose shared entries
    /// are never invalidated by identity and so are not indexed.
    func identityIndex(_ identity: Identity, group: String) -> String? {
        identity == .anonymous ? nil : "\(prefix(group: group)):i:\(identity.digest)"
    }

    /// The set of value digests of group `group` tagged with `surrogateKey` (`<ns>:{g}:s:<SHA-256 of the key>`, so
    /// any key makes a name of fixed size).
    func surrogateIndex(_ surrogateKey: String, group: String) -> String {
        "\(prefix(group: group)):s:\(Hex.encode(SHA256.hash(data: Array(surrogateKey.utf8))))"
    }

    /// The key's fixed-size fingerprint (a SHA-256 over identity, method and request digest) in hex.
    static func digest(of key: StoreKey) -> String {
        Hex.encode(key.fingerprint)
    }

    /// The message announcing a completion: the digest, then `|` and the encoded result when it is not stored.
    static func announcement(_ digest: String, payload: [UInt8]?) -> [UInt8] {
        var out = Array(digest.utf8)
        if let payload {
            out.append(UInt8(ascii: "|"))
            out.append(contentsOf: payload)
        }
        return out
    }

    /// What an invalidation dropped, as announced to every replica: its scope (each replica drops matching entries of
    /// its fallback store) and the digests of the values dropped in Redis (each replica drops its local copies).
    enum Invalidation: Sendable, Hashable {
        case identity(Identity)
        case label(String)
        case surrogateKey(String)
    }

    /// The most digests in one drop announcement (each 65 bytes with its separator).
    static let digestsPerAnnouncement = 128

    /// The messages announcing that `digests` were dropped: `-` and the digests separated by `,`, in chunks of
    /// `digestsPerAnnouncement`. A digest never starts with `-` or `!`, so no completion reads like one.
    static func dropAnnouncements(_ digests: [String]) -> [[UInt8]] {
        stride(from: 0, to: digests.count, by: digestsPerAnnouncement).map { start in
            Array(("-" + digests[start..<min(start + digestsPerAnnouncement, digests.count)].joined(separator: ",")).utf8)
        }
    }

    /// The message announcing an invalidation's scope: `!i:<identity digest>`, `!l:<label>` or `!s:<surrogate key>`.
    static func scopeAnnouncement(_ scope: Invalidation) -> [UInt8] {
        switch scope {
        case .identity(let identity): Array("!i:\(identity.digest)".utf8)
        case .label(let label): Array("!l:\(label)".utf8)
        case .surrogateKey(let key): Array("!s:\(key)".utf8)
        }
    }

    /// A message on the store's channel.
    enum Message: Sendable, Hashable {
        /// A completion: the digest, and the encoded result when it is not stored.
        case completed(digest: String, payload: [UInt8]?)
        /// Values dropped in Redis by an invalidation.
        case dropped([String])
        /// An invalidation's scope.
        case invalidated(Invalidation)
    }

    static func parseMessage(_ message: [UInt8]) -> Message? {
        switch message.first {
        case UInt8(ascii: "-"):
            let digests = message.dropFirst().split(separator: UInt8(ascii: ",")).compactMap { part -> String? in
                part.count == digestLength ? String(decoding: part, as: UTF8.self) : nil
            }
            return .dropped(digests)
        case UInt8(ascii: "!"):
            guard message.count > 3, message[2] == UInt8(ascii: ":") else { return nil }
            let value = String(decoding: message[3...], as: UTF8.self)
            switch message[1] {
            case UInt8(ascii: "i"): return .invalidated(.identity(Identity(digest: value)))
            case UInt8(ascii: "l"): return .invalidated(.label(value))
            case UInt8(ascii: "s"): return .invalidated(.surrogateKey(value))
            default: return nil
            }
        default:
            return parseAnnouncement(message).map { .completed(digest: $0.digest, payload: $0.payload) }
        }
    }

    static func parseAnnouncement(_ message: [UInt8]) -> (digest: String, payload: [UInt8]?)? {
        guard message.count >= digestLength else { return nil }
        let digest = String(decoding: message[..<digestLength], as: UTF8.self)
        guard message.count > digestLength + 1, message[digestLength] == UInt8(ascii: "|") else {
            return (digest, nil)
        }
        return (digest, Array(message[(digestLength + 1)...]))
    }
}
