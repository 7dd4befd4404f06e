import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import Synchronization
import Testing

@testable import PrefetchService

/// Two `prefetch serve` processes sharing a real redis-server, or a real Redis Cluster: what a load balancer in front of
/// replicas needs.
@Suite(.serialized) struct ServeReplicaTests {
    /// The identity key every replica shares (as a deployment does, from a Secret).
    static let identityKey = "replica-test-identity-key-0123456789abcdef"

    /// What the replicas share: one redis-server, or a 3-primary Redis Cluster.
    enum SharedRedis: String, CaseIterable, Sendable {
        case single
        case cluster
    }

    /// Runs `body` with an upstream, a redis-server (or with `.cluster` a Redis Cluster, and no single server) and two
    /// replicas on it; everything is stopped afterwards.
    func withReplicas(
        on shared: SharedRedis = .single, interfaces: @Sendable (TestUpstream) -> [TestInterface],
        _ body: @Sendable (TestUpstream, RedisServer?, CommandTests.Server, CommandTests.Server, String) async throws -> Void
    ) async throws {
        try await withUpstream { upstream in
            let redis = shared == .single ? try await RedisServer.start() : nil
            let cluster: RedisCluster?
            do {
                cluster = shared == .cluster ? try await RedisCluster.start() : nil
            } catch {
                await redis?.stop()
                throw error
            }
            let url = redis?.url ?? cluster?.url ?? ""
            let page = "\(upstream.base)/pages/replicated"
            let config = try TempConfig(TestConfig([TestPage(page, interfaces(upstream))]))
            var servers: [CommandTests.Server] = []
            func stopAll() async {
                for server in servers { await server.child.stop() }
                await redis?.stop()
                await cluster?.stop()
                config.remove()
            }
            do {
                for _ in 0..<2 {
                    servers.append(
                        try await CommandTests.Server.start(
                            configPath: config.path, arguments: ["--store", url, "--identity-key", Self.identityKey]))
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
        var body: [String: Any] = ["url": page]
        if let cookie { body["headers"] = ["Cookie": cookie] }
        let text = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
        let reply = try await oneRequest(port: server.port, .post, "/v1/prefetch", body: text)
        #expect(reply.status == 202, "\(reply.text)")
        return try reply.decoded(TriggerAnswer.self).ticket
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
            let data = try await oneRequest(port: second.port, .get, "/v1/prefetch/\(ticket)/data?name=info&wait=5000")
            #expect(data.status == 200, "\(data.text)")
            #expect(["hit", "joined"].contains(data.header("X-Prefetch") ?? ""))
            #expect(data.text.contains(#""query":"id=7""#))
            let results = try await oneRequest(port: second.port, .get, "/v1/prefetch/\(ticket)?wait=5000")
            #expect(results.status == 200)
            #expect(upstream.hits(path: "/r/info") == 1)
        }
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
            _ = try await trigger(first, target)
            let reads = try await withThrowingTaskGroup(of: Reply?.self) { group in
                group.addTask {
                    _ = try await trigger(second, target)
                    return nil
                }
                for index in 0..<100 {
                    let port = index.isMultiple(of: 2) ? first.port : second.port
                    let name = index.isMultiple(of: 3) ? "list" : "slow"
                    group.addTask { try await oneRequest(port: port, .get, "/v1/data?page=\(q(target))&name=\(name)&wait=8000") }
                }
                var all: [Reply] = []
                for try await reply in group { if let reply { all.append(reply) } }
                return all
            }
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
            let bobByPage = try await oneRequest(
                port: first.port, .get, "/v1/data?page=\(q(page))&name=me&wait=2000", headers: ["Cookie": "sid=bob"])
            #expect(bobByPage.text.contains("sid=bob") && !bobByPage.text.contains("sid=alice"))
            #expect(upstream.hits(path: "/r/me") == 2)
        }
    }

    @Test func aRedisOutageKeepsBothAnsweringAndRecoversByItself() async throws {
        try await withReplicas(interfaces: { upstream in
            [upstream.interface("info", "/r/outage", urlParam: true)]
        }) { _, redis, first, second, page in
            let redis = try #require(redis)
            await redis.stop()
            for (index, server) in [first, second].enumerated() {
                let ticket = try await trigger(server, page + "?during=\(index)")
                let data = try await oneRequest(port: server.port, .get, "/v1/prefetch/\(ticket)/data?name=info&wait=5000")
                #expect(data.status == 200, "replica \(index) during the outage: \(data.text)")
            }
            let degraded = await eventually(within: 10) {
                let ready = try? await oneRequest(port: first.port, .get, "/readyz")
                return (try? ready?.decoded(ReadinessAnswer.self))?.store == "degraded"
            }
            #expect(degraded)
            let health = try await oneRequest(port: second.port, .get, "/healthz")
            #expect(health.status == 200)

            try await redis.launch()
            for server in [first, second] {
                let recovered = await eventually(within: 15) {
                    let ready = try? await oneRequest(port: server.port, .get, "/readyz")
                    return (try? ready?.decoded(ReadinessAnswer.self))?.store == "ok"
                }
                #expect(recovered)
            }
            let ticket = try await trigger(first, page + "?after=1")
            let data = try await oneRequest(port: second.port, .get, "/v1/prefetch/\(ticket)/data?name=info&wait=5000")
            #expect(data.status == 200, "after recovery, across replicas: \(data.text)")
        }
    }
}

/// A port nothing listens on right now (`unusedLocalPort`), or the error saying the system refused.
func freeLocalPort() throws -> Int {
    guard let port = unusedLocalPort() else { throw CommandTestError(message: "cannot bind a socket to 127.0.0.1") }
    return port
}
