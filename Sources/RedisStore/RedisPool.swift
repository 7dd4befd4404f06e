import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Connection settings shared by the pool and the subscriber.
struct ConnectionSettings: Sendable {
    /// The credentials and database every connection presents (with `redis://`, also the one server's address).
    var endpoint: RedisEndpoint
    /// Where a new connection goes: `endpoint`, or the primary the sentinels name now.
    var locator: PrimaryLocator
    var connectTimeout: Duration
    var commandTimeout: Duration
    /// What a reply may claim before the pool closes the connection (the subscriber's hiredis has its own bounds).
    var limits: RESPLimits
    /// The sentinels that name the primary (nil with `redis://`); asked by the subscriber's thread.
    var sentinels: SentinelEndpoints?

    /// Settings for `endpoint`, or (with `sentinels`) for the primary they name, found by `locator`.
    init(
        endpoint: RedisEndpoint, locator: PrimaryLocator? = nil, sentinels: SentinelEndpoints? = nil, connectTimeout: Duration,
        commandTimeout: Duration, limits: RESPLimits = RESPLimits(maximumValueBytes: RedisStore.Configuration().maximumValueBytes)
    ) {
        self.endpoint = endpoint
        self.locator = locator ?? PrimaryLocator(fixed: endpoint)
        self.sentinels = sentinels
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
        self.limits = limits
    }
}

/// Where the store sends its commands: one server's pool (`RedisPool`, also for a Sentinel-managed primary), or a
/// cluster's, which routes each command to its slot's primary (`ClusterPool`).
protocol RedisCommands: Sendable {
    /// Runs `commands` pipelined: those for one server in one write, in order, so Redis runs them one after another.
    /// Returns one result per command, in order.
    func execute(batch commands: [[[UInt8]]]) async -> [Result<RedisValue, RedisCallError>]
    /// ``execute(batch:)`` without a task: the results go to `done` on an event loop (or at once, when Redis is known
    /// to be down). `done` must not block.
    func submit(batch commands: [[[UInt8]]], then done: @escaping @Sendable (RedisCall.Results) -> Void)
    /// One runner per primary, for the commands that address every server rather than a key (`SCAN`).
    func everyPrimary() async -> [any RedisCommands]
}

extension RedisCommands {
    /// Runs one command.
    func execute(_ arguments: [[UInt8]]) async -> Result<RedisValue, RedisCallError> {
        await execute(batch: [arguments])[0]
    }
}

/// A small pool of non-blocking Redis connections on NIO event loops (`MultiThreadedEventLoopGroup.singleton`, the
/// group Hummingbird serves on, unless another is given), speaking RESP2 through our own codec (`RESP.swift`).
///
/// The connections sit on the group's loops in turn. A call made on a loop that holds one goes on it (its replies are
/// handled where the caller is); any other call goes to the connections round robin. A call's commands are written at once, as one pipeline, behind whatever
/// is already outstanding on that connection: Redis answers in order, so each connection keeps a FIFO of the
/// outstanding calls and hands each its replies as they arrive. Writes made in one event-loop turn share one flush.
/// Nothing waits for a round trip before writing, and no thread but an event loop touches a connection.
///
/// An awaited call crosses threads twice: the caller's task to the connection's event loop (`EventLoop.execute`), and
/// the continuation's resumption back to the cooperative pool when its last reply is in. A call made without a task
/// (`submit(batch:then:)`, the page open's path) from an event loop that holds a connection crosses none; from
/// another thread (the fetcher's settlements), once: its results are handled on the connection's loop.
///
/// Every call is bounded: connecting by the connect timeout, each call by the command timeout from the moment it is
/// written (a timer on the event loop; when it fires the connection is closed and every call outstanding on it fails
/// `.io`). The rules of a call, whatever else shares its connection:
/// - While Redis is known to be down (`RedisHealthMonitor`) a call fails fast with `.unavailable` unless it claims
///   the reconnect attempt, and a connection opened before the outage is no longer used.
/// - A connection is opened on demand: connect, then `AUTH` (when the endpoint has credentials; a refusal is
///   `.auth`, with the password redacted from every message; without credentials `PING`, whose `NOAUTH` is `.auth`
///   too, so a server that wants credentials never counts as reached) and `SELECT` (when the database is not 0),
///   pipelined.
///   Calls that arrive meanwhile wait for it, and all fail with its error if it cannot be opened.
/// - A call whose connection is found closed by the server (EOF or reset, as after a Redis restart) before any reply
///   of the call arrived is retried once on a fresh connection, since none of it ran, provided the connection was
///   open before the call was written. A call that got some replies keeps them and the rest fail: those commands are
///   never retried, because they may have run.
/// - A `NOAUTH` error reply means the server wants credentials the URL does not give: the connection is closed and
///   the call's unanswered commands fail `.auth`.
/// - Every call that reached Redis reports to the health monitor: `succeeded()` when all its replies arrived,
///   `failed(_)` when it failed for want of Redis.
final class RedisPool: RedisCommands {
    private let connections: [PooledConnection]
    private let next = Atomic<Int>(0)

    init(
        size: Int, settings: ConnectionSettings, health: RedisHealthMonitor,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        // The group's loops in turn, not `next()`: that counter is shared with everything else on the group (the
        // listeners' accepts), so a pool made while traffic flows would leave some loops two connections and others
        // none, and those loops' calls would cross threads.
        let loops = Array(eventLoopGroup.makeIterator())
        self.connections = (0..<max(1, size)).map { index in
            PooledConnection(eventLoop: loops[index % loops.count], settings: settings, health: health)
        }
    }

    deinit {
        for connection in connections { connection.close() }
    }

    /// One server: this pool.
    func everyPrimary() async -> [any RedisCommands] { [self] }

    /// Runs `commands` pipelined on one connection (``connection()``): one write for the lot, in order, on one
    /// connection, so Redis runs them one after another as if sent one by one. Returns one result per command, in
    /// order.
    func execute(batch commands: [[[UInt8]]]) async -> [Result<RedisValue, RedisCallError>] {
        guard !commands.isEmpty else { return [] }
        let connection = connection()
        return await withCheckedContinuation { continuation in
            connection.submit(RedisCall(commands: commands, completion: .caller(continuation)))
        }
    }

    /// ``execute(batch:)`` without a task: the same call, its results handed to `done` on the connection's event loop
    /// (or at once, when Redis is known to be down or the pool is closed). Made on an event loop that holds one of the
    /// pool's connections (a page request's), the call goes on that connection, so `done` runs on the caller's own
    /// loop and no other thread is woken for it. `done` must not block: it runs on an event loop.
    func submit(batch commands: [[[UInt8]]], then done: @escaping @Sendable (RedisCall.Results) -> Void) {
        submit(batch: commands, gated: true, then: done)
    }

    /// ``submit(batch:then:)``; with `gated` false the call is sent even while Redis is known to be down, without
    /// claiming the reconnect attempt: for a cluster's `CLUSTER SHARDS`, which must find the new primaries while the
    /// store counts a dead one as an outage.
    func submit(batch commands: [[[UInt8]]], gated: Bool, then done: @escaping @Sendable (RedisCall.Results) -> Void) {
        guard !commands.isEmpty else { return done([]) }
        connection().submit(RedisCall(commands: commands, completion: .callback(done)), gated: gated)
    }

    /// The connection a call goes on: one on the calling thread's event loop when the pool has one there (the caller
    /// is a page request on an event loop: its replies are decoded, and its callback run, where it already is), else
    /// the next one, round robin (a task, the fetcher's thread). With the default of one connection per core (the
    /// singleton group's loops), every call a page request makes stays on its loop.
    private func connection() -> PooledConnection {
        let turn = next.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max
        let count = connections.count
        for offset in 0..<count where connections[(turn + offset) % count].eventLoop.inEventLoop {
            return connections[(turn + offset) % count]
        }
        return connections[turn % count]
    }
}

/// One call's commands, the replies that arrived for it, and where its results go.
struct RedisCall: Sendable {
    typealias Results = [Result<RedisValue, RedisCallError>]

    enum Completion: Sendable {
        /// A caller suspended in `RedisPool.execute`.
        case caller(CheckedContinuation<Results, Never>)
        /// A function called with the results on the connection's event loop (or at once, on the submitting thread,
        /// when the call fails before it is queued): the connection's own `AUTH`/`SELECT`, and the store's calls made
        /// without a task (``RedisPool/submit(batch:then:)``).
        case callback(@Sendable (Results) -> Void)
    }

    var commands: [[[UInt8]]]
    var completion: Completion
    var replies: [RedisValue] = []
    /// When the call fails `.io` for want of its replies (set when it is written).
    var deadline = NIODeadline.distantFuture
    /// Whether the call may be retried on a fresh connection if this one turns out closed before it got a reply: it
    /// was written on a connection open before it, and it has not been retried already.
    var mayRetry = false
    var retried = false

    init(commands: [[[UInt8]]], completion: Completion) {
        self.commands = commands
        self.completion = completion
    }

    var isAnswered: Bool { replies.count == commands.count }

    /// What a connection that closed for a reason of `kind` means for this call, outstanding on it.
    enum AfterClose: Sendable, Hashable {
        /// Written again on a fresh connection: the server closed the connection before any reply of this call, so
        /// none of it ran.
        case retry
        /// The replies that arrived stand; every command without one fails, since it may have run.
        case fail
    }

    /// Retried only when the server closed the connection (`.closed`: EOF or reset, not a timeout or a bad reply),
    /// no reply of this call had arrived, and the call may be retried (written on a connection open before it, and
    /// not retried already).
    func afterClose(_ kind: RedisCallError.Kind) -> AfterClose {
        kind == .closed && mayRetry && replies.isEmpty ? .retry : .fail
    }

    /// Hands the replies that arrived and `error` for each command without one to the caller.
    func finish(failing error: RedisCallError? = nil) {
        var results: Results = []
        results.reserveCapacity(commands.count)
        for reply in replies { results.append(.success(reply)) }
        if let error {
            for _ in replies.count..<commands.count { results.append(.failure(error)) }
        }
        switch completion {
        case .caller(let continuation): continuation.resume(returning: results)
        case .callback(let done): done(results)
        }
    }
}

/// One slot of the pool: at most one open connection at a time on one event loop, opened on demand. Its state is
/// only touched on that event loop.
final class PooledConnection: Sendable {
    let eventLoop: any EventLoop
    private let settings: ConnectionSettings
    private let health: RedisHealthMonitor
    private let state: NIOLoopBoundBox<State>

    private enum State {
        /// No connection: the next call opens one.
        case idle
        /// Connecting (and authenticating); the calls wait, in order.
        case connecting([RedisCall])
        /// Open and ready, to the primary of a locator generation: calls are written at once.
        case open(RedisConnectionHandler, generation: Int)
        /// The pool is gone.
        case closed
    }

    init(eventLoop: any EventLoop, settings: ConnectionSettings, health: RedisHealthMonitor) {
        self.eventLoop = eventLoop
        self.settings = settings
        self.health = health
        self.state = NIOLoopBoundBox.makeBoxSendingValue(.idle, eventLoop: eventLoop)
    }

    /// Sends `call` on this slot's event loop.
    func submit(_ call: RedisCall, gated: Bool = true) {
        if eventLoop.inEventLoop {
            submitOnLoop(call, gated: gated)
        } else {
            eventLoop.execute { self.submitOnLoop(call, gated: gated) }
        }
    }

    /// Closes the connection once what is outstanding on it is answered; calls waiting for a connection fail.
    func close() {
        eventLoop.execute {
            switch self.state.value {
            case .open(let handler, _): handler.retire()
            case .connecting(let waiting):
                for call in waiting { call.finish(failing: RedisCallError(kind: .io, message: "the Redis pool was closed")) }
            case .idle, .closed: break
            }
            self.state.value = .closed
        }
    }

    /// Writes `call` on the open connection, or queues it for one. `gated`: subject to the health rules (a retry is
    /// not: it goes to a fresh connection whatever the health says, as the first attempt already claimed its turn).
    private func submitOnLoop(_ call: RedisCall, gated: Bool) {
        var call = call
        if case .open(let handler, let generation) = state.value, generation != settings.locator.generation {
            // Opened to a server the sentinels no longer name as the primary: finish what is on it, and connect to
            // the one they name now.
            handler.retire()
            state.value = .idle
        }
        if gated {
            if !health.isUp, case .open(let handler, _) = state.value {
                // Opened before the outage: finish what is on it, and start afresh.
                handler.retire()
                state.value = .idle
            }
            if case .open = state.value {
            } else if !health.claimAttempt() {
                call.finish(failing: .unavailable)
                return
            }
        }
        switch state.value {
        case .open(let handler, _):
            call.mayRetry = !call.retried
            handler.send(call)
        case .connecting(var waiting):
            state.value = .idle
            waiting.append(call)
            state.value = .connecting(waiting)
        case .idle:
            state.value = .connecting([call])
            connect()
        case .closed:
            call.finish(failing: RedisCallError(kind: .io, message: "the Redis pool was closed"))
        }
    }

    /// Opens a connection, authenticates and selects the database, then writes the calls that waited.
    private func connect() {
        let generation = settings.locator.generation
        guard let endpoint = settings.locator.current else {
            opened(.failure(RedisCallError(kind: .connect, message: "no Redis primary is known yet: the sentinels have not named one")))
            return
        }
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(settings.connectTimeout))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { [settings, health] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(RESPReplyDecoder(limits: settings.limits)))
                    try channel.pipeline.syncOperations.addHandler(
                        RedisConnectionHandler(
                            address: endpoint.address, commandTimeout: settings.commandTimeout, health: health))
                }
            }
        // An address given as an IP literal is connected to directly: `connect(host:port:)` would resolve it through
        // getaddrinfo on a dispatch queue and Happy Eyeballs first, which a busy machine can stretch past the connect
        // timeout.
        let connecting =
            if let address = try? SocketAddress(ipAddress: endpoint.host, port: endpoint.port) {
                bootstrap.connect(to: address)
            } else {
                bootstrap.connect(host: endpoint.host, port: endpoint.port)
            }
        connecting.assumeIsolated().whenComplete { result in
            switch result {
            case .success(let channel):
                guard let handler = try? channel.pipeline.syncOperations.handler(type: RedisConnectionHandler.self) else {
                    channel.close(promise: nil)
                    self.opened(.failure(RedisCallError(kind: .connect, message: "cannot set up a connection to \(endpoint)")))
                    return
                }
                handler.onClose = { closing, retry in self.connectionClosed(closing, retry: retry) }
                self.handshake(handler, endpoint: endpoint, generation: generation)
            case .failure(let error):
                self.opened(.failure(RedisCallError(kind: .connect, message: "cannot connect to \(endpoint): \(error)")))
            }
        }
    }

    /// The handshake (`RedisHandshake`: `AUTH` or `PING`, and `SELECT` when the database is not 0), as one pipeline.
    private func handshake(_ handler: RedisConnectionHandler, endpoint: RedisEndpoint, generation: Int) {
        let box = NIOLoopBound(handler, eventLoop: eventLoop)
        handler.send(
            RedisCall(
                commands: RedisHandshake.commands(for: endpoint),
                completion: .callback { results in
                    let handler = box.value
                    if let failure = RedisHandshake.failure(results, endpoint: endpoint) {
                        handler.retire()
                        self.opened(.failure(failure), generation: generation)
                    } else {
                        self.opened(.success(handler), generation: generation)
                    }
                }))
    }

    /// The connection attempt ended: write the waiting calls on it, or fail them all.
    private func opened(_ result: Result<RedisConnectionHandler, RedisCallError>, generation: Int = 0) {
        guard case .connecting(let waiting) = state.value else {
            // The pool closed meanwhile.
            if case .success(let handler) = result { handler.retire() }
            return
        }
        switch result.flatMap({ handler in handler.closeError.map { .failure($0) } ?? .success(handler) }) {
        case .success(let handler):
            health.succeeded()
            state.value = .open(handler, generation: generation)
            for call in waiting { handler.send(call) }
        case .failure(let error):
            health.failed(error)
            state.value = .idle
            for call in waiting { call.finish(failing: error) }
        }
    }

    /// `handler`'s connection closed; `retry` are the calls on it that the server closed before they got a reply.
    private func connectionClosed(_ handler: RedisConnectionHandler, retry: [RedisCall]) {
        if case .open(let current, _) = state.value, current === handler { state.value = .idle }
        for var call in retry {
            call.retried = true
            call.mayRetry = false
            call.replies = []
            submitOnLoop(call, gated: false)
        }
    }
}

/// The handler at the end of a pooled connection's pipeline: writes calls, matches replies to them in order, bounds
/// each by the command timeout, and decides what a broken connection means for each call outstanding on it.
/// Event-loop only.
final class RedisConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = RedisValue
    typealias OutboundOut = ByteBuffer

    /// Told when the connection has closed, with the calls to retry on a fresh one.
    var onClose: ((RedisConnectionHandler, [RedisCall]) -> Void)?

    private let address: String
    private let commandTimeout: TimeAmount
    private let health: RedisHealthMonitor
    private var context: ChannelHandlerContext?
    /// The calls written and not yet answered, oldest first: Redis answers in order.
    private var outstanding = CircularBuffer<RedisCall>(initialCapacity: 16)
    /// Whether a flush is scheduled for the end of this event-loop turn.
    private var flushScheduled = false
    /// The timer for the oldest call's deadline, while any call is outstanding.
    private var timer: Scheduled<Void>?
    /// Close once nothing is outstanding: no new calls come.
    private var retiring = false
    /// The connection is closing or closed; set once, with the error that closed it.
    private var closedBy: RedisCallError?

    init(address: String, commandTimeout: Duration, health: RedisHealthMonitor) {
        self.address = address
        self.commandTimeout = TimeAmount(commandTimeout)
        self.health = health
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Writes `call` (flushed at the end of this event-loop turn) and starts its command timeout.
    func send(_ call: RedisCall) {
        guard let context, closedBy == nil else {
            // Closed before the pool heard of it (between connecting and this write): the call was never written.
            call.finish(failing: closeError ?? RedisCallError(kind: .closed, message: "Redis connection broke"))
            return
        }
        var call = call
        call.deadline = .now() + commandTimeout
        var buffer = context.channel.allocator.buffer(capacity: call.commands.reduce(0) { $0 + RESPEncoder.encodedCount($1) })
        for command in call.commands { RESPEncoder.encode(command, into: &buffer) }
        outstanding.append(call)
        context.write(wrapOutboundOut(buffer), promise: nil)
        if !flushScheduled {
            flushScheduled = true
            context.eventLoop.assumeIsolated().execute {
                self.flushScheduled = false
                self.context?.flush()
            }
        }
        if timer == nil { arm(at: call.deadline) }
    }

    /// Why the connection closed; nil while it is open.
    var closeError: RedisCallError? {
        context == nil ? (closedBy ?? RedisCallError(kind: .closed, message: "Redis connection broke")) : closedBy
    }

    /// No more calls will be sent: close once the outstanding ones are answered.
    func retire() {
        retiring = true
        if outstanding.isEmpty { context?.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let value = unwrapInboundIn(data)
        guard closedBy == nil else { return }
        guard !outstanding.isEmpty else {
            fail(RedisCallError(kind: .io, message: "Redis at \(address) sent a reply nobody asked for"))
            return
        }
        if case .caller = outstanding[outstanding.startIndex].completion,
            let missing = RedisCallError(missingCredentials: value, at: address)
        {
            fail(missing)
            return
        }
        outstanding[outstanding.startIndex].replies.append(value)
        guard outstanding[outstanding.startIndex].isAnswered else { return }
        let call = outstanding.removeFirst()
        if case .caller = call.completion { health.succeeded() }
        call.finish()
        if retiring && outstanding.isEmpty { context.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(Self.callError(error, address: address))
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(RedisCallError(kind: .closed, message: "Redis connection broke: Redis at \(address) closed the connection"))
        context.fireChannelInactive()
    }

    /// What a channel error means for the calls on it: the server dropping the connection (`.closed`: whatever had
    /// no reply never ran), a bad reply, or another I/O failure (`.io`: the commands may have run).
    private static func callError(_ error: any Error, address: String) -> RedisCallError {
        if let error = error as? RESPError {
            return RedisCallError(kind: .io, message: "Redis at \(address) sent a bad reply: \(error)")
        }
        if let error = error as? IOError, error.errnoCode == ECONNRESET || error.errnoCode == EPIPE {
            return RedisCallError(kind: .closed, message: "Redis connection broke: \(error)")
        }
        if let error = error as? ChannelError, error == .ioOnClosedChannel || error == .eof {
            return RedisCallError(kind: .closed, message: "Redis connection broke: \(error)")
        }
        return RedisCallError(kind: .io, message: "Redis connection broke: \(error)")
    }

    /// Closes the connection for `error`. Calls the server closed before any reply of theirs, on a connection open
    /// before they were written, go back to the pool to be retried once; the others get the replies that arrived and
    /// `error` for the rest, and the health monitor hears of it.
    private func fail(_ error: RedisCallError) {
        guard closedBy == nil else { return }
        closedBy = error
        timer?.cancel()
        timer = nil
        var retry: [RedisCall] = []
        var failing: [RedisCall] = []
        while let call = outstanding.popFirst() {
            switch call.afterClose(error.kind) {
            case .retry: retry.append(call)
            case .fail: failing.append(call)
            }
        }
        // Heard before the callers resume, so none of them finds the store still healthy.
        if failing.contains(where: { if case .caller = $0.completion { true } else { false } }) { health.failed(error) }
        for call in failing { call.finish(failing: error) }
        context?.close(promise: nil)
        onClose?(self, retry)
        onClose = nil
    }

    /// Sets the timer for `deadline`. When it fires it checks the oldest call (which may be a later one by then).
    private func arm(at deadline: NIODeadline) {
        guard let context else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { self.timerFired() }
    }

    private func timerFired() {
        timer = nil
        guard closedBy == nil, let oldest = outstanding.first else { return }
        guard oldest.deadline <= .now() else {
            arm(at: oldest.deadline)
            return
        }
        fail(RedisCallError(kind: .io, message: "Redis at \(address) did not answer within \(commandTimeout)"))
    }
}
