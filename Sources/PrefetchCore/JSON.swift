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
/// It reads the input through an `UnsafeBufferPointer` and builds only the values it returns: a string without
/// escapes becomes a `String` straight from its bytes (validated as UTF-8 only when it has a non-ASCII byte), a
/// string with escapes is decoded into one reused byte buffer, and an object's members go into one array with
/// no intermediate lookups (names are checked for duplicates as they come).
public struct JSONParser {
    /// The deepest nesting of arrays and objects accepted.
    public static let maximumDepth = 64

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0
    /// The decoded bytes of the string being read, when it has escapes (reused across strings).
    private var scratch: [UInt8] = []
    /// The members of the objects being read, innermost last (reused): an object's array is made once, at its
    /// closing brace, with exactly its members, instead of growing by doubling as members arrive.
    private var memberStack: [JSONObject.Member] = []
    /// The same for the elements of the arrays being read.
    private var elementStack: [JSONValue] = []

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

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
        do throws(JSONParseError) {
            if buffer.count >= 3 && buffer[0] == 0xEF && buffer[1] == 0xBB && buffer[2] == 0xBF { parser.index = 3 }
            parser.skipWhitespace()
            if parser.index >= buffer.count { throw parser.error("the document is empty") }
            let value = try parser.parseValue()
            parser.skipWhitespace()
            if parser.index < buffer.count { throw parser.error("unexpected data after the JSON document") }
            return .success(value)
        } catch {
            return .failure(error)
        }
    }

    private func error(_ message: String) -> JSONParseError {
        var line = 1
        var column = 1
        for byte in UnsafeBufferPointer(rebasing: bytes[..<min(index, bytes.count)]) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return JSONParseError(message: message, line: line, column: column)
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input (the document is truncated)") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default:
            let byte = bytes[index]
            if byte >= 0x20 && byte < 0x7F {
                throw error("unexpected character '\(Character(Unicode.Scalar(byte)))'")
            }
            throw error("unexpected byte 0x\(String(byte, radix: 16, uppercase: true)) (not JSON text)")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count, ByteText(bytes).equals(index..<(index + count), literal) else {
            throw error("invalid literal (expected \(literal))")
        }
        index += count
    }

    private mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > Self.maximumDepth { throw error("nesting deeper than \(Self.maximumDepth) levels") }
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(JSONObject(uniqueMembers: []))
        }
        let first = memberStack.count
        defer { memberStack.removeSubrange(first...) }
        /// The names seen, once the object is too large for a linear scan to stay cheap.
        var names: Set<String>?
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an object") }
            guard bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name in double quotes") }
            let name = try parseString()
            let duplicate: Bool
            if var seen = names {
                names = nil
                duplicate = !seen.insert(name).inserted
                names = seen
            } else {
                duplicate = memberStack[first...].contains { $0.name == name }
                if memberStack.count - first == 16 { names = Set(memberStack[first...].map(\.name) + [name]) }
            }
            if duplicate { throw error("duplicate member name \"\(name)\"") }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after member name") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            memberStack.append(JSONObject.Member(name: name, value: value))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                break
            }
            throw error("expected ',' or '}' in an object")
        }
        depth -= 1
        return .object(JSONObject(uniqueMembers: Array(memberStack[first...])))
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array([])
        }
        let first = elementStack.count
        defer { elementStack.removeSubrange(first...) }
        while true {
            skipWhitespace()
            let value = try parseValue()
            elementStack.append(value)
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                break
            }
            throw error("expected ',' or ']' in an array")
        }
        depth -= 1
        return .array(Array(elementStack[first...]))
    }

    @inline(__always)
    private mutating func skipDigits() -> Int {
        let from = index
        while index < bytes.count, ByteText.isDigit(bytes[index]) { index += 1 }
        return index - from
    }

    private mutating func parseNumber() throws(JSONParseError) -> String {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if skipDigits() == 0 {
            throw error("invalid number")
        }
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            index += 1
            if skipDigits() == 0 { throw error("invalid number: digits expected after '.'") }
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) { index += 1 }
            if skipDigits() == 0 { throw error("invalid number: digits expected in the exponent") }
        }
        return ByteText(bytes).string(start..<index)
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Hex.value(of: bytes[index]) else { throw error("invalid hex digit in \\u escape") }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// A string starting at its opening quote. The common case, no escape, is one scan and one `String`.
    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        let start = index
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let run = UnsafeBufferPointer(rebasing: bytes[start..<index])
                let text: String
                if ascii {
                    text = String(decoding: run, as: UTF8.self)
                } else {
                    // Reported at the closing quote, where the run ends.
                    guard let valid = String(validating: run, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
                    text = valid
                }
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { return try parseEscapedString(from: start, runIsASCII: ascii) }
            if byte < 0x20 { throw error("unescaped control character in a string") }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        throw error("unterminated string")
    }

    /// The rest of a string that has an escape at `index`, decoded into ``scratch``. Each run of unescaped bytes is
    /// checked as UTF-8 where it ends, so an error is reported where it always was.
    private mutating func parseEscapedString(from start: Int, runIsASCII: Bool) throws(JSONParseError) -> String {
        scratch.removeAll(keepingCapacity: true)
        var runStart = start
        var runASCII = runIsASCII
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                let run = UnsafeBufferPointer(rebasing: bytes[runStart..<index])
                if !runASCII && String(validating: run, as: UTF8.self) == nil { throw error("invalid UTF-8 in a string") }
                scratch.append(contentsOf: run)
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return String(decoding: scratch, as: UTF8.self)
                }
            } else {
                if byte < 0x20 { throw error("unescaped control character in a string") }
                if byte >= 0x80 { runASCII = false }
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw error("unterminated escape") }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scratch.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): scratch.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "/"): scratch.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(0x0A)
            case UInt8(ascii: "r"): scratch.append(0x0D)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                var code = try parseHex4()
                if (0xD800...0xDBFF).contains(code) {
                    guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("lone high surrogate in \\u escape")
                    }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid low surrogate in \\u escape") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(code) {
                    throw error("lone low surrogate in \\u escape")
                }
                guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
                scratch.append(contentsOf: UTF8.encode(scalar)!)
            default:
                throw error("invalid escape '\\\(Character(Unicode.Scalar(escape)))'")
            }
            runStart = index
            runASCII = true
        }
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
