import Dispatch
import Synchronization

/// Connection settings shared by the pool and the subscriber.
struct ConnectionSettings: Sendable {
    var endpoint: RedisEndpoint
    var connectTimeout: Duration
    var commandTimeout: Duration
}

/// A small pool of blocking hiredis connections, each owned by a worker with its own serial dispatch queue. Async
/// callers suspend on a continuation while the worker's thread does the blocking I/O, so Redis calls never block the
/// cooperative pool or an event loop. Every call is bounded by the connect and command timeouts.
final class RedisPool: Sendable {
    private let workers: [RedisWorker]
    private let next = Atomic<Int>(0)

    init(size: Int, settings: ConnectionSettings, health: RedisHealthMonitor) {
        self.workers = (0..<max(1, size)).map { index in
            RedisWorker(index: index, settings: settings, health: health)
        }
    }

    /// Runs one command on the next worker, round robin.
    func execute(_ arguments: [[UInt8]]) async -> Result<RedisValue, RedisCallError> {
        let worker = workers[(next.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max) % workers.count]
        return await withCheckedContinuation { continuation in
            worker.queue.async {
                continuation.resume(returning: worker.execute(arguments))
            }
        }
    }
}

/// One pooled connection and the serial queue that alone uses it.
final class RedisWorker: Sendable {
    let queue: DispatchQueue
    private let settings: ConnectionSettings
    private let health: RedisHealthMonitor
    /// Locked only on `queue`, so never contended; the lock is what lets the connection live in a Sendable worker.
    private let connection = Mutex<RedisConnection?>(nil)

    init(index: Int, settings: ConnectionSettings, health: RedisHealthMonitor) {
        self.queue = DispatchQueue(label: "prefetch.redis.connection.\(index)")
        self.settings = settings
        self.health = health
    }

    /// Runs one command, connecting first if needed. While Redis is known to be down it fails fast unless this call
    /// claims the reconnect attempt. A pooled connection found closed by the server (e.g. after a Redis restart) is
    /// replaced and the command retried once, since it never ran.
    func execute(_ arguments: [[UInt8]]) -> Result<RedisValue, RedisCallError> {
        dispatchPrecondition(condition: .onQueue(queue))
        return connection.withLock { slot -> Result<RedisValue, RedisCallError> in
            if !health.isUp { slot = nil }
            let reused = slot != nil
            if slot == nil {
                guard health.claimAttempt() else { return .failure(.unavailable) }
                switch open() {
                case .success(let opened): slot = opened
                case .failure(let error): return .failure(error)
                }
            }
            do throws(RedisCallError) {
                let value = try slot!.command(arguments)
                health.succeeded()
                return .success(value)
            } catch {
                slot = nil
                guard reused, error.kind == .closed else {
                    health.failed(error)
                    return .failure(error)
                }
            }
            switch open() {
            case .success(let opened):
                do throws(RedisCallError) {
                    let value = try opened.command(arguments)
                    slot = opened
                    health.succeeded()
                    return .success(value)
                } catch {
                    health.failed(error)
                    return .failure(error)
                }
            case .failure(let error):
                return .failure(error)
            }
        }
    }

    private func open() -> Result<RedisConnection, RedisCallError> {
        do {
            let opened = try RedisConnection.open(
                settings.endpoint, connectTimeout: settings.connectTimeout, commandTimeout: settings.commandTimeout)
            health.succeeded()
            return .success(opened)
        } catch {
            health.failed(error)
            return .failure(error)
        }
    }
}
