import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Synchronization
import Testing

@testable import PageAPI
@testable import PrefetchService

/// Two `prefetch serve` processes sharing a real redis-server, a real Redis Cluster, or a real Sentinel-managed primary:
/// what a load balancer in front of replicas needs.
@Suite(.serialized) struct ServeReplicaTests {
    /// The identity key every replica shares (as a deployment does, from a Secret).
    static let identityKey = "replica-test-identity-key-0123456789abcdef"

    /// What the replicas share: one redis-server, a 3-primary Redis Cluster, or a primary with a replica and three
    /// sentinels.
    enum SharedRedis: String, CaseIterable, Sendable {
        case single
        case cluster
        case sentinel

        func start() async throws -> any SharedRedisProcess {
            switch self {
            case .single: try await RedisServer.start()
            case .cluster: try await RedisCluster.start()
            case .sentinel: try await RedisSentinels.start()
            }
        }
    }

    /// Runs `body` with an upstream, the Redis of `shared` and two replicas on it; everything is stopped afterwards.
    func withReplicas(
        on shared: SharedRedis = .single, interfaces: @Sendable (TestUpstream) -> [TestInterface],
        _ body: @Sendable (TestUpstream, any SharedRedisProcess, CommandTests.Server, CommandTests.Server, String) async throws -> Void
    ) async throws {
        try await withUpstream { upstream in
            let redis = try await shared.start()
            let page = "\(upstream.base)/pages/replicated"
            var servers: [CommandTests.Server] = []
            var config: TempConfig?
            func stopAll() async {
                for server in servers { await server.child.stop() }
                await redis.stop()
                config?.remove()
            }
            do {
                let written = try TempConfig(TestConfig([TestPage(page, interfaces(upstream))]))
                config = written
                for _ in 0..<2 {
                    servers.append(
                        try await CommandTests.Server.start(
                            configPath: written.path, arguments: ["--store", redis.url, "--identity-key", Self.identityKey],
                            untilReady: true))
                }
                try await body(upstream, redis, servers[0], servers[1], page)
            } catch {
                await stopAll()
                throw error
            }
            await stopAll()
        }
    }

    func trigger(_ server: CommandTests.Server, _ page: String, cookie: String? = nil) async throws -> String {
        try await triggered(server, page, cookie: cookie).ticket
    }

    /// The trigger's answer: its ticket and read key.
    func triggered(_ server: CommandTests.Server, _ page: String, cookie: String? = nil) async throws -> TriggerAnswer {
        var body: [String: Any] = ["url": page]
        if let cookie { body["cookies"] = testJar(cookie) }
        let text = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
        let reply = try await oneRequest(port: server.port, .post, "/v1/prefetch", body: text)
        #expect(reply.status == 202, "\(reply.text)")
        return try reply.decoded(TriggerAnswer.self)
    }

    /// `target` triggered on `first` (answered while its flight is under way), then at once on `second` and read by
    /// one reader per name in `readers` (`GET /v1/data`, waiting up to 8 s), alternately on each replica: the readers'
    /// replies.
    func openOnBoth(
        _ first: CommandTests.Server, _ second: CommandTests.Server, _ target: String, readers: [String]
    ) async throws -> [Reply] {
        _ = try await trigger(first, target)
        return try await withThrowingTaskGroup(of: Reply?.self) { group in
            group.addTask {
                _ = try await trigger(second, target)
                return nil
            }
            for (index, name) in readers.enumerated() {
                let port = index.isMultiple(of: 2) ? first.port : second.port
                group.addTask { try await oneRequest(port: port, .get, "/v1/data?page=\(q(target))&name=\(name)&wait=8000") }
            }
            var all: [Reply] = []
            for try await reply in group { if let reply { all.append(reply) } }
            return all
        }
    }

    @Test(arguments: SharedRedis.allCases)
    func aTicketFromOneReplicaIsServedByTheOther(on shared: SharedRedis) async throws {
        try await withReplicas(
            on: shared,
            interfaces: { upstream in
                [upstream.interface("info", "/r/info", urlParam: true)]
            }
        ) { upstream, _, first, second, page in
            let ticket = try await trigger(first, page + "?id=7")
            let before = try await eventLoopAnswers(second)
            let data = try await oneRequest(port: second.port, .get, "/v1/prefetch/\(ticket)/data?name=info&wait=5000")
            #expect(data.status == 200, "\(data.text)")
            #expect(["hit", "joined"].contains(data.header("X-Prefetch") ?? ""))
            #expect(data.text.contains(#""query":"id=7""#))
            let results = try await oneRequest(port: second.port, .get, "/v1/prefetch/\(ticket)?wait=5000")
            #expect(results.status == 200)
            // The page's own read, by read key, of a page opened on the first replica (the key names its ticket).
            let opened = try await oneRequest(
                port: first.port, .post, "/v1/prefetch", headers: ["Content-Type": "application/json"], body: #"{"url": "\#(page)?id=8"}"#)
            let readKey = try opened.decoded(TriggerAnswer.self).readKey
            let byKey = try await oneRequest(
                port: second.port, .get, "/v1/data?name=info&wait=5000", headers: ["X-Prefetch-Key": readKey, "Origin": upstream.base])
            #expect(byKey.status == 200 && byKey.text.contains(#""query":"id=8""#), "\(byKey.text)")
            // A ticket id no replica issued: the second replica asks the registry, then refuses it.
            let unknown = try await oneRequest(port: second.port, .get, "/v1/prefetch/AAAAAAAAAAAAAAAAAAAAAA/data?name=info")
            #expect(unknown.status == 404 && unknown.errorCode == "unknown-ticket", "\(unknown.text)")
            #expect(upstream.hits(path: "/r/info") == 2)
            // The second replica fetched the first's ticket from Redis and answered on its event loop, without a
            // task (the two reads and the results view; the unknown ticket is a refusal, counted by neither).
            let after = try await eventLoopAnswers(second)
            #expect(after.data == before.data + 2, "data reads answered on the event loop: \(before) -> \(after)")
            #expect(after.results == before.results + 1, "results views answered on the event loop: \(before) -> \(after)")
        }
    }

    /// Requests pipelined behind a read of another replica's ticket (fetched from Redis, the read going on on the
    /// event loop once it is in) are answered after it, in order, and a `Connection: close` on the last is kept.
    @Test func requestsPipelinedBehindAFetchedTicketKeepTheirOrder() async throws {
        try await withReplicas(
            on: .single,
            interfaces: { upstream in
                [upstream.interface("info", "/r/info", urlParam: true)]
            }
        ) { _, _, first, second, page in
            let ticket = try await trigger(first, page + "?id=9")
            let host = "Host: 127.0.0.1:\(second.port)\r\n"
            let answer = try await rawExchange(
                port: second.port,
                "GET /v1/prefetch/\(ticket)/data?name=info&wait=5000 HTTP/1.1\r\n\(host)\r\n"
                    + "GET /healthz HTTP/1.1\r\n\(host)\r\n"
                    + "GET /v1/prefetch/\(ticket)?wait=0 HTTP/1.1\r\n\(host)Connection: close\r\n\r\n")
            let statuses = answer.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
            #expect(statuses == ["200", "200", "200"], "\(answer)")
            let data = answer.range(of: #""query":"id=9""#)
            let health = answer.range(of: #"{"status":"ok"}"#)
            let results = answer.range(of: #""ticket":""#)
            #expect(data != nil && health != nil && results != nil, "\(answer)")
            if let data, let health, let results {
                #expect(data.lowerBound < health.lowerBound && health.lowerBound < results.lowerBound, "in order: \(answer)")
            }
        }
    }

    /// A replica's reads answered on its event loop: `prefetch_data_fast_total` and the results views of
    /// `prefetch_event_loop_answers_total`.
    func eventLoopAnswers(_ server: CommandTests.Server) async throws -> (data: Int, results: Int) {
        let text = try await oneRequest(port: server.adminPort, .get, "/metrics").text
        func value(_ prefix: String) -> Int {
            text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        }
        return (value("prefetch_data_fast_total "), value("prefetch_event_loop_answers_total{route=\"results\"} "))
    }

    @Test(arguments: SharedRedis.allCases)
    func consumersOnBothReplicasCauseOneUpstreamFetch(on shared: SharedRedis) async throws {
        try await withReplicas(
            on: shared,
            interfaces: { upstream in
                [
                    upstream.interface("slow", "/r/slow?delay=300"),
                    upstream.interface("list", "/r/list", method: .POST, bodyParam: true),
                ]
            }
        ) { upstream, _, first, second, page in
            let target = page + "?q=1"
            // The first replica's trigger is answered (the flight is under way, 300 ms upstream) before the
            // second replica's trigger and the 100 readers on both replicas race it; nobody reads before a trigger.
            let reads = try await openOnBoth(first, second, target, readers: (0..<100).map { $0.isMultiple(of: 3) ? "list" : "slow" })
            let served = reads.filter { $0.status == 200 }
            #expect(reads.count == 100)
            #expect(served.count == 100, "\(reads.map(\.status))")
            #expect(upstream.hits(path: "/r/slow") == 1)
            #expect(upstream.hits(path: "/r/list") == 1)
        }
    }

    @Test(arguments: SharedRedis.allCases)
    func identitiesStayIsolatedAcrossReplicas(on shared: SharedRedis) async throws {
        try await withReplicas(
            on: shared,
            interfaces: { upstream in
                [upstream.interface("me", "/r/me")]
            }
        ) { upstream, _, first, second, page in
            let ticketA = try await trigger(first, page, cookie: "sid=alice")
            let ticketB = try await trigger(second, page, cookie: "sid=bob")
            let a = try await oneRequest(
                port: second.port, .get, "/v1/prefetch/\(ticketA)/data?name=me&wait=5000", headers: ["Cookie": "sid=alice"])
            let b = try await oneRequest(
                port: first.port, .get, "/v1/prefetch/\(ticketB)/data?name=me&wait=5000", headers: ["Cookie": "sid=bob"])
            #expect(a.text.contains("sid=alice") && !a.text.contains("sid=bob"))
            #expect(b.text.contains("sid=bob") && !b.text.contains("sid=alice"))
            let stolen = try await oneRequest(
                port: second.port, .get, "/v1/prefetch/\(ticketA)/data?name=me", headers: ["Cookie": "sid=bob"])
            #expect(stolen.status == 403)
            // A ticket leaked to another replica is no bearer token there either.
            let leaked = try await oneRequest(port: second.port, .get, "/v1/prefetch/\(ticketA)/data?name=me")
            #expect(leaked.status == 401 && !leaked.text.contains("sid=alice"))
            // Alice's read key (its ticket on the first replica) on Bob's ticket on the second: the second fetches the
            // key's ticket, and the key opens only its own.
            let keyA = try await triggered(first, page + "?k=1", cookie: "sid=alice").readKey
            let crossed = try await oneRequest(
                port: second.port, .get, "/v1/prefetch/\(ticketB)/data?name=me",
                headers: ["X-Prefetch-Key": keyA, "Origin": upstream.base])
            #expect(crossed.status == 403 && crossed.errorCode == "invalid-read-key", "\(crossed.text)")
            #expect(crossed.text.contains("issued for another ticket"), "the key's own ticket was found: \(crossed.text)")
            #expect(!crossed.text.contains("sid=bob") && !crossed.text.contains("sid=alice"))
            let bobByPage = try await oneRequest(
                port: first.port, .get, "/v1/data?page=\(q(page))&name=me&wait=2000", headers: ["Cookie": "sid=bob"])
            #expect(bobByPage.text.contains("sid=bob") && !bobByPage.text.contains("sid=alice"))
            #expect(upstream.hits(path: "/r/me") == 2, "alice's second page open shares her first's entry")
        }
    }

    /// The primary under two replicas dies; the sentinels promote its replica and the fleet follows by itself: a
    /// ticket triggered on one replica is served by the other again, a page opened on both with readers on both
    /// costs one upstream fetch per interface, and one user's answer never reaches another.
    @Test func theFleetFollowsASentinelFailoverWithOneFetchAndIdentitiesApart() async throws {
        try await withReplicas(
            on: .sentinel,
            interfaces: { upstream in
                [upstream.interface("slow", "/r/failover?delay=300", urlParam: true), upstream.interface("me", "/r/me")]
            }
        ) { upstream, shared, first, second, page in
            let deployment = try #require(shared as? RedisSentinels)
            let before = try await trigger(first, page + "?before=1")
            let served = try await oneRequest(port: second.port, .get, "/v1/prefetch/\(before)/data?name=slow&wait=5000")
            #expect(served.status == 200 && ["hit", "joined"].contains(served.header("X-Prefetch") ?? ""), "\(served.text)")

            let promoted = await deployment.killPrimaryAndAwaitPromotion()
            try #require(promoted, "the sentinels never promoted the replica")
            for server in [first, second] {
                let ready = await eventually(within: 30) {
                    let answer = try? await oneRequest(port: server.port, .get, "/readyz")
                    return (try? answer?.decoded(ReadinessAnswer.self))?.code == .ok
                }
                #expect(ready, "the replica on port \(server.port) is back on the shared store")
            }

            // Across replicas again: triggered on the first, a hit (or joined) on the second.
            let after = try await trigger(first, page + "?after=1")
            let crossed = try await oneRequest(port: second.port, .get, "/v1/prefetch/\(after)/data?name=slow&wait=5000")
            #expect(crossed.status == 200, "\(crossed.text)")
            #expect(["hit", "joined"].contains(crossed.header("X-Prefetch") ?? ""), "\(crossed.headers)")

            // One page opened on both replicas at once, 40 readers over both: one fetch per interface.
            let slowBefore = upstream.hits(path: "/r/failover")
            let target = page + "?race=1"
            let reads = try await openOnBoth(first, second, target, readers: Array(repeating: "slow", count: 40))
            #expect(reads.count == 40 && reads.allSatisfy { $0.status == 200 }, "\(reads.map(\.status))")
            #expect(upstream.hits(path: "/r/failover") - slowBefore == 1, "single flight on the promoted primary")

            // Identities stay apart on the new primary.
            let meBefore = upstream.hits(path: "/r/me")
            let alice = try await trigger(first, page + "?who=1", cookie: "sid=alice")
            let bob = try await trigger(second, page + "?who=1", cookie: "sid=bob")
            let a = try await oneRequest(
                port: second.port, .get, "/v1/prefetch/\(alice)/data?name=me&wait=5000", headers: ["Cookie": "sid=alice"])
            let b = try await oneRequest(
                port: first.port, .get, "/v1/prefetch/\(bob)/data?name=me&wait=5000", headers: ["Cookie": "sid=bob"])
            #expect(a.text.contains("sid=alice") && !a.text.contains("sid=bob"))
            #expect(b.text.contains("sid=bob") && !b.text.contains("sid=alice"))
            let stolen = try await oneRequest(
                port: second.port, .get, "/v1/prefetch/\(alice)/data?name=me", headers: ["Cookie": "sid=bob"])
            #expect(stolen.status == 403 && !stolen.text.contains("sid=alice"))
            #expect(upstream.hits(path: "/r/me") - meBefore == 2, "one fetch per user")
        }
    }

    @Test func aRedisOutageKeepsBothAnsweringAndRecoversByItself() async throws {
        try await withReplicas(interfaces: { upstream in
            [upstream.interface("info", "/r/outage", urlParam: true)]
        }) { _, shared, first, second, page in
            let redis = try #require(shared as? RedisServer)
            await redis.stop()
            for (index, server) in [first, second].enumerated() {
                let ticket = try await trigger(server, page + "?during=\(index)")
                let data = try await oneRequest(port: server.port, .get, "/v1/prefetch/\(ticket)/data?name=info&wait=5000")
                #expect(data.status == 200, "replica \(index) during the outage: \(data.text)")
            }
            let degraded = await eventually(within: 10) {
                let ready = try? await oneRequest(port: first.port, .get, "/readyz")
                return (try? ready?.decoded(ReadinessAnswer.self))?.code == .degraded
            }
            #expect(degraded)
            let health = try await oneRequest(port: second.port, .get, "/healthz")
            #expect(health.status == 200)

            try await redis.launch()
            for server in [first, second] {
                let recovered = await eventually(within: 15) {
                    let ready = try? await oneRequest(port: server.port, .get, "/readyz")
                    return (try? ready?.decoded(ReadinessAnswer.self))?.code == .ok
                }
                #expect(recovered)
            }
            let ticket = try await trigger(first, page + "?after=1")
            let data = try await oneRequest(port: second.port, .get, "/v1/prefetch/\(ticket)/data?name=info&wait=5000")
            #expect(data.status == 200, "after recovery, across replicas: \(data.text)")
        }
    }
}
