/// JSON on bytes: a validator that builds nothing, and a writer that appends runs of bytes.
///
/// The results view embeds upstream JSON bodies as they are: the validator checks a body is one JSON text
/// (RFC 8259, nesting at most ``maximumDepth``) without allocating, and the writer splices its bytes in place of
/// a parse and re-serialisation.
public enum JSONBytes {
    /// The deepest nesting accepted, as for ``JSONParser``.
    public static let maximumDepth = JSONParser.maximumDepth

    /// Whether `bytes` is exactly one JSON text, optionally surrounded by whitespace.
    public static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { isValid($0) }
    }

    /// ``isValid(_:)`` over bytes held elsewhere (a stored body's storage: no copy).
    public static func isValid(_ buffer: UnsafeBufferPointer<UInt8>) -> Bool {
        var scanner = Scanner(bytes: buffer)
        scanner.skipWhitespace()
        guard scanner.value(depth: 0) else { return false }
        scanner.skipWhitespace()
        return scanner.index == buffer.count
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
        }

        mutating func literal(_ text: StaticString) -> Bool {
            let count = text.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { return false }
            index += count
            return true
        }

        mutating func value(depth: Int) -> Bool {
            guard let byte = current else { return false }
            switch byte {
            case UInt8(ascii: "{"):
                guard depth < JSONBytes.maximumDepth else { return false }
                index += 1
                skipWhitespace()
                if current == UInt8(ascii: "}") {
                    index += 1
                    return true
                }
                while true {
                    guard current == UInt8(ascii: "\""), string() else { return false }
                    skipWhitespace()
                    guard current == UInt8(ascii: ":") else { return false }
                    index += 1
                    skipWhitespace()
                    guard value(depth: depth + 1) else { return false }
                    skipWhitespace()
                    if current == UInt8(ascii: ",") {
                        index += 1
                        skipWhitespace()
                        continue
                    }
                    guard current == UInt8(ascii: "}") else { return false }
                    index += 1
                    return true
                }
            case UInt8(ascii: "["):
                guard depth < JSONBytes.maximumDepth else { return false }
                index += 1
                skipWhitespace()
                if current == UInt8(ascii: "]") {
                    index += 1
                    return true
                }
                while true {
                    guard value(depth: depth + 1) else { return false }
                    skipWhitespace()
                    if current == UInt8(ascii: ",") {
                        index += 1
                        skipWhitespace()
                        continue
                    }
                    guard current == UInt8(ascii: "]") else { return false }
                    index += 1
                    return true
                }
            case UInt8(ascii: "\""): return string()
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        /// A string starting at the opening quote: escapes checked, control characters refused, UTF-8 well formed.
        mutating func string() -> Bool {
            index += 1
            while let byte = current {
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return true
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let escaped = current else { return false }
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        // As `JSONParser` reads it: a high surrogate must be followed by `\u` and a low one, and a low
                        // one never stands alone (a lone surrogate is no Unicode text), so both say the same is JSON.
                        guard let unit = hexUnit(at: index + 1) else { return false }
                        index += 5
                        if (0xDC00...0xDFFF).contains(unit) { return false }
                        if (0xD800...0xDBFF).contains(unit) {
                            guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u"),
                                let low = hexUnit(at: index + 2), (0xDC00...0xDFFF).contains(low)
                            else { return false }
                            index += 6
                        }
                    default: return false
                    }
                case 0x00..<0x20: return false
                case 0x00..<0x80: index += 1
                default:
                    guard utf8Sequence() else { return false }
                }
            }
            return false
        }

        /// The four hex digits at `start` as a UTF-16 code unit, or nil when they are not four hex digits.
        func hexUnit(at start: Int) -> UInt16? {
            guard bytes.count - start >= 4 else { return nil }
            var unit: UInt16 = 0
            for offset in 0..<4 {
                guard let digit = Hex.value(of: bytes[start + offset]) else { return nil }
                unit = unit << 4 | UInt16(digit)
            }
            return unit
        }

        /// One well-formed multi-byte UTF-8 sequence (no overlongs, surrogates or values past U+10FFFF).
        mutating func utf8Sequence() -> Bool {
            let lead = bytes[index]
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
            return true
        }

        mutating func number() -> Bool {
            if current == UInt8(ascii: "-") { index += 1 }
            guard let first = current, isDigit(first) else { return false }
            index += 1
            if first != UInt8(ascii: "0") { while let byte = current, isDigit(byte) { index += 1 } }
            if current == UInt8(ascii: ".") {
                index += 1
                guard let byte = current, isDigit(byte) else { return false }
                while let byte = current, isDigit(byte) { index += 1 }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                guard let byte = current, isDigit(byte) else { return false }
                while let byte = current, isDigit(byte) { index += 1 }
            }
            return true
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    }
}

/// Appends JSON to a byte buffer: strings are copied in runs between the characters that need escaping, and
/// bytes already known to be JSON are spliced as they are.
public struct JSONBytesWriter {
    /// What has been written.
    public private(set) var bytes: [UInt8] = []
    /// Per open container (and the top level): whether nothing has been written in it yet.
    private var empty = [true]
    /// A member name was just written: its value needs no separator.
    private var afterKey = false

    /// An empty writer with room for `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    private mutating func beforeValue() {
        if afterKey {
            afterKey = false
            return
        }
        if !empty[empty.count - 1] { bytes.append(UInt8(ascii: ",")) }
        empty[empty.count - 1] = false
    }

    /// Opens an object (a value of its own, an array element, or a member's value after ``key(_:)``).
    public mutating func beginObject() {
        beforeValue()
        bytes.append(UInt8(ascii: "{"))
        empty.append(true)
    }

    /// Closes the innermost object.
    public mutating func endObject() {
        empty.removeLast()
        bytes.append(UInt8(ascii: "}"))
    }

    /// Opens an array.
    public mutating func beginArray() {
        beforeValue()
        bytes.append(UInt8(ascii: "["))
        empty.append(true)
    }

    /// Closes the innermost array.
    public mutating func endArray() {
        empty.removeLast()
        bytes.append(UInt8(ascii: "]"))
    }

    /// Writes an object member's name; the next call writes its value.
    public mutating func key(_ name: String) {
        beforeValue()
        appendString(name)
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    /// A string value.
    public mutating func string(_ text: String) {
        beforeValue()
        appendString(text)
    }

    /// A whole number.
    public mutating func integer(_ value: Int64) {
        beforeValue()
        bytes.append(contentsOf: String(value).utf8)
    }

    /// `true` or `false`.
    public mutating func bool(_ value: Bool) {
        beforeValue()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// `null`.
    public mutating func null() {
        beforeValue()
        bytes.append(contentsOf: "null".utf8)
    }

    /// Bytes that are already one JSON value (checked by the caller, e.g. with ``JSONBytes/isValid(_:)``).
    public mutating func raw(_ json: [UInt8]) {
        beforeValue()
        bytes.append(contentsOf: json)
    }

    /// ``raw(_:)`` from bytes held elsewhere (no intermediate array).
    public mutating func raw(_ json: UnsafeBufferPointer<UInt8>) {
        beforeValue()
        bytes.append(contentsOf: json)
    }

    private mutating func appendString(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            var index = 0
            while index < utf8.count {
                let byte = utf8[index]
                var escape: String?
                switch byte {
                case UInt8(ascii: "\""): escape = "\\\""
                case UInt8(ascii: "\\"): escape = "\\\\"
                case 0x0A: escape = "\\n"
                case 0x0D: escape = "\\r"
                case 0x09: escape = "\\t"
                case 0x08: escape = "\\b"
                case 0x0C: escape = "\\f"
                case 0x00..<0x20, 0x7F: escape = "\\u00" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
                case 0xE2 where index + 2 < utf8.count && utf8[index + 1] == 0x80 && (utf8[index + 2] == 0xA8 || utf8[index + 2] == 0xA9):
                    // U+2028 and U+2029, so the output is also valid JavaScript.
                    escape = utf8[index + 2] == 0xA8 ? "\\u2028" : "\\u2029"
                default: break
                }
                guard let escape else {
                    index += 1
                    continue
                }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                bytes.append(contentsOf: escape.utf8)
                index += byte == 0xE2 ? 3 : 1
                runStart = index
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
