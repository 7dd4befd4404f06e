import HTTPTypes
import MetricsTestKit
import NIOCore
import PrefetchCore
import Synchronization
import Testing

@testable import PrefetchStore

/// What the store counts against its budget is what the process holds: a body's storage, not only its readable
/// bytes, and the bodies still arriving.
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

    /// A body from the allocator's mmap threshold up is mapped in whole pages, header included: 128 KiB maps
    /// 132 KiB. A count of its bytes missed 4 KiB per such entry (3%).
    @Test func aLargeBodyIsAccountedInWholePages() {
        let large = StoredResponse(status: 200, body: [UInt8](repeating: 0x64, count: 128 * 1024))
        #expect(large.accountedBytes == 132 * 1024)
        let small = StoredResponse(status: 200, body: [UInt8](repeating: 0x64, count: 128 * 1024 - 1))
        #expect(small.accountedBytes == 128 * 1024 - 1, "below the threshold: its bytes")
        #expect(BodyAllocation.footprint(ofCapacity: 256 * 1024) == 260 * 1024)
        #expect(BodyAllocation.footprint(ofCapacity: 0) == 0)
    }

    /// Bytes still arriving count against the budget: completing a response evicts least recently used entries
    /// until the store and those bytes fit together.
    @Test func bytesInFlightElsewhereAreMadeRoomFor() async throws {
        let held = Atomic<Int>(0)
        let entry = MemoryStore.perEntryOverhead + key("/0").accountedBytes + 1_000
        let budget = 10 * entry
        let store = MemoryStore(
            budgetBytes: budget, logger: quietLogger, metricsFactory: TestMetrics(), heldElsewhere: { held.load(ordering: .relaxed) })
        for n in 0..<9 {
            await put(store, key("/\(n)"), .success(response(bytes: 1_000)))
        }
        #expect(await store.snapshot().evictions == 0)
        held.store(4 * entry, ordering: .relaxed)
        await put(store, key("/9"), .success(response(bytes: 1_000)))
        let snapshot = await store.snapshot()
        #expect(snapshot.bytes + 4 * entry <= budget)
        #expect(snapshot.evictions == 4)
        #expect(await store.read(key("/0"), wait: .zero) == .absent(.evicted), "least recently used first")
        #expect(await store.read(key("/9"), wait: .zero).response == response(bytes: 1_000))
    }

    /// In-flight bytes are not the store's to free: they never make it refuse a response, only evict.
    @Test func bytesInFlightNeverRefuseAResponse() async throws {
        let entry = MemoryStore.perEntryOverhead + key("/0").accountedBytes + 1_000
        let store = MemoryStore(
            budgetBytes: 4 * entry, logger: quietLogger, metricsFactory: TestMetrics(), heldElsewhere: { 100 * entry })
        await put(store, key("/0"), .success(response(bytes: 1_000)))
        await put(store, key("/1"), .success(response(bytes: 1_000)))
        #expect(await store.read(key("/1"), wait: .zero).response == response(bytes: 1_000), "the newest is kept")
        #expect(await store.read(key("/0"), wait: .zero) == .absent(.evicted))
        let settled = Settled()
        store.settle([.put(key("/2"), policy: policy(), result: .success(response(bytes: 1_000)))]) { settled.mark() }
        #expect(settled.done, "an in-process store settles before returning")
        #expect(await store.read(key("/2"), wait: .zero).response == response(bytes: 1_000))
        #expect(await store.snapshot().entries == 1)
    }

    /// Without anything held elsewhere, the store fills its budget as before.
    @Test func nothingHeldElsewhereLeavesTheBudgetToTheStore() async throws {
        let entry = MemoryStore.perEntryOverhead + key("/0").accountedBytes + 1_000
        let store = MemoryStore(budgetBytes: 4 * entry, logger: quietLogger, metricsFactory: TestMetrics(), heldElsewhere: { 0 })
        for n in 0..<4 {
            await put(store, key("/\(n)"), .success(response(bytes: 1_000)))
        }
        let snapshot = await store.snapshot()
        #expect(snapshot.entries == 4)
        #expect(snapshot.evictions == 0)
    }
}

/// Whether a store's `settle(_:then:)` called its function.
private final class Settled: Sendable {
    private let called = Mutex(false)
    func mark() { called.withLock { $0 = true } }
    var done: Bool { called.withLock { $0 } }
}
