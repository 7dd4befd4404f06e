/// The protobuf wire format, as much of it as the OTLP export requests use: varints, tags, length-delimited fields
/// (strings, bytes, nested messages, packed repeated scalars), fixed64 and double. Proto3 rules are the caller's:
/// a field at its default is simply not written (`OTLPEncoding` leaves out zeros and empty strings except in a
/// `oneof`, whose member must be written to be present).
///
/// A nested message is written in place and its length put in front afterwards: one byte is kept for it, which is
/// the whole prefix of a message under 128 bytes (most attributes and values); a longer one moves its own bytes
/// over by the prefix's extra length, so each level of nesting costs one copy of what it holds.
struct ProtobufWriter: Sendable {
    /// The wire types the writer emits.
    enum WireType: UInt8, Sendable {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    /// The encoded message so far.
    private(set) var bytes: [UInt8] = []

    /// An empty message.
    init() {}

    /// The tag of field `number`: its number and wire type as one varint.
    mutating func tag(_ number: Int, _ type: WireType) {
        varint(UInt64(number) << 3 | UInt64(type.rawValue))
    }

    /// An unsigned varint: seven bits a byte, least significant first.
    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// Eight bytes, little-endian.
    mutating func fixed64(_ value: UInt64) {
        var value = value
        for _ in 0..<8 {
            bytes.append(UInt8(truncatingIfNeeded: value))
            value >>= 8
        }
    }

    /// Four bytes, little-endian.
    mutating func fixed32(_ value: UInt32) {
        var value = value
        for _ in 0..<4 {
            bytes.append(UInt8(truncatingIfNeeded: value))
            value >>= 8
        }
    }

    // MARK: Fields

    /// A `uint32`, `uint64`, `int64` (two's complement: a negative value takes ten bytes), `bool` or enum field.
    mutating func varintField(_ number: Int, _ value: UInt64) {
        tag(number, .varint)
        varint(value)
    }

    /// An `int64` field.
    mutating func int64Field(_ number: Int, _ value: Int64) {
        varintField(number, UInt64(bitPattern: value))
    }

    /// A `bool` field.
    mutating func boolField(_ number: Int, _ value: Bool) {
        varintField(number, value ? 1 : 0)
    }

    /// A `fixed64` field.
    mutating func fixed64Field(_ number: Int, _ value: UInt64) {
        tag(number, .fixed64)
        fixed64(value)
    }

    /// An `sfixed64` field.
    mutating func sfixed64Field(_ number: Int, _ value: Int64) {
        fixed64Field(number, UInt64(bitPattern: value))
    }

    /// A `fixed32` field.
    mutating func fixed32Field(_ number: Int, _ value: UInt32) {
        tag(number, .fixed32)
        fixed32(value)
    }

    /// A `double` field (IEEE 754, as a fixed64).
    mutating func doubleField(_ number: Int, _ value: Double) {
        fixed64Field(number, value.bitPattern)
    }

    /// A `string` field: its UTF-8 bytes.
    mutating func stringField(_ number: Int, _ value: String) {
        tag(number, .lengthDelimited)
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// A `bytes` field.
    mutating func bytesField(_ number: Int, _ value: some Collection<UInt8>) {
        tag(number, .lengthDelimited)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A nested message field: `body` writes its fields.
    mutating func messageField(_ number: Int, _ body: (inout ProtobufWriter) -> Void) {
        tag(number, .lengthDelimited)
        lengthDelimited(body)
    }

    /// A packed `repeated fixed64` field (nothing when `values` is empty).
    mutating func packedFixed64Field(_ number: Int, _ values: [UInt64]) {
        guard !values.isEmpty else { return }
        tag(number, .lengthDelimited)
        varint(UInt64(values.count * 8))
        for value in values { fixed64(value) }
    }

    /// A packed `repeated double` field (nothing when `values` is empty).
    mutating func packedDoubleField(_ number: Int, _ values: [Double]) {
        packedFixed64Field(number, values.map(\.bitPattern))
    }

    /// What `body` writes, preceded by its length as a varint.
    private mutating func lengthDelimited(_ body: (inout ProtobufWriter) -> Void) {
        let prefix = bytes.count
        bytes.append(0)
        body(&self)
        let length = bytes.count - prefix - 1
        if length < 0x80 {
            bytes[prefix] = UInt8(length)
            return
        }
        var encoded = ProtobufWriter()
        encoded.varint(UInt64(length))
        bytes.replaceSubrange(prefix..<prefix + 1, with: encoded.bytes)
    }
}
