import Logging
import Synchronization
import Testing

@testable import RendererPool

let testLogger: Logger = {
    var logger = Logger(label: "renderer-pool-test")
    logger.logLevel = .critical
    return logger
}()

/// A modelled profile with small, test-friendly numbers.
func modelledProfile(
    minIdle: Int = 0, maxSize: Int = 2, createMs: Double = 1, acquireTimeout: Double = 5000,
    _ adjust: (inout RendererProfile) -> Void = { _ in }
) -> RendererProfile {
    var profile = RendererProfile()
    profile.minIdle = minIdle
    profile.maxSize = maxSize
    profile.createMs = createMs
    profile.acquireTimeout = acquireTimeout
    adjust(&profile)
    return profile
}

/// Runs `body` while `pool.run()` runs in a child task; cancels the run afterwards and waits for it to end.
@discardableResult
func withRunningPool<T: Sendable>(
    _ pool: RendererPool, _ body: () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await pool.run() }
        do {
            let result = try await body()
            group.cancelAll()
            try await group.waitForAll()
            return result
        } catch {
            group.cancelAll()
            try? await group.waitForAll()
            throw error
        }
    }
}

extension Lease {
    var modelled: ModelledRenderer { renderer as! ModelledRenderer }
}

/// Thread-safe recorder for tests.
final class Recorder<Value: Sendable>: Sendable {
    private let storage: Mutex<[Value]> = Mutex([])
    func add(_ value: Value) { storage.withLock { $0.append(value) } }
    var values: [Value] { storage.withLock { $0 } }
}

/// The renderer ids currently leased by a test's workers.
final class InUse: Sendable {
    private let ids: Mutex<Set<String>> = Mutex([])
    /// Whether the id was not leased already.
    func insert(_ id: String) -> Bool { ids.withLock { $0.insert(id).inserted } }
    func remove(_ id: String) { _ = ids.withLock { $0.remove(id) } }
}

/// A clock that moves only when told to: `advance(by:)` wakes every sleeper whose deadline it passes, in
/// deadline order. Pools under test run on it, so no test waits for wall-clock time to pass.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        /// Time since the clock was created.
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID = 0
        /// Sleeps begun whose continuation is not stored yet.
        var starting: Set<Int> = []
        /// Sleeps cancelled before their continuation was stored.
        var cancelled: Set<Int> = []
        var sleepers: [Int: Sleeper] = [:]
    }

    private let state = Mutex(State())

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .zero }

    /// How many sleeps are waiting for the clock to move.
    var sleepers: Int { state.withLock { $0.sleepers.count } }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            state.starting.insert(state.nextID)
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, any Error>? = state.withLock { state in
                    state.starting.remove(id)
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                if state.starting.contains(id) { state.cancelled.insert(id) }
                return state.sleepers.removeValue(forKey: id)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes every sleep whose deadline is now reached.
    func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}
