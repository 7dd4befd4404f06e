public import HTTPTypes
@_spi(CustomByteBufferAllocator) public import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A response as the store keeps and hands it out.
public struct StoredResponse: Sendable, Hashable {
    /// The HTTP status code.
    public var status: Int { didSet { token = ResponseToken() } }
    /// The response headers, in order, repeated ones (`Set-Cookie`) kept.
    public var headers: HTTPFields { didSet { token = ResponseToken() } }
    /// The response body, as one immutable storage every reader's replay shares: a reader's answer is a view of
    /// it, written without a copy (`ByteBuffer` is copy-on-write, and nothing writes to a stored one). The
    /// initialisers keep it in storage of exactly its size (see ``rightSized(_:)``).
    public var bodyBuffer: ByteBuffer { didSet { token = ResponseToken() } }
    /// The response body as an array: a copy of ``bodyBuffer``, for the few readers that need one (a dependent's
    /// JSON, the results view), never for a replay.
    public var body: [UInt8] {
        get { Array(bodyBuffer.readableBytesView) }
        set { bodyBuffer = Self.rightSized(newValue) }
    }
    /// When the fetch finished, on the monotonic clock of this process (not a wall-clock time; not comparable
    /// across processes).
    public var fetchedAt: ContinuousClock.Instant
    /// Upstream said `Cache-Control: no-store`: the store hands the response out once, then drops it.
    public var noStore: Bool
    /// How long the upstream fetch took.
    public var elapsed: Duration
    /// This response's identity for what readers derive from it (see ``ResponseToken``).
    public private(set) var token = ResponseToken()

    /// Creates a response (its body copied once into storage of exactly its size, which its readers share).
    public init(
        status: Int,
        headers: HTTPFields = [:],
        body: some Collection<UInt8> = [],
        fetchedAt: ContinuousClock.Instant = .now,
        noStore: Bool = false,
        elapsed: Duration = .zero
    ) {
        self.init(
            status: status, headers: headers, bodyBuffer: Self.rightSized(body), fetchedAt: fetchedAt, noStore: noStore,
            elapsed: elapsed)
    }

    /// Creates a response around `bodyBuffer`, which it keeps as is when its storage holds just its readable bytes,
    /// and otherwise copies once into storage of exactly their size (see ``rightSized(_:)``).
    public init(
        status: Int,
        headers: HTTPFields = [:],
        bodyBuffer: ByteBuffer,
        fetchedAt: ContinuousClock.Instant = .now,
        noStore: Bool = false,
        elapsed: Duration = .zero
    ) {
        self.status = status
        self.headers = headers
        self.bodyBuffer =
            bodyBuffer.storageCapacity > bodyBuffer.readableBytes ? Self.rightSized(bodyBuffer.readableBytesView) : bodyBuffer
        self.fetchedAt = fetchedAt
        self.noStore = noStore
        self.elapsed = elapsed
    }

    /// The body's length in bytes.
    public var bodyCount: Int { bodyBuffer.readableBytes }

    /// The bytes this response counts against a store budget: header names and values plus the memory its body
    /// keeps alive: its storage's capacity, not only its readable bytes (a slice of a larger buffer pins all of
    /// it), as the allocator maps it (see ``BodyAllocation/footprint(ofCapacity:)``).
    public var accountedBytes: Int {
        headers.reduce(BodyAllocation.footprint(ofCapacity: bodyBuffer.storageCapacity)) {
            $0 + $1.name.rawName.utf8.count + $1.value.utf8.count
        }
    }

    /// The default allocator (`malloc`, `realloc`, `free`), which frees the storage ``rightSized(_:)`` hands over.
    private static let allocator = ByteBufferAllocator()

    /// `bytes` in a `ByteBuffer` whose storage is exactly their size. `ByteBuffer(bytes:)` and every allocator
    /// path of NIO round a capacity up to the next power of two, so a 40 KiB body would pin 64 KiB: up to twice
    /// what a store accounting readable bytes believes it holds. The storage is `malloc`ed at the exact size and
    /// handed to a buffer that frees it with the default allocator's `free`.
    static func rightSized(_ bytes: some Collection<UInt8>) -> ByteBuffer {
        let count = bytes.count
        guard count > 0, let memory = malloc(count) else { return ByteBuffer(bytes: bytes) }
        let storage = UnsafeMutableRawBufferPointer(start: memory, count: count)
        storage.copyBytes(from: bytes)
        return ByteBuffer(takingOwnershipOf: storage, allocator: allocator)
    }
}

/// How response bodies are allocated, so a store can count what a body really costs.
public enum BodyAllocation {
    /// Allocations of at least this many bytes get their own mapping (glibc's `M_MMAP_THRESHOLD`, which `serve`
    /// sets to this at start so large bodies never fragment the heap).
    public static let mmapThreshold = 128 * 1024

    private static let pageSize: Int = {
        #if canImport(Glibc) || canImport(Musl) || canImport(Darwin)
        let size = sysconf(Int32(_SC_PAGESIZE))
        return size > 0 ? size : 4096
        #else
        return 4096
        #endif
    }()

    /// The memory a body storage of `capacity` bytes occupies: from `mmapThreshold` up, the allocation plus its
    /// 16-byte chunk header rounded up to whole pages (a 128 KiB body maps 132 KiB: 3% more, 4 KiB per entry
    /// that a count of its bytes missed); below it, its capacity (heap chunk headers are within the store's
    /// per-entry overhead).
    public static func footprint(ofCapacity capacity: Int) -> Int {
        guard capacity >= mmapThreshold else { return capacity }
        return (capacity + 16 + pageSize - 1) / pageSize * pageSize
    }
}
