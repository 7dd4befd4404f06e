import PrefetchCore
import ServiceTestSupport
import Testing

@testable import PrefetchEngine

/// The ticket's read log: the last `Ticket.readLimit` reads in order, and every request ever served counted once,
/// whatever the ring has dropped.
@Suite struct ReadLogTests {
    func read(_ index: Int, _ served: ReadResult) -> TicketRead {
        let now = ContinuousClock.now
        return TicketRead(index: index, served: served, reason: served == .miss ? .expired : nil, askedAt: now, answeredAt: now)
    }

    @Test func keepsTheLastReadsInOrderAndCountsServedRequestsOnce() {
        var log = ReadLog(requests: 70)
        #expect(log.inOrder.isEmpty && log.servedCount == 0)
        for step in 0..<(Ticket.readLimit + 5) {
            log.append(read(step % 70, step % 3 == 0 ? .miss : .hit), served: step % 3 != 0)
        }
        let kept = log.inOrder
        #expect(kept.count == Ticket.readLimit)
        #expect(kept.map(\.index) == Array(5..<(Ticket.readLimit + 5)), "oldest first, the first five dropped")
        let servedIndexes = Set((0..<(Ticket.readLimit + 5)).filter { $0 % 3 != 0 })
        #expect(log.servedCount == servedIndexes.count, "a dropped read still counts as served")
        log.append(read(1, .hit), served: true)
        #expect(log.servedCount == servedIndexes.count, "serving a request again counts it once")
        log.append(read(69, .joined), served: true)
        #expect(log.servedCount == servedIndexes.count + 1, "request 69 lives in the second word of the bitset")
    }
}
