import Synchronization
import Testing

@testable import RedisStore

/// The pool's decisions that need no socket: what a closed connection means for each call on it, what a call's
/// results are, and what the replies to a new connection's AUTH and SELECT mean. Every combination, no clock.
@Suite struct PoolRuleTests {
    static let kinds: [RedisCallError.Kind] = [.unavailable, .connect, .io, .closed, .auth]

    /// Where a call's results land.
    final class Box: Sendable {
        let results = Mutex<RedisCall.Results?>(nil)
    }

    /// A call of `commands` commands whose results land in the returned box.
    static func call(_ commands: Int = 2) -> (RedisCall, Box) {
        let box = Box()
        let call = RedisCall(
            commands: Array(repeating: [Array("PING".utf8)], count: commands),
            completion: .callback { results in box.results.withLock { $0 = results } })
        return (call, box)
    }

    @Test(arguments: kinds, [false, true])
    func onlyACallTheServerClosedBeforeAnyReplyOfItIsRetried(kind: RedisCallError.Kind, mayRetry: Bool) {
        for replies in 0...2 {
            var (call, _) = Self.call(3)
            call.mayRetry = mayRetry
            call.replies = Array(repeating: .status("OK"), count: replies)
            let expected: RedisCall.AfterClose = kind == .closed && mayRetry && replies == 0 ? .retry : .fail
            #expect(call.afterClose(kind) == expected, "\(kind), mayRetry \(mayRetry), \(replies) replies")
        }
    }

    @Test func aCallGetsItsRepliesThenTheErrorForEachCommandWithout() {
        let error = RedisCallError(kind: .closed, message: "gone")
        for replies in 0...3 {
            var (call, box) = Self.call(3)
            call.replies = (0..<replies).map { .integer(Int64($0)) }
            call.finish(failing: error)
            let results = box.results.withLock { $0 } ?? []
            #expect(results.count == 3)
            for (index, result) in results.enumerated() {
                #expect(result == (index < replies ? .success(.integer(Int64(index))) : .failure(error)))
            }
        }
        var (answered, box) = Self.call(2)
        answered.replies = [.status("OK"), .null]
        #expect(answered.isAnswered)
        answered.finish()
        #expect(box.results.withLock { $0 } == [.success(.status("OK")), .success(.null)])
    }

    static let password = "s3cret-pw"
    static let withCredentials = RedisEndpoint(
        host: "10.0.0.5", port: 6380, database: 2, credentials: RedisCredentials(user: "app", password: password))

    @Test func aRefusedAuthIsAnAuthErrorNamingTheUserAndHostButNotThePassword() throws {
        let refusal = RedisValue.error("WRONGPASS invalid username-password pair or user is disabled (\(Self.password))")
        let failure = try #require(
            RedisHandshake.failure(
                [.success(refusal), .success(.error("NOAUTH Authentication required."))], endpoint: Self.withCredentials))
        #expect(failure.kind == .auth)
        #expect(failure.message.contains("Redis at 10.0.0.5:6380 refused user 'app'"), "\(failure.message)")
        #expect(failure.message.contains("WRONGPASS"))
        #expect(!failure.message.contains(Self.password))
    }

    @Test func aConnectionThatBreaksDuringTheHandshakeKeepsItsKindAndHidesThePassword() throws {
        let broken = RedisCallError(kind: .io, message: "Redis connection broke while sending \(Self.password)")
        let failure = try #require(
            RedisHandshake.failure([.failure(broken), .failure(broken)], endpoint: Self.withCredentials))
        #expect(failure.kind == .io)
        #expect(!failure.message.contains(Self.password))
    }

    @Test func aRefusedSelectIsAConnectErrorNamingTheDatabase() throws {
        let failure = try #require(
            RedisHandshake.failure(
                [.success(.status("OK")), .success(.error("ERR DB index is out of range"))], endpoint: Self.withCredentials))
        #expect(failure.kind == .connect)
        #expect(failure.message.contains("cannot select database 2"))
        let noAuth = RedisEndpoint(host: "127.0.0.1", database: 9)
        let unselected = RedisHandshake.failure(
            [.success(.status("PONG")), .success(.error("ERR DB index is out of range"))], endpoint: noAuth)
        #expect(unselected?.kind == .connect)
        #expect(unselected?.message.contains("cannot select database 9") == true)
    }

    /// Without credentials the handshake is a `PING`: a server that wants credentials says so before the connection
    /// counts as open (and so before the store counts Redis as reached).
    @Test func aServerWantingCredentialsTheURLLacksRefusesTheHandshake() throws {
        let noAuth = RedisEndpoint(host: "127.0.0.1", port: 7001)
        let failure = try #require(
            RedisHandshake.failure([.success(.error("NOAUTH Authentication required."))], endpoint: noAuth))
        #expect(failure.kind == .auth)
        #expect(failure.message == "Redis at 127.0.0.1:7001 wants credentials the store URL does not give: NOAUTH Authentication required.")
        let selecting = RedisEndpoint(host: "127.0.0.1", port: 7001, database: 3)
        let refused = RedisHandshake.failure(
            [.success(.error("NOAUTH Authentication required.")), .success(.error("NOAUTH Authentication required."))],
            endpoint: selecting)
        #expect(refused?.kind == .auth)
        #expect(RedisHandshake.failure([.success(.error("LOADING Redis is loading"))], endpoint: noAuth)?.kind == .connect)
    }

    @Test func anAcceptedHandshakeLetsTheConnectionBeUsed() {
        #expect(
            RedisHandshake.failure([.success(.status("OK")), .success(.status("OK"))], endpoint: Self.withCredentials)
                == nil)
        let passwordOnly = RedisEndpoint(host: "127.0.0.1", credentials: RedisCredentials(password: Self.password))
        #expect(RedisHandshake.failure([.success(.status("OK"))], endpoint: passwordOnly) == nil)
        #expect(RedisHandshake.failure([.success(.status("PONG"))], endpoint: RedisEndpoint(host: "127.0.0.1")) == nil)
    }
}
