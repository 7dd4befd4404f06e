import Logging
import MetricsTestKit
import NIOCore
import NIOPosix
import PrefetchTestSupport
import Testing

@testable import RedisStore

/// The pool's failure rules against a real redis-server: a restart between calls, a call written behind one the
/// server closes the connection after, the command timeout, a slow reply within it, the fast failure while down, a
/// reply past the size limit, and the pool on an event loop group of the caller's.
@Suite(.serialized) struct PoolTests {
    /// A pool of `size` connections to `server` and its health; `initialBackoff` is how long a failure keeps every
    /// call failing fast. The command timeout is long by default, so a busy machine does not fail a test that is not
    /// about it.
    static func pool(
        _ server: RedisServer, size: Int = 1, commandTimeout: Duration = .seconds(5),
        initialBackoff: Duration = .milliseconds(100), maximumValueBytes: Int = 16 * 1024 * 1024,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws -> (RedisPool, RedisHealthMonitor) {
        let endpoint = try RedisEndpoint(url: server.url)
        let health = RedisHealthMonitor(
            endpoint: endpoint, initialBackoff: initialBackoff, maxBackoff: max(initialBackoff, .seconds(1)), logger: quietLogger,
            factory: TestMetrics())
        let settings = ConnectionSettings(
            endpoint: endpoint, connectTimeout: .seconds(2), commandTimeout: commandTimeout,
            limits: RESPLimits(maximumValueBytes: maximumValueBytes))
        return (RedisPool(size: size, settings: settings, health: health, eventLoopGroup: group), health)
    }

    /// `DEBUG SLEEP` from 127.0.0.1 (Redis 7 refuses DEBUG unless enabled).
    static let debug = ["--enable-debug-command", "local"]

    static func command(_ words: String...) -> [[UInt8]] { words.map { Array($0.utf8) } }

    /// Answers PING, counting the server's own answer (retried while the health backoff makes calls fail fast).
    static func answers(_ pool: RedisPool) async -> Bool {
        await eventually { (try? await pool.execute(command("PING")).get()) == .status("PONG") }
    }

    @Test func aCallAfterARestartOfRedisSucceedsAndRunsOnce() async throws {
        try await withRedis { server in
            let (pool, health) = try Self.pool(server)
            #expect(try await pool.execute(Self.command("PING")).get() == .status("PONG"))
            // The pooled connection is open when the server goes away and another takes its port.
            await server.stop()
            try await server.launch()
            // Whether the pool noticed the close before the call or only when writing it, the call is answered:
            // on a fresh connection, or retried once on one because the server closed the old one before any reply.
            #expect(try await pool.execute(Self.command("INCR", "restarted")).get() == .integer(1))
            #expect(try await pool.execute(Self.command("GET", "restarted")).get() == .string(Array("1".utf8)), "it ran once")
            #expect(health.isUp)
        }
    }

    @Test func aCallWrittenBehindOneTheServerClosesAfterIsRetriedOnAFreshConnection() async throws {
        try await withRedis { server in
            let (pool, health) = try Self.pool(server)
            #expect(try await pool.execute(Self.command("PING")).get() == .status("PONG"))
            // Both go to the one connection; QUIT is answered, then the server closes it. The INCR, written behind
            // QUIT or after the close was noticed, never ran there: it runs exactly once on a fresh connection.
            async let quit = pool.execute(Self.command("QUIT"))
            async let incr = pool.execute(Self.command("INCR", "behind-quit"))
            let (quitResult, incrResult) = await (quit, incr)
            #expect(try incrResult.get() == .integer(1))
            if case .success(let reply) = quitResult { #expect(reply == .status("OK")) }
            #expect(try await pool.execute(Self.command("GET", "behind-quit")).get() == .string(Array("1".utf8)))
            #expect(health.isUp, "a connection the server closed before any reply is no outage")
        }
    }

    @Test func aCallWithoutAnAnswerWithinTheCommandTimeoutFailsIOAndTheConnectionIsReplaced() async throws {
        try await withRedis(arguments: Self.debug) { server in
            let (pool, health) = try Self.pool(server, commandTimeout: .seconds(1))
            // Connected first (retried: on a busy machine even a PING may take longer than the timeout).
            #expect(await Self.answers(pool))
            // Redis sleeps (the whole server) for 3 s, well past the timeout: every command of the pipeline fails `.io`.
            let results = await pool.execute(batch: [Self.command("DEBUG", "SLEEP", "3"), Self.command("SET", "late", "1")])
            #expect(results.count == 2)
            for result in results {
                guard case .failure(let error) = result else {
                    Issue.record("a command answered after the command timeout: \(result)")
                    continue
                }
                #expect(error.kind == .io, "\(error)")
            }
            #expect(!health.isUp, "a timeout counts as an outage")
            // Once Redis is awake and the backoff has passed, a fresh connection answers.
            #expect(await Self.answers(pool))
            #expect(health.isUp)
        }
    }

    @Test func aSlowReplyWithinTheCommandTimeoutIsAnsweredAndSoIsWhatWaitedBehindIt() async throws {
        try await withRedis(arguments: Self.debug) { server in
            let (pool, health) = try Self.pool(server, commandTimeout: .seconds(5))
            #expect(try await pool.execute(Self.command("PING")).get() == .status("PONG"))
            async let slow = pool.execute(Self.command("DEBUG", "SLEEP", "0.3"))
            async let behind = pool.execute(batch: (0..<20).map { Self.command("INCR", "behind-\($0 % 3)") })
            #expect(try await slow.get() == .status("OK"))
            let counts = await behind.map { try? $0.get() }
            #expect(counts.allSatisfy { $0 != nil }, "\(counts)")
            #expect(try await pool.execute(Self.command("GET", "behind-0")).get() == .string(Array("7".utf8)))
            #expect(health.isUp)
        }
    }

    @Test func whileRedisIsDownCallsFailFastUntilTheBackoffHasPassed() async throws {
        try await withRedis { server in
            // A long backoff, so the second call is sure to come before the next attempt is due.
            let (pool, health) = try Self.pool(server, initialBackoff: .seconds(60))
            #expect(try await pool.execute(Self.command("PING")).get() == .status("PONG"))
            await server.stop()
            let first = await pool.execute(Self.command("PING"))
            guard case .failure(let error) = first else {
                Issue.record("a call to a stopped server was answered: \(first)")
                return
            }
            #expect([.closed, .connect, .io].contains(error.kind), "\(error)")
            #expect(!health.isUp)
            let second = await pool.execute(batch: [Self.command("PING"), Self.command("PING")])
            #expect(second.map { try? $0.get() } == [nil, nil])
            for result in second {
                if case .failure(let error) = result { #expect(error.kind == .unavailable) }
            }
        }
    }

    @Test func aReplyPastTheValueLimitClosesTheConnectionAndFailsIO() async throws {
        try await withRedis { server in
            let (pool, _) = try Self.pool(server, maximumValueBytes: 1000)
            let large = String(repeating: "x", count: 5000)
            #expect(try await pool.execute(Self.command("SET", "large", large)).get() == .status("OK"))
            let read = await pool.execute(Self.command("GET", "large"))
            guard case .failure(let error) = read else {
                Issue.record("a value past the limit was read: \(read)")
                return
            }
            #expect(error.kind == .io)
            #expect(error.message.contains("1000"), "\(error.message)")
            // The connection that carried it is gone; the next call gets a fresh one.
            #expect(await Self.answers(pool))
            #expect(try await pool.execute(Self.command("STRLEN", "large")).get() == .integer(5000))
        }
    }

    /// A call made on an event loop that holds one of the pool's connections goes on that connection: its callback
    /// runs on the caller's own loop, every time (round robin alone would put every other call on the other loop).
    @Test func aCallMadeOnAnEventLoopIsAnsweredOnIt() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        try await withRedis { server in
            let (pool, _) = try Self.pool(server, size: 2, group: group)
            for loop in [group.next(), group.next()] {
                let answeredOnTheCallersLoop = try await loop.submit {
                    (0..<10).map { index in
                        let promise = loop.makePromise(of: Bool.self)
                        pool.submit(batch: [Self.command("INCRBY", "affinity", "\(index)")]) { results in
                            promise.succeed(loop.inEventLoop && results.allSatisfy { (try? $0.get()) != nil })
                        }
                        return promise.futureResult
                    }
                }.flatMap { EventLoopFuture.whenAllSucceed($0, on: loop) }.get()
                #expect(answeredOnTheCallersLoop == Array(repeating: true, count: 10), "\(loop)")
            }
            // Made by a task, not on a loop: round robin over both connections, answered all the same.
            #expect(try await pool.execute(Self.command("GET", "affinity")).get() == .string(Array("90".utf8)))
        }
        try await group.shutdownGracefully()
    }

    @Test func aPoolRunsOnTheEventLoopGroupItIsGiven() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        try await withRedis { server in
            let (pool, _) = try Self.pool(server, size: 3, group: group)
            let replies = await withTaskGroup(of: Result<RedisValue, RedisCallError>.self) { tasks in
                for index in 0..<30 { tasks.addTask { await pool.execute(Self.command("INCRBY", "on-group", "\(index)")) } }
                return await tasks.reduce(into: [Result<RedisValue, RedisCallError>]()) { $0.append($1) }
            }
            #expect(replies.allSatisfy { (try? $0.get()) != nil })
            #expect(try await pool.execute(Self.command("GET", "on-group")).get() == .string(Array("435".utf8)))
        }
        try await group.shutdownGracefully()
    }
}
