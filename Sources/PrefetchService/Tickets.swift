import Foundation
import PrefetchCore
import PrefetchStore
import Synchronization

/// One composed request of a ticket: what was asked for and under which store key it lives.
struct TicketRequest: Sendable {
    var name: String
    var api: String
    var method: HTTPMethod
    var url: String
    var key: StoreKey
    var policy: StorePolicy
    var timeout: Duration
}

/// How one request of a ticket went, for the results and the debug view.
struct RequestTiming: Sendable {
    /// `leader` (this trigger fetched), `joined` (a flight was already running) or `fresh` (a stored entry).
    var origin: String
    var startedAt: ContinuousClock.Instant
    var finishedAt: ContinuousClock.Instant?
    var status: Int?
    var bytes: Int?
    var error: String?
}

/// A page open: the handle a shell passes to its page so the page can collect the prefetched responses.
///
/// The id is 128 random bits, URL-safe base64: it is a capability, so it is unguessable, and it expires with
/// the entries it points at.
final class Ticket: Sendable {
    let id: String
    let page: String
    let matched: String
    let version: String
    /// The identity of the credentials the trigger carried (before the per-interface credentials rule).
    let identity: Identity
    let createdAt: ContinuousClock.Instant
    let createdWallClock: Date
    let expiresAt: ContinuousClock.Instant
    let requests: [TicketRequest]
    let timings: Mutex<[RequestTiming]>
    /// The page's reads of the data, for the debug view (see `recordingRead`, bounded).
    let reads = Mutex<[TicketRead]>([])

    init(id: String, page: String, matched: String, version: String, identity: Identity, requests: [TicketRequest], timings: [RequestTiming]) {
        let now = ContinuousClock.now
        self.id = id
        self.page = page
        self.matched = matched
        self.version = version
        self.identity = identity
        self.createdAt = now
        self.createdWallClock = Date()
        self.expiresAt = now + Self.lifetime(of: requests)
        self.requests = requests
        self.timings = Mutex(timings)
    }

    /// A ticket read back from a shared store (triggered on another replica): its timings are not known here.
    init(record: TicketRecord) {
        let now = ContinuousClock.now
        let remaining = Duration.milliseconds(max(0, record.expiresAtMs - Int64(Date().timeIntervalSince1970 * 1000)))
        self.id = record.id
        self.page = record.page
        self.matched = record.matched
        self.version = record.version
        self.identity = Identity(digest: record.identity)
        self.createdAt = now
        self.createdWallClock = Date(timeIntervalSince1970: Double(record.createdAtMs) / 1000)
        self.expiresAt = now + remaining
        self.requests = record.requests.map {
            TicketRequest(
                name: $0.name, api: $0.api, method: HTTPMethod(rawValue: $0.method) ?? .GET, url: $0.url,
                key: StoreKey(identity: Identity(digest: $0.identity), method: $0.method, url: $0.url, bodyDigest: $0.bodyDigest),
                policy: StorePolicy(ttl: .milliseconds($0.ttlMs), negativeTTL: .milliseconds($0.negativeTTLMs), label: $0.name),
                timeout: .milliseconds($0.timeoutMs))
        }
        self.timings = Mutex(record.requests.map { _ in RequestTiming(origin: "remote", startedAt: now, finishedAt: nil) })
    }

    /// How long a ticket stays valid: as long as the longest-lived response it points at.
    static func lifetime(of requests: [TicketRequest]) -> Duration {
        requests.map { $0.policy.ttl + $0.timeout }.max() ?? .seconds(30)
    }

    /// What is shared with other replicas.
    var record: TicketRecord {
        let created = Int64(createdWallClock.timeIntervalSince1970 * 1000)
        return TicketRecord(
            id: id, page: page, matched: matched, version: version, identity: identity.digest, createdAtMs: created,
            expiresAtMs: created + Self.lifetime(of: requests).milliseconds,
            requests: requests.map {
                TicketRecord.Request(
                    name: $0.name, api: $0.api, method: $0.method.rawValue, url: $0.url, identity: $0.key.identity.digest,
                    bodyDigest: $0.key.bodyDigest, ttlMs: $0.policy.ttl.milliseconds, negativeTTLMs: $0.policy.negativeTTL.milliseconds,
                    timeoutMs: $0.timeout.milliseconds)
            })
    }

    func record(_ index: Int, _ update: (inout RequestTiming) -> Void) {
        timings.withLock { update(&$0[index]) }
    }

    /// 16 random bytes as URL-safe base64 without padding (22 characters).
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Whether `text` has the shape of a ticket id (so junk is refused before any lookup).
    static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == 22 && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"): true
            default: false
            }
        }
    }
}

/// A ticket as shared between replicas (JSON in the shared store).
struct TicketRecord: Codable, Sendable {
    struct Request: Codable, Sendable {
        var name: String
        var api: String
        var method: String
        var url: String
        var identity: String
        var bodyDigest: String?
        var ttlMs: Int64
        var negativeTTLMs: Int64
        var timeoutMs: Int64
    }

    var id: String
    var page: String
    var matched: String
    var version: String
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
protocol TicketRegistry: Sendable {
    /// Remembers a new ticket.
    func insert(_ ticket: Ticket) async
    /// The ticket with `id`, if it is known and unexpired.
    func ticket(_ id: String) async -> Ticket?
    /// The most recent tickets triggered on this replica, newest first.
    func recent(_ limit: Int) -> [Ticket]
    /// Tickets held by this replica.
    var count: Int { get }
}

/// Tickets shared through the response store (Redis), so a page's data request may land on any replica.
/// Tickets triggered here are also kept locally, with their timings; others are read back from the store.
struct SharedTicketRegistry: TicketRegistry {
    let store: any ResponseStore
    let local: LocalTicketRegistry

    init(store: any ResponseStore, capacity: Int) {
        self.store = store
        self.local = LocalTicketRegistry(capacity: capacity)
    }

    func insert(_ ticket: Ticket) async {
        local.remember(ticket)
        let key = TicketRecord.key(ticket.id)
        let policy = StorePolicy(ttl: Ticket.lifetime(of: ticket.requests), negativeTTL: .zero, label: TicketRecord.storeLabel)
        guard case .leader(let token) = await store.begin(key, policy: policy), let body = try? JSONEncoder().encode(ticket.record) else { return }
        await store.complete(key, token: token, result: .success(StoredResponse(status: 200, body: Array(body))))
    }

    func ticket(_ id: String) async -> Ticket? {
        if let ticket = local.ticket(id) { return ticket }
        guard case .ready(let response, _) = await store.read(TicketRecord.key(id), wait: .zero),
            let record = try? JSONDecoder().decode(TicketRecord.self, from: Data(response.body)),
            record.id == id
        else { return nil }
        let ticket = Ticket(record: record)
        return ticket.expiresAt > .now ? ticket : nil
    }

    func recent(_ limit: Int) -> [Ticket] { local.recent(limit) }
    var count: Int { local.count }
}

/// The tickets currently valid, bounded in number; expired ones are dropped as new ones arrive.
final class LocalTicketRegistry: TicketRegistry, Sendable {
    private struct State {
        var tickets: [String: Ticket] = [:]
        /// Insertion order, for expiry and the capacity bound (tickets of one process expire in roughly that order).
        var order: [String] = []
        var head = 0
    }

    private let state = Mutex(State())
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    func insert(_ ticket: Ticket) async {
        remember(ticket)
    }

    /// Adds `ticket`, dropping expired tickets and, past the capacity, the oldest.
    func remember(_ ticket: Ticket) {
        state.withLock { state in
            state.tickets[ticket.id] = ticket
            state.order.append(ticket.id)
            let now = ContinuousClock.now
            while state.head < state.order.count {
                let oldest = state.order[state.head]
                guard let candidate = state.tickets[oldest] else {
                    state.head += 1
                    continue
                }
                guard state.tickets.count > capacity || candidate.expiresAt <= now else { break }
                state.tickets[oldest] = nil
                state.head += 1
            }
            if state.head > 1024 && state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
        }
    }

    func ticket(_ id: String) -> Ticket? {
        state.withLock { state in
            guard let ticket = state.tickets[id] else { return nil }
            if ticket.expiresAt <= .now {
                state.tickets[id] = nil
                return nil
            }
            return ticket
        }
    }

    /// The most recent tickets, newest first.
    func recent(_ limit: Int) -> [Ticket] {
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

    var count: Int { state.withLock { $0.tickets.count } }
}
