public import Foundation
public import PrefetchCore
public import PrefetchStore
public import Synchronization
import Tracing

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
    /// Where its reads' spans go: the tracer and the page open's span context (nil without a tracer, or for a ticket
    /// triggered on another replica).
    let trace: Trace?

    /// A page open's trace: each read becomes a span under the open's.
    struct Trace: Sendable {
        var tracer: any Tracer
        var context: ServiceContext
    }

    init(
        id: String, page: String, pageOrigin: String, partnerOrigins: [String] = [], matched: String, version: String,
        identity: Identity, owner: String, requests: [TicketRequest], role: ConfigRole = .active, timings: [RequestTiming],
        now: ContinuousClock.Instant, dependents: [Int: Int] = [:], trace: Trace? = nil
    ) {
        self.answers = AnswerBoard(consumers: dependents)
        self.trace = trace
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
        self.trace = nil
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
        self.timings = Mutex(record.requests.map { _ in RequestTiming(origin: .remote, startedAt: now, finishedAt: nil) })
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

    /// Records how a read of request `index` was served (`hit`, `joined`) or why it missed, for the debug view.
    /// One uncontended lock and no allocation (the log's storage is made with the ticket); with a tracer, also the
    /// read's span under the page open's.
    public func recordRead(
        _ index: Int, served: ReadResult, reason: FailureCode?, askedAt: ContinuousClock.Instant, answeredAt: ContinuousClock.Instant
    ) {
        let read = TicketRead(index: index, served: served, reason: reason, askedAt: askedAt, answeredAt: answeredAt)
        readLog.withLock { $0.append(read, served: served != .miss) }
        if let trace { span(of: read, in: trace) }
    }

    /// The read as a span under the page open's, timed from when it was asked to when it was answered.
    private func span(of read: TicketRead, in trace: Trace) {
        let end = DefaultTracerClock.now
        let took = UInt64(max(0, (read.answeredAt - read.askedAt).nanoseconds))
        let start = WallInstant(nanosecondsSinceEpoch: end.nanosecondsSinceEpoch &- min(took, end.nanosecondsSinceEpoch))
        let span = trace.tracer.startSpan("prefetch read", context: trace.context, ofKind: .server, at: start)
        span.attributes["prefetch.interface"] = requests[read.index].name
        span.attributes["prefetch.served"] = read.served.rawValue
        if let reason = read.reason { span.attributes["prefetch.reason"] = reason.rawValue }
        span.end(at: end)
    }

    /// The last ``readLimit`` reads, oldest first.
    public var reads: [TicketRead] { readLog.withLock { $0.inOrder } }

    /// The requests never served to a reader so far.
    public var unreadCount: Int {
        requests.count - readLog.withLock { $0.servedCount }
    }
}

/// A wall-clock instant for a span that began before it was made.
private struct WallInstant: TracerInstant {
    var nanosecondsSinceEpoch: UInt64
    static func < (lhs: Self, rhs: Self) -> Bool { lhs.nanosecondsSinceEpoch < rhs.nanosecondsSinceEpoch }
}
