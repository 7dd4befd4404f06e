import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import NIOPosix
import PrefetchTestSupport
import PrefetchTestUpstream
import Prometheus
import ServiceTestSupport
import Synchronization
import Testing

@testable import PageAPI
@testable import PrefetchService

#if canImport(Glibc)
import Glibc
#endif

/// The connection guards tried as an attacker would (SECURITY.md, promise 15): real `prefetch serve` processes on
/// free ports, raw sockets, and assertions on what the attacker got (the answer's bytes, and whether the server
/// closed the connection).
@Suite("connection guards: slow bodies and the connection cap, through real sockets", .serialized, .timeLimit(.minutes(3)))
struct ConnectionGuardTests {
    /// Runs `prefetch serve` with `arguments` and the security suite's config, against a local upstream.
    func withServe(_ arguments: [String], _ body: @Sendable (ServeProcess) async throws -> Void) async throws {
        try await withUpstream { upstream in
            let config = try TempConfig(SecurityTests.config(upstream.base))
            defer { config.remove() }
            let server = try await ServeProcess.start(configPath: config.path, arguments: arguments, logLevel: "warning", untilReady: true)
            do {
                try await body(server)
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }

    /// A short body timeout, and an idle timeout far beyond the drip's deadline: whatever closes a dripped
    /// connection within the drip's 30 s is the body guard, however late a loaded machine sends the drip's bytes
    /// (the idle timeout used to be 2 s against a drip every half second: a drip held up 1.5 s by the machine's
    /// load let the idle timeout close the connection first, with no body timeout counted). The timeout itself is held to the millisecond on a virtual clock
    /// by `BodyGuardClockTests`; these check the same guard through real sockets and a real `prefetch serve`.
    static let slowBodyArguments = ["--idle-timeout", "120", "--body-timeout", "3"]

    /// SECURITY.md 15: a body a route never reads, dripped, does not hold the connection: the page listener answers
    /// `/healthz` at once and closes the connection at the body timeout.
    @Test func aDrippedBodyTheRouteDoesNotReadIsCutOffOnThePageListener() async throws {
        try await withServe(Self.slowBodyArguments) { server in
            let attack = try await drip(port: server.port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n")
            #expect(attack.closed, "the server kept a dripped body's connection open: \(attack.answer.prefix(300))")
            #expect(rawStatus(attack.answer) == 200, "the route answers before the body: \(attack.answer.prefix(300))")
            let metrics = try await server.admin(.get, "/metrics").text
            #expect(metricValue(metrics, "prefetch_body_timeouts_total", labels: #"listener="page""#) == 1)
            #expect(try await server.get("/healthz").status == 200, "other clients are still served")
        }
    }

    /// SECURITY.md 15: the same on the operator listener.
    @Test func aDrippedBodyIsCutOffOnTheOperatorListener() async throws {
        try await withServe(Self.slowBodyArguments) { server in
            let attack = try await drip(
                port: server.adminPort, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n")
            #expect(attack.closed, "the operator listener kept a dripped body's connection open: \(attack.answer.prefix(300))")
            #expect(rawStatus(attack.answer) == 200, "the route answers before the body: \(attack.answer.prefix(300))")
            let metrics = try await server.admin(.get, "/metrics").text
            #expect(metricValue(metrics, "prefetch_body_timeouts_total", labels: #"listener="operator""#) == 1)
        }
    }

    /// SECURITY.md 15: a trigger whose body is late is answered `408 body-timeout` in the service's error shape,
    /// and its connection closes. (The route's own body timeout did this before the guard, which now answers first;
    /// this holds the answer and the close whichever of the two gives it.)
    @Test func aSlowTriggerBodyIsA408AndTheConnectionCloses() async throws {
        try await withServe(Self.slowBodyArguments) { server in
            let attack = try await drip(
                port: server.port,
                "POST /v1/prefetch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"url\": ",
                bytes: "    ")
            #expect(attack.closed, "the server kept a slow trigger's connection open: \(attack.answer.prefix(300))")
            #expect(rawStatus(attack.answer) == 408, "\(attack.answer.prefix(300))")
            let body = attack.answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
            let error = try JSONDecoder().decode(APIError.Body.self, from: Data(body.utf8))
            #expect(error.error == "body-timeout", "\(body)")
            #expect(error.message.contains("3000 ms"), "\(body)")
        }
    }

    /// SECURITY.md 15: `--max-connections 4` holds four connections; a fifth is closed on arrival (it reads EOF and
    /// nothing else) and counted; once one of the four closes, a new connection is served.
    @Test func connectionsPastTheCapAreClosedOnArrival() async throws {
        try await withServe(["--max-connections", "4", "--idle-timeout", "60"]) { server in
            var held: [RawConnection] = []
            defer { for connection in held { connection.close() } }
            for _ in 0..<4 {
                // Each is served, so each was counted in before the fifth arrives.
                let connection = try await RawConnection.open(port: server.port)
                held.append(connection)
                connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                #expect(await eventually(within: 10) { rawStatus(connection.text) == 200 }, "\(connection.text)")
            }
            #expect(try await pageConnections(server) == 4)

            let fifth = try await RawConnection.open(port: server.port)
            defer { fifth.close() }
            #expect(await fifth.closes(within: 10), "a fifth connection stayed open past --max-connections 4")
            #expect(fifth.text.isEmpty, "the refused connection got \(fifth.text.prefix(200))")
            let metrics = try await server.admin(.get, "/metrics").text
            #expect(metricValue(metrics, "prefetch_connections_refused_total", labels: #"listener="page""#) == 1)

            // The held connections are still served.
            held[1].send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(await eventually(within: 10) { held[1].text.components(separatedBy: "HTTP/1.1 200").count == 3 })

            held[0].close()
            #expect(await eventually(within: 10) { (try? await pageConnections(server)) == 3 }, "the closed connection was not counted out")
            #expect(try await server.get("/healthz").status == 200)
        }
    }

    /// The new limits refuse values that would switch them off, naming the option.
    @Test func serveRefusesLimitsOutOfRange() async throws {
        for (option, value) in [("--max-connections", "0"), ("--admin-max-connections", "0"), ("--body-timeout", "0")] {
            let run = try await runExecutable("prefetch", ["serve", "--config", "configs/prefetch.json", "--port", "0", option, value])
            #expect(run.status != 0 && run.status != nil, "\(option) \(value) was accepted")
            #expect(run.stderr.contains("\(option) \(value) must be between"), "\(run.stderr)")
            #expect(!run.stdout.contains("listening"))
        }
    }

    func pageConnections(_ server: ServeProcess) async throws -> Double? {
        metricValue(try await server.admin(.get, "/metrics").text, "prefetch_connections", labels: #"listener="page""#)
    }

    /// Sends `head` on a raw connection, then `bytes` every half second until the server closes the connection (at
    /// most `within` seconds); what the server answered, and whether it closed.
    func drip(
        port: Int, _ head: String, bytes: String = "abcd", within seconds: Double = 30
    ) async throws -> (answer: String, closed: Bool) {
        let connection = try await RawConnection.open(port: port)
        defer { connection.close() }
        connection.send(head)
        let deadline = ContinuousClock.now.advanced(by: .milliseconds(Int64(seconds * 1000)))
        while connection.isOpen, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(500))
            connection.send(bytes)
        }
        return (connection.text, !connection.isOpen)
    }
}

/// A client TCP connection that collects what the server sends, for attacks that need several open at once.
final class RawConnection: Sendable {
    private let channel: any Channel
    private let received: Received

    private init(channel: any Channel, received: Received) {
        self.channel = channel
        self.received = received
    }

    static func open(port: Int) async throws -> RawConnection {
        let received = Received()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Collector(received: received)) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return RawConnection(channel: channel, received: received)
    }

    /// Everything received so far.
    var text: String { String(decoding: received.bytes.withLock { $0 }, as: UTF8.self) }

    var isOpen: Bool { channel.isActive }

    /// Sends `text` (a write to a connection the server closed fails, and the connection reads as closed).
    func send(_ text: String) {
        channel.writeAndFlush(ByteBuffer(string: text), promise: nil)
    }

    /// Waits at most `seconds` for the server to close the connection.
    func closes(within seconds: Double) async -> Bool {
        await eventually(within: seconds) { !channel.isActive }
    }

    func close() {
        channel.close(promise: nil)
    }

    private final class Received: Sendable {
        let bytes = Mutex<[UInt8]>([])
    }

    private final class Collector: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let received: Received

        init(received: Received) {
            self.received = received
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            received.bytes.withLock { $0.append(contentsOf: buffer.readableBytesView) }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // A reset by the server ends the connection like a close.
            context.close(promise: nil)
        }
    }
}

/// The body guard's decisions, every order of events a connection can see, without sockets or clocks.
@Suite("connection guards: the body guard's state machine")
struct BodyGuardStateTests {
    @Test func aRequestThatArrivesWholeInOneReadStartsNoTimer() {
        var state = BodyGuardState()
        state.requestHead()
        #expect(state.requestEnd() == .none)
        #expect(state.readComplete() == .none)
    }

    @Test func aBodyStillArrivingAtTheEndOfAReadStartsOneTimerItsEndCancels() {
        var state = BodyGuardState()
        state.requestHead()
        #expect(state.readComplete() == .armTimer)
        #expect(state.readComplete() == .none, "one timer per request, not per read")
        #expect(state.requestEnd() == .cancelTimer)
        // A timer that fired as it was being cancelled changes nothing.
        #expect(state.timerFired() == .none)
        #expect(state.phase == .open)
    }

    @Test func aLateBodyNotYetAnsweredIsA408AndLaterAnswersAreDropped() {
        var state = BodyGuardState()
        state.requestHead()
        _ = state.readComplete()
        #expect(state.timerFired() == .answerAndClose)
        #expect(state.write(.head) == .drop)
        #expect(state.write(.end) == .drop)
        #expect(state.readComplete() == .none)
    }

    @Test func aLateBodyWhoseRequestWasAnsweredJustCloses() {
        var state = BodyGuardState()
        state.requestHead()
        #expect(state.write(.head) == .pass)
        #expect(state.write(.end) == .pass)
        #expect(state.readComplete() == .armTimer)
        #expect(state.timerFired() == .close)
    }

    @Test func aLateBodyWhileAnAnswerIsBeingWrittenClosesAtItsEnd() {
        var state = BodyGuardState()
        state.requestHead()
        _ = state.readComplete()
        #expect(state.write(.head) == .pass)
        #expect(state.timerFired() == .closeAtNextEnd)
        #expect(state.write(.body) == .pass)
        #expect(state.write(.end) == .passThenClose)
        #expect(state.phase == .closed)
    }

    @Test func pipelinedRequestsWaitForTheEarlierAnswer() {
        var state = BodyGuardState()
        // The first request is whole; the second one's body is late while the first is still unanswered.
        state.requestHead()
        _ = state.requestEnd()
        state.requestHead()
        #expect(state.readComplete() == .armTimer)
        #expect(state.timerFired() == .closeAtNextEnd, "a 408 now would be read as the first request's answer")
        #expect(state.write(.head) == .pass)
        #expect(state.write(.end) == .passThenClose)
    }

    @Test func aLateBodyAfterEarlierRequestsWereAnsweredIsA408() {
        var state = BodyGuardState()
        state.requestHead()
        _ = state.requestEnd()
        _ = state.write(.head)
        _ = state.write(.end)
        state.requestHead()
        #expect(state.readComplete() == .armTimer)
        #expect(state.timerFired() == .answerAndClose)
    }
}

/// The body guard on a connection, on NIO's embedded event loop: the drip of the socket tests above, with time
/// that moves only when the test moves it, so a loaded machine cannot stretch a gap between two dripped bytes into
/// another timeout. The timer is the guard's own (`scheduleTask` on the connection's loop).
@Suite("connection guards: the body timeout on a virtual clock")
struct BodyGuardClockTests {
    static let bodyTimeout = Duration.seconds(3)

    /// A connection with only the guard in its pipeline, active, and the registry its counters go to.
    static func connection() throws -> (EmbeddedChannel, PrometheusCollectorRegistry) {
        let registry = PrometheusCollectorRegistry()
        let guards = ConnectionGuards(
            listener: .operator, maximum: 8, bodyTimeout: bodyTimeout, headLimit: 80 * 1024,
            factory: PrometheusMetricsFactory(registry: registry),
            logger: Logger(label: "guard-test"))
        let channel = EmbeddedChannel(handler: ConnectionGuardHandler(guards: guards))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8081)).wait()
        return (channel, registry)
    }

    /// One read from the socket: `part`, then the end of the read.
    static func read(_ channel: EmbeddedChannel, _ part: HTTPRequestPart) throws {
        try channel.writeInbound(part)
        channel.pipeline.fireChannelReadComplete()
        channel.embeddedEventLoop.run()
    }

    static func bodyTimeouts(_ registry: PrometheusCollectorRegistry) -> Double? {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return metricValue(String(decoding: buffer, as: UTF8.self), "prefetch_body_timeouts_total", labels: #"listener="operator""#)
    }

    /// SECURITY.md 15: a route answered before reading the body; the body keeps arriving a few bytes every half
    /// second, and the connection still closes at the body timeout (not a moment sooner), counted once.
    @Test func aDrippedBodyOfAnAnsweredRequestIsCutOffAtTheBodyTimeout() throws {
        let (channel, registry) = try Self.connection()
        defer { _ = try? channel.finish() }
        try Self.read(
            channel,
            .head(
                HTTPRequest(method: .get, scheme: nil, authority: "127.0.0.1", path: "/metrics", headerFields: [.contentLength: "1000000"]))
        )
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        #expect(try channel.readOutbound(as: HTTPResponsePart.self) == .head(HTTPResponse(status: .ok)), "the answer passes")
        #expect(try channel.readOutbound(as: HTTPResponsePart.self) == .end(nil))
        // 5 drips in the first 2.5 s, then up to 2,999 ms: every one is read, none buys time.
        for _ in 0..<5 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
            try Self.read(channel, .body(ByteBuffer(string: "abcd")))
        }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(499))
        #expect(channel.isActive, "closed before the body timeout")
        #expect(Self.bodyTimeouts(registry) == 0)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive, "a dripped body held the connection past the body timeout")
        #expect(Self.bodyTimeouts(registry) == 1)
        #expect(try channel.readOutbound(as: HTTPResponsePart.self) == nil, "no second answer to an answered request")
    }

    /// SECURITY.md 15: a trigger whose body is dripped and not yet answered gets `408 body-timeout` in the
    /// service's error shape at the body timeout, and its connection closes.
    @Test func aDrippedBodyOfAnUnansweredRequestIsA408AtTheBodyTimeout() throws {
        let (channel, registry) = try Self.connection()
        defer { _ = try? channel.finish() }
        try Self.read(
            channel,
            .head(
                HTTPRequest(
                    method: .post, scheme: nil, authority: "127.0.0.1", path: "/v1/prefetch",
                    headerFields: [.contentType: "application/json", .contentLength: "1000"])))
        try Self.read(channel, .body(ByteBuffer(string: #"{"url": "#)))
        for _ in 0..<5 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
            try Self.read(channel, .body(ByteBuffer(string: "    ")))
        }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(499))
        #expect(channel.isActive)
        #expect(try channel.readOutbound(as: HTTPResponsePart.self) == nil, "answered before the body timeout")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        guard case .head(let head) = try channel.readOutbound(as: HTTPResponsePart.self) else {
            Issue.record("no answer at the body timeout")
            return
        }
        #expect(head.status == .requestTimeout && head.headerFields[.connection] == "close")
        guard case .body(let body) = try channel.readOutbound(as: HTTPResponsePart.self) else {
            Issue.record("the 408 has no body")
            return
        }
        let error = try JSONDecoder().decode(APIError.Body.self, from: Data(String(buffer: body).utf8))
        #expect(error.error == "body-timeout" && error.message.contains("3000 ms"), "\(String(buffer: body))")
        #expect(try channel.readOutbound(as: HTTPResponsePart.self) == .end(nil))
        #expect(!channel.isActive, "the connection stayed open after its 408")
        #expect(Self.bodyTimeouts(registry) == 1)
    }

    /// A body whose last byte arrives a moment before the body timeout disarms it: the connection outlives any
    /// body timeout afterwards (the guard's timer is the body's, not the connection's).
    @Test func aBodyThatEndsBeforeTheBodyTimeoutLeavesTheConnectionOpen() throws {
        let (channel, registry) = try Self.connection()
        defer { _ = try? channel.finish() }
        try Self.read(
            channel,
            .head(
                HTTPRequest(method: .post, scheme: nil, authority: "127.0.0.1", path: "/v1/prefetch", headerFields: [.contentLength: "4"])))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(2_999))
        try Self.read(channel, .body(ByteBuffer(string: "{}  ")))
        try Self.read(channel, .end(nil))
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(channel.isActive)
        #expect(Self.bodyTimeouts(registry) == 0)
    }
}
