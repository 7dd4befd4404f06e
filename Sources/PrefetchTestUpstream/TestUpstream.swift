// A scriptable upstream (plain HTTP/1.1; TLS and HTTP/2 are PrefetchTestUpstreamTLS's) for tests and benchmarks:
// a SwiftNIO server whose behaviour and faults are chosen by each request's query parameters (`UpstreamScript`),
// with hit, connection and request records readable in process or over HTTP (`/__hits`, `/__connections`,
// `/__requests`).
// Design notes: docs/design/test-upstream.md
package import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// One scripted request as the upstream saw it.
public struct SeenRequest: Sendable, Equatable {
    /// The request path, without the query.
    public var path: String
    /// The Host header, or nil when the request had none.
    public var host: String?
    /// The TLS server name (SNI) the connection presented; nil on plain connections or when none was sent.
    public var serverName: String?
    /// Whether the request arrived over TLS.
    public var tls: Bool

    /// Creates a record.
    public init(path: String, host: String?, serverName: String?, tls: Bool) {
        self.path = path
        self.host = host
        self.serverName = serverName
        self.tls = tls
    }
}

/// A running scriptable upstream server bound on a local address.
///
/// Default answer: `200` JSON echo `{"method","path","query","headers","body","hit"}`. Query parameters script it:
/// `status`, `delay` (ms), `setCookie` (repeatable), `cacheControl`, `contentType`, `bytes` (octet body of N
/// bytes), `drip` (ms between small body chunks), `reset` (N body bytes then TCP reset), `short` (N body bytes of a
/// larger announced length, then close), `garbage=1` (non-HTTP bytes), `hang=1` (never answer), `hold=NAME`
/// (answer once the gate NAME is released: ``release(_:)``), `surrogateKey` (a `Surrogate-Key` header value,
/// repeatable), `surrogateKeys=N` (one of N keys `key-0 key-1 ...`). Requests with an `Origin` header get
/// `Access-Control-Allow-Origin: *`, and CORS preflights are answered, so pages in a browser can call it.
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

    /// Starts a plain HTTP/1.1 server on `host:port` (port 0 picks a free port) served by `threads` event loops.
    public static func start(host: String = "127.0.0.1", port: Int = 0, threads: Int = 1) async throws -> TestUpstream {
        try await start(host: host, port: port, threads: threads) { channel, counters in
            channel.eventLoop.makeCompletedFuture {
                try addHTTPHandlers(to: channel, counters: counters, serverName: nil, tls: false)
            }
        }
    }

    /// Starts a server whose accepted connections `initialize` sets up (after counting them): how the TLS and
    /// HTTP/2 upstream (PrefetchTestUpstreamTLS) puts its handlers in front of the same scripted ones.
    package static func start(
        host: String, port: Int, threads: Int,
        initialize: @escaping @Sendable (any Channel, UpstreamCounters) -> EventLoopFuture<Void>
    ) async throws -> TestUpstream {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
        let counters = UpstreamCounters()
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.backlog, value: 4096)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    counters.connectionOpened()
                    return initialize(channel, counters)
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

    /// Every scripted request since start or the last reset, in arrival order (at most the latest 10,000).
    public func requests() -> [SeenRequest] {
        counters.requests()
    }

    /// The most HTTP/2 streams that were open at once since start or the last reset (0 without HTTP/2).
    public func peakStreams() -> Int {
        counters.peakStreams()
    }

    /// How many TCP connections were accepted since start or the last reset.
    public func connections() -> Int {
        counters.connections()
    }

    /// Clears hit and connection counts, and closes every released gate again.
    public func resetCounts() {
        counters.reset()
    }

    /// Releases the gate `name` (`hold=NAME` in a request's query): the answers it holds are sent now, and later
    /// requests naming it are answered at once. Returns how many answers it held.
    @discardableResult
    public func release(_ name: String) -> Int {
        counters.release(name)
    }

    /// How many answers the gate `name` holds now (requests that arrived and wait for its release).
    public func held(_ name: String) -> Int {
        counters.heldCount(name)
    }

    /// Stops listening and closes every connection, including hanging ones and those held at a gate (a gate released
    /// afterwards answers nothing: its event loops are gone).
    public func shutdown() async throws {
        counters.dropHeld()
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

/// Installs the HTTP decoder and the scripted handler on `channel` (after TLS, when there is TLS).
package func addHTTPHandlers(to channel: any Channel, counters: UpstreamCounters, serverName: String?, tls: Bool) throws {
    try channel.pipeline.syncOperations.addHandler(
        ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes))
    )
    try channel.pipeline.syncOperations.addHandler(
        UpstreamHandler(counters: counters, connection: ConnectionInfo(serverName: serverName, tls: tls))
    )
}

/// What is known about a connection before its first request.
package struct ConnectionInfo {
    package var serverName: String?
    package var tls: Bool

    package init(serverName: String?, tls: Bool) {
        self.serverName = serverName
        self.tls = tls
    }
}

/// Hit counts per path, the requests seen and the number of accepted connections, shared by every connection.
package final class UpstreamCounters: Sendable {
    private struct State {
        var hits: [String: Int] = [:]
        var requests: [SeenRequest] = []
        var connections = 0
        var openStreams = 0
        var peakStreams = 0
        /// Answers held at a gate (`hold=NAME`) not yet released, by gate.
        var held: [String: [@Sendable () -> Void]] = [:]
        /// Gates released since start or the last reset (at most `requestLogLimit`): they hold nothing.
        var released: Set<String> = []
    }

    /// Bounds the request log of a long-running upstream (benchmarks send millions of requests).
    private static let requestLogLimit = 10_000

    private let state = Mutex(State())

    package func connectionOpened() {
        state.withLock { $0.connections += 1 }
    }

    /// Records one hit and returns its ordinal (1 for the first).
    package func recordHit(_ request: SeenRequest) -> Int {
        state.withLock { state in
            let next = state.hits[request.path, default: 0] + 1
            state.hits[request.path] = next
            if state.requests.count >= Self.requestLogLimit {
                state.requests.removeFirst(state.requests.count - Self.requestLogLimit + 1)
            }
            state.requests.append(request)
            return next
        }
    }

    package func streamOpened() {
        state.withLock { state in
            state.openStreams += 1
            state.peakStreams = max(state.peakStreams, state.openStreams)
        }
    }

    package func streamClosed() {
        state.withLock { $0.openStreams -= 1 }
    }

    func peakStreams() -> Int {
        state.withLock { $0.peakStreams }
    }

    func requests() -> [SeenRequest] {
        state.withLock { $0.requests }
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

    /// Runs `answer` once the gate `name` is released: now, when it already is.
    package func hold(_ name: String, _ answer: @escaping @Sendable () -> Void) {
        let open = state.withLock { state in
            if state.released.contains(name) { return true }
            state.held[name, default: []].append(answer)
            return false
        }
        if open { answer() }
    }

    /// Releases the gate `name`: the answers it holds go now, later ones at once. How many it held.
    package func release(_ name: String) -> Int {
        let answers = state.withLock { state in
            // Bounded like the request log: at the limit every earlier release is forgotten (those gates hold again).
            if state.released.count >= Self.requestLogLimit { state.released.removeAll(keepingCapacity: true) }
            state.released.insert(name)
            return state.held.removeValue(forKey: name) ?? []
        }
        for answer in answers { answer() }
        return answers.count
    }

    /// Forgets every held answer (the server is stopping, and their connections close with it).
    package func dropHeld() {
        state.withLock { $0.held = [:] }
    }

    /// How many answers the gate `name` holds now.
    func heldCount(_ name: String) -> Int {
        state.withLock { $0.held[name]?.count ?? 0 }
    }

    func reset() {
        state.withLock { state in
            // Streams still open stay counted, so the peak after a reset is measured from them.
            let open = state.openStreams
            // Held answers stay held: a reset must not leave their requests waiting for ever.
            let held = state.held
            state = State()
            state.openStreams = open
            state.peakStreams = open
            state.held = held
        }
    }
}
