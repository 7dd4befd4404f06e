import Testing

@testable import PrefetchCore

/// The one Duration-to-milliseconds conversion: truncated for display, rounded up for timeouts handed to C.
@Suite struct DurationMillisecondsTests {
    @Test func truncatesForDisplayAndRoundsUpForTimeouts() {
        #expect(Duration.milliseconds(1500).milliseconds == 1500)
        #expect(Duration.microseconds(1999).milliseconds == 1)
        #expect(Duration.microseconds(1999).wholeMillisecondsRoundedUp == 2)
        #expect(Duration.nanoseconds(1).wholeMillisecondsRoundedUp == 1)
        #expect(Duration.zero.wholeMillisecondsRoundedUp == 0)
        #expect(Duration.seconds(3).wholeMillisecondsRoundedUp == 3000)
    }

    @Test func finerUnitsTruncateAndSaturate() {
        #expect(Duration.nanoseconds(1_999).microseconds == 1)
        #expect(Duration.seconds(2).microseconds == 2_000_000)
        #expect(Duration.milliseconds(1_500).nanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(-7).nanoseconds == -7)
        // Beyond Int64 nanoseconds (about 292 years) a timer or a deadline gets the bound, never a wrapped value.
        #expect(Duration.seconds(Int64.max / 2).nanoseconds == .max)
        #expect(Duration.seconds(-(Int64.max / 2)).nanoseconds == .min)
        #expect(Duration.milliseconds(1_250).fractionalSeconds == 1.25)
        #expect(Duration.zero.fractionalSeconds == 0)
    }
}
