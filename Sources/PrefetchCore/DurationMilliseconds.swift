extension Duration {
    /// Whole milliseconds, truncated: what logs, answers and metrics show.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// Whole microseconds, truncated.
    public var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    /// Whole nanoseconds, truncated, saturating at `Int64`'s bounds (about 292 years either way): what a timer
    /// metric or a Dispatch deadline gets.
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflowAgain) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowAgain ? (seconds < 0 ? .min : .max) : sum
    }

    /// Seconds as a `Double`, fractions included: what a rate or a histogram in milliseconds computes with.
    public var fractionalSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Whole milliseconds, rounded up, so that a positive duration never becomes zero: what a timeout or an expiry
    /// handed to a C library (libcurl, Redis, `poll`) gets.
    public var wholeMillisecondsRoundedUp: Int64 {
        let (seconds, attoseconds) = components
        let millis = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return attoseconds % 1_000_000_000_000_000 > 0 ? millis + 1 : millis
    }
}
