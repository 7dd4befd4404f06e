import ConfigUpdater
import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchStore
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// Who gets a canary candidate: a stable, salted share of identified callers, never anonymous ones.
@Suite struct CanaryAssignmentTests {
    static let key = try! IdentityKey(secret: Array(repeating: UInt8(7), count: 32))

    static func identity(_ n: Int) -> Identity {
        Identity(headers: [.cookie: "session=user-\(n)"], credentialHeaderNames: ["cookie"], key: key)
    }

    static func config(version: String) throws -> PrefetchConfig {
        try TestConfig(name: "n", version: version, []).loaded()
    }

    static func canary(version: String = "5", basisPoints: Int) throws -> CanaryConfig {
        CanaryConfig(config: try config(version: version), basisPoints: basisPoints)
    }

    static let active = try! config(version: "4")

    /// The config `identity` is served beside the active version 4 while `canary` stands, as the engine asks for it.
    static func role(identity: Identity, canary: CanaryConfig?) -> ConfigRole {
        let served = ServedConfigs(active: active, canary: canary)
        return served.config(forIdentityDigest: identity == .anonymous ? nil : identity.digest).role
    }

    @Test func aTenPercentCanaryServesAboutTenPercentOfIdentities() throws {
        let canary = try Self.canary(basisPoints: 1000)
        let count = 20_000
        let candidates = (0..<count).filter { Self.role(identity: Self.identity($0), canary: canary) == .candidate }.count
        // Binomial(20,000, 0.1): mean 2,000, standard deviation 42.4; 99.9 % of draws fall within 3.29 of them.
        let bound = 3.29 * (Double(count) * 0.1 * 0.9).squareRoot()
        #expect(abs(Double(candidates) - 2000) <= bound, "\(candidates) of \(count) got the candidate")
    }

    @Test func theSameIdentityAlwaysGetsTheSameVersion() throws {
        let canary = try Self.canary(basisPoints: 5000)
        for n in 0..<200 {
            let first = Self.role(identity: Self.identity(n), canary: canary)
            for _ in 0..<3 {
                #expect(Self.role(identity: Self.identity(n), canary: canary) == first)
            }
        }
    }

    @Test func eachCandidateVersionDrawsItsOwnShare() throws {
        let five = try Self.canary(version: "5", basisPoints: 5000)
        let six = try Self.canary(version: "6", basisPoints: 5000)
        let count = 2000
        let inFive = Set((0..<count).filter { Self.role(identity: Self.identity($0), canary: five) == .candidate })
        let inSix = Set((0..<count).filter { Self.role(identity: Self.identity($0), canary: six) == .candidate })
        // Independent halves overlap on about a quarter of the identities (500, standard deviation 19.4): a rollout
        // does not land on the same users as the last one.
        let both = inFive.intersection(inSix).count
        #expect(abs(Double(both) - 500) <= 3.29 * (Double(count) * 0.25 * 0.75).squareRoot(), "\(both) in both rollouts")
    }

    @Test func raisingTheShareKeepsEveryoneAlreadyInIt() throws {
        let ten = try Self.canary(basisPoints: 1000)
        let fifty = try Self.canary(basisPoints: 5000)
        for n in 0..<2000 where Self.role(identity: Self.identity(n), canary: ten) == .candidate {
            #expect(Self.role(identity: Self.identity(n), canary: fifty) == .candidate)
        }
    }

    @Test func aCallerIsPlannedWithItsRolesConfigAndAnOperatorsDecisionServesOneConfig() throws {
        let served = ServedConfigs(active: Self.active, canary: try Self.canary(basisPoints: 10_000))
        #expect(served.config(forIdentityDigest: Self.identity(1).digest).config.version == "5")
        #expect(served.config(forIdentityDigest: nil).config.version == "4")
        #expect(served.promoted?.active.version == "5" && served.promoted?.canary == nil)
        #expect(served.rolledBack?.active.version == "4" && served.rolledBack?.canary == nil)
        #expect(ServedConfigs(active: Self.active).promoted == nil && ServedConfigs(active: Self.active).rolledBack == nil)
    }

    @Test func anonymousCallersAndTheBoundsOfTheShare() throws {
        #expect(Self.role(identity: .anonymous, canary: try Self.canary(basisPoints: 10_000)) == .active)
        #expect(Self.role(identity: Self.identity(1), canary: nil) == .active)
        for n in 0..<500 {
            #expect(Self.role(identity: Self.identity(n), canary: try Self.canary(basisPoints: 0)) == .active)
            #expect(Self.role(identity: Self.identity(n), canary: try Self.canary(basisPoints: 10_000)) == .candidate)
        }
    }
}

/// A service following a config file that carries a canary: the share reaches the candidate's upstream, stays
/// put per user, shows in the metrics, and operators end it on their own surface.
@Suite struct CanaryServiceTests {
    /// The active config fetches `/v1/feed` (or `activePath`), the candidate `/v2/feed`.
    static func document(
        base: String, active: String = "4", activePath: String = "/v1/feed", candidate: String? = "5", percent: Double = 10
    ) -> TestConfig {
        let page = "\(base)/pages/canary"
        let canary = candidate.map {
            TestCanary(percent: percent, version: $0, [TestPage(page, [TestInterface(name: "feed", api: "\(base)/v2/feed")])])
        }
        return TestConfig(version: active, canary: canary, [TestPage(page, [TestInterface(name: "feed", api: "\(base)\(activePath)")])])
    }

    /// `GET /v1/config` of the operator surface, nil when it does not answer a status.
    static func configStatus(_ service: LiveService) async -> ConfigStatus? {
        try? await service.admin(.get, "/v1/config").decoded(ConfigStatus.self)
    }

    static func metric(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    @Test func aTenPercentCanaryReachesItsShareStaysPutAndIsPromotedOrRolledBackByOperators() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/canary"
            let file = try TempConfig(Self.document(base: base))
            defer { file.remove() }
            let clock = ManualClock()
            var settings = testSettings()
            settings.engine.identityKey = CanaryAssignmentTests.key
            settings.configSource = ConfigSourceSettings(
                source: file.path, stateDirectory: file.directory.appendingPathComponent("state").path)
            try await withService(config: Self.document(base: base), settings: settings, clock: clock) { service in
                let loaded = await eventually { await Self.configStatus(service)?.canary?.version == "5" }
                #expect(loaded)
                let status = try await service.admin(.get, "/v1/config").decoded(ConfigStatus.self)
                #expect(status.version == "4")
                #expect(status.canary?.percent == 10)

                // 300 users open the page; about 10 % of them are planned with the candidate and fetch its api.
                let users = 300
                var versions: [Int: String] = [:]
                var candidateTicket: (user: Int, ticket: String)?
                for user in 0..<users {
                    let reply = try await service.trigger(page, credentials: ["Cookie": "session=user-\(user)"])
                    #expect(reply.status == 202, "\(reply.text)")
                    let answer = try? reply.decoded(TriggerAnswer.self)
                    versions[user] = answer?.version
                    if versions[user] == "5", candidateTicket == nil, let ticket = answer?.ticket {
                        candidateTicket = (user, ticket)
                    }
                }
                let candidates = versions.values.filter { $0 == "5" }.count
                #expect(versions.values.allSatisfy { $0 == "4" || $0 == "5" })
                // Binomial(300, 0.1): 30 ± 3.29 × 5.2.
                let bound: Double = 3.29 * (300 * 0.1 * 0.9 as Double).squareRoot()
                let deviation: Double = abs(Double(candidates) - 30)
                #expect(deviation <= bound, "\(candidates) of \(users)")
                let fetched = await eventually { upstream.hits(path: "/v1/feed") + upstream.hits(path: "/v2/feed") == users }
                #expect(fetched)
                #expect(upstream.hits(path: "/v2/feed") == candidates, "each candidate user fetched the candidate's api once")

                // The same cookie gets the same version again.
                for user in [0, 1, 2, candidateTicket?.user ?? 3] {
                    let again = try await service.trigger(page, credentials: ["Cookie": "session=user-\(user)"])
                    #expect(try again.decoded(TriggerAnswer.self).version == versions[user])
                }

                // A candidate user reads the candidate's response, by ticket and by page.
                let (user, ticket) = try #require(candidateTicket)
                let cookie = ["Cookie": "session=user-\(user)"]
                let byTicket = try await service.get("/v1/prefetch/\(ticket)/data?name=feed&wait=5000", headers: cookie)
                #expect(byTicket.status == 200)
                #expect(Echo(byTicket).path == "/v2/feed")
                let byPage = try await service.get("/v1/data?page=\(q(page))&name=feed&wait=5000", headers: cookie)
                #expect(Echo(byPage).path == "/v2/feed", "a page= read is planned under its reader's version: \(byPage.text)")

                var metrics = try await service.admin(.get, "/metrics").text
                #expect(Self.metric(metrics, #"prefetch_config_data_total{config="candidate",result="hit"}"#) == 2, "\(metrics)")
                #expect(Self.metric(metrics, #"prefetch_config_triggers_total{config="candidate"}"#) ?? 0 >= Double(candidates))
                #expect(Self.metric(metrics, "prefetch_config_canary_percent") == 10)
                #expect(Self.metric(metrics, #"prefetch_config_version{config="active"}"#) == 4)
                #expect(Self.metric(metrics, #"prefetch_config_version{config="candidate"}"#) == 5)

                // Tickets that expire unread count as waste of their version.
                clock.advance(by: .seconds(60))
                _ = try await service.trigger(page)
                metrics = try await service.admin(.get, "/metrics").text
                let unreadCandidate = Self.metric(metrics, #"prefetch_config_unread_total{config="candidate"}"#) ?? 0
                let unreadActive = Self.metric(metrics, #"prefetch_config_unread_total{config="active"}"#) ?? 0
                // Every candidate ticket but the one read by ticket (a page= read reads no ticket), and the re-triggers.
                #expect(unreadCandidate >= Double(candidates - 1) && unreadCandidate <= Double(candidates + 3), "\(metrics)")
                #expect(unreadActive >= Double(users - candidates))

                // Not on the page listener.
                let onPage = try await service.separateRequest(.post, "/v1/config/canary/promote", body: "{}")
                #expect(onPage.status == 404)

                // Promote: the candidate is active for everyone identified or not, and the decision stands while the
                // source still carries the document it overruled.
                let promoted = try await service.admin(.post, "/v1/config/canary/promote", body: "{}")
                #expect(promoted.status == 200, "\(promoted.text)")
                let promotedStatus = try promoted.decoded(ConfigStatus.self)
                #expect(promotedStatus.version == "5")
                #expect(promotedStatus.canary == nil)
                #expect(promotedStatus.canaryDecision?.action == .promote)
                metrics = try await service.admin(.get, "/metrics").text
                #expect(Self.metric(metrics, #"prefetch_config_version{config="active"}"#) == 5)
                #expect(Self.metric(metrics, #"prefetch_config_version{config="candidate"}"#)?.isNaN == true, "\(metrics)")
                let activeUser = try #require(versions.first { $0.value == "4" }?.key)
                let afterPromote = try await service.trigger(page, credentials: ["Cookie": "session=user-\(activeUser)"])
                #expect(try afterPromote.decoded(TriggerAnswer.self).version == "5")
                clock.advance(by: .seconds(2))
                let refreshed = try await service.admin(.post, "/v1/config/refresh", body: "{}")
                let refresh = try refreshed.decoded(ConfigRoutes.RefreshAnswer.self)
                #expect(refresh.outcome == "unchanged", "\(refreshed.text)")
                #expect(refresh.status.version == "5")
                let nothing = try await service.admin(.post, "/v1/config/canary/rollback", body: "{}")
                #expect(nothing.status == 409)
                #expect(nothing.errorCode == "no-canary")

                // The source publishes a new candidate: its versions changed, so it is applied; then an operator
                // rolls it back and every user gets the active config.
                try Data(Self.document(base: base, candidate: "6", percent: 50).text.utf8).write(to: URL(fileURLWithPath: file.path))
                clock.advance(by: .seconds(2))
                let applied = await eventually { await Self.configStatus(service)?.canary?.version == "6" }
                #expect(applied)
                let rolledBack = try await service.admin(.post, "/v1/config/canary/rollback", body: "{}")
                #expect(rolledBack.status == 200, "\(rolledBack.text)")
                let rolledBackStatus = try rolledBack.decoded(ConfigStatus.self)
                #expect(rolledBackStatus.version == "4")
                #expect(rolledBackStatus.canary == nil)
                let afterRollback = try await service.trigger(page, credentials: cookie)
                #expect(try afterRollback.decoded(TriggerAnswer.self).version == "4")
                metrics = try await service.admin(.get, "/metrics").text
                #expect(Self.metric(metrics, "prefetch_config_canary_percent") == 0)
                #expect(Self.metric(metrics, #"prefetch_config_version{config="active"}"#) == 4)
                #expect(Self.metric(metrics, #"prefetch_config_version{config="candidate"}"#)?.isNaN == true)
                let badBody = try await service.admin(.post, "/v1/config/canary/promote", body: "[1]")
                #expect(badBody.status == 400)
            }
        }
    }

    @Test func aSourcePublishingTheCandidateAsDataPromotesIt() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let file = try TempConfig(Self.document(base: base, percent: 100))
            defer { file.remove() }
            let clock = ManualClock()
            var settings = testSettings()
            settings.configSource = ConfigSourceSettings(source: file.path)
            try await withService(config: Self.document(base: base), settings: settings, clock: clock) { service in
                #expect(await eventually { await Self.configStatus(service)?.canary != nil })
                try Data(Self.document(base: base, active: "5", activePath: "/v2/feed", candidate: nil).text.utf8).write(
                    to: URL(fileURLWithPath: file.path))
                clock.advance(by: .seconds(2))
                let promoted = await eventually {
                    let status = await Self.configStatus(service)
                    return status?.version == "5" && status?.canary == nil
                }
                #expect(promoted)
                let plan = try await service.admin(.get, "/v1/plan?url=\(q("\(base)/pages/canary"))")
                #expect(plan.text.contains("/v2/feed"))
            }
        }
    }
}
