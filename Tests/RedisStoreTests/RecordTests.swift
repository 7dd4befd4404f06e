import PrefetchStore
import PrefetchTestSupport
import Testing

@testable import RedisStore

/// The records replicas share beside the responses (a ticket's record), against a real redis-server.
@Suite(.serialized) struct RecordTests {
    @Test func aRecordKeptOnOneReplicaIsReadOnTheOtherUntilItsTTL() async throws {
        try await withRedis { server in
            try await withReplicas(server) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await a.keepRecord(Array("ticket one".utf8), name: "ticket:one", ttl: .seconds(30)))
                #expect(await b.record("ticket:one") == Array("ticket one".utf8))
                #expect(await b.record("ticket:two") == nil)
                // Outside the entries: a config update's retain of no label at all leaves it alone.
                _ = await a.retain(labels: [])
                #expect(await b.record("ticket:one") == Array("ticket one".utf8))
                // Its TTL is Redis's: the key expires there.
                #expect(await a.keepRecord(Array("short".utf8), name: "ticket:short", ttl: .milliseconds(1)))
                #expect(await eventually { await b.record("ticket:short") == nil })
            }
        }
    }

    @Test func whileRedisIsAwayARecordIsNotKeptAndNothingIsRead() async throws {
        try await withRedis { server in
            try await withReplicas(server, count: 1) { replicas in
                let store = replicas[0]
                await server.stop()
                #expect(await store.keepRecord(Array("lost".utf8), name: "ticket:lost", ttl: .seconds(30)) == false)
                #expect(await store.record("ticket:lost") == nil)
            }
        }
    }
}
