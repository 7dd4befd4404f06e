import Crypto
import PrefetchCore
import PrefetchStore

/// Names in Redis for one store: keys per store key, and the announcement channel.
struct KeySpace: Sendable, Hashable {
    struct Keys: Sendable, Hashable {
        let digest: String
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

    let namespace: String
    let channel: String

    init(namespace: String, database: Int) {
        self.namespace = namespace
        // Pub/sub ignores the database number, so the channel carries it.
        self.channel = "\(namespace):done:\(database)"
    }

    func keys(for key: StoreKey) -> Keys {
        keys(digest: Self.digest(of: key))
    }

    /// The names for the key whose digest is `digest`.
    func keys(digest: String) -> Keys {
        Keys(
            digest: digest, entry: "\(namespace):e:\(digest)", lock: "\(namespace):lock:\(digest)",
            tombstone: "\(namespace):t:\(digest)")
    }

    /// The key of record `name` (`<ns>:r:<name>`): outside the entries, locks and tombstones, so `retain` and the
    /// invalidations never touch it.
    func record(_ name: String) -> String {
        "\(namespace):r:\(name)"
    }

    func kind(of name: String) -> Kind? {
        if name.hasPrefix("\(namespace):e:") { return .entry }
        if name.hasPrefix("\(namespace):lock:") { return .lock }
        return nil
    }

    /// The tombstone key for a value or lock key; nil for any other name.
    func tombstone(forValueOrLock name: String) -> String? {
        guard kind(of: name) != nil, name.utf8.count > Self.digestLength else { return nil }
        return "\(namespace):t:\(name.suffix(Self.digestLength))"
    }

    /// The set of value digests kept for `identity` (`<ns>:i:<identity digest>`, the digest being already keyed with
    /// the deployment's identity key); nil for the anonymous identity, whose shared entries are never invalidated by
    /// identity and so are not indexed.
    func identityIndex(_ identity: Identity) -> String? {
        identity == .anonymous ? nil : "\(namespace):i:\(identity.digest)"
    }

    /// The set of value digests tagged with `surrogateKey` (`<ns>:s:<SHA-256 of the key>`, so any key makes a name of
    /// fixed size).
    func surrogateIndex(_ surrogateKey: String) -> String {
        "\(namespace):s:\(Hex.encode(SHA256.hash(data: Array(surrogateKey.utf8))))"
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
