import HTTPTypes
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import PrefetchStore

/// The deployment key identities are keyed with in these tests.
let key = IdentityKey.random()

@Suite struct IdentityTests {
    @Test func noCredentialsIsAnonymous() {
        #expect(Identity(headers: [:], key: key) == .anonymous)
        #expect(Identity(headers: HTTPFields([("Accept", "application/json"), ("User-Agent", "shell/1.0")]), key: key) == .anonymous)
        #expect(Identity(headers: HTTPFields([("Cookie", "  ")]), key: key) == .anonymous, "an empty credential carries nothing")
        #expect(Identity.anonymous.description == "anonymous")
    }

    @Test func digestIsAHashNeverTheCredential() {
        let secret = "session=s3cr3t-t0ken-value"
        let identity = Identity(headers: HTTPFields([("Cookie", secret)]), key: key)
        #expect(identity != .anonymous)
        #expect(identity.digest.count == 64)
        #expect(identity.digest.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(!identity.digest.contains("s3cr3t"))
        #expect(!identity.description.contains("s3cr3t"))
        let key = StoreKey(identity: identity, method: "GET", url: "https://api.test/me?token=abc", body: nil)
        #expect(!key.description.contains("s3cr3t"))
        #expect(!key.description.contains("token=abc"), "query strings can carry tokens")
    }

    @Test func sameCredentialsSameIdentityWhateverTheSpelling() {
        let a = Identity(headers: HTTPFields([("Cookie", "sid=1"), ("Authorization", "Bearer x"), ("Accept", "*/*")]), key: key)
        let b = Identity(headers: HTTPFields([("authorization", " Bearer x "), ("COOKIE", "sid=1")]), key: key)
        #expect(a == b)
    }

    @Test func differentCredentialsDifferentIdentity() {
        let a = Identity(headers: HTTPFields([("Cookie", "sid=1")]), key: key)
        #expect(a != Identity(headers: HTTPFields([("Cookie", "sid=2")]), key: key))
        #expect(a != Identity(headers: HTTPFields([("Authorization", "sid=1")]), key: key), "the header name is part of the identity")
        #expect(a != Identity(headers: HTTPFields([("Cookie", "sid=1"), ("Cookie", "lang=en")]), key: key))
        #expect(
            Identity(headers: HTTPFields([("Cookie", "a"), ("Cookie", "b")]), key: key)
                != Identity(headers: HTTPFields([("Cookie", "b"), ("Cookie", "a")]), key: key),
            "repeated headers keep their order")
        #expect(
            Identity(headers: HTTPFields([("Cookie", "ab"), ("Cookie", "c")]), key: key)
                != Identity(headers: HTTPFields([("Cookie", "a"), ("Cookie", "bc")]), key: key))
    }

    @Test func credentialHeaderNamesAreConfigurable() {
        let headers = HTTPFields([(name: "X-Api-Key", value: "k1"), (name: "Cookie", value: "sid=1")])
        let custom = Identity(headers: headers, credentialHeaderNames: ["x-API-key"], key: key)
        #expect(custom == Identity(headers: HTTPFields([("x-api-key", "k1")]), credentialHeaderNames: ["X-Api-Key"], key: key))
        #expect(custom != Identity(headers: headers, key: key))
        #expect(Identity(headers: headers, credentialHeaderNames: [], key: key) == .anonymous)
    }

    @Test func keyCoversIdentityMethodURLAndBodyHash() {
        let alice = Identity(headers: HTTPFields([("Cookie", "user=alice")]), key: key)
        let base = StoreKey(identity: alice, method: "POST", url: "https://api.test/q", body: Array("{\"a\":1}".utf8))
        #expect(base == StoreKey(identity: alice, method: "post", url: "https://api.test/q", body: Array("{\"a\":1}".utf8)))
        #expect(base != StoreKey(identity: alice, method: "POST", url: "https://api.test/q", body: Array("{\"a\":2}".utf8)))
        #expect(base != StoreKey(identity: alice, method: "POST", url: "https://api.test/q", body: nil))
        #expect(base != StoreKey(identity: alice, method: "PUT", url: "https://api.test/q", body: Array("{\"a\":1}".utf8)))
        #expect(base != StoreKey(identity: alice, method: "POST", url: "https://api.test/r", body: Array("{\"a\":1}".utf8)))
        #expect(base != StoreKey(identity: .anonymous, method: "POST", url: "https://api.test/q", body: Array("{\"a\":1}".utf8)))
        #expect(base.request.count == 64)
        #expect(
            StoreKey(identity: alice, method: "GET", url: "u", body: []) == StoreKey(identity: alice, method: "GET", url: "u", body: nil),
            "an empty body is no body on the wire")
    }

    /// SECURITY.md promise 25: the headers that shape an answer and the keys of the answers a dependent request took
    /// values from are part of its key; two requests differing in either are never one entry.
    @Test func keysCoverHeadersAndInputs() {
        let alice = Identity(headers: HTTPFields([("Cookie", "user=alice")]), key: key)
        let bob = Identity(headers: HTTPFields([("Cookie", "user=bob")]), key: key)
        let plain = StoreKey(identity: .anonymous, method: "GET", url: "https://api.test/o", body: nil)
        let versioned = StoreKey(identity: .anonymous, method: "GET", url: "https://api.test/o", headers: [.accept: "v2"], body: nil)
        #expect(plain != versioned)
        #expect(versioned == StoreKey(identity: .anonymous, method: "GET", url: "https://api.test/o", headers: [.accept: "v2"], body: nil))
        #expect(
            StoreKey(identity: .anonymous, method: "GET", url: "u", headers: HTTPFields([("A", "1"), ("B", "2")]), body: nil)
                != StoreKey(identity: .anonymous, method: "GET", url: "u", headers: HTTPFields([("A", "12")]), body: nil),
            "header boundaries are kept")
        // The same template fed by Alice's and by Bob's answer: two keys, even before any value is filled in.
        let aliceUser = StoreKey(identity: alice, method: "GET", url: "https://api.test/user", body: nil)
        let bobUser = StoreKey(identity: bob, method: "GET", url: "https://api.test/user", body: nil)
        let fromAlice = StoreKey(
            identity: .anonymous, method: "GET", url: "https://api.test/orders?uid=${user:/uid}", body: nil, inputs: [aliceUser])
        let fromBob = StoreKey(
            identity: .anonymous, method: "GET", url: "https://api.test/orders?uid=${user:/uid}", body: nil, inputs: [bobUser])
        #expect(fromAlice != fromBob)
        #expect(fromAlice != StoreKey(identity: .anonymous, method: "GET", url: "https://api.test/orders?uid=${user:/uid}", body: nil))
        #expect(
            StoreKey(identity: .anonymous, method: "GET", url: "u", body: nil, inputs: [aliceUser, bobUser])
                != StoreKey(identity: .anonymous, method: "GET", url: "u", body: nil, inputs: [bobUser, aliceUser]))
    }

    /// The request digest and the fingerprint are exactly their documented layout (a domain label, then each field
    /// length-prefixed with 8 big-endian bytes, counts before lists), byte for byte: known answers from Python's
    /// `hashlib` over that layout. A shared store names its keys by these, so replicas of two builds must agree.
    @Test func theRequestDigestAndFingerprintAreTheirLayoutsKnownAnswers() {
        let key = StoreKey(
            identity: .anonymous, method: "get", url: "https://api.example.com/a?b=1&é=2", headers: [.accept: "application/json"],
            body: Array("{}".utf8), credentialScope: "https://m.example.com")
        #expect(key.request == "3aaeca1ec50dbe8a5c6c2399e0479a61a31d5ca2e44688e9343eedbe86d3d103")
        #expect(Hex.encode(key.fingerprint) == "94c491f822fe6a085a555060955091dc5b44cb266012c1c88eb477a99b3312a6")
    }

    @Test func identitiesAreKeyedPerDeployment() throws {
        // The same cookie gives a different digest under another deployment's key: a store dump cannot be tested
        // against guessed credentials without the key.
        let headers = HTTPFields([(name: "Cookie", value: "sid=1234")])
        let other = try IdentityKey(secret: Array(repeating: UInt8(7), count: 32))
        #expect(Identity(headers: headers, key: key) != Identity(headers: headers, key: other))
        #expect(Identity(headers: headers, key: other) == Identity(headers: headers, key: other))
        #expect(throws: IdentityKeyError.self) { try IdentityKey(secret: Array("short".utf8)) }
    }

    @Test func aDigestIsTheKeyedHMACOfItsFieldsEveryTime() async throws {
        // HMAC-SHA256 over the domain label and each field with its 8-byte big-endian length, as computed outside
        // Swift (Python's hmac). The key is keyed once and copied per digest: repeated and concurrent digests must
        // not carry state from one another.
        let key = try IdentityKey(secret: Array(0..<32))
        let fields: [[UInt8]] = [Array("sid=1234".utf8), [], Array("abc".utf8)]
        let expected = "4a35635d4c38fac1605316f83e4aaa7a4157c0bc8294c7ca78ac956751f43401"
        #expect(key.digest(domain: "test-domain", fields) == expected)
        #expect(key.digest(domain: "test-domain", fields) == expected)
        let digests = await withTaskGroup(of: String.self) { group in
            for index in 0..<64 {
                group.addTask { key.digest(domain: "test-domain", index % 2 == 0 ? fields : [[UInt8(index)]]) }
            }
            var all: [String] = []
            for await digest in group { all.append(digest) }
            return all
        }
        #expect(digests.filter { $0 == expected }.count == 32)
    }

    @Test func keysHoldNoURL() {
        let url = "https://api.test/me?token=" + String(repeating: "t", count: 10_000)
        let key = StoreKey(identity: .anonymous, method: "GET", url: url, body: nil)
        #expect(key.accountedBytes < 200, "a key costs the same few bytes whatever the URL")
        #expect(!key.description.contains("token"))
    }

    @Test func fingerprintsAreFixedSizeAndDistinct() {
        let a = StoreKey(identity: .anonymous, method: "GET", url: String(repeating: "x", count: 10_000), body: nil)
        let b = StoreKey(identity: .anonymous, method: "GET", url: String(repeating: "x", count: 10_001), body: nil)
        #expect(a.fingerprint.count == 32)
        #expect(a.fingerprint != b.fingerprint)
    }
}
