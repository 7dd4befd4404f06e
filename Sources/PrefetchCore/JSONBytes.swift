/// JSON on bytes: a validator that builds nothing, and a writer that appends runs of bytes.
///
/// The results view embeds upstream JSON bodies as they are: the validator checks a body is one JSON text
/// (RFC 8259, nesting at most ``maximumDepth``) without allocating, and the writer splices its bytes in place of
/// a parse and re-serialisation.
public enum JSONBytes {
    /// The deepest nesting accepted, as for ``JSONParser``.
    public static let maximumDepth = JSONScanner.maximumDepth

    /// Whether `bytes` is exactly one JSON text, optionally surrounded by whitespace.
    public static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { isValid($0) }
    }

    /// ``isValid(_:)`` over bytes held elsewhere (a stored body's storage: no copy).
    ///
    /// ``JSONParser``'s rules on ``JSONScanner``, but for two: a byte-order mark is not skipped (a body is spliced
    /// whole, so one would end up inside the results view), and duplicate member names are not looked for.
    public static func isValid(_ buffer: UnsafeBufferPointer<UInt8>) -> Bool {
        var scanner = JSONScanner(buffer)
        do throws(JSONSyntaxError) {
            try scanner.beginDocument(skippingByteOrderMark: false)
            try scanner.skipValue()
            try scanner.endDocument()
            return true
        } catch {
            return false
        }
    }
}

extension JSONScanner {
    /// Past the value at ``index``, checked and nothing built: the validator's walk of the grammar.
    fileprivate mutating func skipValue() throws(JSONSyntaxError) {
        let start = try valueStart()
        switch start {
        case .object:
            guard try enter(.object) else { return }
            repeat {
                _ = try memberName()
                try colon()
                try skipValue()
            } while try next(in: .object)
        case .array:
            guard try enter(.array) else { return }
            repeat { try skipValue() } while try next(in: .array)
        case .string: _ = try string()
        case .number: _ = try number()
        case .trueLiteral, .falseLiteral, .null: try literal(start)
        }
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
