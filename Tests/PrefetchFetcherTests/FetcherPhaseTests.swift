import Glibc
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

/// The mailbox wakes the loop once per turn: posts made before the loop takes the mailbox share one eventfd write,
/// and the first post after it writes again (so no post is left waiting for a wakeup that never comes).
@Suite struct MailboxWakeupTests {
    /// Bytes written to the pipe standing in for the loop's eventfd.
    static func written(_ fds: [Int32]) -> Int {
        var count: Int32 = 0
        _ = ioctl(fds[0], UInt(FIONREAD), &count)
        return Int(count)
    }

    @Test func postsBeforeTheLoopTakesTheMailboxShareOneWakeup() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { _ = fds.map(close) }
        var mailbox = Mailbox()
        mailbox.wake()
        #expect(Self.written(fds) == 0, "no loop yet: nothing to wake, and the loop takes the mailbox when it starts")
        mailbox.wakeup = MultiWakeup(fd: fds[1])
        for _ in 0..<5 { mailbox.wake() }
        #expect(Self.written(fds) == 8, "five posts in one turn: one eventfd write")
        _ = mailbox.take()
        mailbox.wake()
        mailbox.wake()
        #expect(Self.written(fds) == 16, "the first post after the loop took the mailbox wakes it again")
    }
}
