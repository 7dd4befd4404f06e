import Foundation
import HTTPTypes
import PrefetchEngine
import PrefetchService
import PrefetchTestUpstream
import Synchronization
import Testing

/// Many users opening the same pages at once, in a random interleaving replayable from its seed: no response
/// ever reaches a user other than the one whose credentials fetched it.
@Suite("reliability: identity isolation", .timeLimit(.minutes(2)))
struct ReliabilityIsolationTests {
    static let users = 20
    static let operations = 600
    static let parallelism = 12

    /// One step of the random workload.
    enum Operation: Sendable {
        /// `user` opens `page` and keeps the ticket.
        case trigger(user: Int, page: Int)
        /// `user` reads one interface of one of its tickets, presenting its own cookie or none (the ticket is
        /// the capability).
        case ticketData(user: Int, interface: Int, withCookie: Bool, wait: Int)
        /// `user` reads the full results of one of its tickets.
        case results(user: Int)
        /// `user` reads by page URL with its own cookie (no ticket).
        case pageData(user: Int, page: Int, interface: Int, wait: Int)
        /// `thief` presents its own cookie on `victim`'s ticket.
        case steal(thief: Int, victim: Int, interface: Int)
    }

    static let interfaces = ["me", "slow", "shared"]

    @Test func randomInterleavingsOfManyUsersNeverCrossIdentities() async throws {
        let seed = testSeed()
        print("identity isolation seed: \(seed) (replay with PREFETCH_TEST_SEED=\(seed))")
        var generator = SeededGenerator(seed: seed)
        let cookies = (0..<Self.users).map { user in "sid=u\(user)-\(UInt32.random(in: 0...UInt32.max, using: &generator))" }
        let plan: [Operation] = (0..<Self.operations).map { _ in
            let user = Int.random(in: 0..<Self.users, using: &generator)
            let page = Int.random(in: 0..<3, using: &generator)
            let interface = Int.random(in: 0..<Self.interfaces.count, using: &generator)
            let wait = [0, 50, 2000].randomElement(using: &generator)!
            switch Int.random(in: 0..<10, using: &generator) {
            case 0...2: return .trigger(user: user, page: page)
            case 3...5: return .ticketData(user: user, interface: interface, withCookie: Bool.random(using: &generator), wait: wait)
            case 6: return .results(user: user)
            case 7...8: return .pageData(user: user, page: page, interface: interface, wait: wait)
            default: return .steal(thief: user, victim: (user + Int.random(in: 1..<Self.users, using: &generator)) % Self.users, interface: interface)
            }
        }

        try await withUpstream { upstream in
            let base = upstream.base
            let pages = (0..<3).map { "\(base)/pages/iso\($0)" }
            let config = configText(pages: pages.enumerated().map { index, page in
                pageEntry(page, [
                    #"{"name": "me", "api": "\#(base)/iso/\#(index)/me", "method": "GET", "urlParam": true}"#,
                    #"{"name": "slow", "api": "\#(base)/iso/\#(index)/slow?delay=30", "method": "POST", "body": {"p": \#(index)}, "ttl": 2}"#,
                    #"{"name": "shared", "api": "\#(base)/iso/\#(index)/shared", "method": "GET", "credentials": "omit"}"#,
                ])
            })
            try await withService(config: config) { service in
                let recorder = Recorder()

                let workload = Workload(service: service, cookies: cookies, pages: pages, recorder: recorder)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    var next = 0
                    while next < min(Self.parallelism, plan.count) {
                        let operation = plan[next]
                        group.addTask { try await workload.run(operation) }
                        next += 1
                    }
                    while try await group.next() != nil, next < plan.count {
                        let operation = plan[next]
                        group.addTask { try await workload.run(operation) }
                        next += 1
                    }
                    try await group.waitForAll()
                }

                let found = recorder.violations.withLock { $0 }
                #expect(found.isEmpty, "seed \(seed): \(found.count) identity violations, first: \(found.prefix(5))")
                let statuses = recorder.answered.withLock { $0 }
                // The workload really exercised hits: many users received their own data.
                #expect(statuses[200, default: 0] > Self.operations / 5, "seed \(seed): \(statuses)")
                #expect(statuses[202, default: 0] > 0)
                #expect(statuses.keys.allSatisfy { $0 < 500 || $0 == 502 || $0 == 504 }, "seed \(seed): \(statuses)")
                #expect(try await service.get("/healthz").status == 200)
            }
        }
    }
}

/// What the concurrent operations of the isolation test share: each user's tickets, the violations seen and
/// a count of answers per status.
final class Recorder: Sendable {
    let tickets = Mutex([Int: [String]]())
    let violations = Mutex([String]())
    let answered = Mutex([Int: Int]())
}

/// The operations of the isolation test, run concurrently against one service.
struct Workload: Sendable {
    let service: LiveService
    let cookies: [String]
    let pages: [String]
    let recorder: Recorder

    /// Checks a replayed upstream echo: it must carry exactly `cookie` (nil: no cookie at all).
    func checkEcho(_ echo: Echo, expected cookie: String?, _ what: String) {
        let seen = echo.values("Cookie")
        let wanted = cookie.map { [$0] } ?? []
        if seen != wanted { recorder.violations.withLock { $0.append("\(what): expected \(wanted), got \(seen)") } }
    }

    func run(_ operation: ReliabilityIsolationTests.Operation) async throws {
        switch operation {
        case .trigger(let user, let page):
            let reply = try await service.separateRequest(.post, "/v1/prefetch", body: #"{"url": "\#(pages[page])?from=feed", "headers": {"Cookie": "\#(cookies[user])"}}"#)
            if let ticket = reply.json["ticket"] as? String { recorder.tickets.withLock { $0[user, default: []].append(ticket) } }
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
        case .ticketData(let user, let interface, let withCookie, let wait):
            guard let ticket = recorder.tickets.withLock({ $0[user]?.last }) else { return }
            let name = ReliabilityIsolationTests.interfaces[interface]
            let reply = try await service.separateRequest(
                .get, "/v1/prefetch/\(ticket)/data?name=\(name)&wait=\(wait)", headers: withCookie ? ["Cookie": cookies[user]] : [:])
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
            if reply.status == 200 { checkEcho(Echo(reply), expected: name == "shared" ? nil : cookies[user], "user \(user) ticket \(name)") }
        case .results(let user):
            guard let ticket = recorder.tickets.withLock({ $0[user]?.first }) else { return }
            let reply = try await service.separateRequest(.get, "/v1/prefetch/\(ticket)?wait=100", headers: ["Cookie": cookies[user]])
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
            for item in reply.json["results"] as? [[String: Any]] ?? [] where item["state"] as? String == "ready" {
                let name = item["name"] as? String ?? ""
                let headers = (item["body"] as? [String: Any])?["headers"] as? [[String]] ?? []
                let seen = headers.filter { $0.first?.lowercased() == "cookie" }.compactMap(\.last)
                let wanted = name == "shared" ? [] : [cookies[user]]
                if seen != wanted { recorder.violations.withLock { $0.append("user \(user) results \(name): expected \(wanted), got \(seen)") } }
            }
        case .pageData(let user, let page, let interface, let wait):
            let name = ReliabilityIsolationTests.interfaces[interface]
            let reply = try await service.separateRequest(
                .get, "/v1/data?page=\(q("\(pages[page])?from=feed"))&name=\(name)&wait=\(wait)", headers: ["Cookie": cookies[user]])
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
            if reply.status == 200 { checkEcho(Echo(reply), expected: name == "shared" ? nil : cookies[user], "user \(user) page \(page) \(name)") }
        case .steal(let thief, let victim, let interface):
            guard let ticket = recorder.tickets.withLock({ $0[victim]?.last }) else { return }
            let reply = try await service.separateRequest(
                .get, "/v1/prefetch/\(ticket)/data?name=\(ReliabilityIsolationTests.interfaces[interface])&wait=0", headers: ["Cookie": cookies[thief]])
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
            if reply.status != 403 || reply.text.contains(cookies[victim]) {
                recorder.violations.withLock { $0.append("user \(thief) read user \(victim)'s ticket: \(reply.status) \(reply.text.prefix(200))") }
            }
        }
    }
}
