import Foundation
import PrefetchCore
import Testing

/// Ticket ids, read keys and lease ids are URL-safe base64 without padding, written and read byte by byte: held to
/// Foundation's base64 on random inputs, and only the one canonical spelling of each byte string is accepted.
@Suite struct Base64URLTests {
    /// Foundation's encoding, made URL-safe and unpadded: the reference.
    static func reference(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test func encodingMatchesFoundationAndDecodingInvertsIt() {
        var generator = SeededRandom(seed: 0xB64)
        for length in 0..<64 {
            for _ in 0..<20 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let text = Base64URL.encode(bytes)
                #expect(text == Self.reference(bytes), "\(bytes)")
                #expect(Base64URL.decode(text) == bytes, "\(text)")
            }
        }
    }

    @Test func onlyTheCanonicalSpellingOfSomeBytesIsAccepted() {
        var generator = SeededRandom(seed: 0x5EED)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=. ")
        for _ in 0..<5000 {
            let text = String((0..<Int.random(in: 0...12, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            // Accepted exactly when some bytes encode to this very text.
            var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while standard.utf8.count % 4 != 0 { standard += "=" }
            let canonical =
                text.utf8.allSatisfy { $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "=") }
                && Data(base64Encoded: standard).map { Self.reference(Array($0)) == text } == true
            #expect((Base64URL.decode(text) != nil) == canonical, "\(text)")
        }
        #expect(Base64URL.decode("AB") == nil, "trailing bits set")
        #expect(Base64URL.decode("AA") == [0])
        #expect(Base64URL.decode("A") == nil)
    }

    @Test(arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ])
    func base64URLMatchesRFC4648(input: String, expected: String) {
        #expect(Base64URL.encode(Array(input.utf8)) == expected)
    }

    @Test func base64URLUsesTheURLSafeAlphabet() {
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.encode([UInt8](repeating: 0xFF, count: 16)) == "_____________________w")
    }
}
