import Foundation
import HTTPTypes
import Logging
import MetricsTestKit
import PrefetchCore
import PrefetchStore
import PrefetchTestSupport
import Synchronization
import Testing

@testable import RedisStore

/// Replicas on a real 3-primary Redis Cluster (redis-server 7 started by the tests): the promises of one Redis —
/// single flight exact, identities apart, announcements reaching every replica, invalidation everywhere — with the
/// keys spread over every primary, and through a slot resharded under the store.
@Suite(.serialized) struct ClusterTests {
    static let alice = Identity(digest: String(repeating: "a1", count: 32))
    static let bob = Identity(digest: String(repeating: "b0", count: 32))

    /// `count` stores on `cluster`, run as services unless `runServices` is false (then no subscriber, and no periodic
    /// map refresh: the map changes only when a node redirects a command).
    /// `url` replaces the cluster's own (credentials), `logger` the quiet one.
    func withStores(
        _ cluster: RedisCluster, url: String? = nil, logger: Logger = quietLogger, count: Int = 2, metrics: [TestMetrics]? = nil,
        runServices: Bool = true, configuration: RedisStore.Configuration = testConfiguration(),
        _ body: ([RedisStore]) async throws -> Void
    ) async throws {
        let stores = try (0..<count).map { index in
            try RedisStore(
                url: url ?? cluster.url, configuration: configuration, logger: logger,
                metricsFactory: metrics?[index] ?? TestMetrics())
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            if runServices {
                for store in stores { group.addTask { try await store.run() } }
                let listening = await eventually(within: 20) { stores.allSatisfy(\.isListening) }
                #expect(listening, "every replica listens to every group's channel on its primary")
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

    /// Keys whose groups spread over every primary: `count` paths, each its own key.
    static func spread(_ count: Int, identity: Identity = .anonymous) -> [StoreKey] {
        (0..<count).map { key("/spread/\($0)", identity: identity) }
    }

    /// A key of `group` (found by trying paths), for `identity`.
    static func member(of group: String, _ label: String, identity: Identity = .anonymous) -> StoreKey {
        let keySpace = KeySpace(namespace: "prefetch:v1", database: 0)
        for index in 0..<100_000 {
            let candidate = key("/\(label)/\(index)", identity: identity)
            if keySpace.keys(for: candidate).group == group { return candidate }
        }
        preconditionFailure("no key of group \(group)")
    }

    @Test func aFleetOnAClusterKeepsSingleFlightIsolationAndPromptWakeUps() async throws {
        try await withCluster { cluster in
            var slow = testConfiguration(pollInterval: .seconds(30))
            slow.localEntries = 0
            try await withStores(cluster, configuration: slow) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let keys = Self.spread(24)
                let keySpace = KeySpace(namespace: "prefetch:v1", database: 0)
                var owners = Set<Int>()
                for key in keys {
                    if let owner = await cluster.owner(ofSlot: HashSlot.of(keySpace.keys(for: key).entry)) { owners.insert(owner) }
                }
                #expect(owners.count == 3, "the keys live on every primary")

                // 40 begins of each key over both replicas, at once: one leader per key.
                let outcomes = await withTaskGroup(of: (Int, Int, BeginOutcome).self) { group in
                    for (index, key) in keys.enumerated() {
                        for attempt in 0..<40 {
                            let store = attempt % 2
                            group.addTask { (index, store, await replicas[store].begin(key, policy: policy())) }
                        }
                    }
                    return await group.reduce(into: [Int: [(store: Int, outcome: BeginOutcome)]]()) {
                        $0[$1.0, default: []].append(($1.1, $1.2))
                    }
                }
                for index in keys.indices {
                    #expect(outcomes[index]?.count { $0.outcome.token != nil } == 1, "key \(index): exactly one leader")
                    #expect(outcomes[index]?.count { $0.outcome == .joined } == 39)
                }

                // Readers waiting on the other replica are woken by the shard channels, not by polling (30 s here).
                let readers = Task {
                    await withTaskGroup(of: String?.self) { group in
                        for key in keys { group.addTask { await b.read(key, wait: .seconds(10)).body } }
                        return await group.reduce(into: [String?]()) { $0.append($1) }
                    }
                }
                _ = await eventually { b.waitingReaders == keys.count }
                for (index, key) in keys.enumerated() {
                    for begun in outcomes[index] ?? [] {
                        guard let token = begun.outcome.token else { continue }
                        await replicas[begun.store].complete(key, token: token, result: .success(response("value \(index)")))
                    }
                }
                let bodies = await bounded(8, "the woken readers") { await readers.value }
                #expect(bodies?.count == keys.count)
                #expect(Set((bodies ?? []).compactMap { $0 }) == Set(keys.indices.map { "value \($0)" }))

                // Identities stay apart: alice's answer is only under alice's key.
                let page = key("/feed", identity: Self.alice)
                #expect(await put(a, page, .success(response("alice's feed"))))
                #expect(await b.read(page, wait: .zero).body == "alice's feed")
                #expect(await b.read(key("/feed", identity: Self.bob), wait: .zero) == .absent(.notFound))
                #expect(!a.isDegraded && !b.isDegraded)
            }
        }
    }

    @Test func invalidationReachesEveryShardAndEveryReplica() async throws {
        try await withCluster { cluster in
            try await withStores(cluster) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let alices = Self.spread(20, identity: Self.alice)
                let bobs = Self.spread(5, identity: Self.bob)
                for key in alices + bobs {
                    let tagged = StoredResponse(status: 200, headers: [SurrogateKeys.headerName: "catalog"], body: Array("x".utf8))
                    #expect(await put(a, key, .success(tagged), policy: policy(key.identity == Self.alice ? "profile" : "cart")))
                }
                for key in alices { #expect(await b.read(key, wait: .zero).body == "x") }

                let dropped = try await b.invalidate(identity: Self.alice)
                #expect(dropped == alices.count, "every one of alice's values, on every primary")
                for key in alices {
                    #expect(await b.read(key, wait: .zero) == .absent(.invalidated))
                    // The replica that stored them drops its local copies when it hears of it (within localTTL).
                    #expect(await eventually { await a.read(key, wait: .zero) == .absent(.invalidated) })
                }
                for key in bobs { #expect(await a.read(key, wait: .zero).body == "x", "bob's values stay") }

                #expect(try await a.invalidate(surrogateKey: "catalog") == bobs.count)
                for key in bobs { #expect(await b.read(key, wait: .zero) == .absent(.invalidated)) }

                for key in Self.spread(12) { #expect(await put(a, key, .success(response("shared")), policy: policy("cart"))) }
                #expect(try await b.invalidate(label: "cart") == 12, "the label scan visits every primary")
                #expect(await a.snapshot().entries == 0)
            }
        }
    }

    @Test func aPageOpenSpanningAMovedAndAnAskedSlotStaysExact() async throws {
        try await withCluster { cluster in
            let metrics = [TestMetrics(), TestMetrics()]
            // No subscribers: the map changes only when a node redirects a command, so each redirection is seen.
            try await withStores(cluster, metrics: metrics, runServices: false) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let keySpace = KeySpace(namespace: "prefetch:v1", database: 0)
                // Two groups on the same primary, and a node to move them to.
                let asked = "3a"
                let askedSlot = HashSlot.of(keySpace.prefix(group: asked))
                let source = try #require(await cluster.owner(ofSlot: askedSlot))
                var sameSource: String?
                for group in KeySpace.groups where group != asked {
                    if await cluster.owner(ofSlot: HashSlot.of(keySpace.prefix(group: group))) == source {
                        sameSource = group
                        break
                    }
                }
                let movedGroup = try #require(sameSource)
                let movedSlot = HashSlot.of(keySpace.prefix(group: movedGroup))
                let target = try #require(cluster.ports.first { $0 != source })

                // Both replicas learn the map and store a value in each group before the reshard.
                let before = [Self.member(of: asked, "before"), Self.member(of: movedGroup, "before")]
                for key in before { #expect(await put(a, key, .success(response("before")))) }
                for key in before { #expect(await b.read(key, wait: .zero).body == "before") }

                // One slot moves entirely behind the stores' backs (their maps are stale: MOVED); the other starts
                // migrating (the source answers ASK for keys it does not hold, and both sides TRYAGAIN for a script
                // whose keys are not all on one side, until the migration ends).
                try await cluster.reshard(slot: movedSlot, from: source, to: target)
                try await cluster.beginMigration(slot: askedSlot, from: source, to: target)

                // A page open of four keys: one in each of those slots, two elsewhere, begun by both replicas at once.
                let page = [
                    Self.member(of: asked, "page"), Self.member(of: movedGroup, "page"),
                    key("/page/other-1"), key("/page/other-2"),
                ]
                let requests = page.map { (key: $0, policy: policy()) }
                async let first = a.begin(requests)
                async let second = b.begin(requests)
                // The page opens wait on the migrating slot; the migration ends once both were sent there.
                let redirected = await eventually {
                    metrics.allSatisfy {
                        $0.counterTotal(label: "prefetch_store_redis_redirections_total", dimensions: [("kind", "ask")]) > 0
                    }
                }
                #expect(redirected, "both page opens were asked to the target")
                try await cluster.moveKeys(slot: askedSlot, from: source, to: target)
                try await cluster.finishMigration(slot: askedSlot, from: source, to: target)
                let outcomes = await [first, second]
                for index in page.indices {
                    let leaders = outcomes.count { $0[index].token != nil }
                    let joined = outcomes.count { $0[index] == .joined }
                    #expect(leaders == 1, "key \(index): one leader, got \(outcomes.map { $0[index] })")
                    #expect(joined == 1, "key \(index): one joined, got \(outcomes.map { $0[index] })")
                }
                for kind in ["moved", "ask", "tryagain"] {
                    let followed = metrics.map {
                        $0.counterTotal(label: "prefetch_store_redis_redirections_total", dimensions: [("kind", kind)])
                    }
                    #expect(followed.reduce(0, +) > 0, "the page opens followed \(kind): \(followed)")
                }
                #expect(!a.isDegraded && !b.isDegraded, "a redirection is not an outage")

                // The leaders complete; the values, and those stored before the reshard, are read on either replica.
                for (store, outcome) in zip(replicas, outcomes) {
                    for (index, begun) in outcome.enumerated() {
                        if let token = begun.token {
                            await store.complete(page[index], token: token, result: .success(response("page \(index)")))
                        }
                    }
                }
                for (index, key) in page.enumerated() {
                    #expect(await b.read(key, wait: .zero).body == "page \(index)")
                    #expect(await a.read(key, wait: .zero).body == "page \(index)")
                }
                for key in before {
                    #expect(await a.read(key, wait: .zero).body == "before")
                    #expect(await b.read(key, wait: .zero).body == "before")
                }
                #expect(await b.begin(page[0], policy: policy()) == .fresh, "single flight sees the moved value")
                #expect(await cluster.owner(ofSlot: askedSlot) == target && cluster.ports.contains(target))
                #expect(!a.isDegraded && !b.isDegraded)
            }
        }
    }

    @Test func aReshardDuringTrafficLosesNoValueAndKeepsOneLeaderPerKey() async throws {
        try await withCluster { cluster in
            try await withStores(cluster) { replicas in
                let keySpace = KeySpace(namespace: "prefetch:v1", database: 0)
                let group = "c4"
                let slot = HashSlot.of(keySpace.prefix(group: group))
                let source = try #require(await cluster.owner(ofSlot: slot))
                let target = try #require(cluster.ports.first { $0 != source })
                let stored = (0..<20).map { Self.member(of: group, "stored-\($0)") }
                for key in stored { #expect(await put(replicas[0], key, .success(response("kept")))) }

                // Rounds of begins of fresh keys of the slot, from both replicas at once, until the reshard is over:
                // each key still has exactly one leader, before, during and after.
                let finished = Flag()
                let traffic = Task {
                    var rounds: [[BeginOutcome]] = []
                    while !finished.isSet || rounds.count < 3 {
                        let key = Self.member(of: group, "raced-\(rounds.count)")
                        rounds.append(
                            await withTaskGroup(of: BeginOutcome.self) { race in
                                for attempt in 0..<4 { race.addTask { await replicas[attempt % 2].begin(key, policy: policy()) } }
                                return await race.reduce(into: []) { $0.append($1) }
                            })
                    }
                    return rounds
                }
                try await cluster.reshard(slot: slot, from: source, to: target)
                finished.set()
                let rounds = await traffic.value
                for (index, outcomes) in rounds.enumerated() {
                    #expect(outcomes.count { $0.token != nil } == 1, "raced key \(index): one leader, got \(outcomes)")
                }
                for key in stored {
                    #expect(await replicas[1].read(key, wait: .zero).body == "kept", "a value stored before the reshard")
                }
                // The subscribers follow the slot: a completion after the reshard still wakes the other replica.
                let next = Self.member(of: group, "after")
                let token = try #require(await replicas[0].begin(next, policy: policy()).token)
                let reader = Task { await replicas[1].read(next, wait: .seconds(10)).body }
                await replicas[0].complete(next, token: token, result: .success(response("after the reshard")))
                #expect(await reader.value == "after the reshard")
            }
        }
    }
}

extension ClusterTests {
    @Test func theFleetFollowsAReplicaPromotedWhenAPrimaryDies() async throws {
        try await withCluster(replicas: true) { cluster in
            try await withStores(cluster) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let keySpace = KeySpace(namespace: "prefetch:v1", database: 0)
                let victim = cluster.ports[0]
                let heir = cluster.replicaPorts[0]
                let witness = cluster.ports[1]
                var victimsGroup: String?
                for group in KeySpace.groups where await cluster.owner(ofSlot: HashSlot.of(keySpace.prefix(group: group))) == victim {
                    victimsGroup = group
                    break
                }
                let group = try #require(victimsGroup)
                let slot = HashSlot.of(keySpace.prefix(group: group))
                let stored = (0..<10).map { Self.member(of: group, "stored-\($0)") } + Self.spread(10)
                for key in stored { #expect(await put(a, key, .success(response("before")))) }
                // Written before the loss: the replica has them (replication is asynchronous; wait until it caught up).
                let caughtUp = await eventually(within: 10) {
                    await cluster.cli(port: victim, ["DBSIZE"]) == cluster.cli(port: heir, ["DBSIZE"])
                }
                #expect(caughtUp)

                await cluster.kill(port: victim)
                let promoted = await eventually(within: 30) { await cluster.owner(ofSlot: slot, seenBy: witness) == heir }
                #expect(promoted, "the cluster promoted the replica")

                // The fleet follows by itself: both replicas serve every value again, from the new primary too.
                let followed = await eventually(within: 20) {
                    guard !a.isDegraded, !b.isDegraded else { return false }
                    for key in stored where await b.read(key, wait: .zero).body != "before" { return false }
                    return true
                }
                #expect(followed, "both replicas read every value again after the failover")
                #expect(a.isListening && b.isListening)

                // Single flight is exact again on the promoted primary, and a completion there wakes the other replica.
                let fresh = Self.member(of: group, "after")
                let outcomes = await withTaskGroup(of: BeginOutcome.self) { race in
                    for attempt in 0..<40 { race.addTask { await replicas[attempt % 2].begin(fresh, policy: policy()) } }
                    return await race.reduce(into: [BeginOutcome]()) { $0.append($1) }
                }
                #expect(outcomes.count { $0.token != nil } == 1)
                #expect(outcomes.count { $0 == .joined } == 39)
                let next = Self.member(of: group, "woken")
                let token = try #require(await a.begin(next, policy: policy()).token)
                let reader = Task { await b.read(next, wait: .seconds(10)).body }
                _ = await eventually { b.waitingReaders == 1 }
                await a.complete(next, token: token, result: .success(response("after the failover")))
                #expect(await reader.value == "after the failover")
            }
        }
    }
}

extension ClusterTests {
    /// The store's part of the rule of the ACL user `prefetch` that `deploy/kubernetes/overlays/cluster/redis-cluster.yaml`
    /// creates on every node (the rest lets replicas replicate): the store's names (keys and shard channels share the
    /// namespace) and every command but `@admin`.
    static let storeUserRule = ["~prefetch:*", "&prefetch:*", "+@all", "-@admin"]

    /// Every node admits only that user (the default user off, as the manifest has it): the store authenticates on
    /// every primary, its data and announcement connections alike, and works with nothing more than the rule grants
    /// (`CLUSTER SHARDS`, `ASKING`, scripts, `SSUBSCRIBE`); a wrong or missing password degrades the store like an
    /// outage, with a log line naming the user and node and never the password.
    @Test func theStoreRunsAsTheDeploymentsLimitedACLUserOnEveryNode() async throws {
        try await withCluster { cluster in
            let password = "cluster-acl-5e1b"
            for port in cluster.ports {
                let created = await cluster.cli(port: port, ["ACL", "SETUSER", "prefetch", "on", ">\(password)"] + Self.storeUserRule)
                #expect(created?.trimmingCharacters(in: .whitespacesAndNewlines) == "OK")
            }
            // Last: from here on only the store's user gets in (the nodes' bus needs no user).
            for port in cluster.ports {
                let closed = await cluster.cli(port: port, ["ACL", "SETUSER", "default", "off"])
                #expect(closed?.trimmingCharacters(in: .whitespacesAndNewlines) == "OK")
            }
            let seeds = cluster.ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")

            let logs = CapturedLogs()
            try await withStores(cluster, url: "redis-cluster://prefetch:\(password)@\(seeds)", logger: logs.logger) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let keys = Self.spread(12, identity: Self.alice)
                for key in keys {
                    let token = try #require(await a.begin(key, policy: policy("profile")).token)
                    #expect(await b.begin(key, policy: policy("profile")) == .joined, "single flight across replicas")
                    let reader = Task { await b.read(key, wait: .seconds(10)).body }
                    await a.complete(key, token: token, result: .success(response("as prefetch")))
                    #expect(await reader.value == "as prefetch")
                }
                #expect(try await b.invalidate(identity: Self.alice) == keys.count, "the invalidation reached every primary")
                #expect(!a.isDegraded && !b.isDegraded)
            }
            #expect(!logs.all.joined().contains(password))

            for (url, shows) in [
                ("redis-cluster://prefetch:not-the-cluster-secret@\(seeds)", "WRONGPASS"),
                ("redis-cluster://\(seeds)", "NOAUTH"),
            ] {
                let refused = CapturedLogs()
                let metrics = TestMetrics()
                let store = try RedisStore(url: url, configuration: testConfiguration(), logger: refused.logger, metricsFactory: metrics)
                await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await store.run() }
                    defer { group.cancelAll() }
                    _ = await store.begin(key("/refused"), policy: policy())
                    #expect(await eventually { store.isDegraded }, "refused credentials (\(shows)) degrade the store like an outage")
                    let during = await bounded(10, "begin while refused") { await store.begin(key("/during"), policy: policy()) }
                    #expect(during?.token != nil, "the store still leads its own fetches")
                    // Down it stays: no node that refuses the store ever counts as reached (no flapping up and down).
                    #expect(store.isDegraded)
                    #expect(metrics.counterTotal(label: "prefetch_store_redis_reconnects_total") == 0)
                }
                #expect(refused.all.contains { $0.contains(shows) }, "\(refused.all)")
                #expect(!refused.all.joined().contains("not-the-cluster-secret"))
                #expect(!refused.all.joined().contains(password))
            }
        }
    }
}

/// A flag one task sets and another reads.
final class Flag: Sendable {
    private let value = Mutex(false)

    var isSet: Bool { value.withLock { $0 } }

    func set() { value.withLock { $0 = true } }
}
