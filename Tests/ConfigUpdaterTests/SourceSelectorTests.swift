import ConfigUpdater
import Testing

@Suite("SourceSelector")
struct SourceSelectorTests {
    @Test("the fallback is engaged by exactly the threshold-th abnormal answer")
    func engagesAtThreshold() {
        var selector = SourceSelector(threshold: 5, hasFallback: true)
        for count in 1...4 {
            #expect(selector.primaryAnswered(normal: false) == .done)
            #expect(selector.consecutiveAbnormal == count)
            #expect(!selector.fallbackEngaged)
        }
        #expect(selector.primaryAnswered(normal: false) == .askFallback)
        #expect(selector.fallbackEngaged)
        #expect(selector.consecutiveAbnormal == 5)
    }

    @Test("a normal answer in between restarts the count")
    func normalResetsCount() {
        var selector = SourceSelector(threshold: 3, hasFallback: true)
        _ = selector.primaryAnswered(normal: false)
        _ = selector.primaryAnswered(normal: false)
        #expect(selector.primaryAnswered(normal: true) == .done)
        #expect(selector.consecutiveAbnormal == 0)
        _ = selector.primaryAnswered(normal: false)
        #expect(selector.primaryAnswered(normal: false) == .done)
        #expect(!selector.fallbackEngaged)
        #expect(selector.primaryAnswered(normal: false) == .askFallback)
    }

    @Test("while engaged, every abnormal primary answer asks the fallback; a normal one returns to the primary")
    func probesPrimaryWhileEngaged() {
        var selector = SourceSelector(threshold: 2, hasFallback: true)
        _ = selector.primaryAnswered(normal: false)
        #expect(selector.primaryAnswered(normal: false) == .askFallback)
        #expect(selector.primaryAnswered(normal: false) == .askFallback)
        #expect(selector.consecutiveAbnormal == 3)
        #expect(selector.primaryAnswered(normal: true) == .done)
        #expect(!selector.fallbackEngaged)
        #expect(selector.consecutiveAbnormal == 0)
        #expect(selector.primaryAnswered(normal: false) == .done)
    }

    @Test("without a fallback the count grows but nothing else is asked")
    func noFallback() {
        var selector = SourceSelector(threshold: 1, hasFallback: false)
        for count in 1...3 {
            #expect(selector.primaryAnswered(normal: false) == .done)
            #expect(selector.consecutiveAbnormal == count)
        }
        #expect(!selector.fallbackEngaged)
    }

    @Test("a threshold below 1 is treated as 1")
    func thresholdFloor() {
        var selector = SourceSelector(threshold: 0, hasFallback: true)
        #expect(selector.threshold == 1)
        #expect(selector.primaryAnswered(normal: false) == .askFallback)
    }
}
