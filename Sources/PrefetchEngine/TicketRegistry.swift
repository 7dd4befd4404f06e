public import PrefetchStore

/// Where tickets live: in this process, or shared by every replica.
public protocol TicketRegistry: Sendable {
    /// Remembers a new ticket, then calls `done` once: before returning when the registry has nothing to wait for
    /// (this process's), else on the thread that has the shared store's answer. `done` must not block.
    func insert(_ ticket: Ticket, then done: @escaping @Sendable () -> Void)
    /// The ticket with `id`, if it is known and unexpired.
    func ticket(_ id: String) async -> Ticket?
    /// The ticket with `id` if this replica holds it (no I/O, for the event loop); nil means unknown only when the
    /// registry ``holdsEveryTicket``.
    func localTicket(_ id: String) -> Ticket?
    /// Whether this replica holds every ticket there is (the registry is this process's alone), so a ticket
    /// ``localTicket(_:)`` does not know is unknown everywhere.
    var holdsEveryTicket: Bool { get }
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
    /// ``insert(_:then:)`` for a caller that is async by nature.
    public func insert(_ ticket: Ticket) async {
        await withCheckedContinuation { continuation in insert(ticket) { continuation.resume() } }
    }
}
