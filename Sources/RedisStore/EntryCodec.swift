import HTTPTypes
import PrefetchCore
import PrefetchStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a Redis value holds: a response, a no-store response, a failure, or a flight's leader lock.
enum StoredValue: Sendable, Hashable {
    case response(StoredResponse, label: String)
    case failure(StoreFailure, label: String)

    var label: String {
        switch self {
        case .response(_, let label), .failure(_, let label): label
        }
    }
}

/// The compact binary encoding of values kept in Redis.
///
///     kind:u8 labelLength:u16 label
///     kind 'R' or 'N' (no-store):  status:u32 fetchedAtWallMs:i64 elapsedMicros:i64 headerCount:u32
///                                  (nameLength:u32 name valueLength:u32 value)* bodyLength:u32 body
///     kind 'F':                    codeLength:u32 code messageLength:u32 message
///     kind 'L' (leader lock):      token as decimal digits
///
/// All integers are big-endian. The kind and label come first so the Lua scripts can tell a no-store response by
/// its first byte and read any value's label (for `retain`) without decoding the rest. `fetchedAt` travels as wall
/// clock milliseconds and is mapped back onto this process's monotonic clock, so it is only as comparable across
/// replicas as their wall clocks.
enum EntryCodec {
    static let responseKind = UInt8(ascii: "R")
    static let noStoreKind = UInt8(ascii: "N")
    static let failureKind = UInt8(ascii: "F")
    static let lockKind = UInt8(ascii: "L")

    static func encode(
        _ value: StoredValue, wallNow: Int64 = wallClockMilliseconds(),
        now: ContinuousClock.Instant = .now
    ) -> [UInt8] {
        var out: [UInt8] = []
        switch value {
        case .response(let response, let label):
            out.reserveCapacity(64 + label.utf8.count + response.accountedBytes + 8 * response.headers.count)
            out.append(response.noStore ? noStoreKind : responseKind)
            appendLabel(label, to: &out)
            append(UInt32(clamping: response.status), to: &out)
            let age = max(.zero, now - response.fetchedAt)
            append(UInt64(bitPattern: wallNow - age.milliseconds), to: &out)
            append(UInt64(bitPattern: response.elapsed.microseconds), to: &out)
            append(UInt32(clamping: response.headers.count), to: &out)
            for header in response.headers {
                appendField(Array(header.name.rawName.utf8), to: &out)
                appendField(Array(header.value.utf8), to: &out)
            }
            appendField(response.body, to: &out)
        case .failure(let failure, let label):
            out.append(failureKind)
            appendLabel(label, to: &out)
            appendField(Array(failure.code.rawValue.utf8), to: &out)
            appendField(Array(failure.message.utf8), to: &out)
        }
        return out
    }

    /// The value of a leader lock: its kind, the flight's label (so `retain` can drop it) and the token.
    static func lock(label: String, token: FlightToken) -> [UInt8] {
        var out: [UInt8] = [lockKind]
        appendLabel(label, to: &out)
        out.append(contentsOf: Array(String(token.value).utf8))
        return out
    }

    static func decode(
        _ bytes: [UInt8], wallNow: Int64 = wallClockMilliseconds(),
        now: ContinuousClock.Instant = .now
    ) -> StoredValue? {
        var reader = ByteReader(bytes: bytes)
        guard let kind = reader.byte(), let labelLength = reader.uint16(),
            let label = reader.string(count: Int(labelLength))
        else { return nil }
        switch kind {
        case responseKind, noStoreKind:
            guard let status = reader.uint32(), let fetchedWall = reader.uint64(), let elapsed = reader.uint64(),
                let headerCount = reader.uint32()
            else { return nil }
            var headers = HTTPFields()
            for _ in 0..<headerCount {
                // A name that is not a valid field name cannot have been written by `encode`: the entry is corrupt.
                guard let name = reader.field().flatMap({ HTTPField.Name(String(decoding: $0, as: UTF8.self)) }),
                    let value = reader.field().map({ String(decoding: $0, as: UTF8.self) })
                else { return nil }
                headers.append(HTTPField(name: name, value: value))
            }
            guard let body = reader.field(), reader.isAtEnd else { return nil }
            // A wall time `encode` cannot have written (before 1970, or so far off the difference overflows) marks the
            // entry corrupt; it must not trap the replica reading it.
            let (difference, overflow) = wallNow.subtractingReportingOverflow(Int64(bitPattern: fetchedWall))
            guard !overflow, Int64(bitPattern: fetchedWall) >= 0 else { return nil }
            let age = max(0, difference)
            let response = StoredResponse(
                status: Int(status), headers: headers, body: body, fetchedAt: now - .milliseconds(age),
                noStore: kind == noStoreKind, elapsed: .microseconds(Int64(bitPattern: elapsed)))
            return .response(response, label: label)
        case failureKind:
            guard let code = reader.field(), let message = reader.field(), reader.isAtEnd else { return nil }
            // A code another replica wrote: in an earlier spelling (snake_case) it reads as today's; one this version
            // does not know reads as `other`, with its message kept.
            let failure = StoreFailure(
                code: FailureCode(stored: String(decoding: code, as: UTF8.self)) ?? .other,
                message: String(decoding: message, as: UTF8.self))
            return .failure(failure, label: label)
        default:
            return nil
        }
    }

    private static func appendLabel(_ label: String, to out: inout [UInt8]) {
        let bytes = Array(label.utf8.prefix(Int(UInt16.max)))
        append(UInt16(bytes.count), to: &out)
        out.append(contentsOf: bytes)
    }

    private static func appendField(_ bytes: [UInt8], to out: inout [UInt8]) {
        append(UInt32(clamping: bytes.count), to: &out)
        out.append(contentsOf: bytes)
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }
}

/// Reads big-endian fields off a byte array; every read returns nil instead of running past the end.
struct ByteReader {
    let bytes: [UInt8]
    var offset = 0

    var isAtEnd: Bool { offset == bytes.count }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint16() -> UInt16? { integer() }
    mutating func uint32() -> UInt32? { integer() }
    mutating func uint64() -> UInt64? { integer() }

    mutating func take(_ count: Int) -> [UInt8]? {
        guard count >= 0, bytes.count - offset >= count else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func string(count: Int) -> String? {
        take(count).map { String(decoding: $0, as: UTF8.self) }
    }

    mutating func field() -> [UInt8]? {
        guard let count = uint32() else { return nil }
        return take(Int(count))
    }

    private mutating func integer<T: FixedWidthInteger>() -> T? {
        guard let raw = take(MemoryLayout<T>.size) else { return nil }
        return raw.reduce(T.zero) { ($0 << 8) | T($1) }
    }
}

/// Milliseconds since the Unix epoch on the wall clock.
func wallClockMilliseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}
