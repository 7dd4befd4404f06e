/// A protobuf wire-format reader for the tests, written apart from the exporter's writer: a message as its fields,
/// in order, each with its number and raw value. It decodes what `ProtobufWriter` and `OTLPEncoding` produce, so
/// the tests check the export requests field by field, by the field numbers of opentelemetry-proto.
struct Message: CustomStringConvertible {
    enum Value: Equatable {
        case varint(UInt64)
        case fixed64(UInt64)
        case fixed32(UInt32)
        case bytes([UInt8])
    }

    struct Field {
        var number: Int
        var value: Value
    }

    var fields: [Field]

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// Every field of `bytes`, which must be a whole message.
    init(_ bytes: [UInt8]) throws {
        var fields: [Field] = []
        var at = 0
        func varint() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard at < bytes.count, shift < 64 else { throw Malformed(description: "truncated varint at \(at)") }
                let byte = bytes[at]
                at += 1
                value |= UInt64(byte & 0x7f) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
        }
        func fixed(_ count: Int) throws -> UInt64 {
            guard at + count <= bytes.count else { throw Malformed(description: "truncated fixed\(count * 8) at \(at)") }
            var value: UInt64 = 0
            for index in 0..<count { value |= UInt64(bytes[at + index]) << (8 * UInt64(index)) }
            at += count
            return value
        }
        while at < bytes.count {
            let tag = try varint()
            let number = Int(tag >> 3)
            guard number > 0 else { throw Malformed(description: "field number 0 at \(at)") }
            switch tag & 7 {
            case 0: fields.append(Field(number: number, value: .varint(try varint())))
            case 1: fields.append(Field(number: number, value: .fixed64(try fixed(8))))
            case 5: fields.append(Field(number: number, value: .fixed32(UInt32(try fixed(4)))))
            case 2:
                let length = Int(try varint())
                guard at + length <= bytes.count else { throw Malformed(description: "length \(length) past the end at \(at)") }
                fields.append(Field(number: number, value: .bytes(Array(bytes[at..<at + length]))))
                at += length
            default: throw Malformed(description: "wire type \(tag & 7) at \(at)")
            }
        }
        self.fields = fields
    }

    /// Every value of field `number`.
    func all(_ number: Int) -> [Value] { fields.filter { $0.number == number }.map(\.value) }

    /// Every nested message of field `number`.
    func messages(_ number: Int) throws -> [Message] {
        try all(number).map { value in
            guard case .bytes(let bytes) = value else { throw Malformed(description: "field \(number) is not length-delimited") }
            return try Message(bytes)
        }
    }

    /// The one nested message of field `number`.
    func message(_ number: Int) throws -> Message {
        let found = try messages(number)
        guard found.count == 1 else { throw Malformed(description: "field \(number) occurs \(found.count) times") }
        return found[0]
    }

    func bytes(_ number: Int) -> [UInt8]? {
        for case .bytes(let bytes) in all(number) { return bytes }
        return nil
    }

    func string(_ number: Int) -> String? { bytes(number).map { String(decoding: $0, as: UTF8.self) } }

    func varint(_ number: Int) -> UInt64? {
        for case .varint(let value) in all(number) { return value }
        return nil
    }

    func fixed64(_ number: Int) -> UInt64? {
        for case .fixed64(let value) in all(number) { return value }
        return nil
    }

    func fixed32(_ number: Int) -> UInt32? {
        for case .fixed32(let value) in all(number) { return value }
        return nil
    }

    func double(_ number: Int) -> Double? { fixed64(number).map(Double.init(bitPattern:)) }

    /// A packed repeated fixed64 field's values.
    func packedFixed64(_ number: Int) -> [UInt64] {
        guard let bytes = bytes(number) else { return [] }
        return stride(from: 0, to: bytes.count, by: 8).map { start in
            (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[start + $1]) << (8 * UInt64($1)) }
        }
    }

    /// `KeyValue`s (key = 1, value = 2) of field `number`, each `AnyValue` read as its one member.
    func attributes(_ number: Int) throws -> [String: Value] {
        var attributes: [String: Value] = [:]
        for keyValue in try messages(number) {
            let value = try keyValue.message(2)
            attributes[keyValue.string(1) ?? ""] = value.fields.first?.value
        }
        return attributes
    }

    var description: String { fields.map { "\($0.number): \($0.value)" }.joined(separator: ", ") }
}

extension Message.Value {
    /// The value of a `string_value` (or any length-delimited member) as text.
    var text: String? {
        guard case .bytes(let bytes) = self else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
