import PrefetchCore
import Synchronization

/// Token buckets per caller: `rate` tokens a second, at most `burst` saved up.
///
/// Callers are opaque strings (an identity digest, or a client address for anonymous callers). The table is
/// bounded: past `capacity` callers, the bucket idle longest is forgotten (a forgotten caller starts full again,
/// which only ever errs towards admitting).
public final class RateLimiter: Sendable {
    struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    private struct State {
        var buckets: [String: Bucket] = [:]
    }

    private let state = Mutex(State())
    let rate: Double
    let burst: Double
    let capacity: Int

    /// A limiter admitting `rate` calls a second per caller with bursts of `burst`, remembering `capacity` callers.
    public init(rate: Double, burst: Int, capacity: Int = 10_000) {
        self.rate = max(rate, 0.001)
        self.burst = Double(max(1, burst))
        self.capacity = max(1, capacity)
    }

    /// Takes one token for `caller`: `nil` when admitted, else how long until a token is available.
    public func admit(_ caller: String, now: ContinuousClock.Instant) -> Duration? {
        state.withLock { state in
            var bucket = state.buckets[caller] ?? Bucket(tokens: burst, updated: now)
            let elapsed = now - bucket.updated
            let seconds = elapsed.fractionalSeconds
            bucket.tokens = min(burst, bucket.tokens + max(0, seconds) * rate)
            bucket.updated = now
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                store(bucket, for: caller, in: &state)
                return nil
            }
            store(bucket, for: caller, in: &state)
            return .milliseconds(Int64(((1 - bucket.tokens) / rate * 1000).rounded(.up)))
        }
    }

    private func store(_ bucket: Bucket, for caller: String, in state: inout State) {
        if state.buckets[caller] == nil, state.buckets.count >= capacity {
            // Forget the caller idle longest (a full scan, only when the table is full).
            if let oldest = state.buckets.min(by: { $0.value.updated < $1.value.updated })?.key {
                state.buckets[oldest] = nil
            }
        }
        state.buckets[caller] = bucket
    }

    /// Callers currently remembered.
    public var count: Int { state.withLock { $0.buckets.count } }
}
