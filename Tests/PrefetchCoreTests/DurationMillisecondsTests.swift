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
}
