public import Foundation
public import NIOCore
public import PrefetchCore
public import PrefetchStore
public import Synchronization

/// One composed request of a ticket: which interface it is and under which store key its response lives.
///
/// The composed URL is not kept (it may carry the page's tokens and be kilobytes long): the key holds its digest.
public struct TicketRequest: Sendable {
    public var name: String
    public var api: String
    public var method: HTTPMethod
    public var key: StoreKey
    public var policy: StorePolicy
    public var timeout: Duration
}

/// How one request of a ticket went, for the results and the debug view.
public struct RequestTiming: Sendable {
    /// `leader` (this trigger fetched), `joined` (a flight was already running), `fresh` (a stored entry), or
    /// `remote` (a ticket read back from another replica).
    public var origin: String
    public var startedAt: ContinuousClock.Instant
    public var finishedAt: ContinuousClock.Instant?
    public var status: Int?
    public var bytes: Int?
    public var error: String?
    /// The response was anonymous but set a cookie or was private: it is kept under a key of this ticket's own.
    public var keptPrivate = false
    /// The interfaces whose answers this request needs (a dependent request); it starts once they are in.
    public var needs: [String] = []
}

/// What a leader of a page open got, for the dependents of the same open: a 2xx body, or why there is none.
public enum DependencyAnswer: Sendable, Hashable {
    /// A 2xx body; `ownOnly` when it is kept for this page open alone (it set a cookie, was `private`, or was made
    /// from such an answer), so whatever is made from it is kept for this page open alone too.
    case body(ByteBuffer, ownOnly: Bool)
    case failed(String)
}

/// The answers a page open's leaders post for its dependent requests, each awaited by any number of them.
///
/// Only answers some dependent needs are kept, and each only until every dependent that needs it took it, so a
/// page open holds no copy of a response beyond the moment it is used.
public final class AnswerBoard: Sendable {
    private struct State {
        var answers: [Int: DependencyAnswer] = [:]
        /// Dependents still to take each needed answer.
        var consumers: [Int: Int]
        var waiting: [Int: [Int: CheckedContinuation<DependencyAnswer?, Never>]] = [:]
        var nextID = 0
    }

    private let state: Mutex<State>

    /// A board for answers `consumers` names, each taken by that many dependents.
    init(consumers: [Int: Int] = [:]) {
        state = Mutex(State(consumers: consumers))
    }

    /// Request `index` has its answer: every dependent waiting for it gets it, and later ones at once. Ignored
    /// when nobody needs it.
    public func post(_ index: Int, _ answer: DependencyAnswer) {
        let waiting = state.withLock { state -> [CheckedContinuation<DependencyAnswer?, Never>] in
            guard let count = state.consumers[index], count > 0, state.answers[index] == nil else { return [] }
            let waiting = state.waiting.removeValue(forKey: index).map { Array($0.values) } ?? []
            state.consumers[index] = count - waiting.count
            if count > waiting.count { state.answers[index] = answer }
            return waiting
        }
        for continuation in waiting { continuation.resume(returning: answer) }
    }

    /// The dependents counted on `inputs` take their answers elsewhere (from the page open's completions): each
    /// input is kept for one consumer fewer. Called before any answer is posted.
    func withdraw(_ inputs: [Int]) {
        state.withLock { state in
            for input in inputs {
                guard let count = state.consumers[input] else { continue }
                state.consumers[input] = count > 1 ? count - 1 : nil
            }
        }
    }

    /// Request `index`'s answer once posted, or nil when `deadline` passes on `clock` first (or the task is
    /// cancelled).
    public func answer(for index: Int, until deadline: ContinuousClock.Instant, clock: any ServiceClock) async -> DependencyAnswer? {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return await withDeadline(deadline, clock: clock, onExpiry: { self.giveUp(index, id) }) {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<DependencyAnswer?, Never>) in
                    let now: DependencyAnswer?? = state.withLock { state in
                        if let answer = state.answers[index] {
                            let left = (state.consumers[index] ?? 1) - 1
                            state.consumers[index] = left
                            if left <= 0 { state.answers[index] = nil }
                            return .some(answer)
                        }
                        if Task.isCancelled { return .some(nil) }
                        state.waiting[index, default: [:]][id] = continuation
                        return .none
                    }
                    if case .some(let answer) = now { continuation.resume(returning: answer) }
                }
            } onCancel: {
                self.giveUp(index, id)
            }
        }
    }

    private func giveUp(_ index: Int, _ id: Int) {
        let continuation = state.withLock { $0.waiting[index]?.removeValue(forKey: id) }
        continuation?.resume(returning: nil)
    }
}

/// A page open: the handle a shell keeps to read the prefetched responses.
///
/// The id is 128 random bits, URL-safe base64. It names the open; it does not by itself entitle a reader to
/// responses fetched with credentials (see ``TicketAccess``).
public final class Ticket: Sendable {
    public let id: String
    public let page: String
    /// The origin of the page URL.
    public let pageOrigin: String
    /// The browser origins entitled to this page open's data: the page's own and its config entry's partners (the
    /// only origins its read keys are accepted from, and the only browser origins its ticket is answered to).
    public let origins: PageOrigins
    public let matched: String
    public let version: String
    /// Which served config the page was planned with: the active one or a canary candidate.
    public let role: ConfigRole
    /// The identity of the credentials the trigger carried (before the per-interface credentials rule).
    public let identity: Identity
    /// The client address that triggered it: when tickets outgrow their budget, the owner holding the most
    /// bytes loses its oldest first, so one client's flood cannot push out everyone else's tickets.
    let owner: String
    public let createdAt: ContinuousClock.Instant
    public let createdWallClock: Date
    public let expiresAt: ContinuousClock.Instant
    public let requests: [TicketRequest]
    public let timings: Mutex<[RequestTiming]>
    /// The page's reads of the data (the last ``readLimit``, for the debug view) and which requests were ever
    /// served (what was not is waste), under one lock.
    private let readLog: Mutex<ReadLog>
    /// Its leaders' answers, for its dependent requests.
    public let answers: AnswerBoard

    init(
        id: String, page: String, pageOrigin: String, partnerOrigins: [String] = [], matched: String, version: String,
        identity: Identity, owner: String, requests: [TicketRequest], role: ConfigRole = .active, timings: [RequestTiming],
        now: ContinuousClock.Instant, dependents: [Int: Int] = [:]
    ) {
        self.answers = AnswerBoard(consumers: dependents)
        self.readLog = Mutex(ReadLog(requests: requests.count))
        self.id = id
        self.owner = owner
        self.page = page
        self.pageOrigin = pageOrigin
        self.origins = PageOrigins(own: pageOrigin, partners: partnerOrigins)
        self.matched = matched
        self.version = version
        self.role = role
        self.identity = identity
        self.createdAt = now
        self.createdWallClock = Date()
        self.expiresAt = now + Self.lifetime(of: requests)
        self.requests = requests
        self.timings = Mutex(timings)
    }

    /// A ticket read back from a shared store (triggered on another replica): its timings are not known here.
    init(record: TicketRecord, now: ContinuousClock.Instant) {
        self.answers = AnswerBoard()
        self.readLog = Mutex(ReadLog(requests: record.requests.count))
        let remaining = Duration.milliseconds(max(0, record.expiresAtMs - Int64(Date().timeIntervalSince1970 * 1000)))
        self.id = record.id
        self.page = record.page
        self.pageOrigin = record.pageOrigin
        self.origins = PageOrigins(own: record.pageOrigin, partners: record.partnerOrigins ?? [])
        self.matched = record.matched
        self.version = record.version
        self.role = record.role.flatMap(ConfigRole.init(rawValue:)) ?? .active
        self.identity = Identity(digest: record.identity)
        self.owner = "remote"
        self.createdAt = now
        self.createdWallClock = Date(timeIntervalSince1970: Double(record.createdAtMs) / 1000)
        self.expiresAt = now + remaining
        self.requests = record.requests.map {
            TicketRequest(
                name: $0.name, api: $0.api, method: HTTPMethod(rawValue: $0.method) ?? .GET,
                key: StoreKey(identity: Identity(digest: $0.identity), method: $0.method, request: $0.request),
                policy: StorePolicy(ttl: .milliseconds($0.ttlMs), negativeTTL: .milliseconds($0.negativeTTLMs), label: $0.name),
                timeout: .milliseconds($0.timeoutMs))
        }
        self.timings = Mutex(record.requests.map { _ in RequestTiming(origin: "remote", startedAt: now, finishedAt: nil) })
    }

    /// How long a ticket stays valid: as long as the longest-lived response it points at.
    static func lifetime(of requests: [TicketRequest]) -> Duration {
        requests.map { $0.policy.ttl + $0.timeout }.max() ?? .seconds(30)
    }

    /// The bytes this ticket holds, counted against the ticket budget: the strings it owns, its keys, timings and
    /// a fixed overhead. Interface names and api URLs are shared with the config, but counted all the same.
    var accountedBytes: Int {
        let perRequest = requests.reduce(0) { total, request in
            total + request.name.utf8.count + request.api.utf8.count + request.key.identity.digest.utf8.count + 64 + 160
        }
        return 512 + id.utf8.count + page.utf8.count + pageOrigin.utf8.count + origins.partners.reduce(0) { $0 + $1.utf8.count + 16 }
            + matched.utf8.count + version.utf8.count
            + identity.digest.utf8.count + perRequest + Self.readLimit * MemoryLayout<TicketRead>.stride
    }

    /// What is shared with other replicas.
    var record: TicketRecord {
        let created = Int64(createdWallClock.timeIntervalSince1970 * 1000)
        return TicketRecord(
            id: id, page: page, pageOrigin: pageOrigin, partnerOrigins: origins.partners.isEmpty ? nil : origins.partners,
            matched: matched, version: version, role: role.rawValue,
            identity: identity.digest, createdAtMs: created,
            expiresAtMs: created + Self.lifetime(of: requests).milliseconds,
            requests: requests.map {
                TicketRecord.Request(
                    name: $0.name, api: $0.api, method: $0.method.rawValue, identity: $0.key.identity.digest, request: $0.key.request,
                    ttlMs: $0.policy.ttl.milliseconds, negativeTTLMs: $0.policy.negativeTTL.milliseconds, timeoutMs: $0.timeout.milliseconds
                )
            })
    }

    func record(_ index: Int, _ update: (inout RequestTiming) -> Void) {
        timings.withLock { update(&$0[index]) }
    }

    /// 16 random bytes as URL-safe base64 without padding (22 characters).
    static func newID() -> String {
        RandomID.make()
    }

    /// Whether `text` has the shape of a ticket id (so junk is refused before any lookup).
    public static func isWellFormed(_ text: String) -> Bool {
        RandomID.isWellFormed(text)
    }

    /// Reads remembered per ticket; older ones are dropped first.
    public static let readLimit = 32

    /// The store label tickets shared between replicas are kept under (never an interface name).
    public static let storeLabel = TicketRecord.storeLabel

    /// Records how a read of request `index` was served (`hit`, `joined`) or why it missed, for the debug view.
    /// One uncontended lock and no allocation: the log's storage is made with the ticket.
    public func recordRead(
        _ index: Int, served: String, reason: String?, askedAt: ContinuousClock.Instant, answeredAt: ContinuousClock.Instant
    ) {
        let read = TicketRead(index: index, served: served, reason: reason, askedAt: askedAt, answeredAt: answeredAt)
        readLog.withLock { $0.append(read, served: served != "miss") }
    }

    /// The last ``readLimit`` reads, oldest first.
    public var reads: [TicketRead] { readLog.withLock { $0.inOrder } }

    /// The requests never served to a reader so far.
    public var unreadCount: Int {
        requests.count - readLog.withLock { $0.servedCount }
    }
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

/// One read of a ticket's data by the page: how it was served and when, for the debug view.
public struct TicketRead: Sendable {
    /// The request's index in the ticket.
    public var index: Int
    /// `hit`, `joined` or `miss`.
    public var served: String
    /// The miss reason (the `X-Prefetch-Reason` code), nil when served.
    public var reason: String?
    public var askedAt: ContinuousClock.Instant
    public var answeredAt: ContinuousClock.Instant
}

/// A ticket as shared between replicas (JSON in the shared store). It holds key digests, never composed URLs.
struct TicketRecord: Codable, Sendable {
    struct Request: Codable, Sendable {
        var name: String
        var api: String
        var method: String
        var identity: String
        var request: String
        var ttlMs: Int64
        var negativeTTLMs: Int64
        var timeoutMs: Int64
    }

    var id: String
    var page: String
    var pageOrigin: String
    /// The page entry's `partnerOrigins`; absent when it names none (and in records written before them).
    var partnerOrigins: [String]?
    var matched: String
    var version: String
    /// `active` or `candidate`; absent in records written before canary configs.
    var role: String?
    var identity: String
    var createdAtMs: Int64
    var expiresAtMs: Int64
    var requests: [Request]

    /// The store label tickets are kept under (never an interface name: those cannot start with `_`).
    static let storeLabel = "_ticket"

    /// The store key of ticket `id`: a key no composed request can have.
    static func key(_ id: String) -> StoreKey {
        StoreKey(identity: .anonymous, method: "TICKET", url: "ticket:" + id, body: nil)
    }
}

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

        /// Tickets dropped while the lock was held, handed to `onDrop` after it is released.
        var dropped: [Ticket] = []

        mutating func drop(_ id: String) {
            guard let ticket = tickets.removeValue(forKey: id) else { return }
            dropped.append(ticket)
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

    public func insert(_ ticket: Ticket) async {
        remember(ticket)
    }

    public var insertsWithoutSuspending: Bool { true }

    public func insertWithoutSuspending(_ ticket: Ticket) {
        remember(ticket)
    }

    /// Adds `ticket`, dropping expired tickets and, past the bounds, the oldest (by owner for the byte budget).
    func remember(_ ticket: Ticket) {
        let dropped = state.withLock { state -> [Ticket] in
            defer { state.dropped = [] }
            state.tickets[ticket.id] = ticket
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

    /// The most recent tickets, newest first.
    public func localTicket(_ id: String) -> Ticket? { ticket(id) }

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
