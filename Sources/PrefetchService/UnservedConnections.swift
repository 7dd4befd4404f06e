import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Synchronization

extension HTTPServerBuilder {
    /// Hummingbird's HTTP/1 server (`.http1(configuration:)`) whose connections are closed when the server never
    /// gets to serve them (``ClosingHTTP1Channel``): what both listeners run.
    static func http1ClosingUnserved(configuration: HTTP1Channel.Configuration) -> HTTPServerBuilder {
        .init { responder in
            ClosingHTTP1Channel(base: HTTP1Channel(responder: responder, configuration: configuration))
        }
    }
}

/// Hummingbird's `HTTP1Channel`, each connection set up and served by it, handed from the listener to the serving
/// task in an ``AcceptedConnection`` that closes the connection if it is never served.
///
/// A listener hands each accepted connection to the serving task through its own async channel: the connection's
/// pipeline and its `NIOAsyncChannel` are made on the connection's event loop (`HTTP1Channel.setup`), then the
/// result goes back to the listener's loop and is queued for the serving task. NIO drops what it holds there when
/// the serving task is cancelled (a service group cancels its services once its graceful-shutdown grace,
/// `ServiceSettings.shutdownGrace`, has passed; a task group cancels the service when its body throws), and what
/// is on its way back when the listener has closed meanwhile (swift-nio issue 2813). Such a connection goes on
/// being registered and becomes active, but nothing serves it. Its `NIOAsyncChannel`, made with `wrappingChannelSynchronously`, has a
/// writer that must be finished before it goes away: dropping it stopped the whole process (`Deinited
/// NIOAsyncWriter without calling finish()`). (In a graceful shutdown the quiesce event each accepted connection
/// gets usually closes it first; on cancellation nothing did.) The ``AcceptedConnection`` that carries it finishes
/// that writer and closes the connection when it goes away unserved, so no connection outlives the server
/// unnoticed, and a graceful shutdown, which waits for every accepted connection to close, still ends.
struct ClosingHTTP1Channel: ServerChildChannel {
    let base: HTTP1Channel

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<AcceptedConnection> {
        base.setup(channel: channel, logger: logger).map { AcceptedConnection($0) }
    }

    func handle(value: AcceptedConnection, logger: Logger) async {
        guard let connection = value.serve() else { return }
        await base.handle(value: connection, logger: logger)
    }
}

/// A connection on its way from the listener to the serving task: served once (``serve()``), or, when it goes
/// away unserved, its writer finished and the connection closed.
final class AcceptedConnection: ServerChildChannelValue {
    private let connection: HTTP1Channel.Value
    private let served = Atomic<Bool>(false)

    init(_ connection: HTTP1Channel.Value) {
        self.connection = connection
    }

    var channel: any Channel { connection.channel }

    /// The connection to serve, the first time only.
    func serve() -> HTTP1Channel.Value? {
        served.exchange(true, ordering: .acquiringAndReleasing) ? nil : connection
    }

    deinit {
        guard !served.load(ordering: .acquiring) else { return }
        // Nothing waits here: a task of its own finishes the writer and closes the connection (`executeThenClose`),
        // and holds the connection until it has.
        let connection = connection
        Task { try? await connection.executeThenClose { _, outbound in outbound.finish() } }
    }
}
