import Digests
import Foundation
import NIOCore
import PrefetchCore

/// One resource of the published map, as the shell SDK parses it (`PrefetchOffline.ResourceEntry`).
public struct PublishedEntry: Codable, Sendable, Hashable {
    /// The resource's own version: the first 16 hex digits of its SHA-256 (the same body, the same version).
    public var version: String
    /// MD5 of the body, lowercase hex (the seed's field).
    public var md5: String
    /// SHA-256 of the body, lowercase hex: what the SDK trusts.
    public var sha256: String
    /// Where the body is fetched: `/v1/resources/blob/<sha256>`, or `<download base>/<sha256>`.
    public var download: String
    /// The `Content-Type` the origin answered with.
    public var ctype: String
}

/// The check's answer, the envelope the SDK parses (`CheckAnswer.classify`):
/// `{"code":200,"data":{"version","update","resourcemap","removed"}}`.
public struct ResourceCheckAnswer: Codable, Sendable, Equatable {
    /// Always 200: a provider with no map answers an empty one.
    public var code: Int = 200
    /// The payload.
    public var data: Payload

    /// The payload of a check.
    public struct Payload: Codable, Sendable, Equatable {
        /// The current map's version (decimal text; "0" for the empty map).
        public var version: String
        /// Whether `resourcemap` follows: false when the caller's version is the current one.
        public var update: Bool
        /// The whole current map, resource URL to entry; absent when `update` is false.
        public var resourcemap: [String: PublishedEntry]?
        /// The resource URLs dropped since the caller's version, when the provider still knows it.
        public var removed: [String]?
    }
}

/// Digests of a body.
enum Digests {
    static func sha256(_ bytes: ByteBuffer) -> String { bytes.withUnsafeReadableBytes { Hex.encode(SHA256.hash(bufferPointer: $0)) } }
    static func md5(_ bytes: ByteBuffer) -> String { bytes.withUnsafeReadableBytes { Hex.encode(MD5.hash(bufferPointer: $0)) } }
    static func sha256(_ bytes: [UInt8]) -> String { Hex.encode(SHA256.hash(data: bytes)) }

    /// Whether `text` is a SHA-256 as the blob route accepts it: exactly 64 lowercase hex digits.
    static func isSHA256(_ text: some StringProtocol) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}

/// The version of a map, from its content only, so replicas with the same inputs publish the same version: the
/// first 6 bytes of the SHA-256 of the sorted lines `<url> <sha256> <ctype>`, as a decimal number (at most 15 digits,
/// exact in every JSON reader). The empty map is "0".
enum MapVersion {
    static func of(_ entries: [String: PublishedEntry]) -> String {
        guard !entries.isEmpty else { return "0" }
        var text = ""
        for key in entries.keys.sorted() {
            guard let entry = entries[key] else { continue }
            text += "\(key) \(entry.sha256) \(entry.ctype)\n"
        }
        let digest = SHA256.hash(data: Array(text.utf8))
        var value: UInt64 = 0
        for byte in digest.prefix(6) { value = value << 8 | UInt64(byte) }
        // Never "0", the empty map's version.
        return String(max(value, 1))
    }
}
