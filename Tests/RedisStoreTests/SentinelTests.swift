import Foundation
import MetricsTestKit
import PrefetchCore
import PrefetchStore
import PrefetchTestSupport
import Synchronization
import Testing

@testable import RedisStore

#if canImport(Glibc)
import Glibc
#endif

/// `redis-sentinel://` URLs, and what the store does with what the sentinels say (no I/O).
@Suite struct SentinelRuleTests {
    @Test func sentinelURLsAreParsedWithEveryPart() throws {
        let plain = try SentinelEndpoints(url: "redis-sentinel://127.0.0.1:26380,sentinel-b,[::1]:26382/prefetch")
        #expect(plain.sentinels.map(\.description) == ["127.0.0.1:26380", "sentinel-b:26379", "[::1]:26382"])
        #expect(plain.primaryName == "prefetch")
        #expect(plain.template.database == 0 && plain.template.credentials == nil)
        let full = try SentinelEndpoints(url: "redis-sentinel://app:s%40cret@10.0.0.1:26379/cache.main/3")
        #expect(full.template.database == 3)
        #expect(full.template.credentials == RedisCredentials(user: "app", password: "s@cret"))
        #expect(full.description == "redis-sentinel://app:***@10.0.0.1:26379/cache.main/3")
        #expect(full.primary(at: .init(host: "10.0.0.9", port: 6380)).description == "redis://app:***@10.0.0.9:6380/3")
    }

    @Test func badSentinelURLsSayWhatIsWrongWithoutThePassword() {
        let cases: [(String, String)] = [
            ("redis-sentinel://127.0.0.1:26379", "the primary's name is missing"),
            ("redis-sentinel://127.0.0.1:26379/", "the primary's name is missing"),
            ("redis-sentinel://127.0.0.1:26379/na me", "is not a primary name"),
            ("redis-sentinel://127.0.0.1:26379,/p", "an address in the list is empty"),
            ("redis-sentinel://127.0.0.1:99999/p", "the sentinel address '127.0.0.1:99999' is not host:port"),
            ("redis-sentinel://127.0.0.1/p/x", "the database 'x' is not a non-negative number"),
            ("redis-sentinel://127.0.0.1/p/1/2", "unexpected '2' after the database"),
            ("redis-sentinel://user:hunter2@h/p/x", "the database 'x'"),
            ("redis-sentinel://hunter2@h/p", "a user without a password"),
            ("redis://127.0.0.1/p", "the scheme must be redis-sentinel://"),
        ]
        for (url, why) in cases {
            do {
                _ = try SentinelEndpoints(url: url)
                Issue.record("\(url) was accepted")
            } catch {
                #expect(error.code == RedisStoreError.invalidURLCode)
                #expect(error.message.contains(why), "\(url): \(error.message)")
                #expect(!error.message.contains("hunter2"), "\(url): \(error.message)")
            }
        }
    }

    @Test func onlyAPrimaryMostSentinelsNameAndThatSaysSoIsMovedTo() {
        let a = SentinelEndpoints.Address(host: "127.0.0.1", port: 7001)
        let b = SentinelEndpoints.Address(host: "127.0.0.1", port: 7002)
        // A majority is of every configured sentinel, answering or not.
        #expect(PrimaryDiscovery.majority([a, a, b], of: 3) == a)
        #expect(PrimaryDiscovery.majority([a, nil, nil], of: 3) == nil, "one sentinel of three is no majority")
        #expect(PrimaryDiscovery.majority([a, b, nil, nil], of: 4) == nil)
        #expect(PrimaryDiscovery.majority([a, a, b, nil], of: 4) == nil, "two of four is not more than half")
        #expect(PrimaryDiscovery.majority([a, a, a, b], of: 4) == a)
        var discovery = PrimaryDiscovery()
        // No majority: nothing to move to.
        #expect(discovery.observed(named: nil, role: .unknown) == .keep)
        #expect(discovery.current == nil)
        // A named server that is not (yet) a primary is not trusted.
        #expect(discovery.observed(named: a, role: .replica) == .keep)
        #expect(discovery.observed(named: a, role: .unknown) == .keep)
        // The first verified primary; then the same one again changes nothing.
        #expect(discovery.observed(named: a, role: .primary) == .switchTo(a))
        #expect(discovery.observed(named: a, role: .unknown) == .keep)
        // A failover: most sentinels name another server, which says it is the primary.
        #expect(discovery.observed(named: b, role: .primary) == .switchTo(b))
        #expect(discovery.current == b)
        // The old primary named again but now a replica: kept on the new.
        #expect(discovery.observed(named: a, role: .replica) == .keep)
        #expect(discovery.current == b)
    }
}

/// A primary, its replica and three sentinels, started from Debian's redis-server on free ports; two stores
/// ("replicas" of the service) follow the sentinels through the primary's death.
@Suite(.serialized) struct SentinelFailoverTests {
    @Test func theFleetFollowsTheSentinelsThroughThePrimarysDeath() async throws {
        let deployment = try await RedisSentinels.start()
        let (primary, replica, sentinels) = (deployment.primary, deployment.replica, deployment.sentinels)
        do {
            let url = deployment.url
            let metrics = [TestMetrics(), TestMetrics()]
            let stores = try (0..<2).map { index in
                try RedisStore(url: url, configuration: testConfiguration(), logger: quietLogger, metricsFactory: metrics[index])
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in stores { group.addTask { try await store.run() } }
                defer { group.cancelAll() }
                let (a, b) = (stores[0], stores[1])
                let found = await eventually(within: 10) { stores.allSatisfy { $0.primary?.port == primary.port && $0.isListening } }
                try #require(found, "the stores never found the primary through the sentinels")
                // Single flight across the replicas, on the first primary.
                let before = try #require(await a.begin(key("/before"), policy: policy()).token)
                #expect(await b.begin(key("/before"), policy: policy()) == .joined)
                await a.complete(key("/before"), token: before, result: .success(response("first")))
                #expect(await b.read(key("/before"), wait: .seconds(5)).content == Content(response("first")))

                // The primary dies; the sentinels promote the replica; both stores follow.
                let promoted = await deployment.killPrimaryAndAwaitPromotion()
                try #require(promoted, "the sentinels never promoted the replica")
                // Sentinels agree eventually, not at once: a second one names the new primary once it has heard.
                #expect(await eventually(within: 30) { await sentinels[1].primaryPort() == replica.port })
                let followed = await eventually(within: 30) {
                    guard stores.allSatisfy({ $0.primary?.port == replica.port }) else { return false }
                    // Until a call reaches the new primary the store is degraded; probe with a harmless read.
                    _ = await a.read(key("/probe"), wait: .zero)
                    _ = await b.read(key("/probe"), wait: .zero)
                    return !a.isDegraded && !b.isDegraded && stores.allSatisfy(\.isListening)
                }
                try #require(followed, "the stores did not follow the sentinels to the new primary")
                for store in metrics {
                    #expect(try store.expectCounter("prefetch_store_redis_primary_moves_total").totalValue == 1)
                }

                // Single flight is exact again across the replicas, on the new primary: 40 begins, one leader.
                let begun = await withTaskGroup(of: (Int, BeginOutcome).self) { group in
                    for index in 0..<40 {
                        let store = stores[index % 2]
                        group.addTask { (index % 2, await store.begin(key("/after"), policy: policy())) }
                    }
                    return await group.reduce(into: [(Int, BeginOutcome)]()) { $0.append($1) }
                }
                let outcomes = begun.map(\.1)
                #expect(outcomes.count { $0.token != nil } == 1, "\(outcomes)")
                #expect(outcomes.count { $0 == .joined } == 39)
                // The replica that leads completes its flight (the other would be ignored: it does not lead it).
                let (leading, leader) = try #require(
                    begun.first { $0.1.token != nil }.flatMap { pair in pair.1.token.map { (stores[pair.0], $0) } })
                await leading.complete(key("/after"), token: leader, result: .success(response("second")))
                for store in stores {
                    #expect(await store.read(key("/after"), wait: .seconds(5)).content == Content(response("second")))
                }
                // What the replica holds is what the new primary holds: the entry written before the failover too.
                #expect(await b.read(key("/before"), wait: .zero).content == Content(response("first")))
            }
        } catch {
            await deployment.stop()
            throw error
        }
        await deployment.stop()
    }
}
