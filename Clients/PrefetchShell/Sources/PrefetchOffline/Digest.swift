import Foundation

// SHA-256 (FIPS 180-4) and MD5 (RFC 1321) in plain Swift, so the offline package links no crypto library: no
// BoringSSL to compile on Linux, and one implementation on every platform, the one the tests check. Both hash as the
// bytes arrive (`update` any number of times, then `finalize` once), so a body read in pieces needs no second copy.
// Neither is constant time; they hash public bodies, never secrets.

/// SHA-256, streaming. `SHA256Hasher.hash(data)` for a whole buffer.
struct SHA256Hasher: Sendable {
    private var state: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]
    private var buffer = BlockBuffer()

    init() {}

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        buffer.absorb(bytes, into: &state, compress: Self.compress)
    }

    mutating func update(_ data: some DataProtocol) {
        for region in data.regions { region.withUnsafeBytes { update($0) } }
    }

    /// The 32-byte digest. The hasher is spent: hash again with a new one.
    mutating func finalize() -> [UInt8] {
        buffer.pad(lengthBigEndian: true, into: &state, compress: Self.compress)
        var digest: [UInt8] = []
        digest.reserveCapacity(32)
        for word in state {
            digest.append(contentsOf: [
                UInt8(word >> 24), UInt8(truncatingIfNeeded: word >> 16), UInt8(truncatingIfNeeded: word >> 8),
                UInt8(truncatingIfNeeded: word),
            ])
        }
        return digest
    }

    static func hash(_ data: some DataProtocol) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(data)
        return hasher.finalize()
    }

    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    private static func compress(_ state: inout [UInt32], _ block: UnsafeRawPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            for t in 0..<16 {
                w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: 4 * t, as: UInt32.self))
            }
            for t in 16..<64 {
                let s0 = w[t - 15].rotatedRight(7) ^ w[t - 15].rotatedRight(18) ^ (w[t - 15] >> 3)
                let s1 = w[t - 2].rotatedRight(17) ^ w[t - 2].rotatedRight(19) ^ (w[t - 2] >> 10)
                w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
            }
            k.withUnsafeBufferPointer { k in
                var a = state[0]
                var b = state[1]
                var c = state[2]
                var d = state[3]
                var e = state[4]
                var f = state[5]
                var g = state[6]
                var h = state[7]
                for t in 0..<64 {
                    let sum1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
                    let choice = (e & f) ^ (~e & g)
                    let t1 = h &+ sum1 &+ choice &+ k[t] &+ w[t]
                    let sum0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
                    let majority = (a & b) ^ (a & c) ^ (b & c)
                    let t2 = sum0 &+ majority
                    h = g
                    g = f
                    f = e
                    e = d &+ t1
                    d = c
                    c = b
                    b = a
                    a = t1 &+ t2
                }
                state[0] &+= a
                state[1] &+= b
                state[2] &+= c
                state[3] &+= d
                state[4] &+= e
                state[5] &+= f
                state[6] &+= g
                state[7] &+= h
            }
        }
    }
}

/// MD5, streaming. Only to check seed 001's `md5` fields: it catches a damaged body, not a forged one.
struct MD5Hasher: Sendable {
    private var state: [UInt32] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476]
    private var buffer = BlockBuffer()

    init() {}

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        buffer.absorb(bytes, into: &state, compress: Self.compress)
    }

    mutating func update(_ data: some DataProtocol) {
        for region in data.regions { region.withUnsafeBytes { update($0) } }
    }

    /// The 16-byte digest. The hasher is spent: hash again with a new one.
    mutating func finalize() -> [UInt8] {
        buffer.pad(lengthBigEndian: false, into: &state, compress: Self.compress)
        var digest: [UInt8] = []
        digest.reserveCapacity(16)
        for word in state {
            digest.append(contentsOf: [
                UInt8(truncatingIfNeeded: word), UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word >> 16),
                UInt8(word >> 24),
            ])
        }
        return digest
    }

    static func hash(_ data: some DataProtocol) -> [UInt8] {
        var hasher = MD5Hasher()
        hasher.update(data)
        return hasher.finalize()
    }

    /// RFC 1321's T[i], the integer part of 2^32 × |sin(i + 1)|.
    private static let t: [UInt32] = [
        0xd76a_a478, 0xe8c7_b756, 0x2420_70db, 0xc1bd_ceee, 0xf57c_0faf, 0x4787_c62a, 0xa830_4613, 0xfd46_9501,
        0x6980_98d8, 0x8b44_f7af, 0xffff_5bb1, 0x895c_d7be, 0x6b90_1122, 0xfd98_7193, 0xa679_438e, 0x49b4_0821,
        0xf61e_2562, 0xc040_b340, 0x265e_5a51, 0xe9b6_c7aa, 0xd62f_105d, 0x0244_1453, 0xd8a1_e681, 0xe7d3_fbc8,
        0x21e1_cde6, 0xc337_07d6, 0xf4d5_0d87, 0x455a_14ed, 0xa9e3_e905, 0xfcef_a3f8, 0x676f_02d9, 0x8d2a_4c8a,
        0xfffa_3942, 0x8771_f681, 0x6d9d_6122, 0xfde5_380c, 0xa4be_ea44, 0x4bde_cfa9, 0xf6bb_4b60, 0xbebf_bc70,
        0x289b_7ec6, 0xeaa1_27fa, 0xd4ef_3085, 0x0488_1d05, 0xd9d4_d039, 0xe6db_99e5, 0x1fa2_7cf8, 0xc4ac_5665,
        0xf429_2244, 0x432a_ff97, 0xab94_23a7, 0xfc93_a039, 0x655b_59c3, 0x8f0c_cc92, 0xffef_f47d, 0x8584_5dd1,
        0x6fa8_7e4f, 0xfe2c_e6e0, 0xa301_4314, 0x4e08_11a1, 0xf753_7e82, 0xbd3a_f235, 0x2ad7_d2bb, 0xeb86_d391,
    ]

    /// The left rotations of each round, four per round.
    private static let shifts: [UInt32] = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21]

    private static func compress(_ state: inout [UInt32], _ block: UnsafeRawPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 16) { x in
            for i in 0..<16 {
                x[i] = UInt32(littleEndian: block.loadUnaligned(fromByteOffset: 4 * i, as: UInt32.self))
            }
            var a = state[0]
            var b = state[1]
            var c = state[2]
            var d = state[3]
            for i in 0..<64 {
                let mixed: UInt32
                let word: Int
                switch i >> 4 {
                case 0:
                    mixed = (b & c) | (~b & d)
                    word = i
                case 1:
                    mixed = (b & d) | (c & ~d)
                    word = (5 &* i &+ 1) & 15
                case 2:
                    mixed = b ^ c ^ d
                    word = (3 &* i &+ 5) & 15
                default:
                    mixed = c ^ (b | ~d)
                    word = (7 &* i) & 15
                }
                let sum = a &+ mixed &+ t[i] &+ x[word]
                a = d
                d = c
                c = b
                b = b &+ sum.rotatedLeft(shifts[(i >> 4) << 2 | (i & 3)])
            }
            state[0] &+= a
            state[1] &+= b
            state[2] &+= c
            state[3] &+= d
        }
    }
}

/// The 64-byte block framing SHA-256 and MD5 share: whole blocks go to `compress` straight from the caller's bytes,
/// only a partial block is copied; `pad` appends 0x80, zeros and the message length in bits (a 64-bit word, in the
/// hash's byte order) and compresses what is left.
private struct BlockBuffer: Sendable {
    private var block = [UInt8](repeating: 0, count: 64)
    private var used = 0
    private var length: UInt64 = 0

    mutating func absorb<State>(
        _ bytes: UnsafeRawBufferPointer, into state: inout State, compress: (inout State, UnsafeRawPointer) -> Void
    ) {
        guard var next = bytes.baseAddress, !bytes.isEmpty else { return }
        var remaining = bytes.count
        length &+= UInt64(remaining)
        if used > 0 {
            let taken = min(64 - used, remaining)
            block.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: used).copyMemory(from: next, byteCount: taken) }
            used += taken
            next += taken
            remaining -= taken
            guard used == 64 else { return }
            block.withUnsafeBytes { compress(&state, $0.baseAddress!) }
            used = 0
        }
        while remaining >= 64 {
            compress(&state, next)
            next += 64
            remaining -= 64
        }
        if remaining > 0 {
            block.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: next, byteCount: remaining) }
            used = remaining
        }
    }

    mutating func pad<State>(
        lengthBigEndian: Bool, into state: inout State, compress: (inout State, UnsafeRawPointer) -> Void
    ) {
        let bits = length &* 8
        var tail: [UInt8] = [0x80]
        // Zeros up to 56 bytes into a block, then the 8-byte length: the last block ends exactly at 64.
        let zeros = (55 - (used % 64) + 64) % 64
        tail.append(contentsOf: repeatElement(0, count: zeros))
        for index in 0..<8 {
            let shift = UInt64(lengthBigEndian ? 56 - 8 * index : 8 * index)
            tail.append(UInt8(truncatingIfNeeded: bits >> shift))
        }
        let saved = length
        tail.withUnsafeBytes { absorb($0, into: &state, compress: compress) }
        length = saved
        precondition(used == 0, "padding ends on a block boundary")
    }
}

extension UInt32 {
    @inline(__always) fileprivate func rotatedRight(_ count: UInt32) -> UInt32 { (self >> count) | (self << (32 - count)) }
    @inline(__always) fileprivate func rotatedLeft(_ count: UInt32) -> UInt32 { (self << count) | (self >> (32 - count)) }
}
