public import PrefetchCore

/// One read of a ticket's data by the page: how it was served and when, for the debug view.
public struct TicketRead: Sendable {
    /// The request's index in the ticket.
    public var index: Int
    public var served: ReadResult
    /// The miss reason (the `X-Prefetch-Reason` code), nil when served.
    public var reason: FailureCode?
    public var askedAt: ContinuousClock.Instant
    public var answeredAt: ContinuousClock.Instant
}

/// A ticket's read log: a ring of the last ``Ticket/readLimit`` reads and a bitset of the requests ever served,
/// both allocated when the ticket is made. The ring starts with room for one read per request, which is what a
/// page makes, so recording those allocates nothing; a page reading more grows it by doubling up to
/// ``Ticket/readLimit`` (at most three more allocations, amortised over its reads). Reserving the whole ring up
/// front cost 2.3 KiB per ticket, most of it never written, for as long as the ticket lives.
struct ReadLog {
    private var ring: [TicketRead] = []
    private var next = 0
    private var served: [UInt64]

    init(requests: Int) {
        ring.reserveCapacity(min(max(1, requests), Ticket.readLimit))
        served = Array(repeating: 0, count: max(1, (requests + 63) / 64))
    }

    mutating func append(_ read: TicketRead, served isServed: Bool) {
        if ring.count < Ticket.readLimit {
            ring.append(read)
        } else {
            ring[next] = read
        }
        next = (next + 1) % Ticket.readLimit
        if isServed, read.index >= 0, read.index / 64 < served.count { served[read.index / 64] |= 1 << UInt64(read.index % 64) }
    }

    var inOrder: [TicketRead] {
        ring.count < Ticket.readLimit ? ring : Array(ring[next...] + ring[..<next])
    }

    var servedCount: Int { served.reduce(0) { $0 + $1.nonzeroBitCount } }
}
