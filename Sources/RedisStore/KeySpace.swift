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

    static func parseAnnouncement(_ message: [UInt8]) -> (digest: String, payload: [UInt8]?)? {
        guard message.count >= digestLength else { return nil }
        let digest = String(decoding: message[..<digestLength], as: UTF8.self)
        guard message.count > digestLength + 1, message[digestLength] == UInt8(ascii: "|") else {
            return (digest, nil)
        }
        return (digest, Array(message[(digestLength + 1)...]))
    }
}
