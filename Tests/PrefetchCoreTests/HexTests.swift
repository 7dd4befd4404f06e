import PrefetchCore
import Testing

@Suite struct HexTests {
    @Test func encodesLowercaseTwoDigitsPerByte() {
        #expect(Hex.encode([0x00, 0x0f, 0xa5, 0xff]) == "000fa5ff")
        #expect(Hex.encode([UInt8]()) == "")
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
