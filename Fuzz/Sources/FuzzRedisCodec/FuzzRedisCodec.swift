// The Redis entry codec (`EntryCodec`), which decodes whatever bytes a Redis value holds: another replica's entry,
// one written by an older build, or one corrupted or planted by anyone who can write to Redis.
//
// Checks, beyond no crash and no sanitizer report:
// - decoding arbitrary bytes gives nothing or a value that survives being encoded and decoded again unchanged;
// - a value built from the input (status, headers, body, times, a failure) decodes to itself once encoded, and no
//   shorter prefix of its encoding decodes at all;
// - a leader lock never decodes as a value.
import PrefetchCore
import FuzzSupport
import Glibc
import HTTPTypes
import PrefetchStore
@testable import RedisStore

/// One fixed clock reading for a whole run, so times map back exactly.
let wallNow: Int64 = 1_750_000_000_000
let now = ContinuousClock.Instant.now

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = inputBytes(data, size)
    // `encode` takes only what a fetch makes: an elapsed time within ±292,000 years is all it can write in microseconds.
    if let value = EntryCodec.decode(bytes, wallNow: wallNow, now: now), isEncodable(value) {
        let again = EntryCodec.decode(EntryCodec.encode(value, wallNow: wallNow, now: now), wallNow: wallNow, now: now)
        require(again == value, "a decoded value does not survive encoding: \(value) then \(String(describing: again))")
    }
    var input = Input(bytes: bytes)
    let value = input.value()
    let encoded = EntryCodec.encode(value, wallNow: wallNow, now: now)
    require(EntryCodec.decode(encoded, wallNow: wallNow, now: now) == value, "\(value) does not decode to itself")
    let cut = Int(input.byte()) * encoded.count / 256
    require(EntryCodec.decode(Array(encoded[..<cut]), wallNow: wallNow, now: now) == nil, "a prefix of \(cut) bytes decodes")
    let lock = EntryCodec.lock(label: value.label, token: FlightToken(input.uint64()))
    require(EntryCodec.decode(lock, wallNow: wallNow, now: now) == nil, "a leader lock decodes as a value")
    return 0
}

private func isEncodable(_ value: StoredValue) -> Bool {
    guard case .response(let response, _) = value else { return true }
    return abs(response.elapsed.components.seconds) < 9_000_000_000_000
}

/// Draws the parts of a value from the input; past its end, zeros.
struct Input {
    var bytes: [UInt8]
    var offset = 0

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint64() -> UInt64 { (0..<8).reduce(0) { value, _ in value << 8 | UInt64(byte()) } }

    mutating func bytes(upTo limit: Int) -> [UInt8] {
        let count = min(Int(byte()) % (limit + 1), bytes.count - min(offset, bytes.count))
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func text(upTo limit: Int) -> String { String(decoding: bytes(upTo: limit), as: UTF8.self) }

    mutating func value() -> StoredValue {
        let label = text(upTo: 40)
        if byte() & 1 == 0 {
            let codes = FailureCode.allCases
            return .failure(StoreFailure(code: codes[Int(byte()) % codes.count], message: text(upTo: 200)), label: label)
        }
        var headers = HTTPFields()
        for _ in 0..<(byte() % 6) {
            let name = text(upTo: 20)
            let value = text(upTo: 60)
            if let name = HTTPField.Name(name) { headers.append(HTTPField(name: name, value: value)) }
        }
        // Times as the codec keeps them: fetched whole milliseconds ago (not in the future), elapsed in microseconds.
        let age = Int64(uint64() % 1_000_000_000_000)
        let elapsed = Int64(bitPattern: uint64()) / 1_000_000
        let response = StoredResponse(
            status: Int(uint64() % 1000), headers: headers, body: bytes(upTo: 255), fetchedAt: now - .milliseconds(age),
            noStore: byte() & 1 == 1, elapsed: .microseconds(elapsed))
        return .response(response, label: label)
    }
}

/// `FuzzRedisCodec --write-seeds DIR` writes entries encoded by the codec itself (the seed corpus) and exits.
func writeSeeds(to directory: String) -> CInt {
    var headers = HTTPFields()
    headers.append(HTTPField(name: .contentType, value: "application/json"))
    headers.append(HTTPField(name: .setCookie, value: "a=1"))
    headers.append(HTTPField(name: .setCookie, value: "b=2; Path=/"))
    let values: [(String, StoredValue)] = [
        ("response", .response(StoredResponse(status: 200, headers: headers, body: Array(#"{"data":{"uid":"u-42"}}"#.utf8),
            fetchedAt: now - .milliseconds(1500), elapsed: .microseconds(12_345)), label: "user")),
        ("no-store", .response(StoredResponse(status: 404, body: [], fetchedAt: now, noStore: true), label: "feed")),
        ("failure", .failure(StoreFailure(code: .timeout, message: "no answer within 800 ms"), label: "profile")),
    ]
    var files = values.map { ($0.0, EntryCodec.encode($0.1, wallNow: wallNow, now: now)) }
    files.append(("lock", EntryCodec.lock(label: "user", token: FlightToken(42))))
    for (name, bytes) in files {
        guard let file = fopen(directory + "/" + name + ".bin", "wb") else { return 1 }
        fwrite(bytes, 1, bytes.count, file)
        fclose(file)
    }
    return 0
}

@_cdecl("FuzzRedisCodec_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    if argc == 3, let flag = argv[1], String(cString: flag) == "--write-seeds", let directory = argv[2] {
        return writeSeeds(to: String(cString: directory))
    }
    return runLibFuzzer(argc: argc, argv: argv, fuzz)
}
