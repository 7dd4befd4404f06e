import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Synchronization
import Testing

@testable import PageAPI
@testable import PrefetchService

/// Many users (and anonymous visitors) opening the same pages at once, in a random interleaving replayable from
/// its seed, reading by ticket, by page URL and by read key, and trying each other's tickets and keys: no response
/// ever reaches a party other than the one it was fetched for, and no guest cookie set for one visitor reaches
/// another.
@Suite("reliability: identity isolation", .timeLimit(.minutes(2)))
struct ReliabilityIsolationTests {
    static let users = 20
    /// Users from this index on are anonymous visitors (no cookie at all).
    static let firstAnonymous = 15
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
        /// `user` reads with the read key of its latest ticket, from the page's origin.
        case keyData(user: Int, interface: Int, wait: Int)
        /// `thief` presents `victim`'s read key from another allowed origin, or with no credentials on the ticket.
        case keySteal(thief: Int, victim: Int, interface: Int)
    }

    static let interfaces = ["me", "slow", "shared", "guest"]

    @Test func randomInterleavingsOfManyUsersNeverCrossIdentities() async throws {
        let seed = testSeed()
        print("identity isolation seed: \(seed) (replay with PREFETCH_TEST_SEED=\(seed))")
        var generator = SeededRandom(seed: seed)
        let cookies = (0..<Self.users).map { user in "sid=u\(user)-\(UInt32.random(in: 0...UInt32.max, using: &generator))" }
        let plan: [Operation] = (0..<Self.operations).map { _ in
            let user = Int.random(in: 0..<Self.users, using: &generator)
            let page = Int.random(in: 0..<3, using: &generator)
            let interface = Int.random(in: 0..<Self.interfaces.count, using: &generator)
            let wait = [0, 50, 2000].randomElement(using: &generator)!
            let other = (user + Int.random(in: 1..<Self.users, using: &generator)) % Self.users
            switch Int.random(in: 0..<13, using: &generator) {
            case 0...2: return .trigger(user: user, page: page)
            case 3...5: return .ticketData(user: user, interface: interface, withCookie: Bool.random(using: &generator), wait: wait)
            case 6: return .results(user: user)
            case 7...8: return .pageData(user: user, page: page, interface: interface, wait: wait)
            case 9: return .steal(thief: user, victim: other, interface: interface)
            case 10...11: return .keyData(user: user, interface: interface, wait: wait)
            default: return .keySteal(thief: user, victim: other, interface: interface)
            }
        }

        try await withUpstream { upstream in
            let base = upstream.base
            let pages = (0..<3).map { "\(base)/pages/iso\($0)" }
            let config = TestConfig(
                pages.enumerated().map { index, page in
                    TestPage(
                        page,
                        [
                            TestInterface(name: "me", api: "\(base)/iso/\(index)/me", urlParam: true),
                            TestInterface(
                                name: "slow", api: "\(base)/iso/\(index)/slow?delay=30", method: .POST, body: ["p": .int(index)], ttl: 2),
                            TestInterface(name: "shared", api: "\(base)/iso/\(index)/shared", credentials: .omit),
                            TestInterface(name: "guest", api: "\(base)/iso/\(index)/guest?setCookie=guest%3Dp\(index)", credentials: .omit),
                        ])
                })
            var settings = testSettings()
            settings.engine.corsOrigins = [Workload.otherOrigin]
            try await withService(config: config, settings: settings) { service in
                let recorder = Recorder()

                let workload = Workload(service: service, cookies: cookies, pages: pages, pageOrigin: base, recorder: recorder)
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
                #expect(recorder.keyReads.withLock { $0 } > 0, "seed \(seed): the workload read with read keys")
                #expect(statuses.keys.allSatisfy { $0 < 500 }, "seed \(seed): \(statuses)")
                #expect(try await service.get("/healthz").status == 200)
            }
        }
    }
}

/// What the concurrent operations of the isolation test share: each user's tickets, the violations seen and
/// a count of answers per status.
final class Recorder: Sendable {
    let tickets = Mutex([Int: [String]]())
    let readKeys = Mutex([Int: String]())
    /// Which user first received each guest-cookie fetch (page path and upstream hit number).
    let guestFetches = Mutex([String: Int]())
    let keyReads = Mutex(0)
    let violations = Mutex([String]())
    let answered = Mutex([Int: Int]())
}

/// The operations of the isolation test, run concurrently against one service.
struct Workload: Sendable {
    let service: LiveService
    let cookies: [String]
    let pages: [String]
    /// The origin of the config's pages.
    let pageOrigin: String
    let recorder: Recorder

    /// An origin the service allows (`--cors-origin`) that is not the pages' own.
    static let otherOrigin = "https://shell.example.test"

    func isAnonymous(_ user: Int) -> Bool { user >= ReliabilityIsolationTests.firstAnonymous }

    /// The user's credential headers (none for an anonymous visitor).
    func credentials(_ user: Int) -> [String: String] {
        isAnonymous(user) ? [:] : ["Cookie": cookies[user]]
    }

    /// The cookie a reply for `user` must carry upstream-side for interface `name`.
    func expectedCookie(_ user: Int, _ name: String) -> String? {
        name == "shared" || name == "guest" || isAnonymous(user) ? nil : cookies[user]
    }

    /// Checks a replay for `user`: the upstream echo carries exactly the user's cookie, and a guest cookie set by
    /// one fetch reaches one user only.
    func checkReplay(_ reply: Reply, user: Int, name: String, _ what: String) {
        guard reply.status == 200 else {
            if !reply.headers[values: .setCookie].isEmpty {
                recorder.violations.withLock { $0.append("\(what): a refusal carried Set-Cookie") }
            }
            return
        }
        let echo = Echo(reply)
        checkEcho(echo, expected: expectedCookie(user, name), what)
        if name == "guest" {
            let fetch = "\(echo.path)#\(echo.hit)"
            let owner = recorder.guestFetches.withLock { owners in
                if let owner = owners[fetch] { return owner }
                owners[fetch] = user
                return user
            }
            if owner != user {
                recorder.violations.withLock { $0.append("\(what): guest cookie of fetch \(fetch) went to user \(owner) and \(user)") }
            }
        }
    }

    /// Checks a replayed upstream echo: it must carry exactly `cookie` (nil: no cookie at all).
    func checkEcho(_ echo: Echo, expected cookie: String?, _ what: String) {
        let seen = echo.values("Cookie")
        let wanted = cookie.map { [$0] } ?? []
        if seen != wanted { recorder.violations.withLock { $0.append("\(what): expected \(wanted), got \(seen)") } }
    }

    func run(_ operation: ReliabilityIsolationTests.Operation) async throws {
        switch operation {
        case .trigger(let user, let page):
            let headers = isAnonymous(user) ? "" : #", "headers": {"Cookie": "\#(cookies[user])"}"#
            let reply = try await service.separateRequest(.post, "/v1/prefetch", body: #"{"url": "\#(pages[page])?from=feed"\#(headers)}"#)
            // A refusal (by design for some of these triggers) has no ticket to record.
            if let answer = try? reply.decoded(TriggerAnswer.self) {
                recorder.tickets.withLock { $0[user, default: []].append(answer.ticket) }
                recorder.readKeys.withLock { $0[user] = answer.readKey }
            }
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
        case .ticketData(let user, let interface, let withCookie, let wait):
            guard let ticket = recorder.tickets.withLock({ $0[user]?.last }) else { return }
            let name = ReliabilityIsolationTests.interfaces[interface]
            let reply = try await service.separateRequest(
                .get, "/v1/prefetch/\(ticket)/data?name=\(name)&wait=\(wait)", headers: withCookie ? credentials(user) : [:])
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
            if !withCookie && !isAnonymous(user) && reply.status != 401 {
                recorder.violations.withLock { $0.append("user \(user) read its credentialed ticket without credentials: \(reply.status)") }
            }
            checkReplay(reply, user: user, name: name, "user \(user) ticket \(name)")
        case .keyData(let user, let interface, let wait):
            guard let key = recorder.readKeys.withLock({ $0[user] }) else { return }
            let name = ReliabilityIsolationTests.interfaces[interface]
            let reply = try await service.separateRequest(
                .get, "/v1/data?name=\(name)&wait=\(wait)", headers: ["X-Prefetch-Key": key, "Origin": pageOrigin])
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
            recorder.keyReads.withLock { $0 += 1 }
            checkReplay(reply, user: user, name: name, "user \(user) read key \(name)")
        case .keySteal(let thief, let victim, let interface):
            guard let key = recorder.readKeys.withLock({ $0[victim] }), let ticket = recorder.tickets.withLock({ $0[victim]?.last }) else {
                return
            }
            let name = ReliabilityIsolationTests.interfaces[interface]
            let elsewhere = try await service.separateRequest(
                .get, "/v1/data?name=\(name)&wait=0",
                headers: ["X-Prefetch-Key": key, "Origin": Self.otherOrigin].merging(credentials(thief)) { a, _ in a })
            recorder.answered.withLock { $0[elsewhere.status, default: 0] += 1 }
            if elsewhere.status != 403 || (!isAnonymous(victim) && elsewhere.text.contains(cookies[victim])) {
                recorder.violations.withLock {
                    $0.append("user \(thief) used user \(victim)'s read key from another origin: \(elsewhere.status)")
                }
            }
            // The ticket itself, with no credentials: refused whenever the victim had credentials.
            let bare = try await service.separateRequest(.get, "/v1/prefetch/\(ticket)/data?name=\(name)&wait=0")
            recorder.answered.withLock { $0[bare.status, default: 0] += 1 }
            if !isAnonymous(victim) && (bare.status != 401 || bare.text.contains(cookies[victim])) {
                recorder.violations.withLock { $0.append("an anonymous reader got user \(victim)'s ticket: \(bare.status)") }
            }
            // An anonymous visitor's ticket is the capability to its page open: reading it acts as that visitor.
            if bare.status == 200 { checkReplay(bare, user: victim, name: name, "anonymous reader of \(victim)'s ticket") }
        case .results(let user):
            guard let ticket = recorder.tickets.withLock({ $0[user]?.first }) else { return }
            let reply = try await service.separateRequest(.get, "/v1/prefetch/\(ticket)?wait=100", headers: credentials(user))
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
            if reply.text.lowercased().contains("set-cookie") || reply.text.contains("guest=p") {
                recorder.violations.withLock { $0.append("user \(user) results carried a cookie") }
            }
            // An answer that is not the results view has no results to check.
            for item in (try? reply.decoded(ResultsAnswer.Body.self))?.results ?? [] where item.state == .ready {
                let name = item.name
                let seen = (try? Echo(item.body))?.values("Cookie") ?? []
                let wanted = expectedCookie(user, name).map { [$0] } ?? []
                if seen != wanted {
                    recorder.violations.withLock { $0.append("user \(user) results \(name): expected \(wanted), got \(seen)") }
                }
            }
        case .pageData(let user, let page, let interface, let wait):
            let name = ReliabilityIsolationTests.interfaces[interface]
            let reply = try await service.separateRequest(
                .get, "/v1/data?page=\(q("\(pages[page])?from=feed"))&name=\(name)&wait=\(wait)", headers: credentials(user))
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
            if name == "guest" && reply.status == 200 {
                recorder.violations.withLock { $0.append("user \(user) read a guest-cookie response by page URL") }
            }
            checkReplay(reply, user: user, name: name, "user \(user) page \(page) \(name)")
        case .steal(let thief, let victim, let interface):
            guard let ticket = recorder.tickets.withLock({ $0[victim]?.last }) else { return }
            let reply = try await service.separateRequest(
                .get, "/v1/prefetch/\(ticket)/data?name=\(ReliabilityIsolationTests.interfaces[interface])&wait=0",
                headers: credentials(thief))
            recorder.answered.withLock { $0[reply.status, default: 0] += 1 }
            // A victim without credentials holds only anonymous data: its ticket is no secret worth stealing.
            if isAnonymous(victim) { return }
            let expected = isAnonymous(thief) ? 401 : 403
            if reply.status != expected || reply.text.contains(cookies[victim]) {
                recorder.violations.withLock {
                    $0.append("user \(thief) read user \(victim)'s ticket: \(reply.status) \(reply.text.prefix(200))")
                }
            }
        }
    }
}
