import HTTPTypes
import NIOCore
import PrefetchCore
import Testing

@testable import PrefetchStore

/// What the store counts against its budget is what the process holds: a body's storage, not only its readable
/// bytes.
@Suite struct MemoryAccountingTests {
    /// `ByteBuffer(bytes:)` rounds its storage up to a power of two: a 40 KiB body in it holds 64 KiB.
    @Test func aBodyIsStoredInStorageOfExactlyItsSize() {
        let stored = StoredResponse(status: 200, body: [UInt8](repeating: 0x61, count: 40 * 1024))
        #expect(stored.bodyBuffer.readableBytes == 40 * 1024)
        #expect(stored.bodyBuffer.storageCapacity == 40 * 1024, "not rounded up to 64 KiB")
        #expect(stored.accountedBytes == 40 * 1024)
        #expect(stored.body == [UInt8](repeating: 0x61, count: 40 * 1024))
    }

    @Test func aBufferWithSpareCapacityIsKeptRightSized() {
        var buffer = ByteBufferAllocator().buffer(capacity: 64 * 1024)
        buffer.writeBytes([UInt8](repeating: 0x62, count: 40 * 1024 + 3))
        #expect(buffer.storageCapacity == 64 * 1024)
        let stored = StoredResponse(status: 200, bodyBuffer: buffer)
        #expect(stored.bodyBuffer.storageCapacity == 40 * 1024 + 3)
        #expect(stored.bodyBuffer == buffer, "the same bytes")
        #expect(stored.accountedBytes == 40 * 1024 + 3)
    }

    @Test func aBufferOfExactlyItsBytesIsKeptAsIs() {
        let exact = StoredResponse(status: 200, body: Array("abc".utf8)).bodyBuffer
        let stored = StoredResponse(status: 200, bodyBuffer: exact)
        #expect(stored.bodyBuffer.storageCapacity == 3)
        exact.withUnsafeReadableBytes { original in
            stored.bodyBuffer.withUnsafeReadableBytes { kept in
                #expect(original.baseAddress == kept.baseAddress, "no copy")
            }
        }
    }

    /// A slice of a larger buffer keeps all of it alive: the store counts the storage.
    @Test func aBodyIsAccountedByTheStorageItKeepsAlive() {
        var big = ByteBufferAllocator().buffer(capacity: 32 * 1024)
        big.writeBytes([UInt8](repeating: 0x63, count: 32 * 1024))
        var stored = StoredResponse(status: 200, headers: [.contentType: "a/b"], body: [])
        stored.bodyBuffer = big.getSlice(at: 0, length: 10)!
        #expect(stored.bodyCount == 10)
        #expect(stored.accountedBytes == 32 * 1024 + "content-type".count + "a/b".count)
    }
}
