import Foundation
import Testing

@testable import PrefetchOffline

/// The plain-Swift SHA-256 and MD5 of Digest.swift (the only implementation, on every platform): the published
/// vectors, the padding boundaries, streaming in pieces, and the bytes `openssl dgst` hashes.
@Suite struct DigestTests {
    func sha256(_ text: String) -> String { Digests.hex(SHA256Hasher.hash(Data(text.utf8))) }
    func md5(_ text: String) -> String { Digests.hex(MD5Hasher.hash(Data(text.utf8))) }

    /// RFC 1321, appendix A.5.
    @Test func md5MatchesTheRFC1321TestSuite() {
        #expect(md5("") == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(md5("a") == "0cc175b9c0f1b6a831c399e269772661")
        #expect(md5("abc") == "900150983cd24fb0d6963f7d28e17f72")
        #expect(md5("message digest") == "f96b697d7cb7938d525a2f31aaf161d0")
        #expect(md5("abcdefghijklmnopqrstuvwxyz") == "c3fcd3d76192e4007dfb496cca67e13b")
        #expect(
            md5("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") == "d174ab98d277d9f5a5611c2c9f419d9f")
        #expect(
            md5(String(repeating: "1234567890", count: 8)) == "57edf4a22be3c955ac49da2e2107b67a")
    }

    /// FIPS 180-2, appendix B (one block, two blocks with the 56-byte message, one million "a"), and the empty message.
    @Test func sha256MatchesTheFIPS180Vectors() {
        #expect(sha256("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(sha256(String(repeating: "a", count: 1_000_000)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        #expect(sha256("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// One million "a" fed in uneven pieces, so partial blocks are carried across updates; MD5's value is the one
    /// `openssl dgst -md5` and Python's hashlib give.
    @Test func aMillionAsStreamedInPiecesHashesLikeOneBuffer() {
        let piece = Data(repeating: UInt8(ascii: "a"), count: 997)
        var sha = SHA256Hasher()
        var md5 = MD5Hasher()
        var fed = 0
        while fed < 1_000_000 {
            let part = piece.prefix(min(piece.count, 1_000_000 - fed))
            sha.update(part)
            md5.update(part)
            fed += part.count
        }
        #expect(Digests.hex(sha.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        #expect(Digests.hex(md5.finalize()) == "7707d6ae4e027c70eea2a935c2296f21")
    }

    /// Messages of n "a" around the padding's edges: 55 bytes is the longest whose length fits its own block, 56 needs
    /// a second block, 64 is exactly one. Values from `openssl dgst` and Python's hashlib, which agree.
    @Test(arguments: [
        (55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318", "ef1772b6dff9a122358552954ad0df65"),
        (56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a", "3b0c8ac703f828b04c6c197006d17218"),
        (57, "f13b2d724659eb3bf47f2dd6af1accc87b81f09f59f2b75e5c0bed6589dfe8c6", "652b906d60af96844ebd21b674f35e93"),
        (63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34", "b06521f39153d618550606be297466d5"),
        (64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb", "014842d480b571495a4a0363793f7367"),
        (65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0", "c743a45e0d2e6a95cb859adae0248435"),
        (119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb", "8a7bd0732ed6a28ce75f6dabc90e1613"),
        (120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c", "5f61c0ccad4cac44c75ff505e1f1e537"),
        (128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e", "e510683b3f5ffe4093d021808bc6ff70"),
    ])
    func paddingBoundaries(length: Int, sha: String, md5: String) {
        let text = String(repeating: "a", count: length)
        #expect(self.sha256(text) == sha)
        #expect(self.md5(text) == md5)
    }

    /// A few hundred seeded random inputs (lengths weighted to the block edges, some up to 200 KB), each hashed whole
    /// and in random pieces, against `openssl dgst -sha256` and `-md5` over the same bytes in files. openssl is
    /// required: without it the test fails, it does not skip.
    @Test func matchesOpenSSLOnSeededRandomInputs() throws {
        let openssl = "/usr/bin/openssl"
        try #require(
            FileManager.default.isExecutableFile(atPath: openssl),
            "DigestTests needs \(openssl) to compare against (install the openssl package); it does not skip")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("digest-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        var random = SplitMix64(seed: 0x5eed_d16e_57)
        var inputs: [(path: String, sha256: String, md5: String)] = []
        for index in 0..<300 {
            let length: Int
            switch random.next() % 4 {
            case 0: length = Int(random.next() % 200)
            case 1: length = 64 * Int(random.next() % 8 + 1) + Int(random.next() % 17) - 8  // near a block edge
            case 2: length = Int(random.next() % 5000)
            default: length = Int(random.next() % 200_000)
            }
            var bytes = [UInt8](repeating: 0, count: max(length, 0))
            for offset in bytes.indices { bytes[offset] = UInt8(truncatingIfNeeded: random.next()) }
            let data = Data(bytes)

            var sha = SHA256Hasher()
            var md5 = MD5Hasher()
            var start = 0
            while start < data.count {
                let end = min(data.count, start + Int(random.next() % 150))
                sha.update(data[start..<end])
                md5.update(data[start..<end])
                start = end
            }
            let whole = (sha256: Digests.sha256(data), md5: Digests.md5(data))
            #expect(Digests.hex(sha.finalize()) == whole.sha256, "input \(index), \(data.count) bytes: SHA-256 in pieces")
            #expect(Digests.hex(md5.finalize()) == whole.md5, "input \(index), \(data.count) bytes: MD5 in pieces")

            let path = directory.appendingPathComponent("input-\(index)").path
            try data.write(to: URL(fileURLWithPath: path))
            inputs.append((path, whole.sha256, whole.md5))
        }

        let paths = inputs.map(\.path)
        let shaByPath = try Self.openSSLDigests(openssl, "-sha256", paths)
        let md5ByPath = try Self.openSSLDigests(openssl, "-md5", paths)
        for (index, input) in inputs.enumerated() {
            #expect(shaByPath[input.path] == input.sha256, "input \(index): SHA-256 differs from openssl")
            #expect(md5ByPath[input.path] == input.md5, "input \(index): MD5 differs from openssl")
        }
    }

    /// `openssl dgst <algorithm> -r` over every path in one run: the hex digest of each path.
    static func openSSLDigests(_ openssl: String, _ algorithm: String, _ paths: [String]) throws -> [String: String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = ["dgst", algorithm, "-r"] + paths
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl dgst \(algorithm) exited with \(process.terminationStatus)")
        var digests: [String: String] = [:]
        for line in text.split(separator: "\n") {
            // "<hex> *<path>"
            guard let space = line.firstIndex(of: " ") else { continue }
            var path = line[line.index(after: space)...]
            if path.first == "*" { path = path.dropFirst() }
            digests[String(path)] = String(line[..<space])
        }
        try #require(digests.count == paths.count, "openssl dgst \(algorithm) printed \(digests.count) digests for \(paths.count) files")
        return digests
    }
}

/// A small seeded generator, so every run hashes the same inputs.
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
