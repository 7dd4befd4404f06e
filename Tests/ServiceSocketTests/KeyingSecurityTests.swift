import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The attacks of issue 22 on entry keys, through real sockets: a stored answer is keyed by everything that made
/// it, so a dependent request built from one user's answer, one page's parameters or one page open's private
/// answer never reaches another reader. Every upstream answer here is the test upstream's mirror (`mirror=1`): a
/// JSON function of the request's target, credentials and body, so the bytes show whose request they answer.
@Suite struct KeyingSecurityTests {
    /// The mirror of `path` on the upstream, with `extra` script parameters.
    static func mirror(_ base: String, _ path: String, _ extra: String = "") -> String {
        "\(base)\(path)?mirror=1\(extra)"
    }

    /// SECURITY.md promise 25: Alice's `user` answer feeds `orders` (`credentials: omit`, as an api authenticated
    /// by a value in its URL is configured). Bob, with his own cookie and his own ticket, gets his own orders: the
    /// dependent's entry is keyed by the answer it was made from, and that answer by Alice's identity.
    @Test func aDependentMadeFromAlicesAnswerNeverReachesBob() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/keyed-user"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "user", api: "\(Self.mirror(base, "/keyed/user"))"),
                        TestInterface(
                            name: "orders", api: "\(Self.mirror(base, "/keyed/orders"))", credentials: .omit, query: ["uid": "${user:/uid}"]
                        ),
                    ])
            ])
            try await withService(config: config) { service in
                var answers: [String: String] = [:]
                for user in ["alice", "bob"] {
                    let cookie = ["Cookie": "sid=\(user)"]
                    let ticket = try await service.ticket(page, credentials: cookie)
                    let byTicket = try await service.get("/v1/prefetch/\(ticket)/data?name=orders&wait=5000", headers: cookie)
                    #expect(byTicket.status == 200, "\(user): \(byTicket.text)")
                    let query = byTicket.json["query"] as? String ?? ""
                    #expect(query.contains("uid-of%5Bsid%3D\(user)%5D"), "\(user) reads orders made from their own uid: \(query)")
                    // The same-site read by page= finds the very same entry for the same user.
                    let byPage = try await service.get("/v1/data?page=\(q(page))&name=orders&wait=5000", headers: cookie)
                    #expect(byPage.status == 200 && byPage.text == byTicket.text, "\(user): \(byPage.text)")
                    answers[user] = byTicket.text
                }
                #expect(answers["bob"]?.contains("alice") == false, "Bob got: \(answers["bob"] ?? "")")
                #expect(upstream.hits(path: "/keyed/orders") == 2, "one orders fetch per user, never shared")
                // Alice opening again shares her own entries: nothing new is fetched.
                let again = try await service.ticket(page, credentials: ["Cookie": "sid=alice"])
                let reread = try await service.get("/v1/prefetch/\(again)/data?name=orders&wait=5000", headers: ["Cookie": "sid=alice"])
                #expect(reread.text == answers["alice"])
                #expect(upstream.hits(path: "/keyed/orders") == 2)
            }
        }
    }

    /// SECURITY.md promise 25: a leader shaped by the page's query (`?name=mallory`) feeds a dependent that does not
    /// forward the query itself; a later visitor of `?name=alice` gets the dependent made from Alice's value, not
    /// Mallory's poisoned one.
    @Test func pageParametersThatShapeALeaderShapeItsDependentsKey() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/keyed-params"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "lead", api: "\(Self.mirror(base, "/keyed/lead"))", urlParam: true, credentials: .omit),
                        TestInterface(
                            name: "dep", api: "\(Self.mirror(base, "/keyed/dep"))", credentials: .omit, query: ["q": "${lead:/query}"]),
                    ])
            ])
            try await withService(config: config) { service in
                let mallory = try await service.ticket(page + "?name=mallory")
                let poisoned = try await service.get("/v1/prefetch/\(mallory)/data?name=dep&wait=5000")
                #expect(poisoned.status == 200 && poisoned.text.contains("mallory"), "\(poisoned.text)")
                let alice = try await service.ticket(page + "?name=alice")
                for read in [
                    "/v1/prefetch/\(alice)/data?name=dep&wait=5000", "/v1/data?page=\(q(page + "?name=alice"))&name=dep&wait=5000",
                ] {
                    let reply = try await service.get(read)
                    #expect(reply.status == 200, "\(read): \(reply.text)")
                    #expect(!reply.text.contains("mallory"), "Alice's page read Mallory's value: \(reply.text)")
                    #expect(reply.text.contains("alice"), "\(reply.text)")
                }
                #expect(upstream.hits(path: "/keyed/dep") == 2)
            }
        }
    }

    /// SECURITY.md promises 3 and 25: a guest leader sets a cookie (its answer is kept for its page open alone) and a
    /// dependent takes its token. The next visitor never gets a dependent answer carrying the first one's token, by
    /// any read; the first visitor still reads its own.
    @Test func aGuestsPrivateValueNeverReachesTheNextVisitor() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/keyed-guest"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "guest", api: "\(Self.mirror(base, "/keyed/guest", "&token=1"))", credentials: .omit),
                        TestInterface(
                            name: "cart", api: "\(Self.mirror(base, "/keyed/cart"))", method: .POST, body: ["t": "${guest:/token}"],
                            credentials: .omit),
                    ])
            ])
            try await withService(config: config) { service in
                // Two visits; the upstream mints each visit's token from the trace its request carries (a shared
                // flight's: the service's own, new each time).
                let first = try await service.trigger(page, requestHeaders: ["traceparent": Self.traceparent(1)])
                let firstTicket = try first.decoded(TriggerAnswer.self).ticket
                let own = try await service.get("/v1/prefetch/\(firstTicket)/data?name=cart&wait=5000")
                #expect(own.status == 200, "\(own.text)")
                let token = try #require(Self.mintedToken(in: own.json["body"] as? String ?? ""), "the visitor reads its own: \(own.text)")

                let second = try await service.trigger(page, requestHeaders: ["traceparent": Self.traceparent(2)])
                let secondTicket = try second.decoded(TriggerAnswer.self).ticket
                for read in ["/v1/prefetch/\(secondTicket)/data?name=cart&wait=5000", "/v1/data?page=\(q(page))&name=cart&wait=5000"] {
                    let reply = try await service.get(read)
                    #expect(!reply.text.contains(token), "\(read) carried the first visitor's token: \(reply.text)")
                    if reply.status == 200 {
                        #expect(Self.mintedToken(in: reply.text) != nil, "\(read): \(reply.text)")
                    } else {
                        #expect(reply.errorCode == "private", "\(read): \(reply.status) \(reply.text)")
                    }
                }
            }
        }
    }

    /// SECURITY.md promise 3: a config's own static `Authorization` is not the caller's credentials; a guest answer
    /// fetched with it (and what is made from it) is still kept for its page open alone.
    @Test func aConfiguredAuthorizationDoesNotMakeAGuestAnswerShared() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/keyed-static-auth"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(
                            name: "guest", api: "\(Self.mirror(base, "/keyed/static", "&token=1"))",
                            headers: ["Authorization": "Basic c3RhdGlj"], credentials: .omit),
                        TestInterface(
                            name: "dep", api: "\(Self.mirror(base, "/keyed/static-dep"))", credentials: .omit,
                            query: ["t": "${guest:/token}"]),
                    ])
            ])
            try await withService(config: config) { service in
                let first = try await service.trigger(page, requestHeaders: ["traceparent": Self.traceparent(3)])
                let firstTicket = try first.decoded(TriggerAnswer.self).ticket
                let own = try await service.get("/v1/prefetch/\(firstTicket)/data?name=dep&wait=5000")
                #expect(own.status == 200, "\(own.text)")
                let token = try #require(Self.mintedToken(in: own.text), "\(own.text)")
                let second = try await service.trigger(page, requestHeaders: ["traceparent": Self.traceparent(4)])
                let secondTicket = try second.decoded(TriggerAnswer.self).ticket
                for name in ["guest", "dep"] {
                    for read in [
                        "/v1/prefetch/\(secondTicket)/data?name=\(name)&wait=5000", "/v1/data?page=\(q(page))&name=\(name)&wait=5000",
                    ] {
                        let reply = try await service.get(read)
                        #expect(!reply.text.contains(token), "\(read) carried the first visitor's token: \(reply.text)")
                        #expect(reply.header("Set-Cookie")?.contains(token) != true, "\(read) replayed the first visitor's cookie")
                    }
                }
            }
        }
    }

    /// SECURITY.md promise 3: an empty `Cookie` (a shell forwarding a fresh, empty cookie jar) is no credential: the
    /// guest answer its trigger fetched stays that page open's, and an anonymous reader gets nothing of it.
    @Test func anEmptyCookieIsNoCredentialAndKeepsAGuestAnswerPrivate() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/keyed-empty-cookie"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "guest", api: "\(Self.mirror(base, "/keyed/empty", "&token=1"))", credentials: .include)
                    ])
            ])
            try await withService(config: config) { service in
                let victim = try await service.trigger(
                    page, credentials: ["Cookie": ""], requestHeaders: ["traceparent": Self.traceparent(5)])
                let ticket = try victim.decoded(TriggerAnswer.self).ticket
                let own = try await service.get("/v1/prefetch/\(ticket)/data?name=guest&wait=5000")
                #expect(own.status == 200, "\(own.text)")
                let token = try #require(Self.mintedToken(in: own.text), "\(own.text)")
                let attacker = try await service.get("/v1/data?page=\(q(page))&name=guest&wait=0")
                #expect(attacker.status == 404 && attacker.errorCode == "private", "\(attacker.status) \(attacker.text)")
                #expect(!attacker.text.contains(token) && attacker.header("Set-Cookie") == nil)
            }
        }
    }

    /// The guest token the mirror minted in `text` (`tok-` and a trace id), if any.
    static func mintedToken(in text: String) -> String? {
        guard let range = text.range(of: #"tok-[0-9a-f]{32}"#, options: .regularExpression) else { return nil }
        return String(text[range])
    }

    static func traceID(_ visit: Int) -> String { String(format: "%032x", 0xabc000 + visit) }
    static func traceparent(_ visit: Int) -> String { "00-\(traceID(visit))-00f067aa0ba902b7-01" }
}

/// The attack of issue 22 on the CORS grant: with pages of several origins in the config, a page origin acts on
/// its own pages' data only (and on pages whose entry names it in `partnerOrigins`), by every route a page uses.
@Suite struct PageOriginSecurityTests {
    static let victim = "https://a.example.test"
    static let attacker = "https://b.example.test"
    /// A partner site named by one page's `partnerOrigins` only (no page of its own in the config).
    static let partner = "https://partner.example.test"

    /// SECURITY.md promise 26: origin B (a page origin of the config) cannot read origin A's page data with the
    /// user's cookies, by `page=`, by a ticket (its own trigger's or the shell's), by a read key, by the results
    /// view, or same-origin from its own host; A reads its own; a partner named by one page reads that page.
    @Test func aPageOriginReadsOnlyItsOwnPagesData() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let victimPage = "\(Self.victim)/pages/account"
            let attackerPage = "\(Self.attacker)/pages/promo"
            let sharedPage = "\(Self.victim)/pages/co-branded"
            let me =
                TestInterface(name: "me", api: KeyingSecurityTests.mirror(base, "/origin/me"), credentials: .include)
            let config = TestConfig([
                TestPage(victimPage, [me]),
                TestPage(attackerPage, [TestInterface(name: "promo", api: "\(base)/origin/promo")]),
                TestPage(sharedPage, partnerOrigins: [Self.partner], [me]),
            ])
            // The pages are on other sites than the upstream: the victim's cookies reach it as third-party cookies.
            var settings = testSettings()
            settings.engine.thirdPartyCookies = true
            try await withService(config: config, settings: settings) { service in
                let cookie = ["Cookie": "sid=victim"]
                // The shell opens the victim's page natively (no Origin); the victim's page reads its own data.
                let opened = try await service.trigger(victimPage, jar: "sid=victim")
                let triggered = try opened.decoded(TriggerAnswer.self)
                let ticket = triggered.ticket
                let readKey = triggered.readKey
                let ownRead = try await service.get(
                    "/v1/data?page=\(q(victimPage))&name=me&wait=5000", headers: cookie.merging(["Origin": Self.victim]) { $1 })
                #expect(ownRead.status == 200, "\(ownRead.text)")
                #expect(ownRead.header("Access-Control-Allow-Origin") == Self.victim)
                #expect(ownRead.text.contains("sid=victim"))

                // Origin B, with the user's cookies (a browser sends them with credentials: 'include').
                let fromB = cookie.merging(["Origin": Self.attacker]) { $1 }
                let attacks: [(String, [String: String])] = [
                    ("/v1/data?page=\(q(victimPage))&name=me&wait=0", fromB),
                    ("/v1/prefetch/\(ticket)/data?name=me&wait=0", fromB),
                    ("/v1/prefetch/\(ticket)", fromB),
                    ("/v1/data?name=me&wait=0", ["Origin": Self.attacker, "X-Prefetch-Key": readKey]),
                ]
                for (path, headers) in attacks {
                    let reply = try await service.get(path, headers: headers)
                    #expect(reply.status == 403, "\(path): \(reply.status) \(reply.text)")
                    #expect(["origin-not-allowed", "origin-mismatch"].contains(reply.errorCode ?? ""), "\(path): \(reply.text)")
                    #expect(!reply.text.contains("sid=victim") && !reply.text.contains("uid-of"), "\(path) leaked: \(reply.text)")
                }
                // B's own trigger of A's page, to read it through a ticket of its own: refused before anything is fetched.
                let hits = upstream.hits(path: "/origin/me")
                let trigger = try await service.trigger(victimPage, credentials: cookie, requestHeaders: ["Origin": Self.attacker])
                #expect(trigger.status == 403 && trigger.errorCode == "origin-not-allowed", "\(trigger.text)")
                #expect((try? trigger.decoded(TriggerAnswer.self))?.ticket == nil)
                #expect(upstream.hits(path: "/origin/me") == hits, "the refused trigger fetched nothing")

                // A script on B's host reading A's data same-origin (a gateway mounting the service on every page
                // host): the browser sends no Origin, only Sec-Fetch-Site; the host it addresses is B's.
                let sameOriginRead =
                    "GET /v1/data?page=\(q(victimPage))&name=me&wait=0 HTTP/1.1\r\nHost: HOST\r\nCookie: sid=victim\r\n"
                    + "Sec-Fetch-Site: same-origin\r\nConnection: close\r\n\r\n"
                let fromBHost = try await rawExchange(
                    port: service.port, sameOriginRead.replacingOccurrences(of: "HOST", with: "b.example.test"))
                #expect(rawStatus(fromBHost) == 403 && !fromBHost.contains("sid=victim"), "\(fromBHost)")
                let fromAHost = try await rawExchange(
                    port: service.port, sameOriginRead.replacingOccurrences(of: "HOST", with: "a.example.test"))
                #expect(rawStatus(fromAHost) == 200 && fromAHost.contains("sid=victim"), "\(fromAHost)")

                // The co-branded page names a partner site: it triggers and reads that page, by page=, ticket and read
                // key; B, another page origin of the config, still cannot.
                let fromPartner = cookie.merging(["Origin": Self.partner]) { $1 }
                let partnerOpen = try await service.trigger(sharedPage, credentials: cookie, requestHeaders: ["Origin": Self.partner])
                #expect(partnerOpen.status == 202, "\(partnerOpen.text)")
                let partnerAnswer = try partnerOpen.decoded(TriggerAnswer.self)
                let partnerTicket = partnerAnswer.ticket
                let partnerKey = partnerAnswer.readKey
                for (path, headers) in [
                    ("/v1/data?page=\(q(sharedPage))&name=me&wait=5000", fromPartner),
                    ("/v1/prefetch/\(partnerTicket)/data?name=me&wait=5000", fromPartner),
                    ("/v1/data?name=me&wait=5000", ["Origin": Self.partner, "X-Prefetch-Key": partnerKey]),
                ] {
                    let reply = try await service.get(path, headers: headers)
                    #expect(reply.status == 200, "\(path): \(reply.text)")
                    #expect(reply.header("Access-Control-Allow-Origin") == Self.partner)
                    #expect(reply.header("Access-Control-Allow-Credentials") == "true")
                }
                let notPartner = try await service.get("/v1/data?page=\(q(sharedPage))&name=me&wait=0", headers: fromB)
                #expect(notPartner.status == 403, "\(notPartner.text)")
                // The partner is no reader of the victim's own page.
                let partnerOnVictim = try await service.get("/v1/data?page=\(q(victimPage))&name=me&wait=0", headers: fromPartner)
                #expect(partnerOnVictim.status == 403, "\(partnerOnVictim.text)")
            }
        }
    }
}
