extension Duration {
    /// Whole milliseconds, truncated: what logs, answers and metrics show.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// Whole milliseconds, rounded up, so that a positive duration never becomes zero: what a timeout or an expiry
    /// handed to a C library (libcurl, Redis, `poll`) gets.
    public var wholeMillisecondsRoundedUp: Int64 {
        let (seconds, attoseconds) = components
        let millis = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return attoseconds % 1_000_000_000_000_000 > 0 ? millis + 1 : millis
    }
}
