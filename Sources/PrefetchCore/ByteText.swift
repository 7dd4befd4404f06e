/// Byte-offset searching, comparing and slicing over a UTF-8 buffer, for the parsers that work on bytes.
///
/// Offsets are plain `Int`s into the buffer, so a parse is index arithmetic with no `String.Index`
/// translation, no grapheme breaking and no Unicode property look-ups. The buffer is only borrowed: a value
/// of this type must not outlive the `withUTF8` / `withUnsafeBufferPointer` call that produced it.
package struct ByteText {
    let bytes: UnsafeBufferPointer<UInt8>

    package init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// The first offset in `range` holding `byte`.
    @inline(__always)
    func firstIndex(of byte: UInt8, in range: Range<Int>) -> Int? {
        var offset = range.lowerBound
        while offset < range.upperBound {
            if bytes[offset] == byte { return offset }
            offset += 1
        }
        return nil
    }

    /// The last offset in `range` holding `byte`.
    func lastIndex(of byte: UInt8, in range: Range<Int>) -> Int? {
        var offset = range.upperBound
        while offset > range.lowerBound {
            offset -= 1
            if bytes[offset] == byte { return offset }
        }
        return nil
    }

    /// Whether the bytes in `range` are exactly `literal`.
    @inline(__always)
    func equals(_ range: Range<Int>, _ literal: StaticString) -> Bool {
        guard range.count == literal.utf8CodeUnitCount else { return false }
        let start = literal.utf8Start
        for offset in 0..<range.count where bytes[range.lowerBound + offset] != start[offset] { return false }
        return true
    }

    /// Whether the bytes in `range` are exactly `other`.
    @inline(__always)
    func equals(_ range: Range<Int>, _ other: UnsafeBufferPointer<UInt8>) -> Bool {
        guard range.count == other.count else { return false }
        for offset in 0..<range.count where bytes[range.lowerBound + offset] != other[offset] { return false }
        return true
    }

    /// Whether the bytes in `range` are `lowercase` (ASCII letters) in any letter case.
    package func equalsIgnoringASCIICase(_ range: Range<Int>, _ lowercase: StaticString) -> Bool {
        guard range.count == lowercase.utf8CodeUnitCount else { return false }
        let start = lowercase.utf8Start
        for offset in 0..<range.count where Self.asciiLowercased(bytes[range.lowerBound + offset]) != start[offset] { return false }
        return true
    }

    /// The bytes in `range` as a `String` (they are UTF-8; the callers pass whole sequences).
    @inline(__always)
    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// Whether every byte in `range` is ASCII (eight at a time).
    func isASCII(_ range: Range<Int>) -> Bool {
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound {
            if Self.word(bytes, at: offset) & Self.highBits != 0 { return false }
            offset += 8
        }
        while offset < range.upperBound {
            if bytes[offset] >= 0x80 { return false }
            offset += 1
        }
        return true
    }

    // Eight bytes as one word (SWAR): each test below is non-zero exactly when some byte of the word passes it.

    static let highBits: UInt64 = 0x8080_8080_8080_8080
    static let lowBits: UInt64 = 0x0101_0101_0101_0101

    /// The eight bytes at `offset` (which has eight bytes after it), unaligned, in memory order.
    @inline(__always)
    static func word(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt64 {
        UnsafeRawPointer(bytes.baseAddress! + offset).loadUnaligned(as: UInt64.self)
    }

    /// Non-zero when some byte of `word` is `byte`.
    @inline(__always)
    static func hasByte(_ word: UInt64, _ byte: UInt8) -> UInt64 {
        let spread = word ^ (lowBits &* UInt64(byte))
        return (spread &- lowBits) & ~spread & highBits
    }

    /// Non-zero when some byte of `word` is below `limit` (at most 0x80).
    @inline(__always)
    static func hasByteBelow(_ word: UInt64, _ limit: UInt8) -> UInt64 {
        (word &- lowBits &* UInt64(limit)) & ~word & highBits
    }

    /// The bytes of `word` that end or escape a JSON string's plain run (`"`, `\`, a control byte or a non-ASCII one),
    /// each flagged by its high bit. The lowest flag is exact (a borrow can only flag bytes above a true one), so with
    /// the word read in little-endian order, `trailingZeroBitCount / 8` is the offset of the first such byte.
    @inline(__always)
    static func specialStringBytes(_ word: UInt64) -> UInt64 {
        hasByte(word, UInt8(ascii: "\"")) | hasByte(word, UInt8(ascii: "\\")) | hasByteBelow(word, 0x20) | (word & highBits)
    }

    /// Whether some byte of `word` is not a printable ASCII byte (a control byte, DEL or non-ASCII).
    @inline(__always)
    static func hasNonPrintableByte(_ word: UInt64) -> Bool {
        (hasByteBelow(word, 0x20) | hasByte(word, 0x7F) | (word & highBits)) != 0
    }

    @inline(__always)
    static func isASCIIUppercase(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") }

    @inline(__always)
    static func asciiLowercased(_ byte: UInt8) -> UInt8 { isASCIIUppercase(byte) ? byte | 0x20 : byte }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    @inline(__always)
    static func isASCIILetter(_ byte: UInt8) -> Bool {
        let lower = byte | 0x20
        return lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "z")
    }

    /// An ASCII byte allowed in a registered-name host: letters, digits, `-`, `.`, `_`.
    @inline(__always)
    static func isHostByte(_ byte: UInt8) -> Bool {
        isASCIILetter(byte) || isDigit(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
    }

    /// A byte allowed between the brackets of an IPv6 literal: hex digits, `:`, `.`.
    @inline(__always)
    static func isIPv6Byte(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f")) || byte == UInt8(ascii: ":")
            || byte == UInt8(ascii: ".")
    }

    /// The port in `range` as `Int(String)` reads it (an optional sign, then decimal digits), when it has 1-5
    /// bytes and lies in 1...65535.
    static func portValue(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
        guard !range.isEmpty, range.count <= 5 else { return nil }
        var offset = range.lowerBound
        var negative = false
        if bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-") {
            negative = bytes[offset] == UInt8(ascii: "-")
            offset += 1
        }
        guard offset < range.upperBound else { return nil }
        var value = 0
        while offset < range.upperBound {
            let byte = bytes[offset]
            guard isDigit(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            offset += 1
        }
        if negative { value = -value }
        guard value > 0, value <= 65535 else { return nil }
        return value
    }
}
