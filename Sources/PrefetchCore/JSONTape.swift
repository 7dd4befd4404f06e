/// A JSON document read once into a tape: the document's bytes, kept as they are (the caller's array, retained, not
/// copied), and one 64-bit entry per value, object key and container end, in document order, each holding its kind
/// and where it lies in the bytes.
///
/// This is simdjson's second stage on a scalar scan: the config loader validates from the tape, so no `JSONValue`
/// tree is built for a whole config, and a string becomes a `String` only when something asks for it. The grammar,
/// the limits and every error (message, line and column) are ``JSONParser``'s, which is the reference the tape is held
/// to (`JSONTapeTests`, the FuzzTape target).
///
/// Entry layout: bits 0-2 the ``Kind``, bit 3 a string with an escape, bit 4 a string with a non-ASCII byte, bits
/// 8-35 the start offset (a string's first byte after its opening quote, a number's first byte, a container's
/// bracket), bits 36-63 the payload (a string's or number's length in bytes; a container's tape index of its end
/// entry). Offsets and indices fit 28 bits: documents are at most ``maximumBytes`` long.
struct JSONTape: Sendable {
    /// What an entry is.
    enum Kind: UInt8 {
        case null = 0, falseValue, trueValue, number, string, array, object
        /// Closes the array or object that points at it; its start is the closing bracket.
        case end
    }

    /// The longest document a tape holds (offsets are 28 bits); configs are far below it.
    static let maximumBytes = (1 << 28) - 1

    /// The document, exactly as given.
    let bytes: [UInt8]
    /// The entries; the root value is entry 0.
    let entries: [UInt64]

    /// Reads one JSON document as ``JSONParser/parse(_:)-([UInt8])`` does (same grammar, same errors), onto a tape.
    static func build(_ bytes: [UInt8]) throws(JSONParseError) -> JSONTape {
        guard bytes.count <= maximumBytes else {
            throw JSONParseError(message: "the document is \(bytes.count) bytes; a tape holds at most \(maximumBytes)", line: 1, column: 1)
        }
        let result = bytes.withUnsafeBufferPointer { buffer -> Result<[UInt64], JSONParseError> in
            var builder = Builder(bytes: buffer)
            do throws(JSONParseError) {
                try builder.run()
                return .success(builder.entries)
            } catch {
                return .failure(error)
            }
        }
        return JSONTape(bytes: bytes, entries: try result.get())
    }

    /// Calls `body` with a reader over the tape (valid only inside the call).
    func read<Result>(_ body: (TapeReader) -> Result) -> Result {
        bytes.withUnsafeBufferPointer { bytes in
            entries.withUnsafeBufferPointer { entries in body(TapeReader(bytes: bytes, entries: entries)) }
        }
    }

    static let kindMask: UInt64 = 0x7
    static let escapedFlag: UInt64 = 0x8
    static let nonASCIIFlag: UInt64 = 0x10
    static let startShift: UInt64 = 8
    static let payloadShift: UInt64 = 36
    static let fieldMask: UInt64 = (1 << 28) - 1

    @inline(__always)
    static func entry(_ kind: Kind, start: Int, payload: Int = 0, flags: UInt64 = 0) -> UInt64 {
        UInt64(kind.rawValue) | flags | UInt64(truncatingIfNeeded: start) << startShift | UInt64(truncatingIfNeeded: payload)
            << payloadShift
    }

    /// The single pass: ``JSONParser``'s recursive descent, appending entries instead of building values.
    private struct Builder {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        var depth = 0
        var entries: [UInt64] = []
        /// The tape indices of the keys of the objects being read, innermost last (for duplicate names).
        var keys: [Int] = []

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            // About one entry per 6 bytes in configs; growing past it costs a copy or two.
            entries.reserveCapacity(bytes.count / 6 + 16)
        }

        mutating func run() throws(JSONParseError) {
            if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { index = 3 }
            skipWhitespace()
            if index >= bytes.count { throw error("the document is empty") }
            try value()
            skipWhitespace()
            if index < bytes.count { throw error("unexpected data after the JSON document") }
        }

        func error(_ message: String) -> JSONParseError {
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
        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value() throws(JSONParseError) {
            guard index < bytes.count else { throw error("unexpected end of input (the document is truncated)") }
            switch bytes[index] {
            case UInt8(ascii: "{"): try object()
            case UInt8(ascii: "["): try array()
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "t"):
                try literal("true")
                entries.append(JSONTape.entry(.trueValue, start: index - 4))
            case UInt8(ascii: "f"):
                try literal("false")
                entries.append(JSONTape.entry(.falseValue, start: index - 5))
            case UInt8(ascii: "n"):
                try literal("null")
                entries.append(JSONTape.entry(.null, start: index - 4))
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default:
                let byte = bytes[index]
                if byte >= 0x20 && byte < 0x7F {
                    throw error("unexpected character '\(Character(Unicode.Scalar(byte)))'")
                }
                throw error("unexpected byte 0x\(String(byte, radix: 16, uppercase: true)) (not JSON text)")
            }
        }

        mutating func literal(_ literal: StaticString) throws(JSONParseError) {
            let count = literal.utf8CodeUnitCount
            guard index + count <= bytes.count, ByteText(bytes).equals(index..<(index + count), literal) else {
                throw error("invalid literal (expected \(literal))")
            }
            index += count
        }

        mutating func enter() throws(JSONParseError) {
            depth += 1
            if depth > JSONParser.maximumDepth { throw error("nesting deeper than \(JSONParser.maximumDepth) levels") }
        }

        /// Opens a container entry; ``close(_:)`` points it at its end entry.
        mutating func open(_ kind: Kind) -> Int {
            entries.append(JSONTape.entry(kind, start: index))
            return entries.count - 1
        }

        mutating func close(_ container: Int) {
            entries.append(JSONTape.entry(.end, start: index))
            entries[container] |= UInt64(entries.count - 1) << JSONTape.payloadShift
            index += 1
            depth -= 1
        }

        mutating func object() throws(JSONParseError) {
            try enter()
            let container = open(.object)
            index += 1
            skipWhitespace()
            if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
                close(container)
                return
            }
            let first = keys.count
            defer { keys.removeSubrange(first...) }
            /// The decoded names, once the object is too large for a linear scan to stay cheap (as the parser does).
            var names: Set<String>?
            while true {
                skipWhitespace()
                guard index < bytes.count else { throw error("unexpected end of input inside an object") }
                guard bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name in double quotes") }
                try string()
                let key = entries.count - 1
                if let name = duplicateName(key, first: first, names: &names) { throw error("duplicate member name \"\(name)\"") }
                keys.append(key)
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after member name") }
                index += 1
                skipWhitespace()
                try value()
                skipWhitespace()
                guard index < bytes.count else { throw error("unexpected end of input inside an object") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if bytes[index] == UInt8(ascii: "}") {
                    close(container)
                    return
                }
                throw error("expected ',' or '}' in an object")
            }
        }

        /// The key's decoded name when the object already has a member of that name (as `String`s compare), else nil.
        func duplicateName(_ key: Int, first: Int, names: inout Set<String>?) -> String? {
            entries.withUnsafeBufferPointer { entries -> String? in
                let reader = TapeReader(bytes: bytes, entries: entries)
                let duplicate: Bool
                if var seen = names {
                    names = nil
                    duplicate = !seen.insert(reader.string(key)).inserted
                    names = seen
                } else {
                    duplicate = keys[first...].contains { reader.sameString($0, key) }
                    if keys.count - first == 16 { names = Set((keys[first...] + [key]).map { reader.string($0) }) }
                }
                return duplicate ? reader.string(key) : nil
            }
        }

        mutating func array() throws(JSONParseError) {
            try enter()
            let container = open(.array)
            index += 1
            skipWhitespace()
            if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
                close(container)
                return
            }
            while true {
                skipWhitespace()
                try value()
                skipWhitespace()
                guard index < bytes.count else { throw error("unexpected end of input inside an array") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if bytes[index] == UInt8(ascii: "]") {
                    close(container)
                    return
                }
                throw error("expected ',' or ']' in an array")
            }
        }

        @inline(__always)
        mutating func skipDigits() -> Int {
            let from = index
            while index < bytes.count, ByteText.isDigit(bytes[index]) { index += 1 }
            return index - from
        }

        mutating func number() throws(JSONParseError) {
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
            entries.append(JSONTape.entry(.number, start: start, payload: index - start))
        }

        mutating func hex4() throws(JSONParseError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let digit = Hex.value(of: bytes[index]) else { throw error("invalid hex digit in \\u escape") }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        /// A string starting at its opening quote: checked as the parser checks it, decoded by nobody.
        mutating func string() throws(JSONParseError) {
            index += 1
            let start = index
            var flags: UInt64 = 0
            var runStart = start
            var runASCII = true
            while true {
                // Eight plain bytes at a time (no quote, backslash, control or non-ASCII byte): most of a config's text.
                while index + 8 <= bytes.count && !ByteText.hasSpecialStringByte(ByteText.word(bytes, at: index)) { index += 8 }
                guard index < bytes.count else { throw error("unterminated string") }
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    // Each run of unescaped bytes is checked as UTF-8 where it ends, as the parser does.
                    if !runASCII && !UTF8Check.isValid(UnsafeBufferPointer(rebasing: bytes[runStart..<index])) {
                        throw error("invalid UTF-8 in a string")
                    }
                    if byte == UInt8(ascii: "\"") {
                        entries.append(JSONTape.entry(.string, start: start, payload: index - start, flags: flags))
                        index += 1
                        return
                    }
                } else {
                    if byte < 0x20 { throw error("unescaped control character in a string") }
                    if byte >= 0x80 {
                        runASCII = false
                        flags |= JSONTape.nonASCIIFlag
                    }
                    index += 1
                    continue
                }
                flags |= JSONTape.escapedFlag
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                    UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "u"):
                    let code = try hex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw error("lone high surrogate in \\u escape")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid low surrogate in \\u escape") }
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw error("lone low surrogate in \\u escape")
                    }
                default:
                    throw error("invalid escape '\\\(Character(Unicode.Scalar(escape)))'")
                }
                runStart = index
                runASCII = true
            }
        }
    }
}

/// Reads a ``JSONTape`` through borrowed pointers: kinds, strings made on demand, members and elements by tape index.
/// Must not outlive the ``JSONTape/read(_:)`` call that made it.
struct TapeReader {
    let bytes: UnsafeBufferPointer<UInt8>
    let entries: UnsafeBufferPointer<UInt64>

    @inline(__always)
    func kind(_ index: Int) -> JSONTape.Kind {
        JSONTape.Kind(rawValue: UInt8(truncatingIfNeeded: entries[index] & JSONTape.kindMask))!
    }

    @inline(__always)
    func start(_ index: Int) -> Int { Int(truncatingIfNeeded: (entries[index] >> JSONTape.startShift) & JSONTape.fieldMask) }

    @inline(__always)
    func payload(_ index: Int) -> Int { Int(truncatingIfNeeded: entries[index] >> JSONTape.payloadShift) }

    /// The tape index just past the value at `index` (and everything inside it).
    @inline(__always)
    func next(_ index: Int) -> Int {
        switch kind(index) {
        case .array, .object: payload(index) + 1
        default: index + 1
        }
    }

    /// A string's raw bytes (between the quotes, escapes as written), or a number's literal.
    @inline(__always)
    func rawRange(_ index: Int) -> Range<Int> {
        let start = start(index)
        return start..<(start + payload(index))
    }

    /// The source text of any value: a container from its opening to its closing bracket.
    func sourceRange(_ index: Int) -> Range<Int> {
        switch kind(index) {
        case .array, .object: return start(index)..<(start(payload(index)) + 1)
        case .string:
            let raw = rawRange(index)
            return (raw.lowerBound - 1)..<(raw.upperBound + 1)
        case .number: return rawRange(index)
        case .null, .trueValue: return start(index)..<(start(index) + 4)
        case .falseValue: return start(index)..<(start(index) + 5)
        case .end: return start(index)..<(start(index) + 1)
        }
    }

    /// A string without escapes or non-ASCII bytes: its raw bytes are its text, byte for byte and as `String`s compare.
    @inline(__always)
    func isPlainASCII(_ index: Int) -> Bool { entries[index] & (JSONTape.escapedFlag | JSONTape.nonASCIIFlag) == 0 }

    @inline(__always)
    func hasEscape(_ index: Int) -> Bool { entries[index] & JSONTape.escapedFlag != 0 }

    /// The decoded text of the string at `index`.
    func string(_ index: Int) -> String {
        let raw = UnsafeBufferPointer(rebasing: bytes[rawRange(index)])
        guard hasEscape(index) else { return String(decoding: raw, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: raw.count) { out in Self.unescape(raw, into: out) }
    }

    /// Decodes a checked string's escapes into `out` (never longer than `raw`); returns the length written.
    static func unescape(_ raw: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var count = 0
        var index = 0
        func put(_ byte: UInt8) {
            out[count] = byte
            count += 1
        }
        func hex4(at offset: Int) -> UInt32 {
            var value: UInt32 = 0
            for digit in raw[offset..<(offset + 4)] { value = value << 4 | UInt32(Hex.value(of: digit)!) }
            return value
        }
        while index < raw.count {
            let byte = raw[index]
            guard byte == UInt8(ascii: "\\") else {
                put(byte)
                index += 1
                continue
            }
            let escape = raw[index + 1]
            index += 2
            switch escape {
            case UInt8(ascii: "b"): put(0x08)
            case UInt8(ascii: "f"): put(0x0C)
            case UInt8(ascii: "n"): put(0x0A)
            case UInt8(ascii: "r"): put(0x0D)
            case UInt8(ascii: "t"): put(0x09)
            case UInt8(ascii: "u"):
                var code = hex4(at: index)
                index += 4
                if (0xD800...0xDBFF).contains(code) {
                    let low = hex4(at: index + 2)
                    index += 6
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                for unit in UTF8.encode(Unicode.Scalar(code)!)! { put(unit) }
            default: put(escape)
            }
        }
        return count
    }

    /// Whether two strings are the same text as `String` compares them (canonical equivalence): bytes decide when
    /// both are plain ASCII, `String`s otherwise.
    func sameString(_ lhs: Int, _ rhs: Int) -> Bool {
        if isPlainASCII(lhs) && isPlainASCII(rhs) {
            let left = rawRange(lhs)
            return ByteText(bytes).equals(left, UnsafeBufferPointer(rebasing: bytes[rawRange(rhs)]))
        }
        return string(lhs) == string(rhs)
    }

    /// Whether the string at `index` is `literal` (an ASCII word), as `String` compares them.
    @inline(__always)
    func string(_ index: Int, is literal: StaticString) -> Bool {
        if isPlainASCII(index) { return ByteText(bytes).equals(rawRange(index), literal) }
        return string(index) == literal.description
    }

    /// The literal text of the number at `index`.
    func number(_ index: Int) -> String { ByteText(bytes).string(rawRange(index)) }

    /// Whether the number at `index` is written exactly `literal`.
    func number(_ index: Int, is literal: StaticString) -> Bool { ByteText(bytes).equals(rawRange(index), literal) }

    /// As ``JSONValue/kindName``.
    func kindName(_ index: Int) -> String {
        switch kind(index) {
        case .null: "null"
        case .falseValue, .trueValue: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object, .end: "an object"
        }
    }

    /// The members of the object at `index`: each key's and value's tape index, in document order.
    func members(_ object: Int) -> Members { Members(reader: self, position: object + 1, end: payload(object)) }

    /// The elements of the array at `index`, in order.
    func elements(_ array: Int) -> Elements { Elements(reader: self, position: array + 1, end: payload(array)) }

    /// Whether the array or object at `index` is empty.
    func isEmptyContainer(_ index: Int) -> Bool { payload(index) == index + 1 }

    /// The value of the member `name` of the object at `index`, or nil.
    func member(_ object: Int, _ name: StaticString) -> Int? {
        for (key, value) in members(object) where string(key, is: name) { return value }
        return nil
    }

    struct Members: Sequence, IteratorProtocol {
        let reader: TapeReader
        var position: Int
        let end: Int

        mutating func next() -> (key: Int, value: Int)? {
            guard position < end else { return nil }
            let key = position
            position = reader.next(key + 1)
            return (key, key + 1)
        }
    }

    struct Elements: Sequence, IteratorProtocol {
        let reader: TapeReader
        var position: Int
        let end: Int

        mutating func next() -> Int? {
            guard position < end else { return nil }
            let element = position
            position = reader.next(element)
            return element
        }
    }

    /// The value at `index` as a tree (for the parts that are used as values, and for tests).
    func value(_ index: Int) -> JSONValue {
        switch kind(index) {
        case .null, .end: return .null
        case .falseValue: return .bool(false)
        case .trueValue: return .bool(true)
        case .number: return .number(number(index))
        case .string: return .string(string(index))
        case .array: return .array(elements(index).map(value))
        case .object: return .object(object(index))
        }
    }

    /// The object at `index` as a ``JSONObject``.
    func object(_ index: Int) -> JSONObject {
        JSONObject(uniqueMembers: members(index).map { JSONObject.Member(name: string($0.key), value: value($0.value)) })
    }

    /// Appends the compact JSON text of the value at `index`, as ``JSONWriter`` writes the same value: a plain string
    /// that needs no escaping is copied from the source.
    func writeCompact(_ index: Int, into out: inout [UInt8]) {
        switch kind(index) {
        case .null, .end: out.append(contentsOf: "null".utf8)
        case .falseValue: out.append(contentsOf: "false".utf8)
        case .trueValue: out.append(contentsOf: "true".utf8)
        case .number: out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[rawRange(index)]))
        case .string: writeString(index, into: &out)
        case .array:
            out.append(UInt8(ascii: "["))
            for (position, element) in elements(index).enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                writeCompact(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object:
            out.append(UInt8(ascii: "{"))
            for (position, member) in members(index).enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                writeCompact(member.value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A string as ``JSONWriter/writeString(_:into:)`` writes its decoded text.
    func writeString(_ index: Int, into out: inout [UInt8]) {
        let raw = UnsafeBufferPointer(rebasing: bytes[rawRange(index)])
        if !hasEscape(index) && !JSONWriter.needsEscaping(raw) {
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: raw)
            out.append(UInt8(ascii: "\""))
        } else {
            JSONWriter.writeString(string(index), into: &out)
        }
    }

    /// Whether the string at `index` may hold a reference (`${`), as ``Template/mayHold(_:)`` says of its text.
    func mayHoldReference(_ index: Int) -> Bool {
        if hasEscape(index) { return Template.mayHold(string(index)) }
        let raw = rawRange(index)
        guard raw.count >= 2 else { return false }
        for offset in raw.lowerBound..<(raw.upperBound - 1)
        where bytes[offset] == UInt8(ascii: "$") && bytes[offset + 1] == UInt8(ascii: "{") {
            return true
        }
        return false
    }
}

/// Well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF): what `String(validating:as:)` accepts,
/// without making the `String`.
enum UTF8Check {
    static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        while index < bytes.count {
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0:
                length = 3
                low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED:
                length = 3
                high = 0x9F
            case 0xF0:
                length = 4
                low = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4:
                length = 4
                high = 0x8F
            default: return false
            }
            guard bytes.count - index >= length else { return false }
            let second = bytes[index + 1]
            guard second >= low && second <= high else { return false }
            for offset in 2..<length where !(0x80...0xBF).contains(bytes[index + offset]) { return false }
            index += length
        }
        return true
    }
}
