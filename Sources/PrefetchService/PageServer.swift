import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import PageAPI

/// The page listener's connections: one pipeline for every request, below which nothing else answers.
///
/// Each accepted connection gets, from the socket up: the listener's cap on open connections
/// (``ConnectionCapHandler``), the writer of answers encoded as bytes (``EncodedAnswerWriter``), NIO's HTTP/1
/// response encoder (for the few answers it frames: `204`, `304`), NIO's request decoder with the head limit, and
/// ``FastHandoffHandler``, which answers every request: the five store routes from the store (``FastHandoff``) and
/// every other one through ``PageAPI``. It keeps the connection's idle timeout, body timeout, pipelining order and
/// graceful close. Hummingbird's `Server` accepts the connections and drives the graceful shutdown (each connection
/// gets `ChannelShouldQuiesceEvent` and the server waits until every one has closed); no Hummingbird codec, router
/// or async channel is on the path.
struct PageChannel: ServerChildChannel {
    let handoff: FastHandoff
    let api: PageAPI
    let guards: ConnectionGuards
    let idleTimeout: TimeAmount?
    /// The most bytes of a request head (request line and header fields).
    let headLimit: Int

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<PageConnection> {
        channel.eventLoop.makeCompletedFuture {
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldSize = headLimit
            limits.maxHeaderListSize = headLimit
            let writer = EncodedAnswerWriter()
            let operations = channel.pipeline.syncOperations
            try operations.addHandler(ConnectionCapHandler(guards: guards))
            try operations.addHandler(writer)
            try operations.addHandler(HTTPResponseEncoder(configuration: .init()))
            try operations.addHandler(
                ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, limitConfiguration: limits)))
            try operations.addHandler(
                FastHandoffHandler(
                    handoff: handoff, api: api, guards: guards, idleTimeout: idleTimeout, writer: writer, headLimit: headLimit))
            return PageConnection(channel: channel)
        }
    }

    /// The connection is served by its pipeline: this waits for it to close.
    func handle(value: PageConnection, logger: Logger) async {
        try? await value.channel.closeFuture.get()
    }
}

/// An accepted page connection.
struct PageConnection: ServerChildChannelValue {
    let channel: any Channel
}

/// Counts a connection in on the listener's cap, or closes it on arrival when the listener holds its maximum, and
/// counts it out when it goes.
final class ConnectionCapHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let guards: ConnectionGuards
    private var admitted = false

    init(guards: ConnectionGuards) {
        self.guards = guards
    }

    // The count follows the handler's life, not channelActive/Inactive: handlerRemoved comes exactly once after
    // handlerAdded, also for a channel that never became active.
    func handlerAdded(context: ChannelHandlerContext) {
        admitted = guards.admit()
        if !admitted, context.channel.isActive { context.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if admitted {
            admitted = false
            guards.release()
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        if !admitted { context.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }
}
