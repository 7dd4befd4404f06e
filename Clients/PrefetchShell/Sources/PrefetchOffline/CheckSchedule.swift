/// When the map is checked and whom it is asked (seed 001's rules), as a value type that decides and does nothing:
///
/// - a check (at start, page open, foreground, page exit) is admitted at most once per `interval` (30 s), and never
///   while another is in flight (fatigue control);
/// - after `failureThreshold` (5) consecutive abnormal answers of the provider (`code != 200`, another HTTP status,
///   no answer), the check asks the CDN mirror instead, in the same check and in the checks after it;
/// - while on the mirror, the provider is asked again once `providerRetry` has passed since it was last asked, and
///   its first normal answer brings every check back to it (an abnormal one goes on to the mirror in that check).
///
/// Time is a parameter, so tests drive it without clocks.
struct CheckSchedule<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// Who answers a check.
    enum Source: String, Sendable, Equatable {
        case provider
        case mirror
    }

    /// Why a check was not made.
    enum Skip: String, Sendable, Equatable {
        /// A check was admitted less than `interval` ago.
        case fatigue
        /// A check is still in flight.
        case inFlight = "in-flight"
    }

    /// What to do now.
    enum Step: Sendable, Equatable {
        /// Ask `source` and report its answer with ``record(normal:from:)``.
        case ask(Source)
        /// Make no check.
        case skip(Skip)
        /// The check is over.
        case done
    }

    let interval: Duration
    let failureThreshold: Int
    let providerRetry: Duration
    let hasMirror: Bool

    private(set) var lastCheck: Instant?
    private(set) var inFlight = false
    /// Consecutive abnormal answers of the provider.
    private(set) var providerFailures = 0
    private(set) var lastProviderAsk: Instant?

    init(interval: Duration, failureThreshold: Int, providerRetry: Duration, hasMirror: Bool) {
        self.interval = interval
        self.failureThreshold = max(1, failureThreshold)
        self.providerRetry = providerRetry
        self.hasMirror = hasMirror
    }

    /// Whether checks go to the mirror (the provider failed `failureThreshold` times in a row and a mirror exists).
    var onMirror: Bool { hasMirror && providerFailures >= failureThreshold }

    /// Starts a check at `now`, or says why none is made.
    mutating func admit(at now: Instant) -> Step {
        if inFlight { return .skip(.inFlight) }
        if let lastCheck, now < lastCheck.advanced(by: interval) { return .skip(.fatigue) }
        lastCheck = now
        inFlight = true
        if onMirror, let lastProviderAsk, now < lastProviderAsk.advanced(by: providerRetry) { return .ask(.mirror) }
        lastProviderAsk = now
        return .ask(.provider)
    }

    /// Reports whether `source`'s answer was normal; the check's next step.
    mutating func record(normal: Bool, from source: Source) -> Step {
        switch (source, normal) {
        case (.provider, true):
            providerFailures = 0
        case (.provider, false):
            providerFailures += 1
            if onMirror { return .ask(.mirror) }
        case (.mirror, _):
            break
        }
        inFlight = false
        return .done
    }
}
