import Testing

@testable import RedisStore

/// The one parser of store URLs (`RedisURL`), for each scheme, and the one handshake every connection sends
/// (`RedisHandshake`). No I/O.
@Suite struct RedisURLTests {
    typealias Address = RedisURL.Address

    @Test func eachSchemeIsParsedWithItsPartsAndDefaults() throws {
        let single = try RedisURL("redis://cache.internal:6380/4", as: .redis)
        #expect(single.scheme == .redis && single.addresses == [Address(host: "cache.internal", port: 6380)])
        #expect(single.database == 4 && single.credentials == nil && single.primaryName == nil)
        #expect(try RedisURL("Redis://cache.internal", as: .redis).addresses == [Address(host: "cache.internal", port: 6379)])

        let cluster = try RedisURL("redis-cluster://10.0.0.1:7000,redis-c,[::1]:7001/", as: .cluster)
        #expect(
            cluster.addresses == [
                Address(host: "10.0.0.1", port: 7000), Address(host: "redis-c", port: 6379), Address(host: "::1", port: 7001),
            ])
        #expect(cluster.database == 0 && cluster.primaryName == nil)

        let sentinel = try RedisURL("REDIS-SENTINEL://10.0.0.1,10.0.0.2:26380/cache.main/2", as: .sentinel)
        #expect(sentinel.addresses == [Address(host: "10.0.0.1", port: 26379), Address(host: "10.0.0.2", port: 26380)])
        #expect(sentinel.primaryName == "cache.main" && sentinel.database == 2)
        #expect(try RedisURL("redis-sentinel://s/p/", as: .sentinel).database == 0)

        #expect(RedisURL.Scheme.of("redis://h") == .redis)
        #expect(RedisURL.Scheme.of("REDIS-CLUSTER://h:1") == .cluster)
        #expect(RedisURL.Scheme.of("redis-sentinel://h/p") == .sentinel)
        #expect(RedisURL.Scheme.of("rediss://h") == nil && RedisURL.Scheme.of("memory") == nil)
    }

    @Test(arguments: RedisURL.Scheme.allCases)
    func credentialsArePercentDecodedTheSameWayForEveryScheme(scheme: RedisURL.Scheme) throws {
        let tail = scheme == .sentinel ? "h/p" : "h"
        let acl = try RedisURL("\(scheme.rawValue)ops%2Dapp:p%40ss%3Aw/rd@\(tail)", as: scheme)
        #expect(acl.credentials == RedisCredentials(user: "ops-app", password: "p@ss:w/rd"))
        let legacy = try RedisURL("\(scheme.rawValue):s%25cret@\(tail)", as: scheme)
        #expect(legacy.credentials == RedisCredentials(password: "s%cret"))
        #expect(legacy.addresses.map(\.host) == ["h"])
    }

    @Test func anIPv6HostIsWrittenInBracketsAndStoredWithout() throws {
        let parsed = try RedisURL("redis://:pw@[2001:db8::1]:6390/1", as: .redis)
        #expect(parsed.addresses == [Address(host: "2001:db8::1", port: 6390)])
        #expect(try RedisURL("redis://[::1]", as: .redis).addresses == [Address(host: "::1", port: 6379)])
        #expect(try RedisEndpoint(url: "redis://[::1]:7000").description == "redis://[::1]:7000/0")
    }

    /// Each message names the URL with the password masked (the user as written), says what is wrong and shows the
    /// form expected.
    @Test(arguments: [
        (
            "rediss://app:hunter2@127.0.0.1", RedisURL.Scheme.redis,
            "invalid Redis URL 'rediss://app:***@127.0.0.1': the scheme must be redis://; expected redis://[user:password@]host[:port][/db]"
        ),
        (
            "redis://app:hunter2@127.0.0.1:99999", .redis,
            "invalid Redis URL 'redis://app:***@127.0.0.1:99999': the port '99999' is not a number in 1...65535; expected redis://[user:password@]host[:port][/db]"
        ),
        (
            "redis://:hunter2@127.0.0.1/x", .redis,
            "invalid Redis URL 'redis://:***@127.0.0.1/x': the database 'x' is not a non-negative number; expected redis://[user:password@]host[:port][/db]"
        ),
        (
            "redis://127.0.0.1:6379?db=1", .redis,
            "invalid Redis URL 'redis://127.0.0.1:6379?db=1': query strings and fragments are not supported; expected redis://[user:password@]host[:port][/db]"
        ),
        (
            "redis://app:hunter2@127.0.0.1/1", .cluster,
            "invalid Redis Cluster URL 'redis://app:***@127.0.0.1/1': the scheme must be redis-cluster://; expected redis-cluster://[user:password@]host:port[,host:port...]"
        ),
        (
            "redis-cluster://app:hunter2@a:1,b:0", .cluster,
            "invalid Redis Cluster URL 'redis-cluster://app:***@a:1,b:0': the node address 'b:0' is not host:port (the port '0' is not a number in 1...65535); expected redis-cluster://[user:password@]host:port[,host:port...]"
        ),
        (
            "redis-cluster://app:hunter2@a:1/3", .cluster,
            "invalid Redis Cluster URL 'redis-cluster://app:***@a:1/3': a cluster has only database 0, so the URL takes no path; expected redis-cluster://[user:password@]host:port[,host:port...]"
        ),
        (
            "redis-sentinel://app:hunter2@[::1:26379/p", .sentinel,
            "invalid Redis Sentinel URL 'redis-sentinel://app:***@[::1:26379/p': the sentinel address '[::1:26379' is not host:port (the IPv6 address lacks its closing ]); expected redis-sentinel://[user:password@]host:port[,host:port...]/primary-name[/db]"
        ),
        (
            "redis-sentinel://app:hunter2@s/p/-1", .sentinel,
            "invalid Redis Sentinel URL 'redis-sentinel://app:***@s/p/-1': the database '-1' is not a non-negative number; expected redis-sentinel://[user:password@]host:port[,host:port...]/primary-name[/db]"
        ),
    ])
    func aBadURLIsNamedWithThePasswordMaskedAndWhatIsWrong(url: String, scheme: RedisURL.Scheme, message: String) {
        #expect {
            try RedisURL(url, as: scheme)
        } throws: { error in
            guard let error = error as? RedisStoreError else { return false }
            return error.code == RedisStoreError.invalidURLCode && error.message == message && !error.message.contains("hunter2")
        }
    }

    @Test func aPasswordHoldingTheDelimitersIsMaskedWhole() {
        #expect(RedisURL.masked("redis://app:p@ss/w:rd@h:1/2") == "redis://app:***@h:1/2")
        #expect(RedisURL.masked("redis-cluster://:hunter2@a:1,b:2") == "redis-cluster://:***@a:1,b:2")
        #expect(RedisURL.masked("app:hunter2@h") == "app:***@h")
        #expect(RedisURL.masked("redis://h:1/2") == "redis://h:1/2")
    }
}

@Suite struct RedisHandshakeTests {
    static func commands(_ endpoint: RedisEndpoint) -> [[String]] {
        RedisHandshake.commands(for: endpoint).map { $0.map { String(decoding: $0, as: UTF8.self) } }
    }

    @Test func withoutCredentialsItIsAPing() {
        #expect(Self.commands(RedisEndpoint(host: "h")) == [["PING"]])
    }

    @Test func aPasswordAloneAuthenticatesTheDefaultUser() {
        #expect(Self.commands(RedisEndpoint(host: "h", credentials: RedisCredentials(password: "pw"))) == [["AUTH", "pw"]])
    }

    @Test func aUserAndPasswordAuthenticateThatUser() {
        let endpoint = RedisEndpoint(host: "h", credentials: RedisCredentials(user: "app", password: "pw"))
        #expect(Self.commands(endpoint) == [["AUTH", "app", "pw"]])
    }

    @Test func aDatabaseOtherThanZeroIsSelectedAfterwards() {
        #expect(Self.commands(RedisEndpoint(host: "h", database: 3)) == [["PING"], ["SELECT", "3"]])
        let endpoint = RedisEndpoint(host: "h", database: 15, credentials: RedisCredentials(user: "app", password: "pw"))
        #expect(Self.commands(endpoint) == [["AUTH", "app", "pw"], ["SELECT", "15"]])
    }

    /// `NOAUTH` is recognised in one place; every other reply, errors included, is not it.
    @Test func onlyANoAuthReplyMeansMissingCredentials() throws {
        let missing = try #require(RedisCallError(missingCredentials: .error("NOAUTH Authentication required."), at: "h:1"))
        #expect(missing.kind == .auth)
        #expect(missing.message == "Redis at h:1 wants credentials the store URL does not give: NOAUTH Authentication required.")
        for other: RedisValue in [.error("WRONGPASS invalid"), .error("ERR NOAUTH"), .status("NOAUTH"), .string(Array("NOAUTH".utf8))] {
            #expect(RedisCallError(missingCredentials: other, at: "h:1") == nil, "\(other)")
        }
    }
}
