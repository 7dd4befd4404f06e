import Testing

@testable import PrefetchStore

@Suite struct IdentityTests {
    @Test func noCredentialsIsAnonymous() {
        #expect(Identity(headers: []) == .anonymous)
        #expect(Identity(headers: [("Accept", "application/json"), ("User-Agent", "shell/1.0")]) == .anonymous)
        #expect(Identity(headers: [("Cookie", "  ")]) == .anonymous, "an empty credential carries nothing")
        #expect(Identity.anonymous.description == "anonymous")
    }

    @Test func digestIsAHashNeverTheCredential() {
        let secret = "session=s3cr3t-t0ken-value"
        let identity = Identity(headers: [("Cookie", secret)])
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
        let a = Identity(headers: [("Cookie", "sid=1"), ("Authorization", "Bearer x"), ("Accept", "*/*")])
        let b = Identity(headers: [("authorization", " Bearer x "), ("COOKIE", "sid=1")])
        #expect(a == b)
    }

    @Test func differentCredentialsDifferentIdentity() {
        let a = Identity(headers: [("Cookie", "sid=1")])
        #expect(a != Identity(headers: [("Cookie", "sid=2")]))
        #expect(a != Identity(headers: [("Authorization", "sid=1")]), "the header name is part of the identity")
        #expect(a != Identity(headers: [("Cookie", "sid=1"), ("Cookie", "lang=en")]))
        #expect(
            Identity(headers: [("Cookie", "a"), ("Cookie", "b")]) != Identity(headers: [("Cookie", "b"), ("Cookie", "a")]),
            "repeated headers keep their order")
        #expect(Identity(headers: [("Cookie", "ab"), ("Cookie", "c")]) != Identity(headers: [("Cookie", "a"), ("Cookie", "bc")]))
    }

    @Test func credentialHeaderNamesAreConfigurable() {
        let headers = [(name: "X-Api-Key", value: "k1"), (name: "Cookie", value: "sid=1")]
        let custom = Identity(headers: headers, credentialHeaderNames: ["x-API-key"])
        #expect(custom == Identity(headers: [("x-api-key", "k1")], credentialHeaderNames: ["X-Api-Key"]))
        #expect(custom != Identity(headers: headers))
        #expect(Identity(headers: headers, credentialHeaderNames: []) == .anonymous)
    }

    @Test func keyCoversIdentityMethodURLAndBodyHash() {
        let alice = Identity(headers: [("Cookie", "user=alice")])
        let base = StoreKey(identity: alice, method: "POST", url: "https://api.test/q", body: Array("{\"a\":1}".utf8))
        #expect(base == StoreKey(identity: alice, method: "post", url: "https://api.test/q", body: Array("{\"a\":1}".utf8)))
        #expect(base != StoreKey(identity: alice, method: "POST", url: "https://api.test/q", body: Array("{\"a\":2}".utf8)))
        #expect(base != StoreKey(identity: alice, method: "POST", url: "https://api.test/q", body: nil))
        #expect(base != StoreKey(identity: alice, method: "PUT", url: "https://api.test/q", body: Array("{\"a\":1}".utf8)))
        #expect(base != StoreKey(identity: alice, method: "POST", url: "https://api.test/r", body: Array("{\"a\":1}".utf8)))
        #expect(base != StoreKey(identity: .anonymous, method: "POST", url: "https://api.test/q", body: Array("{\"a\":1}".utf8)))
        #expect(base.bodyDigest?.count == 64)
        #expect(
            StoreKey(identity: alice, method: "GET", url: "u", body: []) == StoreKey(identity: alice, method: "GET", url: "u", body: nil),
            "an empty body is no body on the wire")
    }

    @Test func fingerprintsAreFixedSizeAndDistinct() {
        let a = StoreKey(identity: .anonymous, method: "GET", url: String(repeating: "x", count: 10_000), body: nil)
        let b = StoreKey(identity: .anonymous, method: "GET", url: String(repeating: "x", count: 10_001), body: nil)
        #expect(a.fingerprint.count == 32)
        #expect(a.fingerprint != b.fingerprint)
    }
}
