import PrefetchEngine
import Testing

/// The page listener's budget for request bodies (`--request-body-bytes`), without sockets: what a body is charged,
/// and that concurrent connections never hold more than the limit together and give back exactly what they took.
@Suite("request bodies: the shared budget")
struct BodyBudgetTests {
    @Test func aBodyIsChargedOnlyPastItsConnectionsAllowance() {
        let budget = BodyBudget(limit: 100_000, allowance: 16_384)
        #expect(budget.charge(0) == 0)
        #expect(budget.charge(16_384) == 0)
        #expect(budget.charge(16_385) == 1)
        #expect(budget.charge(262_144) == 262_144 - 16_384)
    }

    @Test func reservationsStopAtTheLimitAndReleasesGiveItBack() {
        let budget = BodyBudget(limit: 1_000)
        #expect(budget.reserve(600))
        #expect(!budget.reserve(401), "past the limit")
        #expect(budget.reserve(400), "up to the limit exactly")
        #expect(budget.bytes == 1_000)
        budget.release(1_000)
        #expect(budget.bytes == 0)
        budget.release(0)
        #expect(budget.bytes == 0)
    }

    /// Eight connections reserving and releasing at once: the sum never passes the limit, and ends at zero.
    @Test func concurrentConnectionsNeverHoldMoreThanTheLimit() async {
        let budget = BodyBudget(limit: 10_000)
        let worst = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var seen = 0
                    for round in 0..<5_000 {
                        let size = 1 + round % 3_000
                        if budget.reserve(size) {
                            seen = max(seen, budget.bytes)
                            budget.release(size)
                        }
                    }
                    return seen
                }
            }
            return await group.reduce(0) { max($0, $1) }
        }
        #expect(worst <= 10_000)
        #expect(budget.bytes == 0)
    }
}
