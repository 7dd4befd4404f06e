// The clients the service's tests send requests through, and the live application they talk to: the project's own,
// in place of Hummingbird's testing product, whose AsyncHTTPClient brought NIOSSL (a BoringSSL of its own) into
// every test build.
//
// Design
// - `SocketClient`: one HTTP/1.1 connection to a listener on 127.0.0.1 (plain SwiftNIO, HTTPTypes through
//   NIOHTTPTypesHTTP1). Requests go out in order on it and answers come back in order; each has a hang guard (60 s at least), after
//   which the connection is closed. What `.live` and `TestClient` did: the shared connection of a live service sends
//   `Host: localhost` and `Connection: keep-alive`, a connection of its own `Host: 127.0.0.1`.
// - `RouterClient`: a router's responder called in process, as `.router` did: no socket, a testing channel in the
//   request context, a thrown error that is no `HTTPResponseError` answered `500`.
// - `withLiveApplication`: the application and its services run by a `ServiceGroup` until the test is done, then
//   shut down gracefully.
package import HTTPTypes
package import Hummingbird
package import Logging
package import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization
import Testing

/// A whole HTTP answer as a test client received it.
package struct ClientResponse: Sendable {
    package var head: HTTPResponse
    package var body: ByteBuffer

    package init(head: HTTPResponse, body: ByteBuffer) {
        self.head = head
        self.body = body
    }

    package var status: HTTPResponse.Status { head.status }
    package var headers: HTTPFields { head.headerFields }
}

/// Where a test sends its requests: a connection to a live listener (``SocketClient``) or a router in process
/// (``RouterClient``).
package protocol TestHTTPClient: Sendable {
    /// Sends one request (with a `Content-Length` when it has a body) and returns the whole answer.
    func executeRequest(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> ClientResponse
}

extension TestHTTPClient {
    /// Sends one request and returns the whole answer.
    package func execute(
        uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil
    ) async throws -> ClientResponse {
        try await executeRequest(uri: uri, method: method, headers: headers, body: body)
    }
}

/// Why a ``SocketClient`` request got no answer.
package enum SocketClientError: Error {
    /// The connection closed before the answer was complete.
    case connectionClosed
    /// The server sent an answer part out of order.
    case malformedResponse
}

/// One HTTP/1.1 connection to a listener on 127.0.0.1: requests go out in order on it, answers come back in order.
package final class SocketClient: TestHTTPClient {
    /// The port the connection goes to.
    package let port: Int
    private let channel: any Channel
    private let authority: String
    private let keepAlive: Bool
    private let timeout: Duration

    private init(port: Int, channel: any Channel, authority: String, keepAlive: Bool, timeout: Duration) {
        self.port = port
        self.channel = channel
        self.authority = authority
        self.keepAlive = keepAlive
        self.timeout = timeout
    }

    /// Connects to 127.0.0.1:`port` (at most 5 s). Requests carry `authority` as their `Host`, and `Connection:
    /// keep-alive` with `keepAlive`; a connection whose answer has not come `timeout` (60 s at least) after its request is closed, a hang guard.
    package static func connect(port: Int, authority: String, keepAlive: Bool, timeout: Duration) async throws -> SocketClient {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandlers([HTTP1ToHTTPClientCodec(), ExchangeHandler()])
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return SocketClient(port: port, channel: channel, authority: authority, keepAlive: keepAlive, timeout: timeout)
    }

    package func executeRequest(
        uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?
    ) async throws -> ClientResponse {
        var fields = headers
        if keepAlive { fields[.connection] = "keep-alive" }
        if let body { fields[.contentLength] = String(body.readableBytes) }
        let head = HTTPRequest(method: method, scheme: nil, authority: authority, path: uri, headerFields: fields)
        let answer = channel.eventLoop.makePromise(of: ClientResponse.self)
        channel.writeAndFlush(Exchange(head: head, body: body, answer: answer)).whenFailure { answer.fail($0) }
        // A hang guard, not a deadline a passing test meets: after `timeout` (60 s at least, as every wait bound in
        // the test targets) the connection is closed, which fails every answer still owed (`channelInactive`).
        // Scheduled and cancelled on the channel's loop, where the answer is completed.
        let loop = channel.eventLoop
        let bound = max(timeout, .seconds(60)).components
        let guardTask = loop.scheduleTask(
            in: .nanoseconds(bound.seconds * 1_000_000_000 + bound.attoseconds / 1_000_000_000)
        ) { [channel] in channel.close(promise: nil) }
        answer.futureResult.whenComplete { _ in guardTask.cancel() }
        return try await answer.futureResult.get()
    }

    /// Closes the connection.
    package func close() async {
        try? await channel.close()
    }
}

/// Runs `body` with a ``SocketClient`` connected to 127.0.0.1:`port`, closed afterwards, also when `body` throws.
package func withSocketClient<T: Sendable>(
    port: Int, authority: String = "127.0.0.1", keepAlive: Bool = false, timeout: Duration = .seconds(15),
    _ body: @Sendable (SocketClient) async throws -> T
) async throws -> T {
    let client = try await SocketClient.connect(port: port, authority: authority, keepAlive: keepAlive, timeout: timeout)
    do {
        let value = try await body(client)
        await client.close()
        return value
    } catch {
        await client.close()
        throw error
    }
}

/// A request on its way, with the promise its answer completes.
private struct Exchange: Sendable {
    var head: HTTPRequest
    var body: ByteBuffer?
    var answer: EventLoopPromise<ClientResponse>
}

/// Writes each exchange's request and completes the oldest waiting answer with each response read.
private final class ExchangeHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPResponsePart
    typealias OutboundIn = Exchange
    typealias OutboundOut = HTTPRequestPart

    private var waiting = CircularBuffer<EventLoopPromise<ClientResponse>>()
    private var head: HTTPResponse?
    private var body = ByteBuffer()

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let exchange = unwrapOutboundIn(data)
        waiting.append(exchange.answer)
        context.write(wrapOutboundOut(.head(exchange.head)), promise: nil)
        if let body = exchange.body, body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(body)), promise: nil)
        }
        context.write(wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (unwrapInboundIn(data), head) {
        case (.head(let response), nil):
            head = response
            body = context.channel.allocator.buffer(capacity: 0)
        case (.body(var chunk), .some):
            body.writeBuffer(&chunk)
        case (.end, .some(let response)):
            head = nil
            waiting.popFirst()?.succeed(ClientResponse(head: response, body: body))
        default:
            failAll(SocketClientError.malformedResponse)
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(SocketClientError.connectionClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(error)
        context.close(promise: nil)
    }

    private func failAll(_ error: any Error) {
        while let answer = waiting.popFirst() { answer.fail(error) }
    }
}

/// A router's responder called in process: each request is answered without a socket, in a request context whose
/// channel is a testing channel.
package struct RouterClient<Responder: HTTPResponder>: TestHTTPClient where Responder.Context == BasicRequestContext {
    private let responder: Responder
    private let logger: Logger

    package init(responder: Responder, logger: Logger) {
        self.responder = responder
        self.logger = logger
    }

    package func executeRequest(
        uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?
    ) async throws -> ClientResponse {
        var fields = headers
        if let body { fields[.contentLength] = String(body.readableBytes) }
        let request = Request(
            head: HTTPRequest(method: method, scheme: "http", authority: "localhost", path: uri, headerFields: fields),
            body: RequestBody(buffer: body ?? ByteBuffer()))
        let context = BasicRequestContext(source: ApplicationRequestContextSource(channel: NIOAsyncTestingChannel(), logger: logger))
        let response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            // What the server does with an error no route turned into an answer.
            response = Response(status: .internalServerError)
        }
        let collected = CollectedBody()
        try await response.body.write(collected)
        return ClientResponse(head: response.head, body: collected.bytes)
    }
}

/// A response body written whole into memory.
private final class CollectedBody: ResponseBodyWriter, Sendable {
    private let storage = Mutex(ByteBuffer())

    var bytes: ByteBuffer { storage.withLock { $0 } }

    func write(_ buffer: ByteBuffer) async throws {
        _ = storage.withLock { $0.writeImmutableBuffer(buffer) }
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

/// Runs `app` (its services, and its listeners, which call back with their ports) while `body` runs with a
/// ``SocketClient`` on one keep-alive connection to the page listener, whose port `port` learns from the
/// application's `onServerRunning`; the application is shut down gracefully afterwards, also when `body` throws.
package func withLiveApplication<T: Sendable>(
    _ app: some ApplicationProtocol, port: PortBox, _ body: @Sendable (SocketClient) async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        let services = ServiceGroup(configuration: .init(services: [app], logger: app.logger))
        group.addTask { try await services.run() }
        do {
            let listening = try #require(await port.value(), "the page listener did not start")
            let value = try await withSocketClient(port: listening, authority: "localhost", keepAlive: true, timeout: .seconds(20), body)
            await services.triggerGracefulShutdown()
            return value
        } catch {
            await services.triggerGracefulShutdown()
            throw error
        }
    }
}
