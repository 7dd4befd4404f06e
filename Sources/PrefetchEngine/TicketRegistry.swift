public import PrefetchStore

/// Where tickets live: in this process, or shared by every replica.
public protocol TicketRegistry: Sendable {
    /// Remembers a new ticket, then calls `done` once: before returning when the registry has nothing to wait for
    /// (this process's), else on the thread that has the shared store's answer. `done` must not block.
    func insert(_ ticket: Ticket, then done: @escaping @Sendable () -> Void)
    /// Calls `done` once with the ticket with `id`, if it is known and unexpired: before returning when this
    /// replica can tell, else on the thread that has the shared store's answer. `done` must not block.
    func ticket(_ id: String, then done: @escaping @Sendable (Ticket?) -> Void)
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
    /// ``ticket(_:then:)`` for a caller that is async by nature.
    public func ticket(_ id: String) async -> Ticket? {
        await withCheckedContinuation { continuation in ticket(id) { continuation.resume(returning: $0) } }
    }

    /// Where the ticket with `id` is, without I/O: held here, known to be unknown (``holdsEveryTicket``), or
    /// possibly held by another replica (ask ``ticket(_:then:)``).
    public func lookUp(_ id: String) -> TicketLookup {
        if let held = localTicket(id) { return .found(held) }
        return holdsEveryTicket ? .unknown : .elsewhere(id)
    }

    /// ``lookUp(_:)`` with the tickets a caller already fetched from the shared registry (`known`, by id; nil for one
    /// no replica holds) looked at first.
    public func lookUp(_ id: String, known: [String: Ticket?]) -> TicketLookup {
        if !known.isEmpty, let fetched = known[id] { return fetched.map { .found($0) } ?? .unknown }
        return lookUp(id)
    }

    /// ``insert(_:then:)`` for a caller that is async by nature.
    public func insert(_ ticket: Ticket) async {
        await withCheckedContinuation { continuation in insert(ticket) { continuation.resume() } }
    }
}

/// Where a ticket is, as far as this replica can tell without I/O.
public enum TicketLookup: Sendable {
    case found(Ticket)
    /// No replica holds it.
    case unknown
    /// Not held here; another replica may hold it (its id).
    case elsewhere(String)
}
