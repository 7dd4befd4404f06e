/// Chooses which sources a check asks: the primary, and the fallback once the primary has been abnormal
/// ``threshold`` times in a row.
///
/// Rules:
/// - Every check asks the primary first, also while the fallback is engaged: that is how the primary is probed.
/// - A normal answer from the primary resets the count and disengages the fallback; the fallback is not asked.
/// - An abnormal answer adds one to the count. When the count reaches the threshold (and a fallback exists) the
///   fallback is engaged, and from then on every check whose primary answer is abnormal also asks the fallback,
///   starting with the check whose answer reached the threshold.
/// - The fallback's own answers do not change the selection: there is nowhere further to go.
public struct SourceSelector: Sendable, Hashable {
    /// What a check should do after the primary answered.
    public enum Next: Sendable, Hashable {
        /// Nothing more to ask in this check.
        case done
        /// Ask the fallback in this check.
        case askFallback
    }

    /// Abnormal answers in a row needed to engage the fallback (at least 1).
    public let threshold: Int
    /// Whether a fallback source exists.
    public let hasFallback: Bool
    /// Consecutive abnormal answers from the primary.
    public private(set) var consecutiveAbnormal = 0
    /// Whether checks currently also ask the fallback when the primary is abnormal.
    public private(set) var fallbackEngaged = false

    /// Starts on the primary with no abnormal answers.
    public init(threshold: Int, hasFallback: Bool) {
        self.threshold = max(1, threshold)
        self.hasFallback = hasFallback
    }

    /// Records the primary's answer and says whether to ask the fallback in the same check.
    public mutating func primaryAnswered(normal: Bool) -> Next {
        if normal {
            consecutiveAbnormal = 0
            fallbackEngaged = false
            return .done
        }
        consecutiveAbnormal += 1
        if hasFallback && consecutiveAbnormal >= threshold {
            fallbackEngaged = true
        }
        return fallbackEngaged ? .askFallback : .done
    }
}
