import NIOCore
import ServiceTestSupport
import Testing

@testable import PrefetchService

/// The page listener's idle timeout and graceful close, kept by the fast path's handler for every request of a
/// connection (`ConnectionState`): the rules of Hummingbird's connection-state handler, on instants given by hand.
@Suite struct ConnectionStateTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let idle = TimeAmount.seconds(2)

    func at(_ milliseconds: Int64) -> NIODeadline { start + .milliseconds(milliseconds) }

    @Test func anIdleConnectionClosesAfterItsTimeout() {
        var state = ConnectionState(idleTimeout: idle, now: start)
        #expect(state.activated(now: start) == .armTimer(at(2000)))
        #expect(state.activated(now: at(10)) == .none, "activated once")
        #expect(state.timerFired(now: at(2000)) == .close)
    }

    @Test func activityPushesTheCloseBack() {
        var state = ConnectionState(idleTimeout: idle, now: start)
        _ = state.activated(now: start)
        state.requestHead(now: at(500))
        state.requestEnd(now: at(500))
        #expect(state.answerEnd(now: at(600)) == .armTimer(at(2600)))
        #expect(state.timerFired(now: at(2000)) == .armTimer(at(2600)), "re-armed for the last activity")
        #expect(state.timerFired(now: at(2600)) == .close)
    }

    @Test func anOutstandingAnswerKeepsTheConnection() {
        var state = ConnectionState(idleTimeout: idle, now: start)
        _ = state.activated(now: start)
        state.requestHead(now: at(100))
        state.requestEnd(now: at(100))
        #expect(state.timerFired(now: at(5000)) == .none, "a results view waiting on its flights is not idle")
        #expect(state.answerEnd(now: at(5000)) == .armTimer(at(7000)))
        #expect(state.timerFired(now: at(7000)) == .close)
    }

    @Test func aRequestHeadOrBodyStillArrivingIsTimedFromItsLastPart() {
        var state = ConnectionState(idleTimeout: idle, now: start)
        _ = state.activated(now: start)
        state.requestHead(now: at(100))
        state.requestBody(now: at(1500))
        #expect(state.timerFired(now: at(2000)) == .armTimer(at(3500)))
        #expect(state.timerFired(now: at(3500)) == .close)
    }

    @Test func aQuiesceClosesAnIdleConnectionAtOnceAndABusyOneAfterItsLastAnswer() {
        var idleState = ConnectionState(idleTimeout: idle, now: start)
        _ = idleState.activated(now: start)
        #expect(idleState.quiesce() == .close)

        var busy = ConnectionState(idleTimeout: idle, now: start)
        _ = busy.activated(now: start)
        busy.requestHead(now: at(1))
        busy.requestEnd(now: at(1))
        busy.requestHead(now: at(2))
        busy.requestEnd(now: at(2))
        #expect(busy.quiesce() == .none)
        #expect(busy.answerEnd(now: at(3)) == .none, "one answer still outstanding")
        #expect(busy.answerEnd(now: at(4)) == .close)
    }

    @Test func withoutAnIdleTimeoutNothingIsTimed() {
        var state = ConnectionState(idleTimeout: nil, now: start)
        #expect(state.activated(now: start) == .none)
        #expect(state.timerFired(now: at(1_000_000)) == .none)
        state.requestHead(now: at(1))
        state.requestEnd(now: at(1))
        #expect(state.answerEnd(now: at(2)) == .none)
    }
}
