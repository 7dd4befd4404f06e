import PrefetchCore
import Testing

@Suite struct HexTests {
    @Test func encodesLowercaseTwoDigitsPerByte() {
        #expect(Hex.encode([0x00, 0x0f, 0xa5, 0xff]) == "000fa5ff")
        #expect(Hex.encode([UInt8]()) == "")
    }

    /// Every form writes the same digits, short (a small string) or long (a digest and more).
    @Test func everyFormEncodesTheSameDigits() {
        let bytes = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        let expected = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        for count in [0, 1, 7, 8, 32, 300] {
            let prefix = Array(bytes.prefix(count))
            let digits = String(expected.prefix(count * 2))
            #expect(Hex.encode(prefix) == digits)
            #expect(prefix.withUnsafeBytes { Hex.encode($0) } == digits)
            #expect(Hex.encode(prefix.lazy.map { $0 }) == digits, "a sequence that is not an array")
        }
    }

    @Test func decodesEveryDigitAndRefusesEverythingElse() {
        for byte in UInt8.min...UInt8.max {
            let digit = Hex.encode([byte])
            let bytes = Array(digit.utf8)
            #expect(Hex.value(of: bytes[0])! << 4 | Hex.value(of: bytes[1])! == byte)
            #expect(Hex.value(of: Array(digit.uppercased().utf8)[0]) == byte >> 4)
        }
        let digits = Set("0123456789abcdefABCDEF".utf8)
        for byte in UInt8.min...UInt8.max where !digits.contains(byte) {
            #expect(Hex.value(of: byte) == nil, "byte \(byte)")
        }
    }
}
