import CCrypto

// The digests the service computes, from the system's libcrypto (OpenSSL 3, which libcurl links too) through its
// EVP API. Every type has value semantics: a copy of a hasher or of a keyed HMAC carries its own state (copy on
// write), so a state prepared once (a keyed HMAC) is copied per use.

/// An incremental SHA-256. A copy continues from the state it was copied at, independently of the original.
public struct SHA256: Sendable {
    /// The digest's length in bytes.
    public static let byteCount = 32

    private var context: DigestContext

    /// A fresh hash (no bytes yet).
    public init() {
        context = DigestContext(algorithm: Algorithm.sha256)
    }

    /// Appends `data` to the hashed bytes.
    public mutating func update(data: [UInt8]) {
        data.withUnsafeBytes { update(bufferPointer: $0) }
    }

    /// Appends the bytes of `bufferPointer` to the hashed bytes.
    public mutating func update(bufferPointer: UnsafeRawBufferPointer) {
        if !isKnownUniquelyReferenced(&context) { context = DigestContext(copying: context) }
        context.update(bufferPointer)
    }

    /// The 32-byte digest of every byte appended so far.
    public consuming func finalize() -> [UInt8] {
        if !isKnownUniquelyReferenced(&context) { context = DigestContext(copying: context) }
        return context.finish(byteCount: Self.byteCount)
    }

    /// The 32-byte SHA-256 of `data`.
    public static func hash(data: [UInt8]) -> [UInt8] {
        data.withUnsafeBytes { hash(bufferPointer: $0) }
    }

    /// The 32-byte SHA-256 of the bytes of `bufferPointer`.
    public static func hash(bufferPointer: UnsafeRawBufferPointer) -> [UInt8] {
        oneShot(Algorithm.sha256, byteCount: byteCount, bufferPointer)
    }
}

/// HMAC-SHA256 (RFC 2104) built from two SHA-256 states: keyed once (the key's two padded blocks hashed at
/// `init`), then copied per message, so a copy does not repeat the key schedule.
public struct HMACSHA256: Sendable {
    private var inner = SHA256()
    private var outer = SHA256()

    /// A MAC keyed with `key` (any length; a key longer than SHA-256's 64-byte block is hashed first).
    public init(key: some Sequence<UInt8>) {
        var block = Array(key)
        if block.count > 64 { block = SHA256.hash(data: block) }
        block += [UInt8](repeating: 0, count: 64 - block.count)
        inner.update(data: block.map { $0 ^ 0x36 })
        outer.update(data: block.map { $0 ^ 0x5c })
    }

    /// Appends `data` to the authenticated message.
    public mutating func update(data: [UInt8]) {
        inner.update(data: data)
    }

    /// Appends the bytes of `bufferPointer` to the authenticated message.
    public mutating func update(bufferPointer: UnsafeRawBufferPointer) {
        inner.update(bufferPointer: bufferPointer)
    }

    /// The 32-byte MAC of the message appended so far.
    public consuming func finalize() -> [UInt8] {
        var outer = self.outer
        outer.update(data: inner.finalize())
        return outer.finalize()
    }

    /// The 32-byte HMAC-SHA256 of `data` under `key`.
    public static func authenticationCode(for data: [UInt8], key: some Sequence<UInt8>) -> [UInt8] {
        var mac = HMACSHA256(key: key)
        mac.update(data: data)
        return mac.finalize()
    }
}

/// SHA-1, one shot. Not for security: Redis names scripts by it (`EVALSHA`).
public enum SHA1 {
    /// The digest's length in bytes.
    public static let byteCount = 20

    /// The 20-byte SHA-1 of `data`.
    public static func hash(data: [UInt8]) -> [UInt8] {
        data.withUnsafeBytes { oneShot(Algorithm.sha1, byteCount: byteCount, $0) }
    }
}

/// MD5, one shot. Not for security: a checksum field some clients expect.
public enum MD5 {
    /// The digest's length in bytes.
    public static let byteCount = 16

    /// The 16-byte MD5 of `data`.
    public static func hash(data: [UInt8]) -> [UInt8] {
        data.withUnsafeBytes { hash(bufferPointer: $0) }
    }

    /// The 16-byte MD5 of the bytes of `bufferPointer`.
    public static func hash(bufferPointer: UnsafeRawBufferPointer) -> [UInt8] {
        oneShot(Algorithm.md5, byteCount: byteCount, bufferPointer)
    }
}

/// The algorithms, fetched once from the default provider (an explicit fetch: no per-use implicit lookup).
private enum Algorithm {
    nonisolated(unsafe) static let sha256 = fetch("SHA256")
    nonisolated(unsafe) static let sha1 = fetch("SHA1")
    nonisolated(unsafe) static let md5 = fetch("MD5")

    private static func fetch(_ name: String) -> OpaquePointer {
        guard let algorithm = EVP_MD_fetch(nil, name, nil) else { fatalError("libcrypto has no \(name) digest") }
        return algorithm
    }
}

/// One EVP_MD_CTX, owned: the shared state behind a hasher's copy on write.
private final class DigestContext: @unchecked Sendable {
    let pointer: OpaquePointer

    init(algorithm: OpaquePointer) {
        pointer = Self.allocate()
        guard EVP_DigestInit_ex(pointer, algorithm, nil) == 1 else { fatalError("EVP_DigestInit_ex failed") }
    }

    init(copying other: DigestContext) {
        pointer = Self.allocate()
        guard EVP_MD_CTX_copy_ex(pointer, other.pointer) == 1 else { fatalError("EVP_MD_CTX_copy_ex failed") }
    }

    deinit { EVP_MD_CTX_free(pointer) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        guard EVP_DigestUpdate(pointer, base, bytes.count) == 1 else { fatalError("EVP_DigestUpdate failed") }
    }

    /// The digest; the context is spent afterwards.
    func finish(byteCount: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: byteCount) { buffer, initialized in
            var length: UInt32 = 0
            guard EVP_DigestFinal_ex(pointer, buffer.baseAddress, &length) == 1, Int(length) == byteCount else {
                fatalError("EVP_DigestFinal_ex failed")
            }
            initialized = byteCount
        }
    }

    private static func allocate() -> OpaquePointer {
        guard let pointer = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        return pointer
    }
}

private func oneShot(_ algorithm: OpaquePointer, byteCount: Int, _ bytes: UnsafeRawBufferPointer) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: byteCount) { buffer, initialized in
        var length: UInt32 = 0
        let data = bytes.baseAddress ?? UnsafeRawPointer(buffer.baseAddress!)
        guard EVP_Digest(data, bytes.count, buffer.baseAddress, &length, algorithm, nil) == 1, Int(length) == byteCount else {
            fatalError("EVP_Digest failed")
        }
        initialized = byteCount
    }
}
