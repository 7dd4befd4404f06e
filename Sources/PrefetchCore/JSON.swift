/// A JSON value that keeps everything the source said: object member order and number literals exactly
/// as written.
///
/// Not `indirect`: arrays and objects already hold their elements on the heap, so a scalar value needs no box
/// of its own (a 10,000-page config has a few hundred thousand of them).
///
/// Configs are authored by people and composed bodies are compared byte for byte by upstreams, so the
/// core never round-trips through a lossy representation: `{"b":1,"a":1.50}` serialises back to exactly
/// that text, and the page parameter `"007"` can never silently become the number `7`.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number, kept as its literal JSON text (always valid JSON number grammar).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A short name of the value's kind, for error messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The compact JSON text of this value.
    public var jsonText: String {
        JSONWriter.text(self)
    }
}

/// An ordered JSON object. Member names are unique (the parser rejects duplicates).
public struct JSONObject: Sendable, Hashable {
    /// One `"name": value` member.
    public struct Member: Sendable, Hashable {
        public var name: String
        public var value: JSONValue
        public init(name: String, value: JSONValue) {
            self.name = name
            self.value = value
        }
    }

    /// The members in source order.
    public private(set) var members: [Member]

    /// An object with the given members, in order. A repeated name keeps its first position and last value.
    public init(_ members: [Member] = []) {
        self.members = []
        for member in members { self[member.name] = member.value }
    }

    /// Makes room for `count` members, so merging several into a copy grows its storage once.
    mutating func reserveCapacity(_ count: Int) {
        members.reserveCapacity(count)
    }

    /// Members whose names are already known to be distinct (the parser checked): taken as they are.
    init(uniqueMembers members: [Member]) {
        self.members = members
    }

    /// The value for `name`, or `nil`. Setting appends a new member or replaces an existing one in place.
    public subscript(name: String) -> JSONValue? {
        get { members.first { $0.name == name }?.value }
        set {
            if let index = members.firstIndex(where: { $0.name == name }) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append(Member(name: name, value: newValue))
            }
        }
    }

    /// The member names in order.
    public var names: [String] { members.map(\.name) }
    /// Whether the object has no members.
    public var isEmpty: Bool { members.isEmpty }
}

/// Why a JSON text could not be parsed, with the 1-based line and column of the first bad byte.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var line: Int
    public var column: Int
    public var description: String { "line \(line), column \(column): \(message)" }
}

/// A strict RFC 8259 parser: UTF-8 input only, no trailing commas, no comments, duplicate member names
/// rejected, nesting bounded so hostile input cannot exhaust the stack.
///
/// The byte-level rules are ``JSONScanner``'s (shared with ``JSONTape`` and ``JSONBytes``); this walks the grammar
/// and builds only the values it returns: a string without escapes becomes a `String` straight from its bytes, a
/// string with escapes is decoded straight into its `String`'s storage, and an object's members go into one array
/// with no intermediate lookups (names are checked for duplicates as they come).
public struct JSONParser {
    /// The deepest nesting of arrays and objects accepted.
    public static let maximumDepth = JSONScanner.maximumDepth

    /// The lexical layer: every byte-level rule and the nesting limit.
    private var scanner: JSONScanner
    /// The members of the objects being read, innermost last (reused): an object's array is made once, at its
    /// closing brace, with exactly its members, instead of growing by doubling as members arrive.
    private var memberStack: [JSONObject.Member] = []
    /// The same for the elements of the arrays being read.
    private var elementStack: [JSONValue] = []

    private init(bytes: UnsafeBufferPointer<UInt8>) { scanner = JSONScanner(bytes) }

    /// Parses one JSON document; anything but whitespace after it is an error.
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { parse(buffer: $0) }.get()
    }

    /// Parses one JSON document from bytes in place (a response body's storage), without copying them.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONValue {
        try parse(buffer: bytes.assumingMemoryBound(to: UInt8.self)).get()
    }

    /// Parses one JSON document from text.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var text = text
        return try text.withUTF8 { parse(buffer: $0) }.get()
    }

    static func parse(buffer: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONParseError> {
        var parser = JSONParser(bytes: buffer)
        do throws(JSONSyntaxError) {
            try parser.scanner.beginDocument(skippingByteOrderMark: true)
            let value = try parser.parseValue()
            try parser.scanner.endDocument()
            return .success(value)
        } catch {
            return .failure(parser.scanner.parseError(error))
        }
    }

    private mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
        switch try scanner.valueStart() {
        case .object: return try parseObject()
        case .array: return try parseArray()
        case .string: return .string(text(try scanner.string()))
        case .number: return .number(ByteText(scanner.bytes).string(try scanner.number()))
        case .trueLiteral:
            try scanner.literal(.trueLiteral)
            return .bool(true)
        case .falseLiteral:
            try scanner.literal(.falseLiteral)
            return .bool(false)
        case .null:
            try scanner.literal(.null)
            return .null
        }
    }

    private mutating func parseObject() throws(JSONSyntaxError) -> JSONValue {
        guard try scanner.enter(.object) else { return .object(JSONObject(uniqueMembers: [])) }
        let first = memberStack.count
        defer { memberStack.removeSubrange(first...) }
        /// The names seen, once the object is too large for a linear scan to stay cheap.
        var names: Set<String>?
        repeat {
            let name = text(try scanner.memberName())
            let duplicate: Bool
            if var seen = names {
                names = nil
                duplicate = !seen.insert(name).inserted
                names = seen
            } else {
                duplicate = memberStack[first...].contains { $0.name == name }
                if memberStack.count - first == 16 { names = Set(memberStack[first...].map(\.name) + [name]) }
            }
            if duplicate { throw .duplicateMemberName(name) }
            try scanner.colon()
            let value = try parseValue()
            memberStack.append(JSONObject.Member(name: name, value: value))
        } while try scanner.next(in: .object)
        return .object(JSONObject(uniqueMembers: Array(memberStack[first...])))
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> JSONValue {
        guard try scanner.enter(.array) else { return .array([]) }
        let first = elementStack.count
        defer { elementStack.removeSubrange(first...) }
        repeat {
            let value = try parseValue()
            elementStack.append(value)
        } while try scanner.next(in: .array)
        return .array(Array(elementStack[first...]))
    }

    /// The text of a string the scanner checked.
    private func text(_ string: JSONScanner.ScannedString) -> String {
        JSONScanner.text(UnsafeBufferPointer(rebasing: scanner.bytes[string.range]), hasEscape: string.hasEscape)
    }
}

/// Compact JSON serialisation, the form bodies are sent in.
///
/// Written into a byte buffer (one append per piece, no `String` growth bookkeeping) and made a `String` once.
enum JSONWriter {
    /// Whether `text` has a character that must be escaped: the common case (none) is copied whole.
    static func needsEscaping(_ text: String) -> Bool {
        if let answer = text.utf8.withContiguousStorageIfAvailable(needsEscaping) { return answer }
        return Array(text.utf8).withUnsafeBufferPointer(needsEscaping)
    }

    static func needsEscaping(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        while index < utf8.count {
            switch utf8[index] {
            case 0x00...0x1F, 0x22, 0x5C, 0x7F: return true
            case 0xE2:
                // U+2028 and U+2029 (E2 80 A8/A9) are escaped so the output is also valid JavaScript.
                if index + 2 < utf8.count, utf8[index + 1] == 0x80, utf8[index + 2] == 0xA8 || utf8[index + 2] == 0xA9 { return true }
            default: break
            }
            index += 1
        }
        return false
    }

    /// The compact JSON text of `value`.
    static func text(_ value: JSONValue) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(value, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: append("null", to: &out)
        case .bool(let flag): append(flag ? "true" : "false", to: &out)
        case .number(let literal): out.append(contentsOf: literal.utf8)
        case .string(let text): writeString(text, into: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (offset, element) in values.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (offset, member) in object.members.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.name, into: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    @inline(__always)
    private static func append(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    static func writeString(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        if !needsEscaping(text) {
            out.append(contentsOf: text.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": append("\\\"", to: &out)
            case "\\": append("\\\\", to: &out)
            case "\n": append("\\n", to: &out)
            case "\r": append("\\r", to: &out)
            case "\t": append("\\t", to: &out)
            case "\u{08}": append("\\b", to: &out)
            case "\u{0C}": append("\\f", to: &out)
            case "\u{2028}": append("\\u2028", to: &out)
            case "\u{2029}": append("\\u2029", to: &out)
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    append("\\u00", to: &out)
                    out.append(lowerHex[Int(scalar.value >> 4)])
                    out.append(lowerHex[Int(scalar.value & 0xF)])
                } else {
                    out.append(contentsOf: UTF8.encode(scalar)!)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static let lowerHex = Array("0123456789abcdef".utf8)
}
