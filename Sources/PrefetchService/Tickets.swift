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
        let longest = requests.map { $0.policy.ttl + $0.timeout }.max() ?? .seconds(30)
        self.expiresAt = now + longest
        self.requests = requests
        self.timings = Mutex(timings)
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

/// The tickets currently valid, bounded in number; expired ones are dropped as new ones arrive.
final class TicketRegistry: Sendable {
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

    func insert(_ ticket: Ticket) {
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
