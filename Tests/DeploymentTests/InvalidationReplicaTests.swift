import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// A logout on one replica, seen on another: two `prefetch serve` processes sharing a real redis-server.
@Suite(.serialized, .timeLimit(.minutes(2))) struct InvalidationReplicaTests {
    let replicas = ServeReplicaTests()

    func read(_ server: ServeProcess, _ page: String, cookie: String) async throws -> Reply {
        try await oneRequest(port: server.port, .get, "/v1/data?page=\(q(page))&name=me&wait=5000", headers: ["Cookie": cookie])
    }

    @Test func aLogoutOnOneReplicaTurnsTheNextReadOnAnotherIntoAMiss() async throws {
        try await replicas.withReplicas(interfaces: { upstream in
            [upstream.interface("me", "/r/me")]
        }) { upstream, _, first, second, page in
            _ = try await replicas.trigger(first, page, cookie: "sid=alice")
            _ = try await replicas.trigger(first, page, cookie: "sid=bob")
            let before = try await read(second, page, cookie: "sid=alice")
            #expect(before.status == 200 && before.text.contains("sid=alice"), "\(before.text)")
            #expect(try await read(second, page, cookie: "sid=bob").status == 200)

            let logout = try await oneRequest(port: first.port, .post, "/v1/invalidate", headers: ["Cookie": "sid=alice"], body: "{}")
            #expect(logout.status == 200, "\(logout.text)")
            #expect(try logout.decoded(InvalidationRoutes.Dropped.self).dropped == 1)

            var last: Reply?
            let missed = await eventually(within: 5) {
                last = try? await oneRequest(
                    port: second.port, .get, "/v1/data?page=\(q(page))&name=me&wait=0", headers: ["Cookie": "sid=alice"])
                return last?.status == 404
            }
            #expect(missed, "\(last?.text ?? "")")
            #expect(last?.header("X-Prefetch-Reason") == "invalidated")
            #expect(last?.errorCode == "invalidated")
            #expect(!(last?.text.contains("sid=alice") ?? true))

            // Bob's prefetch is untouched, on both replicas.
            for server in [first, second] {
                let bob = try await read(server, page, cookie: "sid=bob")
                #expect(bob.status == 200 && bob.text.contains("sid=bob"), "\(bob.text)")
            }
            // Alice's next page open fetches again.
            _ = try await replicas.trigger(second, page, cookie: "sid=alice")
            #expect(try await read(first, page, cookie: "sid=alice").status == 200)
            #expect(upstream.hits(path: "/r/me") == 3)
        }
    }
}
