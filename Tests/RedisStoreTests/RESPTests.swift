import NIOCore
import PrefetchCore
import PropertyBased
import Testing

@testable import RedisStore

/// The RESP2 codec the pool speaks: commands encoded byte for byte, every reply type decoded however the bytes are
/// split, and every length a server could grow refused past its limit before anything is buffered for it.
@Suite struct RESPTests {
    static let limits = RESPLimits(maximumValueBytes: 1024 * 1024)

    /// One of every reply type, and the edges of each.
    static let replies: [RedisValue] = [
        .status("OK"), .status(""), .error("ERR unknown command 'NOPE'"), .error("NOAUTH Authentication required."),
        .integer(0), .integer(-1), .integer(42), .integer(Int64.max), .integer(Int64.min),
        .string([]), .string(Array("hello".utf8)), .string([0, 13, 10, 255, 36, 42, 13]), .null,
        .array([]), .array([.integer(1), .string(Array("v".utf8)), .integer(-1)]),
        .array([.string(Array("0".utf8)), .array([.string(Array("k1".utf8)), .string(Array("k2".utf8))])]),
        .array([.null, .array([]), .array([.array([.status("deep")])]), .error("inner")]),
    ]

    static func bytes(_ values: [RedisValue]) -> [UInt8] {
        var buffer = ByteBuffer()
        for value in values { RESPEncoder.encode(reply: value, into: &buffer) }
        return Array(buffer.readableBytesView)
    }

    /// Feeds `chunks` one after another, as reads from a socket, and collects every reply; the error if one is thrown.
    static func parse(_ chunks: [[UInt8]], limits: RESPLimits = limits) -> (values: [RedisValue], error: RESPError?) {
        var parser = RESPParser(limits: limits)
        var buffer = ByteBuffer()
        var values: [RedisValue] = []
        do throws(RESPError) {
            for chunk in chunks {
                buffer.writeBytes(chunk)
                while let value = try parser.next(from: &buffer) { values.append(value) }
            }
        } catch {
            return (values, error)
        }
        return (values, nil)
    }

    @Test func commandsAreArraysOfBinarySafeBulkStrings() {
        var buffer = ByteBuffer()
        let command: [[UInt8]] = [Array("SET".utf8), [0, 13, 10, 255], []]
        RESPEncoder.encode(command, into: &buffer)
        #expect(
            Array(buffer.readableBytesView) == Array("*3\r\n$3\r\nSET\r\n$4\r\n".utf8) + [0, 13, 10, 255] + Array("\r\n$0\r\n\r\n".utf8))
        #expect(RESPEncoder.encodedCount(command) == buffer.readableBytes)
        // The server's side reads it back as the array of strings it is.
        #expect(Self.parse([Array(buffer.readableBytesView)]).values == [.array(command.map { .string($0) })])
    }

    @Test func encodedCountIsExactForEveryLength() {
        for length in [0, 1, 9, 10, 99, 100, 1000, 12345] {
            let command = [Array(repeating: UInt8(ascii: "x"), count: length), Array("GET".utf8)]
            var buffer = ByteBuffer()
            RESPEncoder.encode(command, into: &buffer)
            #expect(RESPEncoder.encodedCount(command) == buffer.readableBytes, "argument of \(length) bytes")
        }
    }

    @Test func everyReplyTypeRoundTrips() {
        for value in Self.replies {
            #expect(Self.parse([Self.bytes([value])]).values == [value], "\(value)")
        }
        #expect(Self.parse([Array("*-1\r\n".utf8)]).values == [.null], "a null array is null, as hiredis has it")
        #expect(Self.parse([Array("*2\r\n$-1\r\n*-1\r\n".utf8)]).values == [.array([.null, .null])])
    }

    @Test func aStreamSplitAtEveryByteBoundaryGivesTheSameReplies() {
        let stream = Self.bytes(Self.replies)
        for split in 0...stream.count {
            let parsed = Self.parse([Array(stream[..<split]), Array(stream[split...])])
            #expect(parsed.error == nil && parsed.values == Self.replies, "split at \(split)")
        }
        let byteByByte = Self.parse(stream.map { [$0] })
        #expect(byteByByte.error == nil && byteByByte.values == Self.replies)
    }

    @Test func anIncompleteReplyIsNotHandedOut() throws {
        var parser = RESPParser(limits: Self.limits)
        var buffer = ByteBuffer(bytes: Array("*2\r\n:1\r\n$5\r\nhel".utf8))
        #expect(try parser.next(from: &buffer) == nil)
        #expect(!parser.isIdle)
        buffer.writeBytes(Array("lo\r\n+next\r\n".utf8))
        #expect(try parser.next(from: &buffer) == .array([.integer(1), .string(Array("hello".utf8))]))
        #expect(try parser.next(from: &buffer) == .status("next"))
        #expect(parser.isIdle && buffer.readableBytes == 0)
    }

    /// Random nested replies, encoded and cut into random pieces, parse back to themselves.
    @Test func randomRepliesInRandomPiecesRoundTrip() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int.max)) { seed in
            var random = SeededRandom(seed: UInt64(seed))
            let values = (0..<Int(random.next() % 6 + 1)).map { _ in Self.randomValue(&random, depth: 0) }
            let stream = Self.bytes(values)
            var chunks: [[UInt8]] = []
            var offset = 0
            while offset < stream.count {
                let length = min(stream.count - offset, Int(random.next() % 17) + 1)
                chunks.append(Array(stream[offset..<offset + length]))
                offset += length
            }
            let parsed = Self.parse(chunks)
            #expect(parsed.error == nil && parsed.values == values)
        }
    }

    static func randomValue(_ random: inout SeededRandom, depth: Int) -> RedisValue {
        switch random.next() % (depth < 3 ? 7 : 6) {
        case 0: .status(String(repeating: "s", count: Int(random.next() % 8)))
        case 1: .error("ERR " + String(repeating: "e", count: Int(random.next() % 8)))
        case 2: .integer(Int64(bitPattern: random.next()))
        case 3: .string((0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        case 4: .null
        case 5: .integer(Int64(random.next() % 1000))
        default: .array((0..<Int(random.next() % 5)).map { _ in randomValue(&random, depth: depth + 1) })
        }
    }

    static let small = RESPLimits(
        maximumBulkBytes: 100, maximumReplyBytes: 300, maximumElements: 10, maximumDepth: 3, maximumLineBytes: 40)

    /// Bytes a hostile (or broken) server could send, each with the error kind it must get, and how far in.
    @Test(arguments: [
        ("$101\r\n", RESPError.Kind.limit, "a bulk string above the cap is refused at its header"),
        ("$2147483647\r\n", .limit, "the largest length a header can say"),
        ("$99999999999999999999\r\n", .malformed, "a length past 64 bits"),
        ("*11\r\n", .limit, "an array above the cap"),
        ("*4\r\n*4\r\n*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", .limit, "more elements in all than the cap"),
        ("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", .limit, "deeper than the cap"),
        // Found by FuzzRESP: an empty array one level past the cap was handed out.
        ("*1\r\n*1\r\n*1\r\n*0\r\n", .limit, "an empty array deeper than the cap"),
        ("+" + String(repeating: "a", count: 41), .limit, "a line past its cap, before its CRLF arrives"),
        (
            "*3\r\n$95\r\n" + String(repeating: "a", count: 95) + "\r\n$95\r\n" + String(repeating: "b", count: 95) + "\r\n$95\r\n",
            .limit, "a reply longer than the cap in all"
        ),
        ("$-2\r\n", .malformed, "a negative length other than -1"),
        ("*-5\r\n", .malformed, "a negative count other than -1"),
        (":12a\r\n", .malformed, "an integer with a letter"),
        (":\r\n", .malformed, "an empty integer"),
        (":9223372036854775808\r\n", .malformed, "an integer past Int64.max"),
        ("$3\r\nabcd\r\n", .malformed, "a bulk string longer than it said"),
        ("+OK\nmore\r\n", .malformed, "a bare LF"),
        ("+O\rK\r\n", .malformed, "a bare CR"),
        ("%1\r\n", .malformed, "a RESP3 map"),
        ("_\r\n", .malformed, "a RESP3 null"),
        ("hello\r\n", .malformed, "not RESP at all"),
    ])
    func hostileRepliesAreRefused(input: String, kind: RESPError.Kind, why: String) {
        let bytes = Array(input.utf8)
        let whole = Self.parse([bytes], limits: Self.small)
        #expect(whole.error?.kind == kind, "\(why): \(String(describing: whole.error))")
        #expect(whole.values.isEmpty, "\(why): nothing is handed out")
        let trickled = Self.parse(bytes.map { [$0] }, limits: Self.small)
        #expect(trickled.error?.kind == kind, "\(why), byte by byte: \(String(describing: trickled.error))")
    }

    @Test func valuesAtTheLimitsAreAccepted() {
        let bulk = RedisValue.string(Array(repeating: 7, count: 100))
        #expect(Self.parse([Self.bytes([bulk])], limits: Self.small).values == [bulk])
        let nested = RedisValue.array([.array([.array([.integer(1)])])])
        #expect(Self.parse([Self.bytes([nested])], limits: Self.small).values == [nested])
        let line = RedisValue.status(String(repeating: "a", count: 40))
        #expect(Self.parse([Self.bytes([line])], limits: Self.small).values == [line])
        let wide = RedisValue.array((0..<10).map { .integer(Int64($0)) })
        #expect(Self.parse([Self.bytes([wide])], limits: Self.small).values == [wide])
    }

    @Test func theLimitsAreForOneReplyNotTheConnection() {
        // Each reply is under the caps; together they are far over them.
        let value = RedisValue.array((0..<8).map { _ in .string(Array(repeating: 1, count: 30)) })
        let parsed = Self.parse([Self.bytes(Array(repeating: value, count: 20))], limits: Self.small)
        #expect(parsed.error == nil && parsed.values.count == 20)
    }

    @Test func theStoreLimitsFitTheLargestEntry() {
        let limits = RESPLimits(maximumValueBytes: RedisStore.Configuration().maximumValueBytes)
        // A 2 MiB response (the service's default cap) with headers: well under the bulk cap.
        let entry = RedisValue.array([.integer(1), .string(Array(repeating: 0x41, count: 2 * 1024 * 1024 + 300 * 1024)), .integer(-1)])
        #expect(Self.parse([Self.bytes([entry])], limits: limits).values == [entry])
    }
}
