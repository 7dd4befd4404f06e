/// Hexadecimal digits: the one encoder (lowercase) and digit decoder every target uses.
public enum Hex {
    /// `bytes` as lowercase hex digits, written straight into the string's storage: one allocation for a digest's
    /// 64 digits, none for up to 7 bytes (a small string).
    public static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var at = 0
            for byte in bytes {
                out[at] = digit(byte >> 4)
                out[at + 1] = digit(byte & 0x0f)
                at += 2
            }
            return at
        }
    }

    /// `bytes` as lowercase hex digits.
    public static func encode(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { encode($0) }
    }

    /// `bytes` as lowercase hex digits.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        encode(Array(bytes))
    }

    @inline(__always)
    private static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
    }

    /// The value of one hex digit (`0-9`, `a-f`, `A-F`), or nil for any other byte.
    @inline(__always)
    public static func value(of digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
