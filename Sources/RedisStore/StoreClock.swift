/// The clock a `RedisStore` reads and sleeps on: any `Clock<Duration>`, seen on the `ContinuousClock.Instant`
/// timeline that `RedisStoreState` and the local tier count in. With `ContinuousClock` it is that clock; with another
/// clock (a test's), its instants are the continuous instant taken when this was made plus the time that clock has
/// advanced since, and sleeping sleeps on that clock, so whoever drives it drives the store's backoff, polling and
/// flight staleness.
struct StoreClock: Clock {
    typealias Duration = Swift.Duration
    typealias Instant = ContinuousClock.Instant

    private let read: @Sendable () -> Instant
    private let pause: @Sendable (Instant) async throws -> Void
    let minimumResolution: Duration

    init(_ clock: some Clock<Duration>) {
        minimumResolution = clock.minimumResolution
        if let continuous = clock as? ContinuousClock {
            read = { continuous.now }
            pause = { deadline in try await continuous.sleep(until: deadline, tolerance: nil) }
            return
        }
        let base = ContinuousClock.now
        let origin = clock.now
        read = { base + origin.duration(to: clock.now) }
        pause = { deadline in try await clock.sleep(until: origin.advanced(by: base.duration(to: deadline)), tolerance: nil) }
    }

    var now: Instant { read() }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        try await pause(deadline)
    }
}
