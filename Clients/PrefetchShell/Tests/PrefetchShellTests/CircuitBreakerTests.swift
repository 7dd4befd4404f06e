import Testing

@testable import PrefetchShell

/// The breaker as a pure state machine: instants are plain values, nothing sleeps.
@Suite struct CircuitBreakerTests {
    typealias Breaker = CircuitBreaker<Moment>

    let start = Moment(offset: .zero)

    func at(_ seconds: Int) -> Moment { start.advanced(by: .seconds(seconds)) }

    func pass(_ admission: Breaker.Admission) throws -> Breaker.Pass {
        guard case .call(let pass) = admission else { throw BreakerTestError.skipped }
        return pass
    }

    enum BreakerTestError: Error { case skipped }

    @Test func itOpensAfterTheThresholdOfConsecutiveFailuresAndSkipsUntilTheCoolDownEnds() throws {
        var breaker = Breaker(failureThreshold: 3, coolDown: .seconds(30))
        for second in 0..<2 {
            let pass = try pass(breaker.admit(at: at(second)))
            #expect(breaker.record(.failure, of: pass, at: at(second)) == .none)
        }
        #expect(breaker.state == .closed(failures: 2))
        let third = try pass(breaker.admit(at: at(2)))
        #expect(breaker.record(.failure, of: third, at: at(2)) == .opened)
        #expect(breaker.state == .open(until: at(32)))
        #expect(breaker.admit(at: at(3)) == .skip)
        #expect(breaker.admit(at: at(31)) == .skip)
    }

    @Test func aSuccessResetsTheCountOfFailures() throws {
        var breaker = Breaker(failureThreshold: 2, coolDown: .seconds(30))
        breaker.record(.failure, of: try pass(breaker.admit(at: at(0))), at: at(0))
        breaker.record(.success, of: try pass(breaker.admit(at: at(1))), at: at(1))
        breaker.record(.failure, of: try pass(breaker.admit(at: at(2))), at: at(2))
        #expect(breaker.state == .closed(failures: 1))
    }

    @Test func afterTheCoolDownOneProbeGoesThroughAndItsSuccessCloses() throws {
        var breaker = Breaker(failureThreshold: 1, coolDown: .seconds(10))
        breaker.record(.failure, of: try pass(breaker.admit(at: at(0))), at: at(0))
        let probe = try pass(breaker.admit(at: at(10)))
        #expect(probe.isProbe)
        #expect(breaker.state == .halfOpen)
        // While the probe is out, every other call is skipped.
        #expect(breaker.admit(at: at(11)) == .skip)
        #expect(breaker.record(.success, of: probe, at: at(12)) == .closed)
        #expect(breaker.state == .closed(failures: 0))
        #expect(try !pass(breaker.admit(at: at(12))).isProbe)
    }

    @Test func aFailedProbeOpensForAnotherCoolDown() throws {
        var breaker = Breaker(failureThreshold: 1, coolDown: .seconds(10))
        breaker.record(.failure, of: try pass(breaker.admit(at: at(0))), at: at(0))
        let probe = try pass(breaker.admit(at: at(15)))
        #expect(breaker.record(.failure, of: probe, at: at(16)) == .opened)
        #expect(breaker.state == .open(until: at(26)))
        #expect(breaker.admit(at: at(25)) == .skip)
        #expect(try pass(breaker.admit(at: at(26))).isProbe)
    }

    @Test func outcomesOfCallsAdmittedInAnEarlierStateChangeNothing() throws {
        var breaker = Breaker(failureThreshold: 1, coolDown: .seconds(10))
        let slow = try pass(breaker.admit(at: at(0)))
        let failing = try pass(breaker.admit(at: at(0)))
        #expect(breaker.record(.failure, of: failing, at: at(1)) == .opened)
        // The slow call of the closed breaker answers late: the breaker stays open.
        #expect(breaker.record(.success, of: slow, at: at(2)) == .none)
        #expect(breaker.state == .open(until: at(11)))
        let probe = try pass(breaker.admit(at: at(11)))
        // A stale failure does not fail the probe either.
        #expect(breaker.record(.failure, of: slow, at: at(12)) == .none)
        #expect(breaker.state == .halfOpen)
        #expect(breaker.record(.success, of: probe, at: at(12)) == .closed)
    }

    @Test func aThresholdBelowOneIsOne() throws {
        var breaker = Breaker(failureThreshold: 0, coolDown: .seconds(1))
        #expect(breaker.record(.failure, of: try pass(breaker.admit(at: at(0))), at: at(0)) == .opened)
    }

    /// Random sequences of admissions and outcomes keep the invariants: nothing is admitted while open before the
    /// deadline, at most one probe is out at a time, a stale pass changes nothing, and only a failure opens.
    @Test func randomSequencesKeepTheInvariants() throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        var random = XorShiftRandom(seed: seed)
        for _ in 0..<300 {
            var breaker = Breaker(failureThreshold: Int(random.next() % 4) + 1, coolDown: .seconds(5))
            var outstanding: [Breaker.Pass] = []
            var clock = 0
            for _ in 0..<60 {
                clock += Int(random.next() % 3)
                if random.next() % 2 == 0 {
                    let before = breaker.state
                    if case .call(let pass) = breaker.admit(at: at(clock)) {
                        if case .open(let until) = before { #expect(at(clock) >= until, "seed \(seed)") }
                        if case .halfOpen = before { Issue.record("a second probe was admitted (seed \(seed))") }
                        outstanding.append(pass)
                    }
                } else if !outstanding.isEmpty {
                    let pass = outstanding.remove(at: Int(random.next() % UInt64(outstanding.count)))
                    let outcome: Breaker.Outcome = random.next() % 3 == 0 ? .success : .failure
                    let stale = pass.epoch != breaker.epoch
                    let transition = breaker.record(outcome, of: pass, at: at(clock))
                    if stale { #expect(transition == .none, "seed \(seed)") }
                    if transition == .opened { #expect(outcome == .failure, "seed \(seed)") }
                    if transition == .closed { #expect(outcome == .success && pass.isProbe, "seed \(seed)") }
                }
            }
        }
    }
}

/// xorshift64*: a small seeded generator for the randomized tests (the seed is in every failure message).
struct XorShiftRandom {
    var state: UInt64

    init(seed: UInt64) { state = seed == 0 ? 1 : seed }

    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
}
