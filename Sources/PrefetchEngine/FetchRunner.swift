import Logging
public import ServiceLifecycle
import Synchronization

/// Keeps the page opens in flight (``PageOpen``) and the few tasks they need (a dependent waiting on another page
/// open's flight, a shared store's settlements) running until graceful shutdown, then lets them finish.
///
/// A page open is live from its trigger until its last flight is settled (`enter`/`leave`); it is not a task. On
/// graceful shutdown the runner takes no new page open, waits until the live ones are done (each bounded by its
/// requests' timeouts), runs what they handed it meanwhile, and returns.
public final class FetchRunner: Service, Sendable {
    typealias Job = @Sendable () async -> Void

    private struct Units {
        var accepting = true
        var live = 0
        var drained: CheckedContinuation<Void, Never>?
    }

    private let stream: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation
    private let units = Mutex(Units())
    private let logger: Logger

    init(logger: Logger) {
        (stream, continuation) = AsyncStream.makeStream(of: Job.self)
        self.logger = logger
    }

    /// A page open starts; false once the runner is draining (the page open is refused).
    func enter() -> Bool {
        units.withLock { units in
            guard units.accepting else { return false }
            units.live += 1
            return true
        }
    }

    /// A page open's last flight is settled.
    func leave() {
        let drained = units.withLock { units -> CheckedContinuation<Void, Never>? in
            units.live -= 1
            guard units.live == 0, !units.accepting else { return nil }
            defer { units.drained = nil }
            return units.drained
        }
        drained?.resume()
    }

    /// Page opens in flight.
    var live: Int { units.withLock { $0.live } }

    /// Queues a job; `false` once the runner has stopped taking jobs.
    func submit(_ job: @escaping Job) -> Bool {
        if case .enqueued = continuation.yield(job) { return true }
        return false
    }

    public func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { [self] in
                // Runs until graceful shutdown (or cancellation), then drains the live page opens.
                try? await gracefulShutdown()
                if !Task.isCancelled {
                    logger.info("draining in-flight fetches")
                    await drain()
                }
                continuation.finish()
            }
            for await job in stream {
                group.addTask { await job() }
            }
        }
    }

    private func drain() async {
        await withCheckedContinuation { (drained: CheckedContinuation<Void, Never>) in
            let done = units.withLock { units in
                units.accepting = false
                if units.live == 0 { return true }
                units.drained = drained
                return false
            }
            if done { drained.resume() }
        }
    }
}
