import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchEngine
import PrefetchFetcher
import PrefetchRuntime
import PrefetchStore
import PrefetchTestSupport
import PrefetchTestUpstream
import PropertyBased
import ServiceTestSupport
import Synchronization
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The proof that an entry is keyed by everything that made it (SECURITY.md promise 25), as a differential test:
/// random pages of request chains (credentialed, anonymous, `private` and guest-token leaders; `omit`, `same-site` and
/// `include` dependents; values in the query, the body and a header), opened and read in random order by many
/// identities with different page parameters, on one service or on two replicas sharing a real redis-server.
/// Every byte a reader is served must be what a direct fetch with that reader's own credentials, page and page
/// open would have returned; a miss is always allowed (the page then fetches for itself), other bytes never.
///
/// The upstream is the test upstream's mirror (`mirror=1`), a pure function of the request's target, credentials,
/// `X-Val` header and body, that also reflects every request header but `traceparent` into its body (`reflect=1`),
/// as echo, debug and gateway error pages do; a guest-token leader (`token=1`, `credentials: omit`) sets a cookie
/// holding a token of the page open (from the trace id its request carried), the way a guest session is handed out.
///
/// Every trigger also carries what an attacker would add: its own `traceparent`, a `tracestate` (a tenant's for a
/// signed-in user, an attacker's payload for an anonymous one) and headers the upstream would answer from (`X-Val`,
/// `X-Extra`). A direct fetch by the reader carries none of another caller's: what a shared entry holds must not
/// either. A per-identity entry may continue its own user's trace (the same tenant `tracestate`).
@Suite(.serialized) struct DifferentialKeyingTests {
    static let users = [nil, "sid=alice", "sid=bob", "sid=carol"]
    static let params = ["", "?name=alice", "?name=mallory&x=1"]

    @Test func everyByteServedIsWhatTheReadersOwnFetchWouldHaveReturned() async throws {
        let served = Mutex(0)
        try await withUpstream { upstream in
            try await withFetcher { fetcher in
                await propertyCheck(count: 12, input: Gen.int(in: 0...Int(Int32.max))) { seed in
                    let scenario = Scenario(seed: UInt64(seed), base: upstream.base)
                    do {
                        let count = try await withService(config: scenario.config) { service in
                            try await scenario.run(replicas: [service], fetcher: fetcher)
                        }
                        served.withLock { $0 += count }
                    } catch {
                        Issue.record("seed \(seed): \(error)")
                    }
                }
            }
        }
        // Not vacuous: many reads were served, and each was compared.
        #expect(served.withLock { $0 } >= 12, "only \(served.withLock { $0 }) reads were served")
    }

    /// On one redis-server, on a 3-primary Redis Cluster (each page's keys spread over the primaries), and on a
    /// Sentinel-managed primary.
    @Test(arguments: ServeReplicaTests.SharedRedis.allCases)
    func everyByteServedAcrossTwoReplicasIsTheReadersOwn(on kind: ServeReplicaTests.SharedRedis) async throws {
        let served = Mutex(0)
        try await withUpstream { upstream in
            let redis = try await kind.start()
            let key = try IdentityKey(secret: Array(ServeReplicaTests.identityKey.utf8))
            do {
                try await withFetcher { fetcher in
                    await propertyCheck(count: 6, input: Gen.int(in: 0...Int(Int32.max))) { seed in
                        let scenario = Scenario(seed: UInt64(seed), base: upstream.base)
                        var shared = testSettings()
                        shared.store.url = redis.url
                        shared.engine.identityKey = key
                        let settings = shared
                        do {
                            let count = try await withService(config: scenario.config, settings: settings) { first in
                                try await withService(config: scenario.config, settings: settings) { second in
                                    try await scenario.run(replicas: [first, second], fetcher: fetcher)
                                }
                            }
                            served.withLock { $0 += count }
                        } catch {
                            Issue.record("seed \(seed): \(error)")
                        }
                    }
                }
            } catch {
                await redis.stop()
                throw error
            }
            await redis.stop()
        }
        #expect(served.withLock { $0 } >= 6, "only \(served.withLock { $0 }) reads were served")
    }
}

/// One random page of request chains, and the page opens and reads made on it.
struct Scenario: Sendable {
    /// One interface of the page.
    struct Spec: Sendable {
        var method: HTTPMethod
        var credentials: CredentialsMode
        /// A guest-token leader: `credentials: omit`, sets a cookie, kept for its page open alone.
        var token: Bool
        /// An anonymous `Cache-Control: private` leader (`credentials: omit`): kept for its page open alone too.
        var isPrivate: Bool
        var urlParam: Bool
        /// Values taken from earlier interfaces: (index, pointer, where: 0 query, 1 body, 2 header).
        var references: [(from: Int, pointer: String, place: Int)]
        var delay: Int
    }

    enum Operation: Sendable {
        /// A page open by `user` with `params`, on `replica`.
        case trigger(user: Int, params: Int, replica: Int)
        /// A read of `interface` through the ticket of page open `open` (with its user's credentials).
        case readTicket(open: Int, interface: Int, replica: Int)
        /// A same-site read by `page=` with `user`'s cookies.
        case readPage(user: Int, params: Int, interface: Int, replica: Int)
    }

    let seed: UInt64
    let page: String
    let specs: [Spec]
    let operations: [Operation]
    let base: String

    init(seed: UInt64, base: String) {
        var random = SeededRandom(seed: seed)
        self.seed = seed
        self.base = base
        // Half the pages are on the api's site (same-site sends credentials), half elsewhere (it omits them).
        page = random.next(2) == 0 ? "\(base)/pages/diff-\(seed)" : "https://m.example.test/diff-\(seed)"
        var specs: [Spec] = []
        for index in 0..<(2 + random.next(4)) {
            let token = index < 2 && random.next(3) == 0
            let isPrivate = !token && random.next(6) == 0
            var references: [(Int, String, Int)] = []
            if index > 0 {
                for from in 0..<index where random.next(2) == 0 {
                    let pointer = ["/uid", "/query", "/token", "/body", "/x"][random.next(5)]
                    references.append((from, pointer, random.next(3)))
                }
            }
            specs.append(
                Spec(
                    method: random.next(2) == 0 ? .GET : .POST,
                    credentials: token || isPrivate ? .omit : [CredentialsMode.omit, .sameSite, .include][random.next(3)],
                    token: token, isPrivate: isPrivate, urlParam: random.next(2) == 0, references: references, delay: random.next(4) * 20))
        }
        self.specs = specs
        var operations: [Operation] = []
        var opens = 0
        for _ in 0..<28 {
            let roll = random.next(20)
            if roll < 7 || opens == 0 {
                operations.append(
                    .trigger(user: random.next(DifferentialKeyingTests.users.count), params: random.next(3), replica: random.next(2)))
                opens += 1
            } else if roll < 15 {
                operations.append(.readTicket(open: random.next(opens), interface: random.next(specs.count), replica: random.next(2)))
            } else {
                operations.append(
                    .readPage(
                        user: random.next(DifferentialKeyingTests.users.count), params: random.next(3), interface: random.next(specs.count),
                        replica: random.next(2)))
            }
        }
        self.operations = operations
    }

    var config: TestConfig {
        let interfaces = specs.enumerated().map { index, spec in
            let query = spec.references.filter { $0.place == 0 }.map { ("q\($0.from)", TestJSON.string("${n\($0.from):\($0.pointer)}")) }
            let body = spec.references.filter { $0.place == 1 }.map { ("b\($0.from)", TestJSON.string("${n\($0.from):\($0.pointer)}")) }
            let header = spec.references.filter { $0.place == 2 }.map { "${n\($0.from):\($0.pointer)}" }
            return TestInterface(
                name: "n\(index)",
                api:
                    "\(base)/diff/\(seed)/n\(index)?mirror=1&reflect=1\(spec.token ? "&token=1" : "")\(spec.isPrivate ? "&cacheControl=private" : "")&delay=\(spec.delay)",
                method: spec.method, urlParam: spec.urlParam, body: body.isEmpty ? nil : .object(Dictionary(uniqueKeysWithValues: body)),
                headers: header.isEmpty ? nil : ["X-Val": header.joined(separator: "|")], credentials: spec.credentials,
                query: query.isEmpty ? nil : .object(Dictionary(uniqueKeysWithValues: query)))
        }
        return TestConfig(version: "d\(seed)", [TestPage(page, interfaces)])
    }

    /// The page opens so far: user, params, trace id and ticket.
    final class Opens: Sendable {
        let all = Mutex<[(user: Int, params: Int, trace: String, ticket: String?)]>([])
    }

    /// Runs the operations; returns how many reads were served (and so compared byte for byte).
    func run(replicas: [LiveService], fetcher: Fetcher) async throws -> Int {
        let oracle = Oracle(config: try config.loaded(), fetcher: fetcher)
        var opens: [(user: Int, params: Int, trace: String, ticket: String?)] = []
        var served = 0
        for (step, operation) in operations.enumerated() {
            switch operation {
            case .trigger(let user, let params, let replica):
                let trace = String(format: "%016llx%016llx", seed, UInt64(step + 1))
                let reply = try await replicas[replica % replicas.count].trigger(
                    page + DifferentialKeyingTests.params[params], credentials: Self.credentials(user),
                    requestHeaders: [
                        "traceparent": "00-\(trace)-00f067aa0ba902b7-01", "tracestate": Self.traceState(user, step: step),
                        "X-Val": "from-the-trigger-\(step)", "X-Extra": "attacker-\(step)",
                    ])
                #expect(reply.status == 202, "seed \(seed) step \(step): trigger answered \(reply.status) \(reply.text)")
                opens.append((user, params, trace, (try? reply.decoded(TriggerAnswer.self))?.ticket))
            case .readTicket(let open, let interface, let replica):
                guard let ticket = opens[open].ticket else { continue }
                let reply = try await replicas[replica % replicas.count].get(
                    "/v1/prefetch/\(ticket)/data?name=n\(interface)&wait=3000", headers: Self.credentials(opens[open].user) ?? [:])
                if reply.status == 200 {
                    served += 1
                    let reader = replicas[replica % replicas.count]
                    let credentials = Self.credentials(opens[open].user) ?? [:]
                    let expected = try await oracle.answer(
                        interface, user: opens[open].user, params: opens[open].params, trace: opens[open].trace, page: page
                    ) { leader in
                        let served = try await reader.get("/v1/prefetch/\(ticket)/data?name=n\(leader)&wait=3000", headers: credentials)
                        return served.status == 200 ? served.text : nil
                    }
                    #expect(
                        expected == reply.text,
                        "seed \(seed) step \(step): n\(interface) read through the ticket of open \(open) (user \(opens[open].user), params \(opens[open].params)) served \(reply.text), its own fetch answers \(expected ?? "nothing it may read")\n\(config.text)"
                    )
                }
            case .readPage(let user, let params, let interface, let replica):
                let target = q(page + DifferentialKeyingTests.params[params])
                let reply = try await replicas[replica % replicas.count].get(
                    "/v1/data?page=\(target)&name=n\(interface)&wait=3000", headers: Self.credentials(user) ?? [:])
                if reply.status == 200 {
                    served += 1
                    // Without a ticket the reader holds no page open: anything made from a guest token is not its own.
                    let expected = try await oracle.answer(interface, user: user, params: params, trace: nil, page: page) { _ in nil }
                    #expect(
                        expected == reply.text,
                        "seed \(seed) step \(step): n\(interface) read by page= (user \(user), params \(params)) served \(reply.text), its own fetch answers \(expected ?? "nothing it may read")\n\(config.text)"
                    )
                }
            }
        }
        return served
    }

    static func credentials(_ user: Int) -> [String: String]? {
        DifferentialKeyingTests.users[user].map { ["Cookie": $0] }
    }

    /// The `tracestate` a user's triggers carry: a tenant's for a signed-in user (the same on each of its page
    /// opens), an attacker's payload, new on each page open, for an anonymous one.
    static func traceState(_ user: Int, step: Int) -> String {
        DifferentialKeyingTests.users[user] == nil ? "mallory=payload-\(step)" : "vendor=tenant-\(user)"
    }
}

/// What a direct fetch with a reader's own credentials, page and page open returns, through the real upstream: each
/// request composed from the config as the page would compose it, the values it needs taken from the reader's own
/// answers of the requests it depends on.
final class Oracle: Sendable {
    let config: PrefetchConfig
    let fetcher: Fetcher
    private let known = Mutex<[String: String?]>([:])

    init(config: PrefetchConfig, fetcher: Fetcher) {
        self.config = config
        self.fetcher = fetcher
    }

    /// The body of interface `index`'s answer for the reader; nil when nothing may be served to it (a value from a
    /// guest token of a page open the reader does not hold).
    ///
    /// A guest token is the service's to mint per page open (its request is a shared flight's: the trace it carries
    /// is the service's own, never the trigger's), so its value cannot be predicted: `served` reads the page open's
    /// own guest-token answer, which must equal a direct fetch in everything but the token, and whose token no
    /// other page open was served.
    func answer(
        _ index: Int, user: Int, params: Int, trace: String?, page: String, served: @Sendable (Int) async throws -> String?
    ) async throws -> String? {
        let memo = "\(index) \(user) \(params) \(trace ?? "-")"
        if let done = known.withLock({ $0[memo] }) { return done }
        let plan = try Plan.make(page: page + DifferentialKeyingTests.params[params], config: config)
        var planned = plan.requests[index]
        // An answer kept for one page open alone (a guest token, `private`) is no reader's without that page open.
        let isToken = planned.interface.api.contains("token=1")
        let ownOnly = isToken || planned.interface.api.contains("cacheControl=private")
        if ownOnly && trace == nil { return remember(memo, nil) }
        if !planned.dependencies.isEmpty {
            var values: [Reference: JSONValue] = [:]
            for dependency in planned.dependencies {
                guard let body = try await answer(dependency, user: user, params: params, trace: trace, page: page, served: served) else {
                    return remember(memo, nil)
                }
                let document = try JSONParser.parse(body)
                for reference in planned.interface.references where reference.interface == plan.requests[dependency].name {
                    if let value = reference.pointer.resolve(in: document) { values[reference] = value }
                }
            }
            planned = try planned.resolved(with: values)
        }
        // The reader's own request, as its page would make it through the service's rules: the config's headers, the
        // fetch purpose, its cookie where the interface's rule sends it, and its own trace state only where the
        // answer is its identity's alone.
        var headers = planned.headers
        if planned.interface.secPurpose { headers[HTTPField.Name("Sec-Purpose")!] = "prefetch" }
        if let cookie = DifferentialKeyingTests.users[user], sendsCredentials(planned, user: user, plan: plan) {
            headers.append(HTTPField(name: .cookie, value: cookie))
        }
        if keyedByIdentity(index, user: user, plan: plan) {
            // The user's own trace state (a tenant's, the same on each of its page opens); the traceparent is not
            // reflected (its span id is new on every attempt).
            headers[HTTPField.Name("tracestate")!] = Scenario.traceState(user, step: 0)
        }
        let response = try await fetcher.fetch(
            FetchRequest(method: planned.method.rawValue, url: planned.url, headers: headers, body: planned.body.map { Array($0.utf8) }))
        let direct = String(decoding: response.body, as: UTF8.self)
        guard isToken, let trace else { return remember(memo, direct) }
        // The page open's own guest token: what it was served, held to the direct fetch but for the token.
        guard let own = try await served(index) else { return remember(memo, nil) }
        let token = Self.token(in: own)
        #expect(token != nil && token != "tok-none", "open \(trace): n\(index) was served no token of its own: \(own)")
        #expect(
            Self.withoutToken(own) == Self.withoutToken(direct),
            "open \(trace): n\(index) served \(own), a direct fetch answers \(direct) (the token aside)")
        if let token {
            let other = tokens.withLock { tokens in
                defer { tokens[token, default: trace] = tokens[token] ?? trace }
                return tokens[token].flatMap { $0 == trace ? nil : $0 }
            }
            #expect(other == nil, "the guest token \(token) of open \(trace) was also open \(other ?? "")'s")
        }
        return remember(memo, own)
    }

    /// Guest tokens served, by page open (trace id).
    private let tokens = Mutex<[String: String]>([:])

    /// Whether `planned`'s answer is keyed by `user`'s identity on its own account: the user has a cookie and the
    /// interface's rule lets credentials go (whether or not the cookie is for the api's host).
    private func takesCredentials(_ planned: PlannedRequest, user: Int, plan: Plan) -> Bool {
        DifferentialKeyingTests.users[user] != nil
            && SiteRule.allowsCredentials(planned.interface.credentials, page: plan.pageURL, api: planned.interface.apiURL)
    }

    /// Whether `planned` is sent with `user`'s cookie: it takes credentials, and the cookie (a single `Cookie`
    /// header: the page's own host's cookies) goes only to the page's own host, never from an https page to plain
    /// http.
    private func sendsCredentials(_ planned: PlannedRequest, user: Int, plan: Plan) -> Bool {
        let page = plan.pageURL
        let api = planned.interface.apiURL
        return takesCredentials(planned, user: user, plan: plan) && page.host == api.host
            && !(page.scheme == "https" && api.scheme != "https")
    }

    /// Whether request `index`'s answer is `user`'s identity's alone: it sends the cookie, or takes a value from an
    /// answer that is.
    private func keyedByIdentity(_ index: Int, user: Int, plan: Plan) -> Bool {
        let planned = plan.requests[index]
        return takesCredentials(planned, user: user, plan: plan)
            || planned.dependencies.contains { keyedByIdentity($0, user: user, plan: plan) }
    }

    /// The mirror's `token` member.
    static func token(in body: String) -> String? {
        guard let range = body.range(of: #""token":"tok-[^"]*""#, options: .regularExpression) else { return nil }
        return String(body[range].dropFirst(#""token":""#.count).dropLast())
    }

    /// `body` with the mirror's token (in `token`, and wherever the reflected headers or a dependent's values carry
    /// it) made `tok-none`.
    static func withoutToken(_ body: String) -> String {
        body.replacingOccurrences(of: #"tok-[0-9a-f]{32}"#, with: "tok-none", options: .regularExpression)
    }

    private func remember(_ memo: String, _ value: String?) -> String? {
        known.withLock { $0[memo] = value }
        return value
    }
}
