import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A config server for tests: each path answers what the test last set for it, and every request is counted.
///
/// Listens on 127.0.0.1 with a kernel-chosen port. Unset paths answer 404.
final class ConfigServer: Sendable {
    /// One scripted answer.
    struct Answer: Sendable {
        var status: Int = 200
        var body: [UInt8]
        /// Wait this long before answering (to outlast a client timeout).
        var delay: Duration?
    }

    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let script: Script

    final class Script: Sendable {
        private struct State {
            var answers: [String: Answer] = [:]
            var hits: [String: Int] = [:]
        }

        private let state = Mutex(State())

        func set(_ path: String, _ answer: Answer) {
            state.withLock { $0.answers[path] = answer }
        }

        /// Counts the request and returns its answer.
        func take(_ path: String) -> Answer? {
            state.withLock { state in
                state.hits[path, default: 0] += 1
                return state.answers[path]
            }
        }

        func hits(_ path: String) -> Int {
            state.withLock { $0.hits[path, default: 0] }
        }
    }

    private init(port: Int, group: MultiThreadedEventLoopGroup, channel: any Channel, script: Script) {
        self.port = port
        self.group = group
        self.channel = channel
        self.script = script
    }

    static func start() async throws -> ConfigServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let script = Script()
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(ConfigServerHandler(script: script))
                    }
                }
                .bind(host: "127.0.0.1", port: 0)
                .get()
            guard let port = channel.localAddress?.port else {
                throw ConfigServerError(message: "the config server has no local port")
            }
            return ConfigServer(port: port, group: group, channel: channel, script: script)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    func url(_ path: String) -> String {
        "http://127.0.0.1:\(port)\(path)"
    }

    /// From now on `path` answers `body` with `status` after `delay`.
    func serve(_ path: String, _ body: [UInt8], status: Int = 200, delay: Duration? = nil) {
        script.set(path, Answer(status: status, body: body, delay: delay))
    }

    /// Requests for `path` so far.
    func hits(_ path: String) -> Int {
        script.hits(path)
    }

    /// Closes the listener and every connection.
    func shutdown() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

struct ConfigServerError: Error {
    var message: String
}

/// Answers each request with the scripted answer of its path.
final class ConfigServerHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let script: ConfigServer.Script
    private var path = "/"
    private var keepAlive = true

    init(script: ConfigServer.Script) {
        self.script = script
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            path = String(head.uri.prefix { $0 != "?" })
            keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            let answer = script.take(path) ?? ConfigServer.Answer(status: 404, body: Array("{}".utf8))
            if let delay = answer.delay {
                let milliseconds = delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) {
                    self.respond(answer, context: context)
                }
            } else {
                respond(answer, context: context)
            }
        }
    }

    private func respond(_ answer: ConfigServer.Answer, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: "\(answer.body.count)")
        let head = HTTPResponseHead(
            version: .http1_1, status: HTTPResponseStatus(statusCode: answer.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: answer.body)))), promise: nil)
        let keepAlive = keepAlive
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            if !keepAlive { context.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
