import Logging
import MetricsTestKit
import PrefetchStore
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import RedisStore

/// Pipelined calls against a real redis-server: a page's begins in one round trip, and concurrent callers sharing a
/// connection's round trips, with exactly the outcomes of one-by-one calls.
@Suite(.serialized) struct PipelineTests {
    /// The same requests as `batch` below: a new key, one in flight, one completed, the same new key three times,
    /// another new key under another policy.
    static let paths = ["/new", "/flying", "/done", "/dup", "/dup", "/dup", "/other"]
    static let requests: [(key: StoreKey, policy: StorePolicy)] = [
        (key("/new"), policy()), (key("/flying"), policy()), (key("/done"), policy()),
        (key("/dup"), policy()), (key("/dup"), policy()), (key("/dup"), policy()),
        (key("/other", identity: Identity(digest: "user-1")), policy("feed", ttl: .seconds(5))),
    ]

    /// Leaves `/flying` in flight and `/done` completed, through `store`.
    static func prepare(_ store: RedisStore) async throws {
        _ = try #require(await store.begin(key("/flying"), policy: policy()).token)
        #expect(await put(store, key("/done"), .success(response("done"))))
    }

    static func kind(_ outcome: BeginOutcome) -> String {
        switch outcome {
        case .leader: "leader"
        case .joined: "joined"
        case .fresh: "fresh"
        }
    }

    @Test func batchBeginAnswersExactlyWhatOneByOneBeginsAnswer() async throws {
        let expected = ["leader", "joined", "fresh", "leader", "joined", "joined", "leader"]
        var serial: [String] = []
        var batched: [BeginOutcome] = []
        try await withRedis { server in
            // Two namespaces on one server: the same state, claimed one by one in one and in one batch in the other.
            var one = testConfiguration()
            one.namespace = "prefetch:serial"
            try await withReplicas(server, configuration: one) { replicas in
                try await Self.prepare(replicas[0])
                for request in Self.requests {
                    serial.append(Self.kind(await replicas[1].begin(request.key, policy: request.policy)))
                }
            }
            var other = testConfiguration()
            other.namespace = "prefetch:batch"
            try await withReplicas(server, configuration: other) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                try await Self.prepare(a)
                batched = await b.begin(Self.requests)
                #expect(!b.isDegraded)
                // The leaders' tokens are real flights in Redis: completing them is a hit on the other replica, and
                // the joined duplicate's readers get the leader's response.
                async let joiner = a.read(key("/dup"), wait: .seconds(30))
                do {
                    let settled = await eventually { a.waitingReaders == 1 }
                    #expect(settled)
                }
                for (index, outcome) in batched.enumerated() {
                    guard let token = outcome.token else { continue }
                    await b.complete(Self.requests[index].key, token: token, result: .success(response(Self.paths[index])))
                }
                #expect(await joiner.body == "/dup")
                #expect(await a.read(key("/new"), wait: .zero).body == "/new")
                #expect(await a.begin(key("/dup"), policy: policy()) == .fresh)
                #expect(await a.read(key("/other", identity: Identity(digest: "user-1")), wait: .zero).body == "/other")
                #expect(await a.read(key("/other"), wait: .zero) == .absent(.notFound), "identity stays in the key")
            }
        }
        #expect(serial == expected)
        #expect(batched.map(Self.kind) == expected)
        #expect(Set(batched.compactMap(\.token)).count == 3, "every leader has a token of its own")
    }

    @Test func concurrentBatchesOverTwoReplicasMakeExactlyOneLeaderPerKey() async throws {
        try await withRedis { server in
            var configuration = testConfiguration()
            configuration.connections = 2
            try await withReplicas(server, configuration: configuration) { replicas in
                // 40 page opens of the same 8 requests, on both replicas at once.
                let page = (0..<8).map { (key: key("/page/\($0)"), policy: policy()) }
                let outcomes = await withTaskGroup(of: [BeginOutcome].self) { group in
                    for index in 0..<40 {
                        let store = replicas[index % 2]
                        group.addTask { await store.begin(page) }
                    }
                    return await group.reduce(into: [[BeginOutcome]]()) { $0.append($1) }
                }
                for index in 0..<8 {
                    #expect(outcomes.count { $0[index].token != nil } == 1, "request \(index) has one leader")
                    #expect(outcomes.count { $0[index] == .joined } == 39)
                }
            }
        }
    }

    @Test func batchBeginDuringAnOutageFallsBackAsOneByOneBeginsDo() async throws {
        try await withRedis { server in
            var configuration = testConfiguration()
            configuration.connections = 1
            try await withReplicas(server, configuration: configuration) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                // Both replicas hold an open connection, so the outage is met mid-use, not at connect.
                #expect(await a.begin([(key("/warm"), policy())]).first?.token != nil)
                #expect(await b.begin(key("/warm"), policy: policy()) == .joined)
                await server.stop()
                let requests: [(key: StoreKey, policy: StorePolicy)] = [
                    (key("/x"), policy()), (key("/x"), policy()), (key("/y"), policy()),
                ]
                let batched = try #require(await bounded(10, "batch begin during the outage") { await a.begin(requests) })
                var serial: [BeginOutcome] = []
                for request in requests {
                    serial.append(
                        try #require(
                            await bounded(10, "begin during the outage") {
                                await b.begin(request.key, policy: request.policy)
                            }))
                }
                #expect(batched.map(Self.kind) == ["leader", "joined", "leader"])
                #expect(serial.map(Self.kind) == batched.map(Self.kind))
                #expect(a.isDegraded && b.isDegraded)
                // The fallback leader's token completes into the fallback store, whose readers get it.
                let token = try #require(batched[0].token)
                await a.complete(key("/x"), token: token, result: .success(response("kept here")))
                #expect(await a.read(key("/x"), wait: .zero).body == "kept here")
            }
        }
    }

    @Test func putStoresAFreshKeyInOneStepAndLeavesAKeyInFlightAlone() async throws {
        try await withRedis { server in
            try await withReplicas(server) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await a.put(key("/ticket"), policy: policy(), result: .success(response("record"))))
                #expect(await b.read(key("/ticket"), wait: .zero).body == "record")
                let token = try #require(await b.begin(key("/busy"), policy: policy()).token)
                #expect(!(await a.put(key("/busy"), policy: policy(), result: .success(response("intruder")))))
                #expect(await a.read(key("/busy"), wait: .zero) == .pending, "the flight is untouched")
                await b.complete(key("/busy"), token: token, result: .success(response("leader's")))
                #expect(await a.read(key("/busy"), wait: .zero).body == "leader's")
                #expect(!(await a.put(key("/busy"), policy: policy(), result: .success(response("late")))))
                #expect(await b.read(key("/busy"), wait: .zero).body == "leader's")
            }
        }
    }

    /// Scripts the server behind `pool` has run so far (`EVALSHA` and `EVAL` calls). Asked over a connection of
    /// this process, not `redis-cli`, so the test spawns no process.
    static func scriptCalls(_ pool: RedisPool) async -> Int {
        guard case .success(let reply) = await pool.execute([Array("INFO".utf8), Array("commandstats".utf8)]),
            let stats = reply.text
        else { return -1 }
        return stats.split(whereSeparator: \.isNewline).reduce(0) { total, line in
            guard line.hasPrefix("cmdstat_evalsha:") || line.hasPrefix("cmdstat_eval:"),
                let calls = line.split(separator: "=").dropFirst().first?.split(separator: ",").first
            else { return total }
            return total + (Int(calls) ?? 0)
        }
    }

    @Test func aReaderOnTheLeadingReplicaAsksRedisOnlyOnceSomethingChanged() async throws {
        try await withRedis { server in
            // Time stands still: a waiting reader's periodic re-check never comes due, so every script call counted
            // below is one the store chose to make, however slow the machine.
            try await withReplicas(server, clock: ManualClock()) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let (observer, _) = try Self.onePool(server)
                // Redis caches every script first, so each call below is one script call.
                #expect(await put(a, key("/warm"), .success(response("warm"))))
                #expect(await b.read(key("/warm"), wait: .zero).body == "warm")
                let token = try #require(await a.begin(key("/lead"), policy: policy()).token)
                let before = await Self.scriptCalls(observer)
                #expect(await a.read(key("/lead"), wait: .zero) == .pending)
                #expect(await Self.scriptCalls(observer) == before, "the leading replica knows its flight is pending")
                #expect(await b.read(key("/lead"), wait: .zero) == .pending)
                #expect(await Self.scriptCalls(observer) == before + 1, "another replica asks Redis")
                // Completed here: a waiting reader is woken with the response from the local tier.
                async let waiter = a.read(key("/lead"), wait: .seconds(30))
                do {
                    let settled = await eventually { a.waitingReaders == 1 }
                    #expect(settled)
                }
                let beforeCompletion = await Self.scriptCalls(observer)
                await a.complete(key("/lead"), token: token, result: .success(response("led here")))
                #expect(await waiter.body == "led here")
                #expect(await Self.scriptCalls(observer) == beforeCompletion + 1, "only the completion went to Redis")

                // Dropped by another replica: once its announcement arrives, the leader's readers ask Redis again.
                _ = try #require(await a.begin(key("/dropped"), policy: policy("gone")).token)
                #expect(await b.retain(labels: ["profile"]) >= 1)
                let evicted = await eventually { await a.read(key("/dropped"), wait: .zero) == .absent(.evicted) }
                #expect(evicted)
            }
        }
    }

    /// A pool of one connection to `server`, and its health.
    static func onePool(_ server: RedisServer) throws -> (RedisPool, RedisHealthMonitor) {
        let endpoint = try RedisEndpoint(url: server.url)
        let health = RedisHealthMonitor(
            endpoint: endpoint, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), logger: quietLogger,
            factory: TestMetrics())
        let settings = ConnectionSettings(
            endpoint: endpoint, connectTimeout: .seconds(2), commandTimeout: .seconds(5))
        return (RedisPool(size: 1, settings: settings, health: health), health)
    }

    @Test func aConnectionClosedMidPipelineKeepsTheRepliesThatArrivedAndRetriesNothing() async throws {
        try await withRedis { server in
            let (pool, health) = try Self.onePool(server)
            let command = { (words: [String]) in words.map { Array($0.utf8) } }
            // The connection is open and reused when the pipeline below runs.
            #expect(try await pool.execute(command(["PING"])).get() == .status("PONG"))
            // QUIT answers, then the server closes the connection: the command after it never runs.
            let results = await pool.execute(batch: [
                command(["SET", "before", "1"]), command(["QUIT"]), command(["SET", "after", "1"]),
            ])
            #expect(results.count == 3)
            #expect(try results[0].get() == .status("OK"))
            #expect(try results[1].get() == .status("OK"))
            guard case .failure(let error) = results[2] else {
                Issue.record("the command after QUIT got an answer: \(results[2])")
                return
            }
            #expect(error.kind == .closed)
            let (observer, _) = try Self.onePool(server)
            #expect(try await observer.execute(command(["EXISTS", "before"])).get() == .integer(1))
            #expect(try await observer.execute(command(["EXISTS", "after"])).get() == .integer(0), "not retried: it may have run")
            #expect(!health.isUp, "a broken pipeline counts as an outage, as a broken command does")
        }
    }

    @Test func concurrentCallersOnOneConnectionEachGetTheirOwnReplies() async throws {
        try await withRedis { server in
            let (pool, _) = try Self.onePool(server)
            let replies = await withTaskGroup(of: (Int, [Result<RedisValue, RedisCallError>]).self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let commands = [["INCRBY", "n\(index)", "\(index)"], ["INCR", "n\(index)"]]
                        return (index, await pool.execute(batch: commands.map { $0.map { Array($0.utf8) } }))
                    }
                }
                return await group.reduce(into: [Int: [Result<RedisValue, RedisCallError>]]()) { $0[$1.0] = $1.1 }
            }
            #expect(replies.count == 200)
            for (index, results) in replies {
                #expect(results.map { try? $0.get() } == [.integer(Int64(index)), .integer(Int64(index) + 1)])
            }
        }
    }
}
