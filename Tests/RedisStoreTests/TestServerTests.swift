import PrefetchTestSupport
import Testing

/// The test harness's own promises, which every Redis test stands on: a port it hands out is not handed out again in
/// the same process, and a redis-server it starts is the one that answers on its port (a loaded run once formed a
/// cluster with another test's server, which had answered the new node's PING after the node lost its port).
struct TestServerTests {
    @Test("a port is handed out once per process")
    func portsAreNotHandedOutTwice() throws {
        var seen = Set<Int>()
        for _ in 0..<2000 {
            let port = try #require(unusedLocalPort())
            #expect(seen.insert(port).inserted, "port \(port) was handed out twice")
        }
    }

    @Test("a server that lost its port to another redis-server is not taken for it")
    func anotherServersAnswerIsNotTheStartedOnes() async throws {
        let first = try await RedisServer.start()
        let second = RedisServer(port: first.port)
        await #expect(throws: TestSetupError.self) { try await second.launch() }
        // The first is untouched and still answers.
        let answer = await first.cli(["PING"])
        await first.stop()
        #expect(answer?.contains("PONG") == true)
    }
}
