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
    private let ids: Mutex<Set<RendererID>> = Mutex([])
    /// Whether the id was not leased already.
    func insert(_ id: RendererID) -> Bool { ids.withLock { $0.insert(id).inserted } }
    func remove(_ id: RendererID) { _ = ids.withLock { $0.remove(id) } }
}
