import Foundation

/// The one rule of trust for a body: it is stored and served only when it hashes to what its map entry says.
enum Integrity {
    /// Whether `entry` names a hash this policy trusts: a SHA-256, or with ``OfflineConfiguration/Integrity/md5Accepted``
    /// an MD5 alone (seed 001's maps carry only MD5, which does not resist a forged body).
    static func isCacheable(_ entry: ResourceEntry, policy: OfflineConfiguration.Integrity) -> Bool {
        if entry.sha256 != nil { return true }
        return policy == .md5Accepted && entry.md5 != nil
    }

    /// Whether `data` is the body `entry` names: every hash the entry carries matches, and it carries one.
    static func verify(_ data: Data, against entry: ResourceEntry) -> Bool {
        guard entry.sha256 != nil || entry.md5 != nil else { return false }
        if let sha256 = entry.sha256, Digests.sha256(data) != sha256 { return false }
        if let md5 = entry.md5, Digests.md5(data) != md5 { return false }
        return true
    }
}

/// The digests a resource map names for each body, as lowercase hex (Digest.swift: plain Swift, no crypto library).
enum Digests {
    static func sha256(_ data: some DataProtocol) -> String { hex(SHA256Hasher.hash(data)) }
    static func md5(_ data: some DataProtocol) -> String { hex(MD5Hasher.hash(data)) }

    private static let digits = Array("0123456789abcdef")

    static func hex(_ digest: some Sequence<UInt8>) -> String {
        var text = ""
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return text
    }
}
