// A scriptable HTTP/1.1 upstream for tests and benchmarks.
//
// Design
// - SwiftNIO server: the pipeline has only the HTTP request decoder; responses are written as raw bytes by
//   `UpstreamHandler`, which is what lets it misbehave on purpose (reset, short bodies, garbage, hanging).
// - Behaviour is scripted by query parameters of each request (see `UpstreamScript`), so any URL that reaches it,
//   e.g. a configured API URL, can choose a fault.
// - Requests on one connection are answered in order, one at a time (keep-alive; pipelined requests queue).
// - Waiting (`delay`, `drip`) is scheduled on the event loop, never slept.
// - Hit and connection counts live behind a `Mutex` in `UpstreamCounters`, shared by all event loops and
//   readable in-process (`hits(path:)`) or over HTTP (`/__hits`, `/__connections`, `POST /__reset`).
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A running scriptable upstream server bound on a local address.
///
/// Default answer: `200` JSON echo `{"method","path","query","headers","body","hit"}`. Query parameters script it:
/// `status`, `delay` (ms), `setCookie` (repeatable), `cacheControl`, `contentType`, `bytes` (octet body of N
/// bytes), `drip` (ms between small body chunks), `reset` (N body bytes then TCP reset), `short` (N body bytes of a
/// larger announced length, then close), `garbage=1` (non-HTTP bytes), `hang=1` (never answer). Requests with an
/// `Origin` header get `Access-Control-Allow-Origin: *`, and CORS preflights are answered, so pages in a browser
/// can call it.
public final class TestUpstream: Sendable {
    /// The bound port (the kernel's choice when started with port 0).
    public let port: Int
    /// The bound host.
    public let host: String
    private let group: MultiThreadedEventLoopGroup
    private let serverChannel: any Channel
    private let counters: UpstreamCounters

    private init(host: String, port: Int, group: MultiThreadedEventLoopGroup, serverChannel: any Channel, counters: UpstreamCounters) {
        self.host = host
        self.port = port
        self.group = group
        self.serverChannel = serverChannel
        self.counters = counters
    }

    /// Starts a server on `host:port` (port 0 picks a free port) served by `threads` event loops.
    public static func start(host: String = "127.0.0.1", port: Int = 0, threads: Int = 1) async throws -> TestUpstream {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
        let counters = UpstreamCounters()
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.backlog, value: 4096)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    counters.connectionOpened()
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes))
                        )
                        try channel.pipeline.syncOperations.addHandler(UpstreamHandler(counters: counters))
                    }
                }
                .bind(host: host, port: port)
                .get()
            guard let boundPort = channel.localAddress?.port else {
                throw UpstreamError(message: "no local port after binding \(host):\(port)")
            }
            return TestUpstream(host: host, port: boundPort, group: group, serverChannel: channel, counters: counters)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// How many scripted (non-control) requests for `path` arrived since start or the last reset.
    public func hits(path: String) -> Int {
        counters.hits(path: path)
    }

    /// How many TCP connections were accepted since start or the last reset.
    public func connections() -> Int {
        counters.connections()
    }

    /// Clears hit and connection counts.
    public func resetCounts() {
        counters.reset()
    }

    /// Stops listening and closes every connection, including hanging ones.
    public func shutdown() async throws {
        try? await serverChannel.close()
        try await group.shutdownGracefully()
    }
}

/// A failure of the test upstream itself.
public struct UpstreamError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var message: String
    /// The message.
    public var description: String { message }
}

/// Hit counts per path and the number of accepted connections, shared by every connection.
final class UpstreamCounters: Sendable {
    private struct State {
        var hits: [String: Int] = [:]
        var connections = 0
    }

    private let state = Mutex(State())

    func connectionOpened() {
        state.withLock { $0.connections += 1 }
    }

    /// Records one hit and returns its ordinal (1 for the first).
    func recordHit(path: String) -> Int {
        state.withLock { state in
            let next = state.hits[path, default: 0] + 1
            state.hits[path] = next
            return next
        }
    }

    func hits(path: String) -> Int {
        state.withLock { $0.hits[path, default: 0] }
    }

    func allHits() -> [String: Int] {
        state.withLock { $0.hits }
    }

    func connections() -> Int {
        state.withLock { $0.connections }
    }

    func reset() {
        state.withLock { $0 = State() }
    }
}
