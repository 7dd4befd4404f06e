/// The clock every time-based decision of the service is made by: how long an entry lives, when a reader's wait
/// ends, when a rate-limit bucket refills.
///
/// Production code uses `ContinuousClock`; tests inject a clock they move by hand, so that a TTL, a lock age or a
/// deadline is tested by advancing time, not by sleeping and hoping the machine was idle. Its instants are
/// `ContinuousClock.Instant`s, so the values a store keeps need not be generic.
public protocol ServiceClock: Clock, Sendable where Instant == ContinuousClock.Instant {}

extension ContinuousClock: ServiceClock {}
