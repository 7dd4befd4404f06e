public import NIOCore
public import PrefetchCore

extension ServiceClock {
    /// Runs `body` on `loop` once `deadline` has passed on this clock, unless the returned handle is cancelled
    /// first: an event-loop timer on the continuous clock (the service's), a sleeper on a clock a test moves by
    /// hand (so a wait that ends by a timer ends when the test says, as every other time-based decision does).
    /// The one way a callback-driven wait (a store read, a results view) is bounded.
    public func schedule(
        at deadline: ContinuousClock.Instant, on loop: any EventLoop, _ body: @escaping @Sendable () -> Void
    ) -> Scheduled<Void> {
        guard !(self is ContinuousClock) else {
            let remaining = max(.zero, deadline - now)
            return loop.scheduleTask(in: .nanoseconds(remaining.nanoseconds), body)
        }
        let ended = loop.makePromise(of: Void.self)
        let sleeper = Task {
            do {
                try await sleep(until: deadline, tolerance: nil)
                loop.execute(body)
                ended.succeed()
            } catch {
                ended.fail(error)
            }
        }
        return Scheduled(promise: ended) { sleeper.cancel() }
    }
}
