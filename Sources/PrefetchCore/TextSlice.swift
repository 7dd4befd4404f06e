/// A UTF-8 offset range of a `String` it keeps (retained, not copied), equal and hashed exactly as the `Substring` of
/// that range would be, for the page index's keys.
///
/// An ASCII slice is compared as bytes and hashed as `String` hashes ASCII text (its bytes, then a `0xFF` terminator):
/// ASCII text is already in normal form, so two ASCII slices are canonically equivalent exactly when their bytes are
/// equal. Any other slice is compared and hashed as its `Substring`, so a non-ASCII key still finds an ASCII one it is
/// canonically equivalent to (U+212A KELVIN SIGN is `K`). No `Substring` is made for an ASCII slice.
struct TextSlice: Hashable, Sendable {
    let base: String
    let start: UInt32
    let end: UInt32
    /// Whether the slice's bytes are all ASCII (set by whoever knows; `false` is always safe).
    let isASCII: Bool

    /// The `/` of a URL without a path.
    static let root = TextSlice("/")

    init(_ base: String, _ range: Range<Int>, isASCII: Bool) {
        self.base = base
        start = UInt32(range.lowerBound)
        end = UInt32(range.upperBound)
        self.isASCII = isASCII
    }

    /// The whole of `text`.
    init(_ text: String) {
        let count = text.utf8.count
        let ascii = text.utf8.withContiguousStorageIfAvailable { ByteText($0).isASCII(0..<$0.count) } ?? false
        self.init(text, 0..<count, isASCII: ascii)
    }

    var range: Range<Int> { Int(start)..<Int(end) }

    /// The slice as a `Substring` of ``base``.
    var substring: Substring {
        let utf8 = base.utf8
        let lower = utf8.index(utf8.startIndex, offsetBy: Int(start))
        return base[lower..<utf8.index(lower, offsetBy: Int(end - start))]
    }

    /// Calls `body` with the slice's bytes.
    @inline(__always)
    func withBytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        let range = range
        if let result = base.utf8.withContiguousStorageIfAvailable({ body(UnsafeBufferPointer(rebasing: $0[range])) }) {
            return result
        }
        var copy = base
        return copy.withUTF8 { body(UnsafeBufferPointer(rebasing: $0[range])) }
    }

    static func == (lhs: TextSlice, rhs: TextSlice) -> Bool {
        guard lhs.isASCII && rhs.isASCII else { return lhs.substring == rhs.substring }
        guard lhs.end - lhs.start == rhs.end - rhs.start else { return false }
        return lhs.withBytes { left in rhs.withBytes { right in ByteText(left).equals(0..<left.count, right) } }
    }

    func hash(into hasher: inout Hasher) {
        guard isASCII else {
            hasher.combine(substring)
            return
        }
        withBytes { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        hasher.combine(0xFF as UInt8)
    }
}
