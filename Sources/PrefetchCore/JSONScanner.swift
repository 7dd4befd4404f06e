/// The lexical layer of JSON (RFC 8259) over bytes in place: whitespace, the three literals, the number grammar,
/// strings (escapes, `\u` units and surrogate pairs, well-formed UTF-8), the punctuation around members and elements,
/// and the nesting limit.
///
/// ``JSONParser`` (values), ``JSONTape`` (a tape) and ``JSONBytes`` (a validator that builds nothing) each walk the
/// grammar with one, so each rule is written here once and the three accept exactly the same texts. A concrete
/// struct over an `UnsafeBufferPointer` (no generics, no existentials), because the tape and the validator are on
/// the request path. A refusal is a ``JSONSyntaxError`` thrown with ``index`` where it is reported; the scanner must
/// not outlive the buffer it reads.
struct JSONScanner {
    /// The deepest nesting of arrays and objects accepted.
    static let maximumDepth = 64

    /// An array or an object: the closing bracket and the name in messages are what differ between them.
    enum Container: Sendable {
        case array, object

        var closing: UInt8 { self == .array ? UInt8(ascii: "]") : UInt8(ascii: "}") }
        var name: String { self == .array ? "an array" : "an object" }
    }

    /// What the byte at the start of a value says it is.
    enum ValueStart {
        case object, array, string, number, trueLiteral, falseLiteral, null
    }

    /// A checked string: its raw bytes (between the quotes, escapes as written) and what decoding them needs.
    struct ScannedString {
        var range: Range<Int>
        var hasEscape: Bool
        var hasNonASCII: Bool
    }

    let bytes: UnsafeBufferPointer<UInt8>
    /// The next byte to read; where a refusal is reported.
    var index = 0
    /// How many arrays and objects are open.
    var depth = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// `error` as a ``JSONParseError`` at the 1-based line and column of ``index``.
    func parseError(_ error: JSONSyntaxError) -> JSONParseError {
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
        return JSONParseError(message: error.message, line: line, column: column)
    }

    // MARK: The document

    /// Past a UTF-8 byte-order mark (when `skippingByteOrderMark`) and leading whitespace, up to the value.
    mutating func beginDocument(skippingByteOrderMark: Bool) throws(JSONSyntaxError) {
        if skippingByteOrderMark && bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { index = 3 }
        skipWhitespace()
        if index >= bytes.count { throw .empty }
    }

    /// After the value: only whitespace may follow.
    mutating func endDocument() throws(JSONSyntaxError) {
        skipWhitespace()
        if index < bytes.count { throw .trailingData }
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

    // MARK: Values

    /// What the value at ``index`` is, from its first byte (nothing is consumed).
    @inline(__always)
    func valueStart() throws(JSONSyntaxError) -> ValueStart {
        guard index < bytes.count else { throw .truncated }
        switch bytes[index] {
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "t"): return .trueLiteral
        case UInt8(ascii: "f"): return .falseLiteral
        case UInt8(ascii: "n"): return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        default: throw .unexpectedByte(bytes[index])
        }
    }

    /// Past the literal `true`, `false` or `null` that `start` says begins at ``index``.
    @inline(__always)
    mutating func literal(_ start: ValueStart) throws(JSONSyntaxError) {
        let literal: StaticString =
            switch start {
            case .trueLiteral: "true"
            case .falseLiteral: "false"
            default: "null"
            }
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count, ByteText(bytes).equals(index..<(index + count), literal) else {
            throw .invalidLiteral(expected: literal)
        }
        index += count
    }

    @inline(__always)
    private mutating func skipDigits() -> Int {
        let from = index
        while index < bytes.count, ByteText.isDigit(bytes[index]) { index += 1 }
        return index - from
    }

    /// Past the number at ``index``; its literal text. No leading zeros, digits on both sides of a '.', an exponent
    /// with digits.
    @inline(__always)
    mutating func number() throws(JSONSyntaxError) -> Range<Int> {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw .invalidNumber }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if skipDigits() == 0 {
            throw .invalidNumber
        }
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            index += 1
            if skipDigits() == 0 { throw .noFractionDigits }
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) { index += 1 }
            if skipDigits() == 0 { throw .noExponentDigits }
        }
        return start..<index
    }

    // MARK: Arrays and objects

    /// Past the opening bracket at ``index`` into `container`, one level deeper, and past the whitespace after it.
    /// Whether the container has anything in it: an empty one is left at once (past its closing bracket).
    @inline(__always)
    mutating func enter(_ container: Container) throws(JSONSyntaxError) -> Bool {
        depth += 1
        if depth > Self.maximumDepth { throw .tooDeep }
        index += 1
        skipWhitespace()
        if index < bytes.count && bytes[index] == container.closing {
            leave()
            return false
        }
        return true
    }

    /// Past the closing bracket at ``index``, one level up.
    private mutating func leave() {
        index += 1
        depth -= 1
    }

    /// After a member or an element of `container`: past a comma and the whitespace after it (true: another one
    /// follows), or past the closing bracket (false: the container is left; its bracket is the byte before ``index``).
    @inline(__always)
    mutating func next(in container: Container) throws(JSONSyntaxError) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw .endInside(container) }
        if bytes[index] == UInt8(ascii: ",") {
            index += 1
            skipWhitespace()
            return true
        }
        if bytes[index] == container.closing {
            leave()
            return false
        }
        throw .expectedCommaOrEnd(container)
    }

    /// The name of an object's member (after whitespace), up to and excluding its colon.
    @inline(__always)
    mutating func memberName() throws(JSONSyntaxError) -> ScannedString {
        skipWhitespace()
        guard index < bytes.count else { throw .endInside(.object) }
        guard bytes[index] == UInt8(ascii: "\"") else { throw .expectedMemberName }
        return try string()
    }

    /// Past the colon after a member name, and the whitespace around it.
    @inline(__always)
    mutating func colon() throws(JSONSyntaxError) {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw .expectedColon }
        index += 1
        skipWhitespace()
    }

    // MARK: Strings

    /// Past the string whose opening quote is at ``index``. Control bytes are refused where they are; each run of
    /// unescaped bytes is checked as UTF-8 where it ends (at the backslash or the closing quote, where a refusal is
    /// reported); escapes are checked, `\u` surrogates in pairs. Eight plain bytes at a time where it can.
    mutating func string() throws(JSONSyntaxError) -> ScannedString {
        let start = index + 1
        // The position in a local (a register through the loops), written back however this ends.
        var at = start
        defer { index = at }
        var hasEscape = false
        var hasNonASCII = false
        var runStart = start
        var runASCII = true
        while true {
            // Eight bytes at a time up to the next quote, backslash, control or non-ASCII byte; one at a time in the
            // last seven bytes of the buffer.
            while at + 8 <= bytes.count {
                let special = ByteText.specialStringBytes(UInt64(littleEndian: ByteText.word(bytes, at: at)))
                if special != 0 {
                    at += special.trailingZeroBitCount >> 3
                    break
                }
                at += 8
            }
            while at < bytes.count && Self.isPlainStringByte(bytes[at]) { at += 1 }
            guard at < bytes.count else { throw .unterminatedString }
            let byte = bytes[at]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                if !runASCII && !UTF8Check.isValid(UnsafeBufferPointer(rebasing: bytes[runStart..<at])) { throw .invalidUTF8 }
                if byte == UInt8(ascii: "\"") {
                    at += 1
                    return ScannedString(range: start..<(at - 1), hasEscape: hasEscape, hasNonASCII: hasNonASCII)
                }
            } else {
                if byte < 0x20 { throw .controlCharacter }
                // Not plain, not a quote, backslash or control byte: non-ASCII.
                runASCII = false
                hasNonASCII = true
                at += 1
                continue
            }
            hasEscape = true
            at += 1
            try escape(&at)
            runStart = at
            runASCII = true
        }
    }

    /// Whether `byte` goes into a string as it is and needs no look: printable ASCII but a quote or a backslash.
    @inline(__always)
    private static func isPlainStringByte(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte < 0x80 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }

    /// Past the escape after a backslash (`at` is just past it, and where a refusal is reported).
    private func escape(_ at: inout Int) throws(JSONSyntaxError) {
        guard at < bytes.count else { throw .unterminatedEscape }
        let escape = bytes[at]
        at += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
            UInt8(ascii: "r"), UInt8(ascii: "t"):
            break
        case UInt8(ascii: "u"):
            // A lone surrogate is no Unicode text: a high one must be followed by `\u` and a low one.
            let unit = try hex4(&at)
            if (0xD800...0xDBFF).contains(unit) {
                guard at + 6 <= bytes.count, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") else {
                    throw .loneHighSurrogate
                }
                at += 2
                guard (0xDC00...0xDFFF).contains(try hex4(&at)) else { throw .invalidLowSurrogate }
            } else if (0xDC00...0xDFFF).contains(unit) {
                throw .loneLowSurrogate
            }
        default:
            throw .invalidEscape(escape)
        }
    }

    /// Past the four hex digits of a `\u` escape at `at`; the UTF-16 code unit they spell.
    private func hex4(_ at: inout Int) throws(JSONSyntaxError) -> UInt32 {
        guard at + 4 <= bytes.count else { throw .truncatedUnicodeEscape }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Hex.value(of: bytes[at]) else { throw .invalidHexDigit }
            value = value << 4 | UInt32(digit)
            at += 1
        }
        return value
    }

    // MARK: Decoding a checked string

    /// The text of a string ``string()`` checked, from its raw bytes.
    static func text(_ raw: UnsafeBufferPointer<UInt8>, hasEscape: Bool) -> String {
        guard hasEscape else { return String(decoding: raw, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: raw.count) { out in unescape(raw, into: out) }
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
}
