import Foundation
import Logging
import Metrics
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PrefetchCore
import PrefetchDNS
import PrefetchEngine
import PrefetchFetcher
import PrefetchStore
import Prometheus
import RendererPool
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The page listener's idle timeout and the fast path's body timeout, kept by ``FastHandoffHandler`` on a live
/// connection's pipeline, on NIO's embedded event loop: time moves only when the test moves it, so the outcome is
/// the handler's rules and never the machine's load (the socket test this replaces read a busy connection's reads
/// 100 ms apart against a 4 s timeout on the wall clock). `ConnectionStateTests` holds the rules on instants given by
/// hand; this holds that the handler reads the loop's clock, arms and re-arms its timer on that loop, and closes the
/// channel when the rules say so.
///
/// The pipeline is the page listener's (`PageChannel`) above the decoder: the encoded-answer writer, NIO's response
/// encoder and the handler with the page API.
@Suite("fast path: the idle and body timeouts on a virtual clock")
struct FastHandoffClockTests {
    static let idle = TimeAmount.seconds(4)
    static let bodyTimeout = Duration.seconds(3)

    /// The socket's place: a close of the output only (a half-close, after an answer with `Connection: close`) is
    /// kept here, as a socket keeps its input open then; `EmbeddedChannel` would close the whole channel.
    final class HalfCloseStandIn: ChannelOutboundHandler, RemovableChannelHandler {
        typealias OutboundIn = Any
        private(set) var outputClosed = false

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            guard mode == .output else { return context.close(mode: mode, promise: promise) }
            outputClosed = true
            promise?.succeed(())
        }
    }

    /// A live page connection: the handler installed as `FastHandoffInstaller` installs it, with an engine that has
    /// no config loaded (so a trigger is an engine refusal, `503 not-ready`, answered on the fast path), the channel active.
    struct Connection {
        let channel: EmbeddedChannel
        let registry: PrometheusCollectorRegistry
        let socket = HalfCloseStandIn()

        var loop: EmbeddedEventLoop { channel.embeddedEventLoop }
        var isOpen: Bool { channel.isActive }

        init() throws {
            let logger = Logger(label: "fast-handoff-clock-test")
            registry = PrometheusCollectorRegistry()
            let factory = PrometheusMetricsFactory(registry: registry)
            let fetcher = Fetcher(logger: logger)
            let orchestrator = Orchestrator(
                settings: EngineSettings(), store: MemoryStore(logger: logger), fetcher: fetcher,
                resolver: try HostResolver(fetcher: fetcher, logger: logger), tickets: LocalTicketRegistry(capacity: 10),
                metrics: EngineMetrics(factory: factory), logger: logger, configs: ConfigHolder(nil))
            let handoff = FastHandoff(
                orchestrator: orchestrator, origins: AllowedOrigins(extra: [], servedConfigs: { nil }),
                requestMetrics: FastHandoffMetrics(), renderers: nil)
            let parts = ServiceParts(
                orchestrator: orchestrator, renderers: try RendererPools(profiles: [:], logger: logger), listeners: ListenerSettings(),
                configSource: nil, configPath: "", updater: nil, registry: registry, logger: logger)
            let api = PageAPI(parts, handoff: handoff, routes: RouteSets(parts, factory: factory))
            let guards = ConnectionGuards(
                listener: .page, maximum: 8, bodyTimeout: FastHandoffClockTests.bodyTimeout, headLimit: nil, factory: factory,
                logger: logger)
            let writer = EncodedAnswerWriter()
            channel = EmbeddedChannel()
            try channel.pipeline.syncOperations.addHandlers([
                socket, writer, HTTPResponseEncoder(),
                FastHandoffHandler(
                    handoff: handoff, api: api, guards: guards, idleTimeout: FastHandoffClockTests.idle, writer: writer,
                    headLimit: 128 * 1024),
            ])
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        }

        /// One read from the socket: `parts`, then the end of the read.
        func read(_ parts: HTTPServerRequestPart...) throws {
            for part in parts { try channel.writeInbound(part) }
            channel.pipeline.fireChannelReadComplete()
            loop.run()
        }

        /// A trigger, whole in one read: answered by the fast path (the engine refuses it: no config loaded).
        func trigger() throws {
            let body = #"{"url":"https://m.example.com/help/new?id=1"}"#
            var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/prefetch")
            head.headers.add(name: "host", value: "127.0.0.1:8080")
            head.headers.add(name: "content-type", value: "application/json")
            head.headers.add(name: "content-length", value: String(body.utf8.count))
            try read(.head(head), .body(ByteBuffer(string: body)), .end(nil))
        }

        /// A request of the page API, answered at once.
        func health() throws {
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/healthz")
            head.headers.add(name: "host", value: "127.0.0.1:8080")
            try read(.head(head), .end(nil))
        }

        /// What the connection wrote since the last call, as text.
        func written() throws -> String {
            var text = ""
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
            return text
        }

        /// The requests answered on the event loop, by endpoint, as the engine counts them.
        func eventLoopAnswers() -> Double? {
            var buffer: [UInt8] = []
            registry.emit(into: &buffer)
            return metricValue(String(decoding: buffer, as: UTF8.self), "prefetch_event_loop_answers_total", labels: #"route="trigger""#)
        }

        func advance(_ amount: TimeAmount) { loop.advanceTime(by: amount) }
    }

    @Test func anIdleConnectionClosesAtItsIdleTimeoutAndNotBefore() throws {
        let connection = try Connection()
        defer { _ = try? connection.channel.finish() }
        connection.advance(Self.idle - .milliseconds(1))
        #expect(connection.isOpen, "closed before its idle timeout")
        connection.advance(.milliseconds(1))
        #expect(!connection.isOpen, "an idle connection was kept open past its idle timeout")
    }

    /// Requests the fast path answers itself keep a connection busy: twenty triggers, each answered on the event
    /// loop, one every half timeout, hold the connection open ten times as long as its timeout; then it closes one
    /// timeout after the last answer. (Request and answer happen at the same instant here; that an answer's end
    /// restarts the timeout on its own is the routed case below, whose answer comes five timeouts after its request.)
    @Test func answersOfTheFastPathKeepABusyConnectionOpenAndItClosesOnceIdle() throws {
        let connection = try Connection()
        defer { _ = try? connection.channel.finish() }
        for round in 1...20 {
            connection.advance(.seconds(2))
            try connection.trigger()
            let answer = try connection.written()
            #expect(answer.hasPrefix("HTTP/1.1 503"), "round \(round): \(answer.prefix(200))")
            #expect(answer.contains(#""error":"not-ready""#), "round \(round): \(answer.prefix(300))")
            #expect(connection.isOpen, "closed while busy, at round \(round)")
        }
        #expect(connection.eventLoopAnswers() == 20)
        connection.advance(Self.idle - .milliseconds(1))
        #expect(connection.isOpen, "closed before the idle timeout counted from the last answer")
        connection.advance(.milliseconds(1))
        #expect(!connection.isOpen, "an idle connection was kept open past its idle timeout")
    }

    /// Every answer's end re-arms the timer: answers of the page API (a health check) one every half timeout hold the
    /// connection open, and it closes one timeout after the last. (That an outstanding answer holds the connection
    /// however long it takes is `ConnectionStateTests`' rule.)
    @Test func answersOfThePageAPIKeepABusyConnectionOpen() throws {
        let connection = try Connection()
        defer { _ = try? connection.channel.finish() }
        for round in 1...10 {
            connection.advance(.seconds(2))
            try connection.health()
            let answer = try connection.written()
            #expect(answer.hasPrefix("HTTP/1.1 200") && answer.hasSuffix(#"{"status":"ok"}"#), "round \(round): \(answer)")
            #expect(connection.isOpen, "closed while busy, at round \(round)")
        }
        connection.advance(Self.idle - .milliseconds(1))
        #expect(connection.isOpen, "closed before the idle timeout counted from the last answer")
        connection.advance(.milliseconds(1))
        #expect(!connection.isOpen)
    }

    /// While the socket takes no more (a client that does not read its answers), pipelined requests are held,
    /// unanswered, so a connection holds at most what one read brought, never the answers it would pile up; they
    /// are answered, in order, once the socket drains.
    @Test func requestsWaitWhileTheClientDoesNotReadItsAnswers() throws {
        let connection = try Connection()
        defer { _ = try? connection.channel.finish() }
        connection.channel.isWritable = false
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/healthz")
        head.headers.add(name: "host", value: "127.0.0.1:8080")
        var missing = head
        missing.uri = "/nowhere"
        try connection.read(.head(head), .end(nil), .head(missing), .end(nil), .head(head), .end(nil))
        #expect(try connection.written().isEmpty, "answered while the socket took no more")
        connection.channel.isWritable = true
        connection.channel.pipeline.fireChannelWritabilityChanged()
        connection.loop.run()
        let answers = try connection.written().components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
        #expect(answers == ["200", "404", "200"], "\(answers)")
    }

    /// A body the decoder cannot read (a malformed chunk) is refused at once, `400 malformed-request`, and the
    /// connection closes: not left to the body timeout.
    @Test func aBodyThatCannotBeReadIsRefusedAtOnce() throws {
        let connection = try Connection()
        defer { _ = try? connection.channel.finish() }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/prefetch")
        head.headers.add(name: "host", value: "127.0.0.1:8080")
        head.headers.add(name: "content-type", value: "application/json")
        head.headers.add(name: "transfer-encoding", value: "chunked")
        try connection.read(.head(head))
        connection.channel.pipeline.fireErrorCaught(HTTPParserError.invalidChunkSize)
        connection.loop.run()
        let answer = try connection.written()
        #expect(answer.hasPrefix("HTTP/1.1 400") && answer.contains(#""error":"malformed-request""#), "\(answer)")
        #expect(connection.socket.outputClosed || !connection.isOpen, "the connection stayed open")
    }

    /// An absolute-form target (RFC 9112 §3.2.2) is answered as its path: the health check of
    /// `GET http://127.0.0.1:8080/healthz`.
    @Test func anAbsoluteFormTargetIsAnsweredAsItsPath() throws {
        let connection = try Connection()
        defer { _ = try? connection.channel.finish() }
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "http://127.0.0.1:8080/healthz")
        head.headers.add(name: "host", value: "127.0.0.1:8080")
        try connection.read(.head(head), .end(nil))
        let answer = try connection.written()
        #expect(answer.hasPrefix("HTTP/1.1 200") && answer.hasSuffix(#"{"status":"ok"}"#), "\(answer)")
    }

    /// A trigger body the fast path collects gets the body timeout on the same clock: a body dripped one byte a
    /// second gets `408 body-timeout` at three seconds (not a millisecond sooner) and the connection closes.
    @Test func aDrippedTriggerBodyIsA408AtTheBodyTimeout() throws {
        let connection = try Connection()
        defer { _ = try? connection.channel.finish() }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/prefetch")
        head.headers.add(name: "host", value: "127.0.0.1:8080")
        head.headers.add(name: "content-type", value: "application/json")
        head.headers.add(name: "content-length", value: "1000")
        try connection.read(.head(head))
        for _ in 0..<2 {
            connection.advance(.seconds(1))
            try connection.read(.body(ByteBuffer(string: " ")))
        }
        connection.advance(.milliseconds(999))
        #expect(try connection.written().isEmpty, "answered before the body timeout")
        #expect(connection.isOpen)
        connection.advance(.milliseconds(1))
        let answer = try connection.written()
        #expect(answer.hasPrefix("HTTP/1.1 408"), "\(answer.prefix(200))")
        #expect(answer.contains(#""error":"body-timeout""#), "\(answer.prefix(300))")
        #expect(!connection.isOpen, "the connection stayed open after the 408")
    }

    /// A trigger refused at its head with `Connection: close` is answered at once, and its body still has the body
    /// timeout: a client that keeps its side open and drips the body one byte a second is cut off at three seconds
    /// (not a millisecond sooner), not left to hold the connection for as long as it drips (each byte would restart
    /// the idle timeout).
    @Test func aClosingRefusalStillEndsADrippedBodyAtTheBodyTimeout() throws {
        let connection = try Connection()
        defer { _ = try? connection.channel.finish() }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/prefetch")
        head.headers.add(name: "host", value: "127.0.0.1:8080")
        head.headers.add(name: "content-type", value: "text/plain")
        head.headers.add(name: "connection", value: "close")
        head.headers.add(name: "content-length", value: "1000")
        try connection.read(.head(head))
        let answer = try connection.written()
        #expect(answer.hasPrefix("HTTP/1.1 415"), "\(answer.prefix(200))")
        #expect(connection.socket.outputClosed, "the refusal did not end the connection's output")
        for _ in 0..<2 {
            connection.advance(.seconds(1))
            try connection.read(.body(ByteBuffer(string: " ")))
        }
        connection.advance(.milliseconds(999))
        #expect(connection.isOpen, "cut off before the body timeout")
        connection.advance(.milliseconds(1))
        #expect(!connection.isOpen, "a refused request's dripped body held the connection past the body timeout")
    }
}
