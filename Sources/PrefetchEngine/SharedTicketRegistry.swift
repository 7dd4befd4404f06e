import Foundation
public import PrefetchCore
public import PrefetchStore

/// Tickets shared through the response store (Redis), so a page's data request may land on any replica.
/// Tickets triggered here are also kept locally, with their timings; others are read back from the store.
public struct SharedTicketRegistry: TicketRegistry {
    let store: any ResponseStore
    let local: LocalTicketRegistry

    let clock: any ServiceClock

    /// A registry sharing tickets through `store`, holding at most `capacity` tickets and `budgetBytes` here;
    /// tickets expire by `clock`.
    public init(
        store: any ResponseStore, capacity: Int, budgetBytes: Int, clock: any ServiceClock = ContinuousClock(),
        onDrop: (@Sendable (Ticket) -> Void)? = nil
    ) {
        self.store = store
        self.clock = clock
        self.local = LocalTicketRegistry(capacity: capacity, budgetBytes: budgetBytes, clock: clock, onDrop: onDrop)
    }

    public var insertsWithoutSuspending: Bool { false }

    public func insertWithoutSuspending(_ ticket: Ticket) {}

    public func insert(_ ticket: Ticket) async {
        local.remember(ticket)
        guard let record = Self.record(ticket) else { return }
        await store.settle([record])
    }

    /// See `TicketRegistry.insertsWithoutTasks`: when the store settles without tasks.
    public var insertsWithoutTasks: Bool { store.beginsAndSettlesWithoutTasks }

    /// See `TicketRegistry.insert(_:then:)`.
    public func insert(_ ticket: Ticket, then done: @escaping @Sendable () -> Void) -> Bool {
        guard store.beginsAndSettlesWithoutTasks else { return false }
        local.remember(ticket)
        guard let record = Self.record(ticket) else {
            done()
            return true
        }
        return store.settle([record], then: done)
    }

    /// The store's put of a ticket's record. A fresh random id: nobody else flies this key, so begin and complete go
    /// in one round trip.
    private static func record(_ ticket: Ticket) -> Settlement? {
        let policy = StorePolicy(ttl: Ticket.lifetime(of: ticket.requests), negativeTTL: .zero, label: TicketRecord.storeLabel)
        guard let body = try? JSONEncoder().encode(ticket.record) else { return nil }
        return .put(TicketRecord.key(ticket.id), policy: policy, result: .success(StoredResponse(status: 200, body: Array(body))))
    }

    public func ticket(_ id: String) async -> Ticket? {
        if let ticket = local.ticket(id) { return ticket }
        guard case .ready(let response, _) = await store.read(TicketRecord.key(id), wait: .zero),
            let record = try? JSONDecoder().decode(TicketRecord.self, from: Data(response.body)),
            record.id == id
        else { return nil }
        let now = clock.now
        let ticket = Ticket(record: record, now: now)
        return ticket.expiresAt > now ? ticket : nil
    }

    public func localTicket(_ id: String) -> Ticket? { local.ticket(id) }

    public func recent(_ limit: Int) -> [Ticket] { local.recent(limit) }
    public var count: Int { local.count }
    public var bytes: Int { local.bytes }
}
