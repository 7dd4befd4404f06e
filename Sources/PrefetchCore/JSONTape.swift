/// A JSON document read once into a tape: the document's bytes, kept as they are (the caller's array, retained, not
/// copied), and one 64-bit entry per value, object key and container end, in document order, each holding its kind
/// and where it lies in the bytes.
///
/// This is simdjson's second stage on a scalar scan: the config loader validates from the tape, so no `JSONValue`
/// tree is built for a whole config, and a string becomes a `String` only when something asks for it. The byte-level
/// rules and the limits are ``JSONScanner``'s and the walk is ``JSONParser``'s, so every error (message, line and
/// column) is the parser's, which is the reference the tape is held to (`JSONTapeTests`, the FuzzTape target).
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

    /// The single pass: ``JSONParser``'s walk of the grammar on the same ``JSONScanner``, appending entries instead of
    /// building values.
    private struct Builder {
        var scanner: JSONScanner
        var entries: [UInt64] = []
        /// The tape indices of the keys of the objects being read, innermost last (for duplicate names).
        var keys: [Int] = []

        init(bytes: UnsafeBufferPointer<UInt8>) {
            scanner = JSONScanner(bytes)
            // About one entry per 6 bytes in configs; growing past it costs a copy or two.
            entries.reserveCapacity(bytes.count / 6 + 16)
        }

        mutating func run() throws(JSONParseError) {
            do throws(JSONSyntaxError) {
                try scanner.beginDocument(skippingByteOrderMark: true)
                try value()
                try scanner.endDocument()
            } catch {
                throw scanner.parseError(error)
            }
        }

        mutating func value() throws(JSONSyntaxError) {
            let start = scanner.index
            switch try scanner.valueStart() {
            case .object: try object()
            case .array: try array()
            case .string: string(try scanner.string())
            case .number:
                let literal = try scanner.number()
                entries.append(JSONTape.entry(.number, start: start, payload: literal.count))
            case .trueLiteral:
                try scanner.literal(.trueLiteral)
                entries.append(JSONTape.entry(.trueValue, start: start))
            case .falseLiteral:
                try scanner.literal(.falseLiteral)
                entries.append(JSONTape.entry(.falseValue, start: start))
            case .null:
                try scanner.literal(.null)
                entries.append(JSONTape.entry(.null, start: start))
            }
        }

        /// Appends a checked string's entry.
        mutating func string(_ string: JSONScanner.ScannedString) {
            var flags: UInt64 = 0
            if string.hasEscape { flags |= JSONTape.escapedFlag }
            if string.hasNonASCII { flags |= JSONTape.nonASCIIFlag }
            entries.append(JSONTape.entry(.string, start: string.range.lowerBound, payload: string.range.count, flags: flags))
        }

        /// Opens a container entry at its opening bracket; ``close(_:)`` points it at its end entry.
        mutating func open(_ kind: Kind) -> Int {
            entries.append(JSONTape.entry(kind, start: scanner.index))
            return entries.count - 1
        }

        /// Appends the end entry of a container the scanner has just left (its closing bracket is the byte before).
        mutating func close(_ container: Int) {
            entries.append(JSONTape.entry(.end, start: scanner.index - 1))
            entries[container] |= UInt64(entries.count - 1) << JSONTape.payloadShift
        }

        mutating func object() throws(JSONSyntaxError) {
            let container = open(.object)
            if try scanner.enter(.object) {
                let first = keys.count
                defer { keys.removeSubrange(first...) }
                /// The decoded names, once the object is too large for a linear scan to stay cheap (as the parser does).
                var names: Set<String>?
                repeat {
                    string(try scanner.memberName())
                    let key = entries.count - 1
                    if let name = duplicateName(key, first: first, names: &names) { throw .duplicateMemberName(name) }
                    keys.append(key)
                    try scanner.colon()
                    try value()
                } while try scanner.next(in: .object)
            }
            close(container)
        }

        /// The key's decoded name when the object already has a member of that name (as `String`s compare), else nil.
        func duplicateName(_ key: Int, first: Int, names: inout Set<String>?) -> String? {
            entries.withUnsafeBufferPointer { entries -> String? in
                let reader = TapeReader(bytes: scanner.bytes, entries: entries)
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

        mutating func array() throws(JSONSyntaxError) {
            let container = open(.array)
            if try scanner.enter(.array) {
                repeat { try value() } while try scanner.next(in: .array)
            }
            close(container)
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
        JSONScanner.text(UnsafeBufferPointer(rebasing: bytes[rawRange(index)]), hasEscape: hasEscape(index))
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
