import Digests
import Testing

/// The Digests target against published test vectors, and its value semantics.
@Suite struct DigestsTests {
    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { byte in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]])
        }.joined()
    }

    @Test func sha256MatchesNISTVectors() {
        // FIPS 180-2 appendix B.1 and B.2, and the empty message.
        #expect(hex(SHA256.hash(data: Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            hex(SHA256.hash(data: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(hex(SHA256.hash(data: [])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func incrementalSHA256EqualsOneShotAndCopiesAreIndependent() {
        var hasher = SHA256()
        hasher.update(data: Array("a".utf8))
        let copy = hasher
        hasher.update(data: Array("bc".utf8))
        var other = copy
        Array("bc".utf8).withUnsafeBytes { other.update(bufferPointer: $0) }
        #expect(hex(hasher.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hex(other.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // The copy taken after "a" still hashes "a" alone, and finalizing twice gives the same digest.
        #expect(hex(copy.finalize()) == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb")
        #expect(hex(copy.finalize()) == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb")
    }

    @Test func hmacSHA256MatchesRFC4231() {
        // Test case 1: a 20-byte key of 0x0b, "Hi There".
        #expect(
            hex(HMACSHA256.authenticationCode(for: Array("Hi There".utf8), key: [UInt8](repeating: 0x0b, count: 20)))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        // Test case 2: key "Jefe".
        #expect(
            hex(HMACSHA256.authenticationCode(for: Array("what do ya want for nothing?".utf8), key: Array("Jefe".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        // Test case 6: a 131-byte key (longer than the block, hashed first).
        #expect(
            hex(
                HMACSHA256.authenticationCode(
                    for: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
                    key: [UInt8](repeating: 0xaa, count: 131)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    @Test func keyedHMACIsCopiedPerMessage() {
        let keyed = HMACSHA256(key: Array("Jefe".utf8))
        var first = keyed
        first.update(data: Array("what do ya want ".utf8))
        first.update(data: Array("for nothing?".utf8))
        var second = keyed
        second.update(data: Array("what do ya want for nothing?".utf8))
        #expect(hex(first.finalize()) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(hex(second.finalize()) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(hex(keyed.finalize()) == hex(HMACSHA256.authenticationCode(for: [], key: Array("Jefe".utf8))))
    }

    @Test func sha1AndMD5MatchPublishedVectors() {
        // FIPS 180-1 appendix A; RFC 1321 appendix A.5.
        #expect(hex(SHA1.hash(data: Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(hex(MD5.hash(data: [])) == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(hex(MD5.hash(data: Array("abc".utf8))) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(
            hex(MD5.hash(data: Array("12345678901234567890123456789012345678901234567890123456789012345678901234567890".utf8)))
                == "57edf4a22be3c955ac49da2e2107b67a")
    }
}
