import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchStore
import PrefetchTestSupport
import Testing

@testable import RedisStore

/// Invalidation on a real redis-server: one replica drops, every replica stops handing out.
@Suite(.serialized) struct RedisInvalidationTests {
    static let alice = Identity(digest: String(repeating: "a", count: 64))
    static let bob = Identity(digest: String(repeating: "b", count: 64))

    /// A local tier that outlives every test, so only the drop announcement can take a copy out of it.
    static let longLocalTier = testConfiguration(localTTL: .seconds(120))

    func tagged(_ text: String, _ keys: String) -> StoredResponse {
        StoredResponse(status: 200, headers: [.contentType: "text/plain", SurrogateKeys.headerName: keys], body: Array(text.utf8))
    }

    @Test func aLogoutOnOneReplicaIsAMissOnTheOtherEvenFromItsLocalTier() async throws {
        try await withRedis { server in
            try await withReplicas(server, configuration: Self.longLocalTier) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await put(a, key("/cart", identity: Self.alice), .success(response("alice cart"))))
                #expect(await put(a, key("/balance", identity: Self.alice), .failure(StoreFailure(code: .timeout, message: "slow"))))
                #expect(await put(a, key("/cart", identity: Self.bob), .success(response("bob cart"))))
                #expect(await put(a, key("/cart"), .success(response("shared"))))
                // Replica b reads alice's cart once: it now holds a local copy.
                #expect(await b.read(key("/cart", identity: Self.alice), wait: .zero).body == "alice cart")

                let aliceDropped = try await a.invalidate(identity: Self.alice)
                #expect(aliceDropped == 2)

                #expect(await a.read(key("/cart", identity: Self.alice), wait: .zero) == .absent(.invalidated))
                let missOnB = await eventually {
                    await b.read(key("/cart", identity: Self.alice), wait: .zero) == .absent(.invalidated)
                }
                #expect(missOnB, "replica b must drop its local copy when the invalidation is announced")
                #expect(await b.read(key("/balance", identity: Self.alice), wait: .zero) == .absent(.invalidated))
                #expect(await b.read(key("/cart", identity: Self.bob), wait: .zero).body == "bob cart")
                #expect(await b.read(key("/cart"), wait: .zero).body == "shared")
                let anonymousDropped = try await b.invalidate(identity: .anonymous)
                #expect(anonymousDropped == 0)
                #expect(await a.read(key("/cart"), wait: .zero).body == "shared")
                // The identity's index went with it, and the next trigger leads again.
                let indexes = await server.cli(["--scan", "--pattern", "prefetch:v1:{*}:i:\(Self.alice.digest)"])
                #expect(indexes?.isEmpty == true, "every group's index set of the identity is gone")
                #expect(await b.begin(key("/cart", identity: Self.alice), policy: policy()).token != nil)
            }
        }
    }

    @Test func aFlightInProgressIsNotTouched() async throws {
        try await withRedis { server in
            // A lock that cannot age out while a loaded machine delays the read (a fresh-clone CI run once saw the
            // reader never wait, 10 s being the lock's age and the test's patience alike).
            try await withReplicas(server, configuration: testConfiguration(lockAge: .seconds(120))) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                let token = try #require(await a.begin(key("/cart", identity: Self.alice), policy: policy()).token)
                let waiting = Task { await b.read(key("/cart", identity: Self.alice), wait: .seconds(60)) }
                #expect(await eventually(within: 60) { b.waitingReaders == 1 })
                let inFlightDropped = try await b.invalidate(identity: Self.alice)
                #expect(inFlightDropped == 0)
                await a.complete(key("/cart", identity: Self.alice), token: token, result: .success(response("fresh")))
                #expect(await waiting.value.body == "fresh")
                #expect(await b.read(key("/cart", identity: Self.alice), wait: .zero).body == "fresh")
            }
        }
    }

    @Test func anInterfaceIsDroppedForEveryIdentityOnEveryReplica() async throws {
        try await withRedis { server in
            try await withReplicas(server, configuration: Self.longLocalTier) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                for identity in [Self.alice, Self.bob, .anonymous] {
                    #expect(await put(a, key("/cart", identity: identity), .success(response("cart")), policy: policy("cart")))
                }
                #expect(await put(a, key("/news"), .success(response("news")), policy: policy("news")))
                let pending = try #require(await a.begin(key("/cart/pending"), policy: policy("cart")).token)
                #expect(await b.read(key("/cart", identity: Self.bob), wait: .zero).body == "cart")

                let cartDropped = try await a.invalidate(label: "cart")
                #expect(cartDropped == 3)

                for identity in [Self.alice, Self.bob, .anonymous] {
                    let miss = await eventually { await b.read(key("/cart", identity: identity), wait: .zero) == .absent(.invalidated) }
                    #expect(miss, "\(identity)")
                }
                #expect(await b.read(key("/news"), wait: .zero).body == "news")
                #expect(await b.begin(key("/cart/pending"), policy: policy("cart")) == .joined, "a flight in progress keeps its lock")
                await a.complete(key("/cart/pending"), token: pending, result: .success(response("late")))
                #expect(await b.read(key("/cart/pending"), wait: .zero).body == "late")
            }
        }
    }

    @Test func aSurrogateKeyDropsTaggedResponsesAcrossIdentities() async throws {
        try await withRedis { server in
            try await withReplicas(server, configuration: Self.longLocalTier) { replicas in
                let (a, b) = (replicas[0], replicas[1])
                #expect(await put(a, key("/p1", identity: Self.alice), .success(tagged("p1 alice", "product-1 catalog"))))
                #expect(await put(b, key("/p1", identity: Self.bob), .success(tagged("p1 bob", "catalog product-1"))))
                #expect(await put(a, key("/p2"), .success(tagged("p2", "product-2 catalog"))))
                #expect(await b.read(key("/p1", identity: Self.alice), wait: .zero).body == "p1 alice")

                let productDropped = try await a.invalidate(surrogateKey: "product-1")
                #expect(productDropped == 2)
                let miss = await eventually { await b.read(key("/p1", identity: Self.alice), wait: .zero) == .absent(.invalidated) }
                #expect(miss)
                #expect(await a.read(key("/p1", identity: Self.bob), wait: .zero) == .absent(.invalidated))
                #expect(await b.read(key("/p2"), wait: .zero).body == "p2")
                let catalogDropped = try await b.invalidate(surrogateKey: "catalog")
                #expect(catalogDropped == 1)
                let productAgainDropped = try await b.invalidate(surrogateKey: "product-1")
                #expect(productAgainDropped == 0)
            }
        }
    }

    @Test func thousandsOfSurrogateKeysRecordOnlyThirtyTwoIndexSetsThatExpireWithTheValue() async throws {
        try await withRedis { server in
            try await withReplicas(server, count: 1) { replicas in
                let many = (0..<5000).map { "key-\($0)" }.joined(separator: " ")
                #expect(await put(replicas[0], key("/many"), .success(tagged("many", many)), policy: policy(ttl: .seconds(30))))
                let listed = await server.cli(["--scan", "--pattern", "prefetch:v1:{*}:s:*"]) ?? ""
                #expect(listed.split(separator: "\n").count == SurrogateKeys.maximumCount)
                let keySpace = KeySpace(namespace: "prefetch:v1", database: 0)
                let set = keySpace.surrogateIndex("key-0", group: keySpace.keys(for: key("/many")).group)
                let ttl = Int((await server.cli(["PTTL", set]) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
                #expect(ttl > 0 && ttl <= 30_000, "an index set expires with the value it names, got \(ttl)")
                let lastRecordedKeyDropped = try await replicas[0].invalidate(surrogateKey: "key-31")
                #expect(lastRecordedKeyDropped == 1)
                let keyBeyondTheBoundDropped = try await replicas[0].invalidate(surrogateKey: "key-32")
                #expect(keyBeyondTheBoundDropped == 0)
            }
        }
    }

    @Test func anUnreachableRedisIsReportedAndTheFallbackIsStillDropped() async throws {
        try await withRedis { server in
            try await withReplicas(server, count: 1) { replicas in
                let store = replicas[0]
                await server.stop()
                // Redis is down: the flight leads and completes in this replica's fallback store.
                #expect(await put(store, key("/cart", identity: Self.alice), .success(response("outage cart"))))
                #expect(store.isDegraded)
                #expect(await store.read(key("/cart", identity: Self.alice), wait: .zero).body == "outage cart")
                await #expect(throws: StoreUnavailable.self) { try await store.invalidate(identity: Self.alice) }
                #expect(await store.read(key("/cart", identity: Self.alice), wait: .zero) == .absent(.invalidated))
            }
        }
    }
}

/// The local tier's part in invalidation, decided without Redis.
@Suite struct LocalTierInvalidationTests {
    let t0 = ContinuousClock.now

    @Test func aDropTakesTheCopyAndRefusesRepliesReadBeforeIt() {
        var state = RedisStoreState(configuration: testConfiguration(localTTL: .seconds(60)), database: 0)
        let digest = KeySpace.digest(of: key("/cart"))
        state.completing(
            state.calls.completion(
                state.calls.claim(key("/cart"), policy: policy(), token: FlightToken(1)).lead, result: .success(response("old")),
                encoded: EntryCodec.encode(.response(response("old"), label: "profile"))),
            sentAt: t0)
        #expect(state.local.items[digest] != nil)

        state.dropped([digest], now: t0 + .milliseconds(10))
        #expect(state.local.items[digest] == nil)

        // A probe sent before the drop whose reply arrives after it does not bring the old response back ...
        var reader = state.startRead(key("/cart"), wait: .zero, cancelled: false, now: t0 + .milliseconds(5)).0
        let stale = RedisStoreState.Probe.value(.response(response("old"), label: "profile"), pttl: 30_000)
        _ = state.probed(&reader, stale, sentAt: t0 + .milliseconds(5), cancelled: false, now: t0 + .milliseconds(20))
        #expect(state.local.items[digest] == nil)
        // ... while one sent after it may be kept.
        var later = state.startRead(key("/cart"), wait: .zero, cancelled: false, now: t0 + .milliseconds(30)).0
        let fresh = RedisStoreState.Probe.value(.response(response("new"), label: "profile"), pttl: 30_000)
        _ = state.probed(&later, fresh, sentAt: t0 + .milliseconds(30), cancelled: false, now: t0 + .milliseconds(31))
        #expect(state.local.items[digest] != nil)
    }

    @Test func messagesOnTheChannelAreToldApart() {
        let digest = String(repeating: "f", count: 64)
        let other = String(repeating: "e", count: 64)
        #expect(KeySpace.parseMessage(KeySpace.announcement(digest, payload: nil)) == .completed(digest: digest, payload: nil))
        #expect(KeySpace.parseMessage(KeySpace.dropAnnouncements([digest, other])[0]) == .dropped([digest, other]))
        let many = (0..<300).map { String(format: "%064x", $0) }
        let chunks = KeySpace.dropAnnouncements(many)
        #expect(chunks.count == 3)
        #expect(
            chunks.flatMap { message -> [String] in
                if case .dropped(let digests) = KeySpace.parseMessage(message) { return digests }
                return []
            } == many)
        for scope: KeySpace.Invalidation in [.identity(Identity(digest: digest)), .label("cart"), .surrogateKey("product-1")] {
            #expect(KeySpace.parseMessage(KeySpace.scopeAnnouncement(scope)) == .invalidated(scope))
        }
    }

    @Test func aCompletionJoinsItsIdentityAndSurrogateKeyIndexes() {
        let state = RedisStoreState(configuration: testConfiguration(), database: 0)
        let identity = Identity(digest: String(repeating: "a", count: 64))
        let lead = state.calls.claim(key("/cart", identity: identity), policy: policy(), token: FlightToken(1)).lead
        let tagged = StoredResponse(status: 200, headers: [SurrogateKeys.headerName: "cart user-1"], body: [])
        #expect(
            state.calls.indexes(lead, result: .success(tagged)) == [
                "prefetch:v1:{\(lead.keys.group)}:i:\(identity.digest)",
                state.calls.keySpace.surrogateIndex("cart", group: lead.keys.group),
                state.calls.keySpace.surrogateIndex("user-1", group: lead.keys.group),
            ])
        #expect(
            state.calls.indexes(lead, result: .failure(StoreFailure(code: .timeout, message: "")))
                == ["prefetch:v1:{\(lead.keys.group)}:i:\(identity.digest)"])
        // The value, its lock, its tombstone and its index sets share the group's hash tag, so one slot on a cluster.
        let slot = HashSlot.of(lead.keys.entry)
        #expect(
            ([lead.keys.lock, lead.keys.tombstone] + state.calls.indexes(lead, result: .success(tagged))).allSatisfy {
                HashSlot.of($0) == slot
            })
        let anonymous = state.calls.claim(key("/cart"), policy: policy(), token: FlightToken(2)).lead
        #expect(state.calls.indexes(anonymous, result: .success(tagged)).count == 2)
    }
}
