import Foundation
import HTTPTypes
import Logging
import MetricsTestKit
import PrefetchCore
import PrefetchStore
import PrefetchTestSupport
import PrefetchTestUpstream
import Synchronization
import Testing

@testable import RedisStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let quietLogger = Logger(label: "prefetch.redis.test") { _ in SwiftLogNoOpLogHandler() }

/// A port nothing listens on right now: bind port 0 and read back what the kernel chose.
func freePort() throws -> Int {
    guard let port = unusedLocalPort() else { throw RedisStoreError(code: "test", message: "cannot bind a socket to 127.0.0.1") }
    return port
}

/// Runs `body` with a fresh redis-server (given extra `arguments`, see `RedisServer.start`) and always stops it
/// afterwards, whatever happens.
func withRedis(
    arguments: [String] = [], cliAuth: [String] = [], _ body: (RedisServer) async throws -> Void
) async throws {
    let server = try await RedisServer.start(arguments: arguments, cliAuth: cliAuth)
    do {
        try await body(server)
    } catch {
        await server.stop()
        throw error
    }
    await server.stop()
}

/// Settings for tests: short poll and lock times, a local tier with a short cap. The command timeout is long: a call
/// that times out counts as Redis being away (the store degrades to its local tier), which these tests do not mean to
/// test when a loaded machine delays a reply; the tests of an unreachable Redis stop or kill the server instead.
func testConfiguration(
    lockAge: Duration = .seconds(10), localTTL: Duration = .milliseconds(200), pollInterval: Duration = .milliseconds(100)
) -> RedisStore.Configuration {
    var configuration = RedisStore.Configuration()
    configuration.pollInterval = pollInterval
    configuration.lockAge = lockAge
    configuration.localTTL = localTTL
    configuration.connectTimeout = .seconds(2)
    configuration.commandTimeout = .seconds(5)
    return configuration
}

/// `count` stores ("replicas") sharing `server`, each run as a service (pub/sub subscriber) unless `runServices` is
/// false; the services are cancelled when `body` returns or throws.
func withReplicas(
    _ server: RedisServer, count: Int = 2, configuration: RedisStore.Configuration = testConfiguration(),
    metrics: [TestMetrics]? = nil, runServices: Bool = true, clock: any ServiceClock = ContinuousClock(),
    _ body: ([RedisStore]) async throws -> Void
) async throws {
    let stores = try (0..<count).map { index in
        try RedisStore(
            url: server.url, configuration: configuration, logger: quietLogger,
            metricsFactory: metrics?[index] ?? TestMetrics(), clock: clock)
    }
    try await withThrowingTaskGroup(of: Void.self) { group in
        if runServices {
            for store in stores { group.addTask { try await store.run() } }
            // Every replica hears the others before the test starts: an announcement made earlier would be lost.
            let listening = await eventually { stores.allSatisfy(\.isListening) }
            #expect(listening, "every replica's subscriber subscribed")
        }
        do {
            try await body(stores)
        } catch {
            group.cancelAll()
            throw error
        }
        group.cancelAll()
    }
}

func key(_ path: String = "/a", identity: Identity = .anonymous, body: [UInt8]? = nil) -> StoreKey {
    StoreKey(identity: identity, method: "GET", url: "https://api.test\(path)", body: body)
}

func response(_ text: String, noStore: Bool = false) -> StoredResponse {
    StoredResponse(
        status: 200, headers: [.contentType: "text/plain"], body: Array(text.utf8),
        noStore: noStore)
}

func policy(_ label: String = "profile", ttl: Duration = .seconds(30), negativeTTL: Duration = .seconds(5)) -> StorePolicy {
    StorePolicy(ttl: ttl, negativeTTL: negativeTTL, label: label)
}

/// What a reader sees of a response, without the process-local `fetchedAt`.
struct Content: Hashable, Sendable {
    var status: Int
    var headers: HTTPFields
    var body: String
    var noStore: Bool

    init(_ response: StoredResponse) {
        status = response.status
        headers = response.headers
        body = String(decoding: response.body, as: UTF8.self)
        noStore = response.noStore
    }
}

extension ReadOutcome {
    var content: Content? {
        if case .ready(let response, _) = self { return Content(response) }
        return nil
    }

    var body: String? { content?.body }

    var isJoined: Bool {
        switch self {
        case .ready(_, let joined), .failed(_, let joined): joined
        default: false
        }
    }
}

extension BeginOutcome {
    var token: FlightToken? {
        if case .leader(let token) = self { return token }
        return nil
    }
}

/// Claims and completes a flight on `store`; returns whether it led.
@discardableResult
func put(
    _ store: RedisStore, _ key: StoreKey, _ result: Result<StoredResponse, StoreFailure>,
    policy: StorePolicy = policy()
) async -> Bool {
    guard let token = await store.begin(key, policy: policy).token else { return false }
    await store.complete(key, token: token, result: result)
    return true
}

/// Runs `operation`, recording an issue and returning nil if it has not finished within `seconds`.
func bounded<T: Sendable>(
    _ seconds: Int = 10, _ what: String, _ operation: @escaping @Sendable () async -> T
) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            try? await Task.sleep(for: .seconds(seconds))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        if first == nil { Issue.record("\(what) did not finish within \(seconds) s") }
        return first
    }
}

/// Ends `name` in Redis now, as its expiry does (`PEXPIRE name 1`), and returns once Redis no longer has it: tests of
/// what replicas do when a TTL or lock age passes use a long one and end it here, so no step races a short TTL on a
/// loaded machine.
func expireNow(_ server: RedisServer, _ name: String) async throws {
    let (pool, _) = try PipelineTests.onePool(server)
    let command = ["PEXPIRE", name, "1"].map { Array($0.utf8) }
    guard case .success = await pool.execute(command) else { throw RedisTestError("PEXPIRE \(name) failed") }
    let gone = await eventually {
        guard case .success(let reply) = await pool.execute(["PTTL", name].map { Array($0.utf8) }) else { return false }
        return reply == .integer(-2)
    }
    guard gone else { throw RedisTestError("\(name) outlived its PEXPIRE") }
}

struct RedisTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
