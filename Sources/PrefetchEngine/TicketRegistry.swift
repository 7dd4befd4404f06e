public import PrefetchStore

/// Where tickets live: in this process, or shared by every replica.
public protocol TicketRegistry: Sendable {
    /// Remembers a new ticket.
    func insert(_ ticket: Ticket) async
    /// Whether `insertWithoutSuspending` remembers a ticket (a registry of this process alone).
    var insertsWithoutSuspending: Bool { get }
    /// `insert` without suspending; does nothing when `insertsWithoutSuspending` is false.
    func insertWithoutSuspending(_ ticket: Ticket)
    /// Whether ``insert(_:then:)`` takes its call.
    var insertsWithoutTasks: Bool { get }
    /// `insert` without a task: `done` is called once the ticket is remembered (at once, or on the thread that has
    /// the shared store's answer). Returns false, having done nothing, when `insertsWithoutTasks` is false.
    func insert(_ ticket: Ticket, then done: @escaping @Sendable () -> Void) -> Bool
    /// The ticket with `id`, if it is known and unexpired.
    func ticket(_ id: String) async -> Ticket?
    /// The ticket with `id` if this replica holds it (no I/O, for the event loop); nil does not mean unknown.
    func localTicket(_ id: String) -> Ticket?
    /// The latest ticket held by this replica with a request under `key`, and that request's index: whose read a
    /// same-site `page=` read of `key` is (no I/O).
    func localTicket(forKey key: StoreKey) -> (ticket: Ticket, index: Int)?
    /// The most recent tickets triggered on this replica, newest first.
    func recent(_ limit: Int) -> [Ticket]
    /// Tickets held by this replica.
    var count: Int { get }
    /// Bytes the tickets held by this replica account for.
    var bytes: Int { get }
}

extension TicketRegistry {
    /// See `TicketRegistry.insertsWithoutTasks`: when the registry inserts without suspending.
    public var insertsWithoutTasks: Bool { insertsWithoutSuspending }

    /// See `TicketRegistry.insert(_:then:)`: through `insertWithoutSuspending`, at once, when the registry can.
    public func insert(_ ticket: Ticket, then done: @escaping @Sendable () -> Void) -> Bool {
        guard insertsWithoutSuspending else { return false }
        insertWithoutSuspending(ticket)
        done()
        return true
    }
}
