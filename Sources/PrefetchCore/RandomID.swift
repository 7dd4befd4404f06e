// Random identifiers and URL-safe base64: ticket ids, read keys and renderer lease ids all use these, so there is
// one spelling of each and one source of random bytes.

/// 128-bit random identifiers, URL-safe base64 without padding (22 characters).
public enum RandomID {
    /// A fresh identifier from the system's secure random source.
    public static func make() -> String {
        Base64URL.encode(randomBytes(16))
    }

    /// `count` bytes from the system's secure random source (``SecureRandom``).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        SecureRandom.bytes(count)
    }

    /// Whether `text` has the shape of an identifier.
    public static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == 22 && text.utf8.allSatisfy(Base64URL.isDigit)
    }
}

/// URL-safe base64 without padding (RFC 4648 §5).
public enum Base64URL {
    /// The 64 digits, in value order.
    private static let digits: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `bytes` encoded, without padding. Byte by byte (ids and read keys are made on every trigger).
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        let input = Array(bytes)
        let count = (input.count * 4 + 2) / 3
        return String(unsafeUninitializedCapacity: count) { out in
            var at = 0
            var index = 0
            while index + 3 <= input.count {
                let value = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
                out[at] = digits[Int(value >> 18 & 63)]
                out[at + 1] = digits[Int(value >> 12 & 63)]
                out[at + 2] = digits[Int(value >> 6 & 63)]
                out[at + 3] = digits[Int(value & 63)]
                at += 4
                index += 3
            }
            let left = input.count - index
            if left > 0 {
                let value = UInt32(input[index]) << 16 | (left == 2 ? UInt32(input[index + 1]) << 8 : 0)
                out[at] = digits[Int(value >> 18 & 63)]
                out[at + 1] = digits[Int(value >> 12 & 63)]
                at += 2
                if left == 2 {
                    out[at] = digits[Int(value >> 6 & 63)]
                    at += 1
                }
            }
            return at
        }
    }

    /// The bytes of `text`, or nil when it is not the canonical URL-safe base64 of some bytes (no padding, and
    /// unused trailing bits must be zero, so every byte string has exactly one accepted spelling).
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for digit in utf8 {
            guard let value = value(of: digit) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Leftover bits (2 or 4) belong to no byte: a canonical spelling leaves them zero.
        guard accumulator == 0 else { return nil }
        return bytes
    }

    private static func value(of digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): digit - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): digit - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }

    static func isDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }
}
