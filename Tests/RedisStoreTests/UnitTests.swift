import HTTPTypes
import PrefetchCore
import PrefetchStore
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import RedisStore

@Suite struct EndpointTests {
    @Test func parsesHostPortAndDatabase() throws {
        let endpoint = try RedisEndpoint(url: "redis://127.0.0.1:6380/2")
        #expect(endpoint == RedisEndpoint(host: "127.0.0.1", port: 6380, database: 2))
        #expect(try RedisEndpoint(url: "redis://cache.internal") == RedisEndpoint(host: "cache.internal"))
        #expect(try RedisEndpoint(url: "REDIS://[::1]:7000/") == RedisEndpoint(host: "::1", port: 7000))
        #expect(endpoint.description == "redis://127.0.0.1:6380/2")
    }

    @Test(arguments: [
        "http://127.0.0.1:6379", "redis://", "redis://:6379", "redis://host:port", "redis://host:0",
        "redis://host:70000", "redis://host:6379/abc", "redis://host:6379/-1", "redis://host:6379?db=1",
        "redis://ho st:6379", "redis://[::1", "127.0.0.1:6379",
    ])
    func invalidURLIsRejectedWithAnErrorNamingIt(url: String) {
        #expect {
            try RedisEndpoint(url: url)
        } throws: { error in
            guard let error = error as? RedisStoreError else { return false }
            return error.code == "invalid-url" && error.message.contains("'\(url)'")
        }
    }
}

@Suite struct CodecTests {
    /// Found by the FuzzRedisCodec fuzz target (Fuzz/Findings): a value whose fetched-at wall time has its top bit
    /// set trapped `decode` on an overflow, taking down every replica that read it. It is a corrupt entry: nothing.
    @Test func aCorruptWallTimeIsNoEntryAndNoTrap() {
        let found: [UInt8] = [0x52, 0, 0, 0, 0, 0, 0xC8, 0x80] + Array(repeating: 0, count: 23)
        #expect(EntryCodec.decode(found) == nil)
        var atMinimum = found
        atMinimum[7] = 0xFF
        #expect(EntryCodec.decode(atMinimum) == nil)
        // The same entry with a sane wall time decodes.
        var sane = found
        sane[7] = 0
        sane[14] = 1
        #expect(EntryCodec.decode(sane) != nil)
    }

    /// A failure another replica stored: in the earlier snake_case spelling it reads as today's code; a code this
    /// version does not know reads as `other`, its message kept.
    @Test func aFailureStoredInAnEarlierSpellingReadsInTodays() throws {
        let encoded = EntryCodec.encode(.failure(StoreFailure(code: .upstream5xx, message: "the upstream answered 503"), label: "feed"))
        func stored(as spelling: String) throws -> StoreFailure? {
            let today = Array("upstream-5xx".utf8)
            let start = try #require((0...(encoded.count - today.count)).first { Array(encoded[$0..<$0 + today.count]) == today })
            var bytes = encoded
            bytes.replaceSubrange(start..<start + today.count, with: Array(spelling.utf8))
            guard case .failure(let failure, "feed")? = EntryCodec.decode(bytes) else { return nil }
            return failure
        }
        #expect(try stored(as: "upstream-5xx")?.code == .upstream5xx)
        #expect(try stored(as: "upstream_5xx")?.code == .upstream5xx)
        let unknown = try stored(as: "unknown_code")
        #expect(unknown?.code == .other && unknown?.message == "the upstream answered 503")
    }

    @Test func responsesRoundTrip() throws {
        let original = StoredResponse(
            status: 203, headers: HTTPFields([("A", "1"), ("Set-Cookie", "x=é"), ("set-cookie", "y=2; Path=/")]),
            body: Array(0...255), fetchedAt: .now - .seconds(3), noStore: true, elapsed: .milliseconds(42))
        let encoded = EntryCodec.encode(.response(original, label: "feed"))
        #expect(encoded.first == UInt8(ascii: "N"), "scripts recognise no-store values by their first byte")
        let entry = try #require(EntryCodec.decode(encoded))
        guard case .response(let decoded, let label) = entry else {
            Issue.record("decoded a response as something else: \(entry)")
            return
        }
        #expect(label == "feed")
        #expect(decoded.status == 203)
        #expect(decoded.headers == original.headers)
        #expect(decoded.headers[values: .setCookie] == ["x=é", "y=2; Path=/"], "repeated Set-Cookie fields are kept, in order")
        #expect(decoded.headers.map(\.name.rawName) == ["A", "Set-Cookie", "set-cookie"], "names as received")
        #expect(decoded.body == original.body)
        #expect(decoded.noStore)
        #expect(decoded.elapsed == .milliseconds(42))
        let age = ContinuousClock.now - decoded.fetchedAt
        #expect(age >= .seconds(2) && age <= .seconds(5), "fetchedAt survives as an age, got \(age)")
    }

    @Test func failuresRoundTripAndGarbageIsRejected() {
        let failure = StoreFailure(code: .timeout, message: "upstream api.test timed out")
        let encoded = EntryCodec.encode(.failure(failure, label: "profile"))
        #expect(EntryCodec.decode(encoded) == .failure(failure, label: "profile"))
        #expect(EntryCodec.decode(Array(encoded.dropLast())) == nil)
        #expect(EntryCodec.decode([]) == nil)
        #expect(EntryCodec.decode(EntryCodec.lock(label: "x", token: FlightToken(7))) == nil)
    }

    @Test func scriptsAreAddressedByTheSHA1RedisComputes() {
        #expect(LuaScript("").sha == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(LuaScript("return 1").sha == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
    }

    @Test func keyDigestCoversEveryFieldAndAnnouncementsParse() {
        let alice = Identity(headers: HTTPFields([("Cookie", "sid=alice")]), key: testIdentityKey)
        let keys = [
            key("/a"), key("/b"), key("/a", identity: alice), key("/a", body: [1]),
            StoreKey(identity: .anonymous, method: "POST", url: "https://api.test/a", body: nil),
        ]
        #expect(Set(keys.map(KeySpace.digest(of:))).count == keys.count)
        let digest = KeySpace.digest(of: key())
        #expect(digest.utf8.count == KeySpace.digestLength)
        #expect(KeySpace.parseAnnouncement(KeySpace.announcement(digest, payload: nil))! == (digest, nil))
        let parsed = KeySpace.parseAnnouncement(KeySpace.announcement(digest, payload: [1, 2]))
        #expect(parsed?.payload == [1, 2])
    }
}

@Suite struct LocalTierTests {
    let now = ContinuousClock.now

    @Test func itemEndsAtTheEarlierOfRedisExpiryAndTheCap() {
        var tier = LocalTier(maxEntries: 4, maxBytes: 1 << 20, ttlCap: .seconds(1))
        tier.put("a", response: response("a"), label: "l", redisExpiresAt: now + .milliseconds(300), now: now)
        tier.put("b", response: response("b"), label: "l", redisExpiresAt: now + .seconds(60), now: now)
        #expect(tier.get("a", now: now + .milliseconds(299)) != nil)
        #expect(tier.get("a", now: now + .milliseconds(300)) == nil, "never past the Redis expiry")
        #expect(tier.get("b", now: now + .milliseconds(999)) != nil)
        #expect(tier.get("b", now: now + .seconds(1)) == nil, "never past the cap")
        #expect(tier.bytes == 0)
    }

    @Test func noStoreIsNeverKeptAndBoundsHold() {
        var tier = LocalTier(maxEntries: 2, maxBytes: 1 << 20, ttlCap: .seconds(1))
        tier.put("n", response: response("n", noStore: true), label: "l", redisExpiresAt: now + .seconds(9), now: now)
        #expect(tier.get("n", now: now) == nil)
        for name in ["a", "b"] {
            tier.put(name, response: response(name), label: "l", redisExpiresAt: now + .seconds(9), now: now)
        }
        _ = tier.get("a", now: now)
        tier.put("c", response: response("c"), label: "l", redisExpiresAt: now + .seconds(9), now: now)
        #expect(tier.items.count == 2)
        #expect(tier.get("b", now: now) == nil, "least recently used goes first")
        #expect(tier.get("a", now: now) != nil)

        var small = LocalTier(maxEntries: 10, maxBytes: 400, ttlCap: .seconds(1))
        for name in ["a", "b", "c", "d"] {
            small.put(
                name, response: response(String(repeating: name, count: 100)), label: "l",
                redisExpiresAt: now + .seconds(9), now: now)
            #expect(small.bytes <= 400)
        }
        small.retain(labels: [])
        #expect(small.items.isEmpty && small.bytes == 0)
    }
}

extension LocalTierTests {
    @Test func evictsExactlyTheLeastRecentlyUsedOverALongMixOfUses() {
        var tier = LocalTier(maxEntries: 8, maxBytes: 1 << 20, ttlCap: .seconds(60))
        // The reference: digests in order of use, oldest first.
        var model: [String] = []
        // A fixed linear congruential sequence: the same mix of uses on every run.
        var state: UInt64 = 14
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        for step in 0..<20_000 {
            let digest = "k\(next() % 24)"
            switch next() % 10 {
            case 0..<5:
                tier.put(digest, response: response(digest), label: "l", redisExpiresAt: now + .seconds(60), now: now)
                model.removeAll { $0 == digest }
                if model.count == 8 { model.removeFirst() }
                model.append(digest)
            case 5..<9:
                let found = tier.get(digest, now: now) != nil
                #expect(found == model.contains(digest), "step \(step)")
                if found {
                    model.removeAll { $0 == digest }
                    model.append(digest)
                }
            default:
                tier.remove(digest)
                model.removeAll { $0 == digest }
            }
            #expect(Set(tier.items.keys) == Set(model), "step \(step)")
        }
        // Live entries stay under 2 x 8 + 64, and the consumed prefix under the larger of 64 and the live part.
        #expect(tier.uses.count <= 2 * (2 * 8 + 64), "the use log stays bounded")
    }
}

/// The identity key the tests key identities with (one per test process, like one deployment).
let testIdentityKey = IdentityKey.random()
