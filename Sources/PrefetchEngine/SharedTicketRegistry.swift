import Foundation
public import PrefetchCore
public import PrefetchStore

/// Tickets shared by every replica through a record store (Redis), so a page's data request may land on any
/// replica. Tickets triggered here are also kept locally, with their timings; others are read back from the records.
public struct SharedTicketRegistry: TicketRegistry {
    let records: any RecordStore
    let local: LocalTicketRegistry

    let clock: any ServiceClock

    /// A registry sharing tickets through `records`, holding at most `capacity` tickets and `budgetBytes` here;
    /// tickets expire by `clock`.
    public init(
        records: any RecordStore, capacity: Int, budgetBytes: Int, clock: any ServiceClock = ContinuousClock(),
        onDrop: (@Sendable (Ticket) -> Void)? = nil
    ) {
        self.records = records
        self.clock = clock
        self.local = LocalTicketRegistry(capacity: capacity, budgetBytes: budgetBytes, clock: clock, onDrop: onDrop)
    }

    /// See `TicketRegistry.insert(_:then:)`: remembered here at once, and `done` once the shared record is kept
    /// (on the thread that has the record store's answer).
    public func insert(_ ticket: Ticket, then done: @escaping @Sendable () -> Void) {
        local.remember(ticket)
        guard let bytes = Self.bytes(of: ticket) else { return done() }
        records.keepRecord(bytes, name: TicketRecord.name(ticket.id), ttl: Ticket.lifetime(of: ticket.requests)) { _ in done() }
    }

    /// A ticket's record as the records keep it (JSON).
    private static func bytes(of ticket: Ticket) -> [UInt8]? {
        (try? JSONEncoder().encode(ticket.record)).map { Array($0) }
    }

    /// See `TicketRegistry.ticket(_:then:)`: this replica's, else the shared record, read back.
    public func ticket(_ id: String, then done: @escaping @Sendable (Ticket?) -> Void) {
        if let ticket = local.ticket(id) { return done(ticket) }
        records.record(TicketRecord.name(id)) { [clock] bytes in
            guard let bytes, let record = try? JSONDecoder().decode(TicketRecord.self, from: Data(bytes)), record.id == id else {
                return done(nil)
            }
            let now = clock.now
            let ticket = Ticket(record: record, now: now)
            done(ticket.expiresAt > now ? ticket : nil)
        }
    }

    public func localTicket(_ id: String) -> Ticket? { local.ticket(id) }

    /// See `TicketRegistry.holdsEveryTicket`: other replicas hold theirs.
    public var holdsEveryTicket: Bool { false }

    public func localTicket(forKey key: StoreKey) -> (ticket: Ticket, index: Int)? { local.localTicket(forKey: key) }

    public func recent(_ limit: Int) -> [Ticket] { local.recent(limit) }
    public var count: Int { local.count }
    public var bytes: Int { local.bytes }
}
