import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import PageAPI
import PrefetchCore
import Synchronization

/// Which listener a connection came in on: a bounded metric label.
enum Listener: String, Sendable {
    case page
    case `operator`
}

/// What every connection of one listener shares: its cap on open connections, the body timeout and the `408`
/// written when a body misses it, and the listener's connection metrics.
///
/// - `prefetch_connections{listener}`: connections open now.
/// - `prefetch_connections_refused_total{listener}`: connections closed on arrival because the listener held
///   its maximum.
/// - `prefetch_body_timeouts_total{listener}`: connections closed because a request body did not arrive within
///   the body timeout.
final class ConnectionGuards: Sendable {
    let listener: Listener
    /// Connections the listener holds open at once.
    let maximum: Int
    let bodyTimeout: TimeAmount
    /// The answer to a request whose body did not arrive in time, made once: the same bytes for every connection.
    let timeoutAnswer: (head: HTTPResponse, body: ByteBuffer)
    /// The answer to a request head over the parser's limit, `431 too-large` in the API's JSON shape, when this
    /// listener's guard gives it (nil: a handler below the codec answers it, as the page surface's fast path does).
    /// Without it Hummingbird answers a bare `400` with no body and no content type.
    let headTooLargeAnswer: (head: HTTPResponse, body: ByteBuffer)?
    private let open = Atomic<Int>(0)
    private let openGauge: Meter
    private let refusals: Counter
    private let bodyTimeouts: Counter
    private let logger: Logger
    /// When a refusal was last logged, and the refusals since then.
    private let refusalLog = Mutex<(last: ContinuousClock.Instant?, unlogged: Int)>((nil, 0))
    private static let refusalLogInterval = Duration.seconds(60)

    init(
        listener: Listener, maximum: Int, bodyTimeout: Duration, headLimit: Int?, factory: any MetricsFactory, logger: Logger
    ) {
        self.listener = listener
        self.maximum = maximum
        self.bodyTimeout = .milliseconds(bodyTimeout.milliseconds)
        self.logger = logger
        let dimensions = [("listener", listener.rawValue)]
        openGauge = Meter(label: "prefetch_connections", dimensions: dimensions, factory: factory)
        refusals = Counter(label: "prefetch_connections_refused_total", dimensions: dimensions, factory: factory)
        bodyTimeouts = Counter(label: "prefetch_body_timeouts_total", dimensions: dimensions, factory: factory)
        timeoutAnswer = Self.closingAnswer(.bodyTimeout(bodyTimeout))
        headTooLargeAnswer = headLimit.map { Self.closingAnswer(.headTooLarge(limit: $0)) }
    }

    /// `error` in the shape of every error, with the security headers and `Connection: close`: what follows on the
    /// connection (the rest of a body, or anything after an unframed head) would be read as the next request.
    private static func closingAnswer(_ error: APIError) -> (head: HTTPResponse, body: ByteBuffer) {
        let body = ByteBuffer(bytes: (try? JSONEncoding.encoder.encode(error.body)) ?? Data())
        var fields: HTTPFields = [.contentType: "application/json", .contentLength: String(body.readableBytes), .connection: "close"]
        PageGuard.secure(&fields)
        return (HTTPResponse(status: error.status, headerFields: fields), body)
    }

    /// Counts a new connection in, or refuses it (false) when the listener already holds its maximum.
    func admit() -> Bool {
        var current = open.load(ordering: .relaxed)
        while current < maximum {
            let (exchanged, original) = open.compareExchange(expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged {
                openGauge.increment(by: 1.0)
                return true
            }
            current = original
        }
        refused()
        return false
    }

    /// Counts an admitted connection out.
    func release() {
        open.subtract(1, ordering: .relaxed)
        openGauge.decrement(by: 1.0)
    }

    /// Counts a body that missed the body timeout.
    func bodyTimedOut() {
        bodyTimeouts.increment()
    }

    /// Counts a refusal; logs at most one line a minute, with the number of refusals since the last one.
    private func refused() {
        refusals.increment()
        let now = ContinuousClock.now
        let logged: Int? = refusalLog.withLock { log in
            log.unlogged += 1
            if let last = log.last, now - last < Self.refusalLogInterval { return nil }
            let count = log.unlogged
            log = (now, 0)
            return count
        }
        if let logged {
            logger.warning(
                "refusing connections: the listener holds its maximum",
                metadata: ["listener": "\(listener.rawValue)", "maximum": "\(maximum)", "refused": "\(logged)"])
        }
    }
}

extension HTTP1Channel.Configuration {
    /// This configuration with a ``ConnectionGuardHandler`` of `guards` first among each connection's extra handlers.
    func guarded(by guards: ConnectionGuards) -> Self {
        var configured = self
        let others = additionalChannelHandlers
        configured.additionalChannelHandlers = {
            [ConnectionCapHandler(guards: guards), ConnectionGuardHandler(guards: guards)] + others()
        }
        return configured
    }
}

/// What a connection's guard decides about request bodies, apart from the channel and the clock: a timer runs
/// while a request body is arriving; if it fires, the connection ends. The shell (``ConnectionGuardHandler``)
/// performs the actions.
///
/// HTTP/1 requests arrive in order (head, body parts, end, then the next head); their answers leave in the same
/// order, possibly after later requests were read (pipelining). When the body of the request being read is late:
/// - every earlier request answered and this one not begun: the guard answers `408` and closes;
/// - this request answered already: it closes;
/// - an answer still being written (or an earlier request still waiting for its answer): it closes when the next
///   answer ends, so no answer is cut in the middle.
struct BodyGuardState: Equatable {
    enum Phase: Equatable {
        case open
        /// The connection closes once the answer being written ends.
        case closingAtNextEnd
        /// The guard wrote the `408`: answers from the router are dropped.
        case answered
        case closed
    }

    enum Action: Equatable {
        case none
        /// Start the body timer (none runs).
        case armTimer
        case cancelTimer
        /// Write the `408`, close once it is flushed.
        case answerAndClose
        case close
        /// Close when the answer being written ends (at the latest after a grace period).
        case closeAtNextEnd
    }

    /// A part of an answer on its way out.
    enum AnswerPart: Equatable {
        case head, body, end
    }

    enum WriteAction: Equatable {
        case pass
        /// Pass the part, close once it is flushed.
        case passThenClose
        case drop
    }

    private(set) var phase = Phase.open
    /// Request heads read.
    private(set) var requests = 0
    /// A request head was read and its end was not.
    private(set) var bodyOpen = false
    private(set) var timerArmed = false
    /// Answer heads and ends written.
    private(set) var answersBegun = 0
    private(set) var answersEnded = 0

    mutating func requestHead() {
        requests += 1
        bodyOpen = true
    }

    /// Whether an over-long head may be answered here: the connection is open and every request before it is
    /// answered. The connection then only closes.
    mutating func refusesOverlongHead() -> Bool {
        guard phase == .open, answersBegun == answersEnded, requests == answersEnded else { return false }
        phase = .answered
        bodyOpen = false
        timerArmed = false
        return true
    }

    mutating func requestEnd() -> Action {
        bodyOpen = false
        guard timerArmed else { return .none }
        timerArmed = false
        return .cancelTimer
    }

    /// The end of one read from the socket: a body still arriving gets its timer (once per request, so a request
    /// that arrives whole in one read never starts one).
    mutating func readComplete() -> Action {
        guard phase == .open, bodyOpen, !timerArmed else { return .none }
        timerArmed = true
        return .armTimer
    }

    mutating func timerFired() -> Action {
        timerArmed = false
        guard phase == .open, bodyOpen else { return .none }
        if answersBegun == answersEnded, answersEnded == requests - 1 {
            phase = .answered
            return .answerAndClose
        }
        if answersBegun == answersEnded, answersEnded == requests {
            phase = .closed
            return .close
        }
        phase = .closingAtNextEnd
        return .closeAtNextEnd
    }

    mutating func write(_ part: AnswerPart) -> WriteAction {
        if phase == .answered || phase == .closed { return .drop }
        switch part {
        case .head: answersBegun += 1
        case .body: break
        case .end:
            answersEnded += 1
            if phase == .closingAtNextEnd {
                phase = .closed
                return .passThenClose
            }
        }
        return .pass
    }
}

/// The operator listener's per-connection body guard, after ``ConnectionCapHandler`` (the listener's cap, as on the
/// page listener) among the handlers Hummingbird adds after the HTTP codec: it ends a connection whose request body does not arrive within the body timeout (`SECURITY.md`, promise 15),
///   whether or not the route reads the body: a route that answered without reading it leaves Hummingbird
///   draining the body, and every dripped byte would reset the idle timer.
///
/// It sits before Hummingbird's `HTTPConnectionStateHandler`, on the codec's side of the router: every routed
/// answer part passes through its `write`, so it knows whether the request being read has been answered, and its
/// own `408` goes straight to the codec. That `408` bypasses the state handler's bookkeeping, which does not
/// matter: the connection closes right after it. The requests the fast path answers (``FastHandoffHandler``, below
/// the codec) never reach it: a trigger body the fast path collects has its own timer and this guard's `408`.
///
/// It holds no body bytes: parts go on as they arrive, and Hummingbird's async channel stops reading the socket
/// when the route does not keep up, so a body never piles up in memory. Everything runs on the connection's
/// event loop; the only timer is armed when a body is still arriving at the end of a read.
final class ConnectionGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let guards: ConnectionGuards
    private var state = BodyGuardState()
    /// The body timer, or the grace period of a closing connection.
    private var timer: Scheduled<Void>?

    init(guards: ConnectionGuards) {
        self.guards = guards
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: state.requestHead()
        case .body: break
        case .end: perform(state.requestEnd(), context: context)
        }
        context.fireChannelRead(data)
    }

    /// A request head over the parser's limit, with every earlier request answered: `431` in the API's JSON shape,
    /// then the close (what follows the head on the connection cannot be framed). With an answer still being
    /// written the error goes on to Hummingbird, which answers after it.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let answer = guards.headTooLargeAnswer, let parser = error as? HTTPParserError, parser == .headerOverflow,
            state.refusesOverlongHead()
        else {
            context.fireErrorCaught(error)
            return
        }
        timer?.cancel()
        timer = nil
        context.write(wrapOutboundOut(.head(answer.head)), promise: nil)
        context.write(wrapOutboundOut(.body(answer.body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        closeAfterGrace(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        perform(state.readComplete(), context: context)
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let part: BodyGuardState.AnswerPart =
            switch unwrapOutboundIn(data) {
            case .head: .head
            case .body: .body
            case .end: .end
            }
        switch state.write(part) {
        case .pass:
            context.write(data, promise: promise)
        case .passThenClose:
            context.writeAndFlush(data).assumeIsolated().whenComplete { result in
                promise?.completeWith(result)
                context.close(promise: nil)
            }
        case .drop:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    private func perform(_ action: BodyGuardState.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .armTimer:
            timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
                timer = nil
                perform(state.timerFired(), context: context)
            }
        case .cancelTimer:
            timer?.cancel()
            timer = nil
        case .answerAndClose:
            guards.bodyTimedOut()
            let answer = guards.timeoutAnswer
            context.write(wrapOutboundOut(.head(answer.head)), promise: nil)
            context.write(wrapOutboundOut(.body(answer.body)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            closeAfterGrace(context: context)
        case .close:
            guards.bodyTimedOut()
            context.close(promise: nil)
        case .closeAtNextEnd:
            guards.bodyTimedOut()
            closeAfterGrace(context: context)
        }
    }

    /// A client that does not read could hold the last answer in the socket forever: one more body timeout, then
    /// the connection closes whatever is left unwritten.
    private func closeAfterGrace(context: ChannelHandlerContext) {
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
            timer = nil
            context.close(promise: nil)
        }
    }
}
