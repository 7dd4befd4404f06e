import Crypto

/// Who a response was fetched for: a SHA-256 of the credential headers the caller forwarded.
///
/// Two callers share an identity exactly when they forwarded the same credential headers (names compared
/// case-insensitively, values with surrounding blanks trimmed, header order irrelevant across names and kept
/// within a name). A caller with no non-empty credential header is `anonymous`. The raw credentials are never kept.
public struct Identity: Hashable, Sendable, CustomStringConvertible {
    /// The identity of callers that forwarded no credentials.
    public static let anonymous = Identity(digest: "anonymous")

    /// The credential header names used when none are configured.
    public static let defaultCredentialHeaderNames = ["cookie", "authorization"]

    /// `anonymous`, or 64 lowercase hex digits of a SHA-256 over the credential headers; never the credentials.
    public let digest: String

    /// Derives the identity from the headers a caller forwarded, looking only at `credentialHeaderNames`
    /// (case-insensitive).
    public init(
        headers: [(name: String, value: String)],
        credentialHeaderNames: [String] = Identity.defaultCredentialHeaderNames
    ) {
        let wanted = Set(credentialHeaderNames.map { $0.lowercased() })
        var picked: [(offset: Int, name: String, value: Substring)] = []
        for (offset, header) in headers.enumerated() {
            let name = header.name.lowercased()
            guard wanted.contains(name) else { continue }
            let value = Self.trimmingBlanks(header.value)
            guard !value.isEmpty else { continue }
            picked.append((offset, name, value))
        }
        guard !picked.isEmpty else {
            self = .anonymous
            return
        }
        // Sorting by name makes the order of different headers irrelevant; the offset keeps the order of
        // repeated headers, which can matter to the upstream.
        picked.sort { ($0.name, $0.offset) < ($1.name, $1.offset) }
        var hasher = SHA256()
        hasher.update(data: Array("prefetch-identity-v1".utf8))
        for item in picked {
            // Length prefixes keep ("ab","c") and ("a","bc") apart.
            Self.appendField(Array(item.name.utf8), to: &hasher)
            Self.appendField(Array(item.value.utf8), to: &hasher)
        }
        self.digest = hexString(hasher.finalize())
    }

    /// An identity from a digest computed earlier (a key read back from a shared store).
    public init(digest: String) {
        self.digest = digest
    }

    /// `anonymous`, or `identity:` and the first 12 hex digits of the digest (enough to correlate logs).
    public var description: String {
        self == .anonymous ? "anonymous" : "identity:\(digest.prefix(12))"
    }

    private static func trimmingBlanks(_ value: String) -> Substring {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        let start = value.firstIndex { !isBlank($0) } ?? value.endIndex
        let end = value.lastIndex { !isBlank($0) }.map { value.index(after: $0) } ?? start
        return value[start..<max(start, end)]
    }

    private static func appendField(_ bytes: [UInt8], to hasher: inout SHA256) {
        var length = UInt64(bytes.count).bigEndian
        withUnsafeBytes(of: &length) { hasher.update(bufferPointer: $0) }
        hasher.update(data: bytes)
    }
}

/// The exact key of a stored response: identity, method, URL and a SHA-256 of the request body.
///
/// Equality covers every field, and the store has no lookup by anything less than a whole key: a response is only
/// ever returned for the key it was stored under, so never across identities.
public struct StoreKey: Hashable, Sendable, CustomStringConvertible {
    /// Who the response is for.
    public let identity: Identity
    /// The request method, uppercased (the store keys methods case-insensitively).
    public let method: String
    /// The request URL exactly as fetched.
    public let url: String
    /// Lowercase hex SHA-256 of the request body; nil when there is no body or it is empty (the same request on
    /// the wire).
    public let bodyDigest: String?

    /// Creates a key, keeping only a SHA-256 of `body`.
    public init(identity: Identity, method: String, url: String, body: [UInt8]?) {
        self.identity = identity
        self.method = method.uppercased()
        self.url = url
        if let body, !body.isEmpty {
            self.bodyDigest = hexString(SHA256.hash(data: body))
        } else {
            self.bodyDigest = nil
        }
    }

    /// Recreates a key from its parts (a key read back from a shared store).
    public init(identity: Identity, method: String, url: String, bodyDigest: String?) {
        self.identity = identity
        self.method = method.uppercased()
        self.url = url
        self.bodyDigest = bodyDigest
    }

    /// Method, URL without its query string (which may carry tokens), identity and body digest prefix.
    public var description: String {
        let shownURL = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map {
            String($0)
        } ?? url
        let query = shownURL.utf8.count < url.utf8.count ? "?…" : ""
        let body = bodyDigest.map { " body:\($0.prefix(12))" } ?? ""
        return "\(method) \(shownURL)\(query) \(identity)\(body)"
    }

    /// The bytes the key's strings count against a store budget.
    var accountedBytes: Int {
        identity.digest.utf8.count + method.utf8.count + url.utf8.count + (bodyDigest?.utf8.count ?? 0)
    }

    /// A fixed-size digest of the whole key, for tombstones that must stay small whatever the URL length.
    var fingerprint: [UInt8] {
        var hasher = SHA256()
        for field in [identity.digest, method, url, bodyDigest ?? "-"] {
            var length = UInt64(field.utf8.count).bigEndian
            withUnsafeBytes(of: &length) { hasher.update(bufferPointer: $0) }
            hasher.update(data: Array(field.utf8))
        }
        return Array(hasher.finalize())
    }
}

private func hexString<D: Sequence>(_ bytes: D) -> String where D.Element == UInt8 {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(64)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}
