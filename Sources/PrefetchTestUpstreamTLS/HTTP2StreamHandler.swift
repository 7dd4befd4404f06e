import NIOCore
import NIOHTTP1
import PrefetchTestUpstream

/// Serves one HTTP/2 stream (behind `HTTP2FramePayloadToHTTP1ServerCodec`, so requests arrive as HTTP/1 parts).
///
/// The scripts that mean something on a multiplexed connection are honoured: `status`, `delay`, `body`, `bytes`,
/// `contentType`, `cacheControl`, `setCookie`, `hang` and the echo. Faults that break the connection (`reset`,
/// `short`, `garbage`, `drip`) are HTTP/1 scripts; on a stream they are ignored. Every stream counts towards the
/// upstream's concurrent-stream figures, which is how tests prove several requests shared one connection.
final class HTTP2StreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let counters: UpstreamCounters
    private let connection: ConnectionInfo
    private var head: HTTPRequestHead?
    private var body: [UInt8]?
    private var counted = false

    init(counters: UpstreamCounters, connection: ConnectionInfo) {
        self.counters = counters
        self.connection = connection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        counters.streamOpened()
        counted = true
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if counted { counters.streamClosed() }
        counted = false
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
        case .body(var chunk):
            body = (body ?? []) + (chunk.readBytes(length: chunk.readableBytes) ?? [])
        case .end:
            guard let head else { return }
            handle(head, context: context)
        }
    }

    private func handle(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let (path, query) = splitURI(head.uri)
        let request = ScriptedRequest(head: head, body: body)
        if path.hasPrefix("/__") {
            let (status, json) = controlAnswer(method: head.method, path: path, query: query, counters: counters)
            respond(status: status, headers: [("Content-Type", "application/json")], body: Array(json.utf8), context: context)
            return
        }
        let hit = counters.recordHit(
            SeenRequest(path: path, host: head.headers.first(name: "host"), serverName: connection.serverName, tls: connection.tls)
        )
        let script = UpstreamScript(query: query)
        if script.hang { return }
        let answer = scriptedAnswer(request, path: path, query: query, hit: hit, script: script)
        if script.delayMilliseconds > 0 {
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(script.delayMilliseconds))) {
                self.respond(status: script.status, headers: answer.headers, body: answer.body, context: context)
            }
        } else {
            respond(status: script.status, headers: answer.headers, body: answer.body, context: context)
        }
    }

    private func respond(status: Int, headers: [(String, String)], body: [UInt8], context: ChannelHandlerContext) {
        var fields = HTTPHeaders(headers)
        fields.add(name: "Content-Length", value: String(body.count))
        let head = HTTPResponseHead(version: .http2, status: HTTPResponseStatus(statusCode: status), headers: fields)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
