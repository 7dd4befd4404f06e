// The cheapest answer a SwiftNIO HTTP/1.1 server gives: the same bytes for every request, through NIO's own server
// pipeline (`configureHTTPServerPipeline`: its request decoder and response encoder) and one handler that writes a
// fixed head and body. The handoff benchmark measures it beside nginx as the floor of any server built on NIO's
// HTTP/1 pipeline (`prefetch-upstream --answer-file`).
import NIOCore
import NIOHTTP1

extension TestUpstream {
    /// Starts a server on `host:port` (port 0 picks a free port), served by `threads` event loops, that answers every
    /// request `200` with `body` as `application/json`.
    public static func startConstant(
        host: String = "127.0.0.1", port: Int = 0, threads: Int = 1, body: [UInt8]
    ) async throws
        -> TestUpstream
    {
        let body = ByteBuffer(bytes: body)
        return try await start(host: host, port: port, threads: threads) { channel, _ in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                try channel.pipeline.syncOperations.addHandler(ConstantAnswerHandler(body: body))
            }
        }
    }
}

/// Answers each request, at its end, with the one head and body it was given.
final class ConstantAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let head: HTTPResponseHead
    private let body: ByteBuffer

    init(body: ByteBuffer) {
        self.body = body
        self.head = HTTPResponseHead(
            version: .http1_1, status: .ok,
            headers: ["Content-Type": "application/json", "Content-Length": String(body.readableBytes)])
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }
}
