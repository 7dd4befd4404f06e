import PrefetchStore
import Testing

@testable import RedisStore

/// The cluster's decisions without a cluster: where a key goes, what a redirection says, what `CLUSTER SHARDS`
/// describes, and how a URL reads. The same rules against a real cluster are in `ClusterTests`.
@Suite struct ClusterRuleTests {
    /// Slots as `CLUSTER KEYSLOT` of redis-server 7.0 gives them, hash tags included.
    @Test(arguments: [
        ("123456789", 12739), ("foo", 12182), ("{user1000}.following", 3443), ("foo{}{bar}", 8363),
        ("foo{{bar}}zap", 4015), ("foo{bar}{zap}", 5061), ("prefetch:v1:{00}", 13254),
    ])
    func keysHashToTheSlotsRedisComputes(key: String, slot: Int) {
        #expect(HashSlot.of(key) == slot)
    }

    @Test func everyNameOfAValueSharesItsGroupsSlot() {
        let keySpace = KeySpace(namespace: "prefetch:v1", database: 3)
        let keys = keySpace.keys(digest: String(repeating: "7c", count: 32))
        #expect(keys.group == "7c")
        let slot = HashSlot.of(keySpace.prefix(group: "7c"))
        for name in [keys.entry, keys.lock, keys.tombstone, keySpace.channel(group: "7c"), keySpace.surrogateIndex("cart", group: "7c")] {
            #expect(HashSlot.of(name) == slot, "\(name)")
        }
        #expect(keySpace.kind(of: keys.entry) == .entry)
        #expect(keySpace.kind(of: keys.lock) == .lock)
        #expect(keySpace.kind(of: keys.tombstone) == nil)
        #expect(keySpace.tombstone(forValueOrLock: keys.lock) == keys.tombstone)
        #expect(keySpace.kind(of: "prefetch:v1:e:\(String(repeating: "7c", count: 32))") == nil, "the layout without groups")
        // The groups spread over the slots: 256 groups, 256 different slots.
        #expect(Set(KeySpace.groups.map { HashSlot.of(keySpace.prefix(group: $0)) }).count == 256)
    }

    @Test func redirectionsAreReadAsTheSpecificationWritesThem() {
        #expect(Redirection("MOVED 3999 127.0.0.1:6381") == .moved(slot: 3999, node: ClusterNode(host: "127.0.0.1", port: 6381)))
        #expect(Redirection("ASK 3999 10.0.0.2:7000") == .ask(slot: 3999, node: ClusterNode(host: "10.0.0.2", port: 7000)))
        #expect(Redirection("MOVED 12 ::1:7001") == .moved(slot: 12, node: ClusterNode(host: "::1", port: 7001)))
        let named = ClusterNode(host: "prefetch-redis-cluster-1.prefetch-redis-cluster", port: 6379)
        #expect(Redirection("ASK 7 prefetch-redis-cluster-1.prefetch-redis-cluster:6379") == .ask(slot: 7, node: named))
        #expect(Redirection("TRYAGAIN Multiple keys request during rehashing of slot") == .tryAgain)
        for other in [
            "MOVED 16384 127.0.0.1:1", "MOVED 1 127.0.0.1:0", "MOVED 1 127.0.0.1", "ERR unknown command", "ASK x h:1", "NOSCRIPT",
            "MOVED 1 ?:6379", "ASK 1 ?:6379",
        ] {
            #expect(Redirection(other) == nil, "\(other)")
        }
    }

    @Test func commandsAreRoutedByTheirFirstKey() {
        func command(_ parts: String...) -> [[UInt8]] { parts.map { Array($0.utf8) } }
        #expect(Redirection.routingKey(of: command("EVALSHA", "abc", "3", "k1", "k2", "k3", "arg")) == Array("k1".utf8))
        #expect(Redirection.routingKey(of: command("EVAL", "return 1", "0")) == nil)
        #expect(Redirection.routingKey(of: command("GET", "prefetch:v1:r:ticket:1")) == Array("prefetch:v1:r:ticket:1".utf8))
        #expect(Redirection.routingKey(of: command("SPUBLISH", "ch", "message")) == Array("ch".utf8))
        #expect(Redirection.routingKey(of: command("PING")) == nil)
    }

    /// `CLUSTER SHARDS` as redis-server 7.0 answers it over RESP2: flat name/value lists.
    static func shard(_ ranges: [(Int, Int)], primary: (String, Int), replica: (String, Int)? = nil) -> RedisValue {
        func node(_ address: (String, Int), role: String) -> RedisValue {
            .array([
                .string(Array("id".utf8)), .string(Array("abc".utf8)), .string(Array("port".utf8)), .integer(Int64(address.1)),
                .string(Array("ip".utf8)), .string(Array(address.0.utf8)), .string(Array("endpoint".utf8)),
                .string(Array(address.0.utf8)), .string(Array("role".utf8)), .string(Array(role.utf8)),
                .string(Array("health".utf8)), .string(Array("online".utf8)),
            ])
        }
        let slots = ranges.flatMap { [RedisValue.integer(Int64($0.0)), .integer(Int64($0.1))] }
        let nodes = [node(replica ?? ("", 0), role: "replica")].filter { _ in replica != nil } + [node(primary, role: "master")]
        return .array([.string(Array("slots".utf8)), .array(slots), .string(Array("nodes".utf8)), .array(nodes)])
    }

    @Test func theShardsReplyNamesEverySlotsPrimaryAndMovedPatchesOne() throws {
        let reply = RedisValue.array([
            Self.shard([(0, 5460)], primary: ("127.0.0.1", 7001), replica: ("127.0.0.1", 7004)),
            Self.shard([(5461, 10922)], primary: ("127.0.0.1", 7002)),
            Self.shard([(10923, 16000), (16001, 16383)], primary: ("127.0.0.1", 7003)),
        ])
        var map = try #require(SlotMap(shards: reply))
        #expect(map.isComplete)
        #expect(map.owner(of: 0) == ClusterNode(host: "127.0.0.1", port: 7001), "the primary, not the replica listed first")
        #expect(map.owner(of: 5461) == ClusterNode(host: "127.0.0.1", port: 7002))
        #expect(map.owner(of: 16383) == ClusterNode(host: "127.0.0.1", port: 7003))
        #expect(map.primaries.count == 3)
        let groups = map.groupsByPrimary(namespace: "prefetch:v1")
        #expect(groups.values.map(\.count).reduce(0, +) == 256, "every group is listened to somewhere")
        map.moved(100, to: ClusterNode(host: "127.0.0.1", port: 7003))
        #expect(map.owner(of: 100) == ClusterNode(host: "127.0.0.1", port: 7003))
        #expect(map.owner(of: 101) == ClusterNode(host: "127.0.0.1", port: 7001))

        // A map with a hole is incomplete; a reply of another shape is no map at all.
        let partial = try #require(SlotMap(shards: .array([Self.shard([(0, 100)], primary: ("127.0.0.1", 7001))])))
        #expect(!partial.isComplete && partial.owner(of: 101) == nil)
        #expect(SlotMap(shards: .array([Self.shard([(0, 16384)], primary: ("127.0.0.1", 7001))])) == nil)
        #expect(SlotMap(shards: .string(Array("ERR".utf8))) == nil)
        #expect(SlotMap().owner(of: 0) == nil && SlotMap().primaries.isEmpty)
    }

    @Test func clusterURLsAreParsedWithEveryPart() throws {
        let cluster = try ClusterEndpoints(url: "redis-cluster://app:s3cret@10.0.0.1:7000,[::1]:7001,redis-c")
        #expect(cluster.seeds.map(\.address) == ["10.0.0.1:7000", "[::1]:7001", "redis-c:6379"])
        #expect(cluster.seeds.allSatisfy { $0.credentials == RedisCredentials(user: "app", password: "s3cret") })
        #expect(!cluster.description.contains("s3cret"))
        #expect(try ClusterEndpoints(url: "redis-cluster://127.0.0.1:7000/").seeds.count == 1)
    }

    @Test(arguments: [
        ("redis-cluster://", "no node"), ("redis-cluster://a:1,,b:2", "empty"), ("redis-cluster://a:1/2", "database 0"),
        ("redis-cluster://:pw-secret@a:99999", "not host:port"), ("redis://a:1", "scheme"),
        ("redis-cluster://user@a:1", "without a password"),
    ])
    func badClusterURLsSayWhatIsWrongWithoutThePassword(url: String, why: String) {
        #expect {
            try ClusterEndpoints(url: url)
        } throws: { error in
            guard let error = error as? RedisStoreError else { return false }
            return error.code == "invalid-url" && error.message.contains(why) && !error.message.contains("pw-secret")
        }
    }
}
