// RESP2, the Redis protocol, as the pool speaks it: commands go out as arrays of bulk strings (`RESPEncoder`), and
// replies come back through an incremental parser (`RESPParser`) that bounds every length a server could grow.
// Held to by Tests/RedisStoreTests/RESPTests.swift and the FuzzRESP libFuzzer target (Fuzz/).

import NIOCore

/// The most a Redis reply may claim. Everything a server sends is bounded: a longer bulk string, a larger array, a
/// deeper nesting, a longer line or a larger reply is a protocol error (`RESPError.Kind.limit`), and the pool closes
/// the connection instead of buffering it.
struct RESPLimits: Sendable, Hashable {
    /// The longest bulk string (`$`). The store's largest value is one entry: a response body (at most the
    /// service's `maximumResponseBytes`, 2 MiB by default) with its headers and a few dozen bytes of framing.
    var maximumBulkBytes: Int
    /// The most bytes one reply may span on the wire, all of its elements counted.
    var maximumReplyBytes: Int
    /// The most array elements one reply may announce, nested arrays' included (a `SCAN` page is about a thousand).
    var maximumElements: Int
    /// The deepest nesting of arrays (`SCAN` answers two levels; no script answers more).
    var maximumDepth: Int
    /// The longest line: a simple string, an error, an integer, or a length (Redis's own error messages are short).
    var maximumLineBytes: Int

    /// Limits for a store whose largest value is `maximumValueBytes`.
    init(maximumValueBytes: Int) {
        maximumBulkBytes = maximumValueBytes
        maximumReplyBytes = 2 * maximumValueBytes
        maximumElements = 1 << 20
        maximumDepth = 8
        maximumLineBytes = 64 * 1024
    }

    /// Limits set one by one (tests and the fuzz target use small ones).
    init(maximumBulkBytes: Int, maximumReplyBytes: Int, maximumElements: Int, maximumDepth: Int, maximumLineBytes: Int) {
        self.maximumBulkBytes = maximumBulkBytes
        self.maximumReplyBytes = maximumReplyBytes
        self.maximumElements = maximumElements
        self.maximumDepth = maximumDepth
        self.maximumLineBytes = maximumLineBytes
    }
}

/// Bytes a server sent that are not a RESP2 reply, or one beyond `RESPLimits`. The connection cannot be trusted
/// after either: the pool closes it and fails what was outstanding on it.
struct RESPError: Error, Sendable, Hashable, CustomStringConvertible {
    enum Kind: Sendable, Hashable {
        /// Not RESP2: an unknown type byte, a bad number, a missing CRLF.
        case malformed
        /// Well-formed, but larger than a `RESPLimits` bound.
        case limit
    }

    var kind: Kind
    var message: String

    var description: String { message }
}

/// Writes commands as RESP2 arrays of bulk strings, binary-safe.
enum RESPEncoder {
    private static let crlf: StaticString = "\r\n"

    /// The bytes `command` takes on the wire.
    static func encodedCount(_ command: [[UInt8]]) -> Int {
        command.reduce(3 + decimalDigits(command.count)) { $0 + 5 + decimalDigits($1.count) + $1.count }
    }

    /// Appends `command` (`*N`, then `$len` and the bytes of each argument) to `buffer`.
    static func encode(_ command: [[UInt8]], into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(ascii: "*"))
        writeDecimal(command.count, into: &buffer)
        buffer.writeStaticString(crlf)
        for argument in command {
            buffer.writeInteger(UInt8(ascii: "$"))
            writeDecimal(argument.count, into: &buffer)
            buffer.writeStaticString(crlf)
            buffer.writeBytes(argument)
            buffer.writeStaticString(crlf)
        }
    }

    /// Appends `value` as a server would send it: the other side of the protocol, for tests and the fuzz target. A
    /// `.null` is written as a null bulk string; a status or error must not contain CR or LF.
    static func encode(reply value: RedisValue, into buffer: inout ByteBuffer) {
        switch value {
        case .string(let bytes):
            buffer.writeInteger(UInt8(ascii: "$"))
            writeDecimal(bytes.count, into: &buffer)
            buffer.writeStaticString(crlf)
            buffer.writeBytes(bytes)
            buffer.writeStaticString(crlf)
        case .integer(let number):
            buffer.writeInteger(UInt8(ascii: ":"))
            buffer.writeString(String(number))
            buffer.writeStaticString(crlf)
        case .array(let elements):
            buffer.writeInteger(UInt8(ascii: "*"))
            writeDecimal(elements.count, into: &buffer)
            buffer.writeStaticString(crlf)
            for element in elements { encode(reply: element, into: &buffer) }
        case .null:
            buffer.writeStaticString("$-1\r\n")
        case .status(let text):
            buffer.writeInteger(UInt8(ascii: "+"))
            buffer.writeString(text)
            buffer.writeStaticString(crlf)
        case .error(let text):
            buffer.writeInteger(UInt8(ascii: "-"))
            buffer.writeString(text)
            buffer.writeStaticString(crlf)
        }
    }

    /// A non-negative number in decimal ASCII, without making a `String`.
    private static func writeDecimal(_ value: Int, into buffer: inout ByteBuffer) {
        precondition(value >= 0, "a RESP length is never negative")
        var divisor = 1
        while divisor <= value / 10 { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            buffer.writeInteger(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    private static func decimalDigits(_ value: Int) -> Int {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }
}

/// Reads RESP2 replies from bytes that arrive in pieces. `next(from:)` consumes one whole element at a time (a
/// scalar, or an array's header) and keeps the arrays it is inside of, so a reply split anywhere costs no re-reading
/// of what was already parsed, and a reply is handed out only once complete. Every length is checked against
/// `limits` before anything is buffered for it.
struct RESPParser {
    let limits: RESPLimits

    /// An array being filled: the elements so far and how many are still to come.
    private struct Frame {
        var elements: [RedisValue]
        var remaining: Int
    }

    /// The arrays the next element belongs to, outermost first.
    private var frames: [Frame] = []
    /// Bytes and elements of the reply being read, for `maximumReplyBytes` and `maximumElements`.
    private var replyBytes = 0
    private var replyElements = 0

    init(limits: RESPLimits) {
        self.limits = limits
    }

    /// True when no reply is partly read.
    var isIdle: Bool { frames.isEmpty && replyBytes == 0 }

    /// The next complete reply in `buffer`, consuming its bytes; nil (having consumed only whole elements, which it
    /// keeps) when `buffer` ends first. Throws on bytes that are not RESP2 or exceed `limits`; the parser and the
    /// connection are unusable after that.
    mutating func next(from buffer: inout ByteBuffer) throws(RESPError) -> RedisValue? {
        while true {
            guard let (element, length) = try element(in: buffer) else { return nil }
            buffer.moveReaderIndex(forwardBy: length)
            replyBytes += length
            guard replyBytes <= limits.maximumReplyBytes else {
                throw RESPError(kind: .limit, message: "a reply longer than \(limits.maximumReplyBytes) bytes")
            }
            var value: RedisValue
            switch element {
            case .value(let scalar):
                value = scalar
            case .arrayHeader(let count):
                replyElements += count
                guard replyElements <= limits.maximumElements else {
                    throw RESPError(kind: .limit, message: "a reply of more than \(limits.maximumElements) array elements")
                }
                // Every array counts for the depth, an empty one too (it is an array one level below its parent).
                guard frames.count < limits.maximumDepth else {
                    throw RESPError(kind: .limit, message: "arrays nested deeper than \(limits.maximumDepth)")
                }
                guard count > 0 else {
                    value = .array([])
                    break
                }
                // Room for what the header claims only up to a point: the claim is the server's, not yet backed by bytes.
                var elements: [RedisValue] = []
                elements.reserveCapacity(min(count, 1024))
                frames.append(Frame(elements: elements, remaining: count))
                continue
            }
            // A complete value: it fills its array, which may complete arrays around it.
            while !frames.isEmpty {
                let last = frames.count - 1
                frames[last].elements.append(value)
                frames[last].remaining -= 1
                guard frames[last].remaining == 0 else { break }
                value = .array(frames.removeLast().elements)
            }
            if frames.isEmpty {
                replyBytes = 0
                replyElements = 0
                return value
            }
        }
    }

    /// One element read at the start of a buffer.
    private enum Element {
        case value(RedisValue)
        case arrayHeader(Int)
    }

    /// The element at the start of `buffer` and the bytes it takes, without consuming them; nil when incomplete.
    private func element(in buffer: ByteBuffer) throws(RESPError) -> (Element, Int)? {
        guard let type = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return nil }
        guard Self.types.contains(type) else {
            throw RESPError(kind: .malformed, message: "an unknown reply type byte \(type) (this client speaks RESP2)")
        }
        guard let lineLength = try line(in: buffer) else { return nil }
        let lineStart = buffer.readerIndex + 1
        let lineBytes = buffer.readableBytesView[lineStart..<lineStart + lineLength]
        let headerLength = 1 + lineLength + 2
        switch type {
        case UInt8(ascii: "+"):
            return (.value(.status(String(decoding: lineBytes, as: UTF8.self))), headerLength)
        case UInt8(ascii: "-"):
            return (.value(.error(String(decoding: lineBytes, as: UTF8.self))), headerLength)
        case UInt8(ascii: ":"):
            guard let number = Self.integer(lineBytes) else {
                throw RESPError(kind: .malformed, message: "an integer reply that is not a 64-bit integer")
            }
            return (.value(.integer(number)), headerLength)
        case UInt8(ascii: "$"):
            let count = try Self.length(lineBytes, what: "bulk string")
            guard count >= 0 else { return (.value(.null), headerLength) }
            guard count <= limits.maximumBulkBytes else {
                throw RESPError(
                    kind: .limit, message: "a bulk string of \(count) bytes, above the limit of \(limits.maximumBulkBytes)")
            }
            let total = headerLength + count + 2
            // Checked before the bytes are in, so the reply cannot outgrow its limit on the way.
            guard replyBytes + total <= limits.maximumReplyBytes else {
                throw RESPError(kind: .limit, message: "a reply longer than \(limits.maximumReplyBytes) bytes")
            }
            guard buffer.readableBytes >= total else { return nil }
            let dataStart = buffer.readerIndex + headerLength
            guard buffer.getInteger(at: dataStart + count, as: UInt16.self) == Self.crlf else {
                throw RESPError(kind: .malformed, message: "a bulk string not followed by CRLF")
            }
            return (.value(.string(buffer.getBytes(at: dataStart, length: count) ?? [])), total)
        case UInt8(ascii: "*"):
            let count = try Self.length(lineBytes, what: "array")
            guard count >= 0 else { return (.value(.null), headerLength) }
            guard count <= limits.maximumElements else {
                throw RESPError(kind: .limit, message: "an array of \(count) elements, above the limit of \(limits.maximumElements)")
            }
            return (.arrayHeader(count), headerLength)
        default:
            throw RESPError(kind: .malformed, message: "an unknown reply type byte \(type) (this client speaks RESP2)")
        }
    }

    /// RESP2's type bytes: simple string, error, integer, bulk string, array.
    private static let types: [UInt8] = [UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"), UInt8(ascii: "$"), UInt8(ascii: "*")]

    private static let crlf = UInt16(UInt8(ascii: "\r")) << 8 | UInt16(UInt8(ascii: "\n"))

    /// The length of the line after the type byte, up to its CRLF; nil when the CRLF has not arrived yet. Throws when
    /// the line is longer than `maximumLineBytes` (or would be) or holds a bare CR or LF.
    private func line(in buffer: ByteBuffer) throws(RESPError) -> Int? {
        let view = buffer.readableBytesView
        let start = view.startIndex + 1
        let searched = view[start..<min(view.endIndex, start + limits.maximumLineBytes + 1)]
        guard let end = searched.firstIndex(where: { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }) else {
            guard searched.count <= limits.maximumLineBytes else {
                throw RESPError(kind: .limit, message: "a line longer than \(limits.maximumLineBytes) bytes")
            }
            return nil
        }
        guard view[end] == UInt8(ascii: "\r") else { throw RESPError(kind: .malformed, message: "a line ending in a bare LF") }
        guard end + 1 < view.endIndex else { return nil }
        guard view[end + 1] == UInt8(ascii: "\n") else {
            throw RESPError(kind: .malformed, message: "a line with a bare CR")
        }
        return end - start
    }

    /// A signed 64-bit decimal: an optional `-` and 1 to 19 digits, nothing else.
    private static func integer(_ bytes: ByteBufferView.SubSequence) -> Int64? {
        var digits = bytes[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var magnitude: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            magnitude = magnitude * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// A bulk string's or array's length: a non-negative count, or -1 for null.
    private static func length(_ bytes: ByteBufferView.SubSequence, what: String) throws(RESPError) -> Int {
        guard let number = integer(bytes), number >= -1, number <= Int64(Int32.max) else {
            throw RESPError(kind: .malformed, message: "a \(what) length that is not -1 or a count")
        }
        return Int(number)
    }
}

/// `RESPParser` as a channel handler's decoder: one `RedisValue` per complete reply.
struct RESPReplyDecoder: ByteToMessageDecoder {
    typealias InboundOut = RedisValue

    private var parser: RESPParser

    init(limits: RESPLimits) {
        parser = RESPParser(limits: limits)
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let value = try parser.next(from: &buffer) else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(value))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decode(context: context, buffer: &buffer)
    }
}
