import Foundation
import Logging
import MetricsTestKit
import PrefetchStore
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import RedisStore

/// Redis with a password (`requirepass`) and with ACL users: the right credentials work on every connection, wrong
/// or missing ones degrade the store like an outage with an error naming the user and host, and the password never
/// reaches a log line, an error or a description.
@Suite(.serialized) struct AuthTests {
    /// Needs percent-encoding in a URL (`@`, `:`, `/`, `%`, space).
    static let password = "p@ss:w/rd% 42"
    static let encodedPassword = "p%40ss%3Aw%2Frd%25%2042"
    static let aclPassword = "acl-secret-7f3a"

    static let requirepass = ["--requirepass", password]
    static let aclUsers = [
        "--user", "default", "off",
        "--user", "app", "on", ">\(aclPassword)", "~*", "&*", "+@all",
    ]

    /// Two replicas on `url`, each running its subscriber, with their logs captured.
    func withStores(
        _ url: String, logs: CapturedLogs, _ body: ([RedisStore]) async throws -> Void
    ) async throws {
        let stores = try (0..<2).map { _ in
            try RedisStore(url: url, configuration: testConfiguration(), logger: logs.logger, metricsFactory: TestMetrics())
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for store in stores { group.addTask { try await store.run() } }
            defer { group.cancelAll() }
            try await body(stores)
        }
    }

    /// A flight completed on one replica is a hit on the other, and both subscribers are subscribed.
    func expectShared(_ stores: [RedisStore], _ server: RedisServer, path: String) async throws {
        #expect(await put(stores[0], key(path), .success(response("shared"))))
        #expect(await stores[1].read(key(path), wait: .zero).body == "shared")
        let subscribed = await eventually {
            let numsub = await server.cli(["PUBSUB", "SHARDNUMSUB", "prefetch:v1:{00}:done:\(stores[0].endpoint.database)"])
            return numsub?.split(separator: "\n").last == "2"
        }
        #expect(subscribed, "both subscribers authenticated and subscribed")
        #expect(!stores[0].isDegraded && !stores[1].isDegraded)
    }

    /// Makes a call and waits until the store reports the failure.
    func expectDegraded(_ store: RedisStore) async {
        _ = await store.begin(key("/probe"), policy: policy())
        let degraded = await eventually { store.isDegraded }
        #expect(degraded, "refused credentials degrade the store like an outage")
        #expect(await bounded(10, "begin while refused") { await store.begin(key("/during"), policy: policy()) }?.token != nil)
    }

    @Test func requirepassWithTheRightPasswordWorksOnEveryConnection() async throws {
        try await withRedis(arguments: Self.requirepass, cliAuth: ["-a", Self.password]) { server in
            let logs = CapturedLogs()
            let url = "redis://:\(Self.encodedPassword)@127.0.0.1:\(server.port)/3"
            try await withStores(url, logs: logs) { stores in
                #expect(stores[0].endpoint.credentials == RedisCredentials(password: Self.password))
                #expect(stores[0].endpoint.description == "redis://:***@127.0.0.1:\(server.port)/3")
                try await expectShared(stores, server, path: "/requirepass")
            }
            let keys = await server.cli(["-n", "3", "DBSIZE"])?.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(keys != nil && keys != "0", "the entries went to database 3 (AUTH came before SELECT)")
            #expect(!logs.all.joined().contains(Self.password))
        }
    }

    @Test func requirepassWithAWrongOrMissingPasswordFailsClearly() async throws {
        try await withRedis(arguments: Self.requirepass, cliAuth: ["-a", Self.password]) { server in
            let wrong = "wrong-guess-91"
            let logs = CapturedLogs()
            try await withStores("redis://:\(wrong)@127.0.0.1:\(server.port)", logs: logs) { stores in
                await expectDegraded(stores[0])
            }
            let refused = logs.all.filter { $0.contains("refused") }
            #expect(refused.contains { $0.contains("Redis at 127.0.0.1:\(server.port) refused the default user") }, "\(logs.all)")
            #expect(!logs.all.joined().contains(wrong))

            let missing = CapturedLogs()
            try await withStores("redis://127.0.0.1:\(server.port)", logs: missing) { stores in
                await expectDegraded(stores[0])
            }
            #expect(missing.all.contains { $0.contains("wants credentials") && $0.contains("127.0.0.1:\(server.port)") }, "\(missing.all)")
        }
    }

    @Test func anACLUserWithTheRightPasswordWorksOnEveryConnection() async throws {
        try await withRedis(arguments: Self.aclUsers, cliAuth: ["--user", "app", "--pass", Self.aclPassword]) { server in
            let logs = CapturedLogs()
            let url = "redis://app:\(Self.aclPassword)@127.0.0.1:\(server.port)"
            try await withStores(url, logs: logs) { stores in
                #expect(stores[0].endpoint.credentials == RedisCredentials(user: "app", password: Self.aclPassword))
                #expect(stores[0].endpoint.description == "redis://app:***@127.0.0.1:\(server.port)/0")
                try await expectShared(stores, server, path: "/acl")
            }
            #expect(!logs.all.joined().contains(Self.aclPassword))
        }
    }

    @Test func anACLUserWithAWrongPasswordOrAnUnknownUserFailsClearly() async throws {
        try await withRedis(arguments: Self.aclUsers, cliAuth: ["--user", "app", "--pass", Self.aclPassword]) { server in
            for (user, password) in [("app", "not-the-acl-secret"), ("mallory", Self.aclPassword)] {
                let logs = CapturedLogs()
                try await withStores("redis://\(user):\(password)@127.0.0.1:\(server.port)", logs: logs) { stores in
                    await expectDegraded(stores[0])
                    #expect(!"\(stores[0].endpoint)".contains(password))
                }
                #expect(
                    logs.all.contains {
                        $0.contains("refused user '\(user)'") && $0.contains("127.0.0.1:\(server.port)") && $0.contains("WRONGPASS")
                    },
                    "\(logs.all)")
                #expect(!logs.all.joined().contains(password))
            }
            let missing = CapturedLogs()
            try await withStores("redis://127.0.0.1:\(server.port)", logs: missing) { stores in
                await expectDegraded(stores[0])
            }
            #expect(missing.all.contains { $0.contains("NOAUTH") }, "\(missing.all)")
        }
    }
}

@Suite struct CredentialURLTests {
    @Test func credentialsAreParsedAndPercentDecoded() throws {
        let legacy = try RedisEndpoint(url: "redis://:s%3Acret%40x@cache.internal:6380/2")
        #expect(
            legacy == RedisEndpoint(host: "cache.internal", port: 6380, database: 2, credentials: RedisCredentials(password: "s:cret@x")))
        #expect(legacy.credentials?.authCommand == ["AUTH", "s:cret@x"])
        let acl = try RedisEndpoint(url: "redis://ops%2Dapp:pa@ss/word@[::1]:7000")
        #expect(acl.credentials == RedisCredentials(user: "ops-app", password: "pa@ss/word"))
        #expect(acl.credentials?.authCommand == ["AUTH", "ops-app", "pa@ss/word"])
        #expect(acl.host == "::1" && acl.port == 7000 && acl.database == 0)
    }

    @Test func thePasswordIsRedactedEverywhereItCouldBeShown() throws {
        let endpoint = try RedisEndpoint(url: "redis://app:hunter2@10.0.0.5:6379/1")
        #expect(endpoint.description == "redis://app:***@10.0.0.5:6379/1")
        #expect(String(reflecting: endpoint).contains("hunter2") == false)
        var dumped = ""
        dump(endpoint, to: &dumped)
        #expect(!dumped.contains("hunter2"), "\(dumped)")
        #expect(dumped.contains("app"))
        #expect(try RedisEndpoint(url: "redis://:hunter2@10.0.0.5").description == "redis://:***@10.0.0.5:6379/0")
    }

    @Test(arguments: [
        ("redis://app@127.0.0.1:6379", "a user without a password"),
        ("redis://:@127.0.0.1:6379", "the password is empty"),
        ("redis://app:hunter2@127.0.0.1:notaport", "the port 'notaport'"),
        ("redis://app:hunter2%zz@127.0.0.1", "the password is not valid percent-encoded UTF-8"),
        ("redis://app:hunter2@127.0.0.1/0?x=1", "query strings"),
        ("rediss://app:hunter2@127.0.0.1", "the scheme must be redis://"),
    ])
    func badCredentialURLsAreRejectedWithoutRepeatingThePassword(url: String, why: String) {
        do {
            _ = try RedisStore(url: url, logger: quietLogger)
            Issue.record("\(url) must be rejected")
        } catch {
            #expect(error.code == RedisStoreError.invalidURLCode)
            #expect(error.message.contains(why), "\(error.message)")
            #expect(error.message.contains("127.0.0.1"), "\(error.message)")
            #expect(!error.message.contains("hunter2"), "\(error.message)")
        }
    }
}
