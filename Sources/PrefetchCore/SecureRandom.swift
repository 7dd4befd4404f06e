import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The system's secure random source, read 512 bytes at a time.
///
/// `SystemRandomNumberGenerator` makes one `getrandom` call per eight bytes. A page open used about 200 of them
/// (a fresh trace for each shared request, drawn byte by byte, plus the ticket id and read key), and the profile of
/// the fan-out benchmark put `getrandom` at 6% of the service's CPU. The bytes handed out here are the same kernel
/// bytes, fetched in larger reads and each handed out once; the buffer is process memory, like every secret the
/// service holds.
public struct SecureRandom: RandomNumberGenerator, Sendable {
    public init() {}

    public mutating func next() -> UInt64 {
        var value: UInt64 = 0
        withUnsafeMutableBytes(of: &value) { Self.fill($0) }
        return value
    }

    /// `count` fresh random bytes.
    public static func bytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }

    /// Fills `target` with fresh random bytes.
    public static func fill(_ target: UnsafeMutableRawBufferPointer) {
        guard target.count <= Pool.size else {
            system(target)
            return
        }
        // The caller's buffer, written under the lock and by this call only.
        nonisolated(unsafe) let target = target
        pool.withLock { $0.take(into: target) }
    }

    private static let pool = Mutex(Pool())

    private struct Pool: ~Copyable, @unchecked Sendable {
        static let size = 512
        /// Owned by the pool, touched only under its lock.
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: Pool.size, alignment: 8)
        /// Bytes before this offset were handed out already.
        var used = Pool.size

        mutating func take(into target: UnsafeMutableRawBufferPointer) {
            if Pool.size - used < target.count {
                SecureRandom.system(storage)
                used = 0
            }
            let source = UnsafeMutableRawBufferPointer(rebasing: storage[used..<(used + target.count)])
            target.copyMemory(from: UnsafeRawBufferPointer(source))
            // Handed out once: the copy left behind is wiped.
            source.initializeMemory(as: UInt8.self, repeating: 0)
            used += target.count
        }

        deinit { storage.deallocate() }
    }

    /// Fills `target` straight from the kernel.
    private static func system(_ target: UnsafeMutableRawBufferPointer) {
        guard let base = target.baseAddress, target.count > 0 else { return }
        #if canImport(Glibc) || canImport(Darwin)
        arc4random_buf(base, target.count)
        #else
        var generator = SystemRandomNumberGenerator()
        var offset = 0
        while offset < target.count {
            let word = generator.next()
            withUnsafeBytes(of: word) { bytes in
                let n = min(8, target.count - offset)
                (base + offset).copyMemory(from: bytes.baseAddress!, byteCount: n)
                offset += n
            }
        }
        #endif
    }
}
