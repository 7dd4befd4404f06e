import Digests
public import HTTPTypes
import PrefetchCore

/// The per-deployment secret that identities are keyed with (HMAC-SHA256).
///
/// A store dump (memory or Redis) holds only keyed digests of credentials: without this key nobody can test a
/// guessed cookie or token against them offline. Replicas that share a store must share the key, or the same
/// user gets a different identity on each replica (misses, never leaks).
public struct IdentityKey: Sendable {
    /// HMAC-SHA256 already keyed with the secret: each digest starts from a copy of it, so the key schedule (two
    /// hash blocks) is computed once, not per digest (a trigger makes several). Never mutated: a copy is updated,
    /// and the copy's state is its own (copy on write).
    private let keyed: HMACSHA256

    /// The smallest secret accepted, in bytes.
    public static let minimumBytes = 32

    /// A key from secret bytes (at least ``minimumBytes``).
    /// - Throws: ``IdentityKeyError`` when the secret is shorter.
    public init(secret: some Sequence<UInt8>) throws(IdentityKeyError) {
        let bytes = Array(secret)
        guard bytes.count >= Self.minimumBytes else { throw IdentityKeyError(length: bytes.count) }
        self.keyed = HMACSHA256(key: bytes)
    }

    /// A fresh random key of 32 bytes.
    public static func random() -> IdentityKey {
        try! IdentityKey(secret: SecureRandom.bytes(32))
    }

    /// A keyed digest of `fields` (each length-prefixed, after a domain label) as 64 lowercase hex digits.
    public func digest(domain: String, _ fields: [[UInt8]]) -> String {
        Hex.encode(mac(domain: domain, fields))
    }

    /// The 32-byte HMAC-SHA256 of `fields` (each length-prefixed, after a domain label).
    public func mac(domain: String, _ fields: [[UInt8]]) -> [UInt8] {
        var mac = keyed
        mac.update(data: Array(domain.utf8))
        for field in fields { appendLengthPrefixed(field, to: &mac) }
        return mac.finalize()
    }
}

/// A secret too short to key identities with.
public struct IdentityKeyError: Error, CustomStringConvertible {
    /// The length that was given.
    public var length: Int
    /// Names the limit, never the secret.
    public var description: String {
        "the identity key has \(length) bytes; at least \(IdentityKey.minimumBytes) are required"
    }
}

/// Who a response was fetched for: a keyed digest (HMAC-SHA256 with the deployment's ``IdentityKey``) of the
/// credential headers the caller forwarded.
///
/// Two callers share an identity exactly when they forwarded the same credential headers (names compared
/// case-insensitively, values with surrounding blanks trimmed, header order irrelevant across names and kept
/// within a name). A caller with no non-empty credential header is `anonymous`. The raw credentials are never kept.
public struct Identity: Hashable, Sendable, CustomStringConvertible {
    /// The identity of callers that forwarded no credentials.
    public static let anonymous = Identity(digest: "anonymous")

    /// The credential header names used when none are configured.
    public static let defaultCredentialHeaderNames = ["cookie", "authorization"]

    /// `anonymous`, or 64 lowercase hex digits of an HMAC over the credential headers; never the credentials.
    public let digest: String

    /// Derives the identity from the headers a caller forwarded, looking only at `credentialHeaderNames`
    /// (case-insensitive), keyed with `key`.
    public init(
        headers: HTTPFields,
        credentialHeaderNames: [String] = Identity.defaultCredentialHeaderNames,
        key: IdentityKey
    ) {
        self.init(headers: headers, wanted: Set(credentialHeaderNames.map { $0.lowercased() }), key: key)
    }

    /// Derives the identity from `headers`, looking only at the names in `wanted` (lowercased), keyed with `key`.
    public init(headers: HTTPFields, wanted: Set<String>, key: IdentityKey) {
        var picked: [(offset: Int, name: String, value: Substring)] = []
        for (offset, header) in headers.enumerated() {
            let name = header.name.canonicalName
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
        self.digest = key.digest(domain: "prefetch-identity-v2", picked.flatMap { [Array($0.name.utf8), Array($0.value.utf8)] })
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
}

/// The exact key of a stored response: identity, method, and a SHA-256 over everything the request as sent is made of.
///
/// The request digest covers the method, the URL exactly as composed, the headers the config and the service
/// fix for it (name and value, in order; credentials are the identity's part, and the per-trigger trace headers
/// are no part of an answer), the body, for a request that takes values from other answers, the keys of
/// those answers (``inputs``), and for a credentialed request the page scope that selects which of the identity's
/// cookies it sends (``init(identity:method:url:headers:body:inputs:credentialScope:)``). A dependent request is thus keyed by what its sent form is a function of: its
/// template and the exact entries that filled it, each of which carries its own identity and request in turn.
///
/// The key holds digests only, never the composed URL (which may carry tokens and be kilobytes long), so it costs
/// the same few bytes whatever the request. Equality covers the identity and the request digest, and the store has
/// no lookup by anything less than a whole key: a response is only ever returned for the key it was stored under,
/// so never across identities.
public struct StoreKey: Hashable, Sendable, CustomStringConvertible {
    /// Who the response is for.
    public let identity: Identity
    /// The request method, uppercased (the store keys methods case-insensitively).
    public let method: String
    /// SHA-256 over the method, the URL exactly as fetched, the headers, the body (an empty body is no body) and
    /// the input keys, as 64 lowercase hex digits.
    public let request: String

    /// Creates a key, keeping only a digest of `url`, `headers`, `body` and `inputs`.
    ///
    /// - Parameters:
    ///   - headers: the headers that shape the answer besides the credentials: the config's static headers,
    ///     `Content-Type`, `Sec-Purpose`.
    ///   - inputs: the keys of the answers whose values the request takes (a dependent request), in order.
    ///   - credentialScope: for a key that carries an identity, what else decides which of its credentials the
    ///     request sends: the page's scheme and host (a cookie goes to an api by the page's site, `SameSite`, and a
    ///     single `Cookie` header only to the page's own host). nil for an anonymous key.
    public init(
        identity: Identity, method: String, url: String, headers: HTTPFields = [:], body: [UInt8]?, inputs: [StoreKey] = [],
        credentialScope: String? = nil
    ) {
        self.identity = identity
        self.method = method.uppercased()
        var hasher = SHA256()
        hasher.update(data: Self.requestDomain)
        appendLengthPrefixed(self.method, to: &hasher)
        appendLengthPrefixed(url, to: &hasher)
        appendLengthPrefixed(body ?? [], to: &hasher)
        appendCount(headers.count, to: &hasher)
        for field in headers {
            appendLengthPrefixed(field.name.canonicalName, to: &hasher)
            appendLengthPrefixed(field.value, to: &hasher)
        }
        appendCount(inputs.count, to: &hasher)
        for input in inputs { hasher.update(data: input.fingerprint) }
        appendLengthPrefixed(credentialScope ?? "", to: &hasher)
        self.request = Hex.encode(hasher.finalize())
    }

    /// Recreates a key from its parts (a key read back from a shared store).
    public init(identity: Identity, method: String, request: String) {
        self.identity = identity
        self.method = method.uppercased()
        self.request = request
    }

    /// The same request under another identity (e.g. one private to a ticket).
    public func with(identity: Identity) -> StoreKey {
        StoreKey(identity: identity, method: method, request: request)
    }

    /// Method, request digest prefix and identity: nothing that could carry a token.
    public var description: String {
        "\(method) request:\(request.prefix(12)) \(identity)"
    }

    /// The bytes the key's strings count against a store budget.
    var accountedBytes: Int {
        identity.digest.utf8.count + method.utf8.count + request.utf8.count
    }

    /// A fixed-size digest of the whole key, for tombstones and shared-store key names.
    public var fingerprint: [UInt8] {
        var hasher = SHA256()
        hasher.update(data: Self.fingerprintDomain)
        appendLengthPrefixed(identity.digest, to: &hasher)
        appendLengthPrefixed(method, to: &hasher)
        appendLengthPrefixed(request, to: &hasher)
        return hasher.finalize()
    }

    /// The domain labels the two digests start with, made once.
    private static let requestDomain = Array("prefetch-request-v4".utf8)
    private static let fingerprintDomain = Array("prefetch-store-key-v2".utf8)
}

/// Length prefixes keep ("ab","c") and ("a","bc") apart.
private func appendLengthPrefixed(_ bytes: [UInt8], to hasher: inout SHA256) {
    appendCount(bytes.count, to: &hasher)
    hasher.update(data: bytes)
}

/// A string's UTF-8 bytes, length-prefixed, read in place (no copy into an array).
private func appendLengthPrefixed(_ string: String, to hasher: inout SHA256) {
    var string = string
    string.withUTF8 { bytes in
        appendCount(bytes.count, to: &hasher)
        hasher.update(bufferPointer: UnsafeRawBufferPointer(bytes))
    }
}

/// A count before a list keeps lists of different lengths apart.
private func appendCount(_ count: Int, to hasher: inout SHA256) {
    var length = UInt64(count).bigEndian
    withUnsafeBytes(of: &length) { hasher.update(bufferPointer: $0) }
}

private func appendLengthPrefixed(_ bytes: [UInt8], to mac: inout HMACSHA256) {
    var length = UInt64(bytes.count).bigEndian
    withUnsafeBytes(of: &length) { mac.update(bufferPointer: $0) }
    mac.update(data: bytes)
}
