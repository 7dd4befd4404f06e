public import PrefetchCore
public import PrefetchStore
import Synchronization

/// The tickets currently valid, bounded in number and in bytes; expired ones are dropped as new ones arrive.
/// Past the count bound the oldest go first; past the byte budget, the oldest ticket of the owner (client address)
/// holding the most bytes goes first, so a flood from one client evicts its own tickets, not its neighbours'.
public final class LocalTicketRegistry: TicketRegistry, Sendable {
    private struct State {
        var tickets: [String: Ticket] = [:]
        /// Insertion order, for expiry and the count bound (tickets of one process expire in roughly that order).
        var order: [String] = []
        var head = 0
        var bytes = 0
        /// Bytes and insertion-ordered ticket ids per owner.
        var owners: [String: (bytes: Int, ids: [String])] = [:]
        /// The latest ticket that holds each store key: a same-site `page=` read finds the ticket that fetched the
        /// entry it reads (at most one entry per request of the tickets held, so bounded with them).
        var byKey: [StoreKey: String] = [:]

        /// Tickets dropped while the lock was held, handed to `onDrop` after it is released.
        var dropped: [Ticket] = []

        mutating func drop(_ id: String) {
            guard let ticket = tickets.removeValue(forKey: id) else { return }
            dropped.append(ticket)
            for request in ticket.requests where byKey[request.key] == id { byKey[request.key] = nil }
            bytes -= ticket.accountedBytes
            if var owner = owners[ticket.owner] {
                owner.bytes -= ticket.accountedBytes
                if let index = owner.ids.firstIndex(of: id) { owner.ids.remove(at: index) }
                owners[ticket.owner] = owner.ids.isEmpty ? nil : owner
            }
        }
    }

    private let state = Mutex(State())
    let capacity: Int
    let budgetBytes: Int
    let clock: any ServiceClock
    let onDrop: (@Sendable (Ticket) -> Void)?

    /// A registry of at most `capacity` tickets and `budgetBytes` bytes; tickets expire by `clock`. `onDrop` is told
    /// of every ticket leaving it (expired or pushed out), outside its lock.
    public init(
        capacity: Int, budgetBytes: Int = .max, clock: any ServiceClock = ContinuousClock(), onDrop: (@Sendable (Ticket) -> Void)? = nil
    ) {
        self.capacity = max(1, capacity)
        self.budgetBytes = max(1, budgetBytes)
        self.clock = clock
        self.onDrop = onDrop
    }

    /// Hands the tickets dropped under the lock to `onDrop`.
    private func report(_ dropped: [Ticket]) {
        guard let onDrop else { return }
        for ticket in dropped { onDrop(ticket) }
    }

    /// See `TicketRegistry.insert(_:then:)`: remembered, then `done`, before returning.
    public func insert(_ ticket: Ticket, then done: @escaping @Sendable () -> Void) {
        remember(ticket)
        done()
    }

    /// Adds `ticket`, dropping expired tickets and, past the bounds, the oldest (by owner for the byte budget).
    func remember(_ ticket: Ticket) {
        let dropped = state.withLock { state -> [Ticket] in
            defer { state.dropped = [] }
            state.tickets[ticket.id] = ticket
            for request in ticket.requests { state.byKey[request.key] = ticket.id }
            state.bytes += ticket.accountedBytes
            state.order.append(ticket.id)
            state.owners[ticket.owner, default: (0, [])].bytes += ticket.accountedBytes
            state.owners[ticket.owner, default: (0, [])].ids.append(ticket.id)
            let now = clock.now
            while state.head < state.order.count {
                let oldest = state.order[state.head]
                guard let candidate = state.tickets[oldest] else {
                    state.head += 1
                    continue
                }
                guard state.tickets.count > capacity || candidate.expiresAt <= now else { break }
                state.drop(oldest)
                state.head += 1
            }
            while state.bytes > budgetBytes, let heaviest = state.owners.max(by: { $0.value.bytes < $1.value.bytes }),
                let id = heaviest.value.ids.first
            {
                state.drop(id)
            }
            if state.head > 1024 && state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
            return state.dropped
        }
        report(dropped)
    }

    public func ticket(_ id: String) -> Ticket? {
        let now = clock.now
        let (found, dropped) = state.withLock { state -> (Ticket?, [Ticket]) in
            guard let ticket = state.tickets[id] else { return (nil, []) }
            if ticket.expiresAt <= now {
                state.drop(id)
                defer { state.dropped = [] }
                return (nil, state.dropped)
            }
            return (ticket, [])
        }
        report(dropped)
        return found
    }

    public func localTicket(_ id: String) -> Ticket? { ticket(id) }

    /// See `TicketRegistry.ticket(_:then:)`: answered at once.
    public func ticket(_ id: String, then done: @escaping @Sendable (Ticket?) -> Void) { done(ticket(id)) }

    /// See `TicketRegistry.holdsEveryTicket`: this process's registry is the only one.
    public var holdsEveryTicket: Bool { true }

    /// See `TicketRegistry.localTicket(forKey:)`.
    public func localTicket(forKey key: StoreKey) -> (ticket: Ticket, index: Int)? {
        guard let id = state.withLock({ $0.byKey[key] }), let ticket = ticket(id),
            let index = ticket.requests.firstIndex(where: { $0.key == key })
        else { return nil }
        return (ticket, index)
    }

    /// The most recent tickets, newest first.

    public func recent(_ limit: Int) -> [Ticket] {
        state.withLock { state in
            var result: [Ticket] = []
            var index = state.order.count - 1
            while index >= state.head && result.count < limit {
                if let ticket = state.tickets[state.order[index]] { result.append(ticket) }
                index -= 1
            }
            return result
        }
    }

    public var count: Int { state.withLock { $0.tickets.count } }
    public var bytes: Int { state.withLock { $0.bytes } }
}
