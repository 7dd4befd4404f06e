import Testing

@testable import PrefetchFetcher

@Suite("FetcherPhase state machine")
struct FetcherPhaseTests {
    @Test func idleAcceptsAndStartsOnce() {
        var phase = FetcherPhase()
        #expect(phase.acceptsSubmissions)
        let started = phase.start()
        #expect(started)
        #expect(phase.state == .running)
        #expect(phase.acceptsSubmissions)
        let startedAgain = phase.start()
        #expect(!startedAgain)
    }

    @Test func drainRefusesNewWorkAndExitsWhenIdle() {
        var phase = FetcherPhase()
        _ = phase.start()
        phase.requestDrain()
        #expect(phase.state == .draining)
        #expect(!phase.acceptsSubmissions)
        #expect(phase.loopMayExitWhenIdle)
        #expect(!phase.loopMustAbort)
        phase.loopExited()
        #expect(phase.state == .stopped)
        #expect(!phase.acceptsSubmissions)
    }

    @Test func abortWinsOverDrain() {
        var phase = FetcherPhase()
        _ = phase.start()
        phase.requestDrain()
        phase.requestAbort()
        #expect(phase.loopMustAbort)
        phase.requestDrain()
        #expect(phase.state == .aborting)
    }

    @Test func drainBeforeStartIsIgnoredAndStoppedIsFinal() {
        var phase = FetcherPhase()
        phase.requestDrain()
        #expect(phase.state == .idle)
        _ = phase.start()
        phase.loopExited()
        phase.requestAbort()
        phase.requestDrain()
        #expect(phase.state == .stopped)
        let restarted = phase.start()
        #expect(!restarted)
    }
}
