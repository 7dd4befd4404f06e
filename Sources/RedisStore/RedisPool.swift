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
///
/// Calls that reach a worker while it is busy wait in its queue and then go to Redis together, as one pipeline:
/// under load a connection carries every call that arrived during its last round trip in its next one, so the
/// round trips (and the thread wake-ups, which cost more CPU than the Redis calls themselves) grow with the number
/// of busy connections, not with the number of calls. An idle pool still answers each call in one round trip.
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
        await execute(batch: [arguments])[0]
    }

    /// Runs `commands` pipelined on the next worker, round robin: one write and one round trip for the lot, in
    /// order, on one connection. Returns one result per command, in order.
    func execute(batch commands: [[[UInt8]]]) async -> [Result<RedisValue, RedisCallError>] {
        guard !commands.isEmpty else { return [] }
        let worker = workers[(next.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max) % workers.count]
        return await withCheckedContinuation { continuation in
            worker.submit(commands, continuation)
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

    /// Calls waiting for the connection, and whether a drain is scheduled on `queue` (which then takes them all).
    private let waiting = Mutex(Waiting())

    private struct Waiting {
        var calls: [Call] = []
        var draining = false
    }

    /// One caller's commands and where their results go.
    private struct Call {
        var commands: [[[UInt8]]]
        var continuation: CheckedContinuation<[Result<RedisValue, RedisCallError>], Never>
    }

    init(index: Int, settings: ConnectionSettings, health: RedisHealthMonitor) {
        self.queue = DispatchQueue(label: "prefetch.redis.connection.\(index)")
        self.settings = settings
        self.health = health
    }

    /// Queues `commands` for the connection; `continuation` gets their results, in order. Schedules a drain on
    /// `queue` unless one is already scheduled or running (it will take these too).
    func submit(
        _ commands: [[[UInt8]]], _ continuation: CheckedContinuation<[Result<RedisValue, RedisCallError>], Never>
    ) {
        let schedule = waiting.withLock { waiting in
            waiting.calls.append(Call(commands: commands, continuation: continuation))
            defer { waiting.draining = true }
            return !waiting.draining
        }
        if schedule { queue.async { self.drain() } }
    }

    /// Sends everything waiting as one pipeline, hands each caller its share of the results, and repeats until
    /// nothing is waiting.
    private func drain() {
        while true {
            let calls = waiting.withLock { waiting -> [Call] in
                if waiting.calls.isEmpty { waiting.draining = false }
                defer { waiting.calls = [] }
                return waiting.calls
            }
            guard !calls.isEmpty else { return }
            let results = execute(batch: calls.flatMap(\.commands))
            var offset = 0
            for call in calls {
                let end = offset + call.commands.count
                call.continuation.resume(returning: Array(results[offset..<end]))
                offset = end
            }
        }
    }

    /// Runs `commands` pipelined, connecting first if needed. While Redis is known to be down it fails fast unless
    /// this call claims the reconnect attempt. A pooled connection found closed by the server (e.g. after a Redis
    /// restart) before any reply arrived is replaced and the whole pipeline retried once, since none of it ran. When
    /// the connection breaks after some replies, those stand and the rest fail: they are never retried, because they
    /// may have run. A single command is a pipeline of one, so both kinds of call share these rules.
    func execute(batch commands: [[[UInt8]]]) -> [Result<RedisValue, RedisCallError>] {
        dispatchPrecondition(condition: .onQueue(queue))
        return connection.withLock { slot -> [Result<RedisValue, RedisCallError>] in
            if !health.isUp { slot = nil }
            let reused = slot != nil
            if slot == nil {
                guard health.claimAttempt() else { return Self.failing(commands.count, .unavailable) }
                switch open() {
                case .success(let opened): slot = opened
                case .failure(let error): return Self.failing(commands.count, error)
                }
            }
            let (replies, error) = slot!.pipeline(commands)
            guard let error else {
                health.succeeded()
                return replies.map { .success($0) }
            }
            slot = nil
            guard reused, replies.isEmpty, error.kind == .closed else {
                health.failed(error)
                return Self.settle(replies, error, count: commands.count)
            }
            switch open() {
            case .success(let opened):
                let (replies, error) = opened.pipeline(commands)
                guard let error else {
                    slot = opened
                    health.succeeded()
                    return replies.map { .success($0) }
                }
                health.failed(error)
                return Self.settle(replies, error, count: commands.count)
            case .failure(let error):
                return Self.failing(commands.count, error)
            }
        }
    }

    /// The replies that arrived, then `error` for each command that got none.
    private static func settle(
        _ replies: [RedisValue], _ error: RedisCallError, count: Int
    )
        -> [Result<RedisValue, RedisCallError>]
    {
        replies.map { .success($0) } + failing(count - replies.count, error)
    }

    private static func failing(_ count: Int, _ error: RedisCallError) -> [Result<RedisValue, RedisCallError>] {
        Array(repeating: .failure(error), count: count)
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
