// PrefetchStore: the TTL response store behind the prefetch orchestrator. The trigger side claims a key's single
// flight with `begin` and, when it leads, fetches and calls `complete`; the page side calls `read`, which never
// starts a fetch and waits (bounded) for one in flight. `ResponseStore` is the seam for a shared backend
// (`RedisStore`); `MemoryStore` is the in-process one.
// Design notes: docs/design/response-store.md

public import HTTPTypes
@_spi(CustomByteBufferAllocator) public import NIOCore
public import PrefetchCore
import Synchronization

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

/// Why a fetch produced no response. `code` is drawn from a small fixed vocabulary, safe as a metric label.
public struct StoreFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why: a fetch's code (`timeout`, `dns`, `connect`, `tls`, `reset`, `too-large`, `protocol`, ...), `upstream-5xx`,
    /// `private`, a dependent's (`dependency-failed`, ...), or the store's own: `too-large` when a response cannot
    /// fit even in an empty store, `store-full` when in-flight entries (never evicted) hold the room it needs.
    public var code: FailureCode
    /// A human explanation naming the offending input.
    public var message: String

    /// Creates a failure.
    public init(code: FailureCode, message: String) {
        self.code = code
        self.message = message
    }

    /// A `description` of the form `code: message`.
    public var description: String { "\(code): \(message)" }

    /// The bytes this failure counts against a store budget.
    var accountedBytes: Int { code.rawValue.utf8.count + message.utf8.count }
}

/// Proof of leadership of one flight; only the leader's token completes it.
public struct FlightToken: Sendable, Hashable, CustomStringConvertible {
    /// The token's value; unique per store for the store's lifetime.
    public let value: UInt64

    /// Creates a token. Backends mint tokens; callers only pass them back.
    public init(_ value: UInt64) {
        self.value = value
    }

    /// `flight#<value>`.
    public var description: String { "flight#\(value)" }
}

/// The answer to `ResponseStore.begin`.
public enum BeginOutcome: Sendable, Hashable {
    /// The caller leads: it must fetch and then call `complete` (or `abandon`) with this token.
    case leader(FlightToken)
    /// A flight for the key is already in progress; nothing to do.
    case joined
    /// A completed entry exists (a response, or a failure within its `negativeTTL`); nothing to do.
    case fresh
}

/// Why `read` found nothing to hand out.
public enum AbsentReason: String, Sendable, Hashable, CaseIterable {
    /// Nothing was ever triggered for this key (or the store forgot it).
    case notFound = "not-triggered"
    /// The entry outlived its TTL (or the failure its negative TTL).
    case expired
    /// A no-store response was already handed out to another reader.
    case consumed
    /// The entry was evicted for room, or dropped because its interface left the configuration.
    case evicted
    /// The entry was dropped by an invalidation: its user logged out, or a backend said what it holds changed.
    case invalidated
}

/// The answer to `ResponseStore.read`.
public enum ReadOutcome: Sendable, Hashable {
    /// The response. `joined` is true when the reader waited on (or arrived during) the flight.
    case ready(StoredResponse, joined: Bool)
    /// The shared failure of the flight. `joined` as for `.ready`.
    case failed(StoreFailure, joined: Bool)
    /// Still in flight when the reader's deadline passed (or its task was cancelled).
    case pending
    /// Nothing to hand out, and why.
    case absent(AbsentReason)
}

/// How long the store keeps what a flight produced, and under which interface it is counted.
public struct StorePolicy: Sendable, Hashable {
    /// How long a response is kept after it completes. Default 30 s.
    public var ttl: Duration
    /// How long a failure is kept (shared with later readers, and stopping `begin` from starting another fetch).
    /// Default 5 s; `.zero` shares a failure only with the readers already waiting.
    public var negativeTTL: Duration
    /// The interface name from the configuration: a bounded value, used as a metric label and by `retain`.
    public var label: String

    /// Creates a policy.
    public init(ttl: Duration = .seconds(30), negativeTTL: Duration = .seconds(5), label: String) {
        self.ttl = ttl
        self.negativeTTL = negativeTTL
        self.label = label
    }
}

/// A point-in-time view of a store's size and cumulative counters.
public struct StoreSnapshot: Sendable, Hashable {
    /// Entries held, including in-flight ones.
    public var entries: Int
    /// Bytes accounted against the budget.
    public var bytes: Int
    /// The byte budget.
    public var budget: Int
    /// Entries still in flight.
    public var pending: Int
    /// Reads that found a response ready on arrival.
    public var hits: Int
    /// Reads that waited on a flight and got its response.
    public var joins: Int
    /// Reads that got no response (failed, pending or absent). `hits + joins + misses` counts every read.
    public var misses: Int
    /// Completed entries evicted to make room.
    public var evictions: Int
    /// Responses that expired, were evicted or dropped without ever being read: wasted prefetches.
    public var expiredUnused: Int

    /// Creates a snapshot.
    public init(
        entries: Int = 0, bytes: Int = 0, budget: Int = 0, pending: Int = 0, hits: Int = 0, joins: Int = 0,
        misses: Int = 0, evictions: Int = 0, expiredUnused: Int = 0
    ) {
        self.entries = entries
        self.bytes = bytes
        self.budget = budget
        self.pending = pending
        self.hits = hits
        self.joins = joins
        self.misses = misses
        self.evictions = evictions
        self.expiredUnused = expiredUnused
    }
}

/// A response store with single flight per key and per-identity isolation.
public protocol ResponseStore: Sendable {
    /// Claims the single flight for `key`. `.leader` means the caller must fetch and then call `complete` (or
    /// `abandon`); `.joined` that a flight is already under way; `.fresh` that a completed entry exists.
    /// A flight older than the store's lock age may be taken over: the caller then leads and the old token is stale.
    func begin(_ key: StoreKey, policy: StorePolicy) async -> BeginOutcome

    /// Begins `key` and, when that leads, completes it with `result` at once; returns whether it led (when it did
    /// not, nothing was written). Meant for a key no one else flies, such as one named by a fresh random id, so a
    /// shared store can do both in one round trip; the default calls `begin` and then `complete`.
    @discardableResult
    func put(_ key: StoreKey, policy: StorePolicy, result: Result<StoredResponse, StoreFailure>) async -> Bool

    /// Publishes the leader's result and wakes every waiter. A success is kept for `policy.ttl` (a no-store one
    /// until its first read), a failure for `policy.negativeTTL`. A stale or unknown token is ignored.
    func complete(_ key: StoreKey, token: FlightToken, result: Result<StoredResponse, StoreFailure>) async

    /// The leader gives up without a result (e.g. its task was cancelled). Waiters keep waiting until their own
    /// deadlines, and the next `begin` leads at once. A stale or unknown token is ignored.
    func abandon(_ key: StoreKey, token: FlightToken) async

    /// Reads the entry for exactly `key`, waiting up to `wait` while it is pending. Never starts a fetch.
    /// Cancelling the reader only stops that reader (it gets `.pending`).
    func read(_ key: StoreKey, wait: Duration) async -> ReadOutcome

    /// Reads several entries at once, each as `read(_:wait:)` would, all waiting up to the same `wait`: a page's
    /// results view. Outcomes are in the order of `keys`. The default reads them concurrently, one task each;
    /// a store that can wait on them together does so.
    func read(_ keys: [StoreKey], wait: Duration) async -> [ReadOutcome]

    /// A read that never suspends, for callers on an event loop: when the entry is a response within its TTL,
    /// exactly what `read(_:wait:)` would hand out (a no-store response is consumed, counters move); otherwise nil
    /// and nothing happens, and the caller takes the normal path. Stores that cannot answer without I/O return nil.
    func readIfReady(_ key: StoreKey) -> ReadOutcome?

    /// How the store is doing, for readiness (`GET /readyz`): an in-process store has no outage state.
    var health: StoreHealth { get }

    /// Claims the single flight for each of `requests`, in order, and hands `done` one outcome per request, in the
    /// same order: exactly what calling `begin(_:policy:)` for each in turn would answer (so of duplicate keys
    /// within one call the first leads and the rest join). A page open claims all its requests at once through
    /// this, so a shared store does it in one round trip. `done` runs exactly once: before the call returns when
    /// the store has the answer at hand (an in-process store, always), else on the thread that has the store's
    /// answer (a Redis connection's event loop). It must not block.
    func begin(_ requests: [(key: StoreKey, policy: StorePolicy)], then done: @escaping @Sendable ([BeginOutcome]) -> Void)

    /// Settles several flights in order (an in-process store: under one acquisition of its lock, readers resumed
    /// after it), then calls `done` once, as ``begin(_:then:)`` calls its own: before returning, or on the thread
    /// that has the store's answer. The fetcher's loop thread hands over every result of one loop iteration of a
    /// page open this way.
    func settle(_ settlements: [Settlement], then done: @escaping @Sendable () -> Void)

    /// Reads `keys` without a task. Every outcome is counted as `read` counts it and a no-store response is
    /// consumed alike. Answers `.done` with every outcome when the store has them at hand, and then never calls
    /// `notify`. Otherwise `.waiting`, and `notify` is called once with every outcome, on the thread that has them:
    /// with `canWait`, keys in flight are waited for until the last of them settles or the caller calls `expire()`
    /// (those still in flight then read `.pending`); a store that must ask a server first (Redis) answers `.waiting`
    /// even without `canWait`. `notify` must not block.
    func read(_ keys: [StoreKey], canWait: Bool, notify: @escaping @Sendable ([ReadOutcome]) -> Void) -> ImmediateRead

    /// Drops every entry, in flight or not, whose policy label is not in `labels` (used when a configuration
    /// update removes interfaces); their waiters get `.absent(.evicted)`. Returns how many entries were dropped.
    func retain(labels: Set<String>) async -> Int

    /// Drops every stored value (a response or a kept failure) fetched for `identity`, on every replica of a shared
    /// store, leaving the reason `invalidated` for later readers. Flights in progress are not touched: their waiters
    /// still get the result, which is then stored as usual. The anonymous identity holds shared entries and is never
    /// dropped this way (answers 0). Returns how many values were dropped.
    /// - Throws: ``StoreUnavailable`` when part of the store could not be reached, so some values may remain.
    func invalidate(identity: Identity) async throws(StoreUnavailable) -> Int

    /// Drops every stored value whose policy label (interface name) is `label`, for every identity, as
    /// `invalidate(identity:)` does. Returns how many values were dropped.
    /// - Throws: ``StoreUnavailable`` when part of the store could not be reached, so some values may remain.
    func invalidate(label: String) async throws(StoreUnavailable) -> Int

    /// Drops every stored response whose upstream named `surrogateKey` in its `Surrogate-Key` header (as recorded
    /// when it was stored, within ``SurrogateKeys``' bounds), for every identity, as `invalidate(identity:)` does.
    /// Returns how many responses were dropped.
    /// - Throws: ``StoreUnavailable`` when part of the store could not be reached, so some values may remain.
    func invalidate(surrogateKey: String) async throws(StoreUnavailable) -> Int

    /// The store's current size and cumulative counters.
    func snapshot() async -> StoreSnapshot
}

/// An invalidation could not reach every copy: a shared store's backend was unreachable. What could be dropped
/// (this process's copies) was dropped; the caller should try again.
/// One way a flight ends, for ``ResponseStore/settle(_:)``: several are handed over together, in order.
public enum Settlement: Sendable {
    /// `complete(_:token:result:)`.
    case complete(StoreKey, token: FlightToken, result: Result<StoredResponse, StoreFailure>)
    /// `put(_:policy:result:)`: claims `key`'s flight and completes it at once, or does nothing when a flight or
    /// an entry holds it.
    case put(StoreKey, policy: StorePolicy, result: Result<StoredResponse, StoreFailure>)
    /// `abandon(_:token:)`.
    case abandon(StoreKey, token: FlightToken)
}

extension AbsentReason {
    /// The failure code of a read that found this (the `X-Prefetch-Reason` of the miss).
    public var code: FailureCode {
        switch self {
        case .notFound: .notTriggered
        case .expired: .expired
        case .consumed: .consumed
        case .evicted: .evicted
        case .invalidated: .invalidated
        }
    }
}

/// How a store is doing (``ResponseStore/health``).
public enum StoreHealth: String, Sendable, Hashable {
    /// An in-process store: nothing to be away.
    case inProcess = "in-process"
    /// A shared store that answers.
    case ok
    /// A shared store that cannot be reached: this replica answers from its fallback.
    case degraded
}

/// What ``ResponseStore/read(_:canWait:notify:)`` found.
public enum ImmediateRead: Sendable {
    /// Every outcome, now (nothing was in flight, or the reader would not wait).
    case done([ReadOutcome])
    /// Some were in flight: `notify` gets every outcome once they are settled, or once `StoreWait.expire()` is
    /// called (those still in flight then read `.pending`).
    case waiting(StoreWait)
}

/// A reader's wait registered without a task: the reader ends it at its deadline with `expire()`.
public final class StoreWait: Sendable {
    private let giveUp: @Sendable () -> Void

    public init(giveUp: @escaping @Sendable () -> Void) {
        self.giveUp = giveUp
    }

    /// The deadline passed: whatever is still in flight reads `.pending`. Harmless after everything settled.
    public func expire() {
        giveUp()
    }
}

/// Collects the outcomes of one reader's waits and calls `notify` once, when the last is in.
final class StoreWaitGroup: Sendable {
    private struct State {
        var outcomes: [ReadOutcome]
        var remaining: Int
    }

    private let state: Mutex<State>
    private let notify: @Sendable ([ReadOutcome]) -> Void

    init(outcomes: [ReadOutcome], remaining: Int, notify: @escaping @Sendable ([ReadOutcome]) -> Void) {
        state = Mutex(State(outcomes: outcomes, remaining: remaining))
        self.notify = notify
    }

    func settle(_ index: Int, _ outcome: ReadOutcome) {
        let done: [ReadOutcome]? = state.withLock { state in
            state.outcomes[index] = outcome
            state.remaining -= 1
            return state.remaining == 0 ? state.outcomes : nil
        }
        if let done { notify(done) }
    }
}

public struct StoreUnavailable: Error, Sendable, Hashable, CustomStringConvertible {
    /// What could not be reached, never a credential.
    public var message: String

    /// Creates the error.
    public init(message: String) {
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

/// The surrogate keys a response is tagged with: its upstream's `Surrogate-Key` header (space-separated keys, as
/// Fastly reads it). A store records them when it keeps the response, within fixed bounds, so an upstream cannot
/// grow the record: at most ``maximumCount`` keys per response, each 1 to ``maximumBytes`` bytes of visible ASCII
/// (`!` to `~`); longer or other keys are ignored, and so is everything after the first ``maximumCount``.
public enum SurrogateKeys {
    /// Most keys recorded per response.
    public static let maximumCount = 32
    /// Longest key recorded, in bytes.
    public static let maximumBytes = 256
    /// `Surrogate-Key`.
    public static let headerName = HTTPField.Name("Surrogate-Key")!

    /// Whether `key` is a key a response can be tagged with (1 to ``maximumBytes`` bytes of visible ASCII).
    public static func isValid(_ key: some StringProtocol) -> Bool {
        let bytes = key.utf8
        return !bytes.isEmpty && bytes.count <= maximumBytes && bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// The keys `headers` tag a response with, in order, each once, within the bounds above.
    public static func keys(in headers: HTTPFields) -> [String] {
        var keys: [String] = []
        for value in headers[values: headerName] {
            for word in value.split(whereSeparator: { $0 == " " || $0 == "\t" }) where isValid(word) {
                let key = String(word)
                if !keys.contains(key) { keys.append(key) }
                if keys.count == maximumCount { return keys }
            }
        }
        return keys
    }
}

extension ResponseStore {
    /// See `ResponseStore.readIfReady`: nil, always the normal path.
    public func readIfReady(_ key: StoreKey) -> ReadOutcome? { nil }

    /// See `ResponseStore.health`: in process.
    public var health: StoreHealth { .inProcess }

    /// ``begin(_:then:)`` for a caller that is async by nature.
    public func begin(_ requests: [(key: StoreKey, policy: StorePolicy)]) async -> [BeginOutcome] {
        await withCheckedContinuation { continuation in begin(requests) { continuation.resume(returning: $0) } }
    }

    /// ``settle(_:then:)`` for a caller that is async by nature.
    public func settle(_ settlements: [Settlement]) async {
        await withCheckedContinuation { continuation in settle(settlements) { continuation.resume() } }
    }

    /// See `ResponseStore.read(_:wait:)` for several keys: one child task per key.
    public func read(_ keys: [StoreKey], wait: Duration) async -> [ReadOutcome] {
        await withTaskGroup(of: (Int, ReadOutcome).self) { group in
            for (index, key) in keys.enumerated() {
                group.addTask { (index, await self.read(key, wait: wait)) }
            }
            var outcomes = [ReadOutcome](repeating: .pending, count: keys.count)
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
    }

    /// Calls `begin(_:policy:)` and, when it leads, `complete`.
    @discardableResult
    public func put(_ key: StoreKey, policy: StorePolicy, result: Result<StoredResponse, StoreFailure>) async -> Bool {
        guard case .leader(let token) = await begin(key, policy: policy) else { return false }
        await complete(key, token: token, result: result)
        return true
    }
}
