import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import PageAPI
import PrefetchCore
import PrefetchEngine
import PrefetchStore

/// The page pipeline's handler: every request of a page-listener connection goes through it into the page API (the
/// five store routes of ``FastHandoff``, every other route of ``PageAPI``). One per connection, on its event loop,
/// right after NIO's HTTP/1 request decoder. It writes the page API's answers (``PageAnswer``) with their heads in
/// bytes (``EncodedAnswer``; a replay's head kept per connection, ``ReplayHeads``) below NIO's response encoder,
/// through ``EncodedAnswerWriter``.
///
/// It keeps the connection's idle timeout and graceful close (``ConnectionState``), and a body it collects has the
/// listener's body timeout with its `408` (``ConnectionGuards``). Both timers run on the event loop's clock
/// (`EventLoop.now`, `scheduleTask`): an `EmbeddedEventLoop` drives them in tests (`FastHandoffClockTests`).
///
/// Order is kept: while an answer is outstanding (a read waiting on flights in progress, a trigger underway in a
/// shared store, a route answered in a task), every later request's parts are held here, and the connection is not
/// read further, until that answer is written; so they are while the socket takes no more.
final class FastHandoffHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The request being read or answered.
    private enum Current {
        /// Between requests.
        case idle
        /// Answered at its head; written at its end.
        case answered(PageAnswer, close: Bool)
        /// A trigger or an open whose body is being collected (under the body timer); decided at its end.
        case collecting(FastHandoff.Posted, HTTPRequest, ByteBuffer, Scheduled<Void>?, close: Bool)
        /// Answered before its end (a refusal at the head, a body over the limit); its body is dropped until its end,
        /// under the body timer. With `close`, the answer ended the connection's output: nothing after the end is
        /// read.
        case draining(Scheduled<Void>?, close: Bool)
        /// A read waiting on flights in progress (its wait given), or a trigger or open underway in the
        /// shared store (none): `ended` once its end arrived, `ready` once its answer did.
        case waiting(StoreWait?, Scheduled<Void>?, close: Bool, ended: Bool, ready: PageAnswer?)
        /// The connection is closing after the guard's `408`: nothing more is read or answered.
        case closing
    }

    private let handoff: FastHandoff
    /// The surface's other routes.
    private let api: PageAPI
    private let guards: ConnectionGuards
    /// Where answers encoded here are written, below NIO's response encoder.
    private let writer: EncodedAnswerWriter
    /// The heads of this connection's last replays.
    private let heads = ReplayHeads()
    private var current = Current.idle
    /// Parts of later requests that arrived while an answer of this handler was outstanding.
    private var held = CircularBuffer<HTTPServerRequestPart>()
    /// A read was asked for while holding; it is passed on once the answer is written.
    private var readWanted = false
    /// The answer to a request the decoder could not read behind an outstanding one: written after it, then the close.
    private var unreadable: PageAnswer?
    /// The client closed its side: once every request read is answered, the connection closes.
    private var inputEnded = false
    /// Request heads seen on this connection: a read's resumption belongs to the request it was made for.
    private var headsSeen: UInt64 = 0
    /// What to do if the connection closes while the current answer is underway (an open's lease to hand back).
    private var onGone: (@Sendable () -> Void)?
    private var state: ConnectionState
    private var idleTimer: Scheduled<Void>?
    /// Bytes of the body being collected past the connection's allowance, taken from the listener's budget
    /// (`Orchestrator.requestBodies`); given back once the request is answered or dropped (``releaseBody()``).
    private var bodyHeld = 0

    /// The most bytes of a request head (request line and header fields) the decoder reads.
    private let headLimit: Int

    init(
        handoff: FastHandoff, api: PageAPI, guards: ConnectionGuards, idleTimeout: TimeAmount?, writer: EncodedAnswerWriter,
        headLimit: Int
    ) {
        self.handoff = handoff
        self.api = api
        self.guards = guards
        self.writer = writer
        self.headLimit = headLimit
        // Restarted at `handlerAdded`, on the event loop's clock; nothing reads it before.
        self.state = ConnectionState(idleTimeout: idleTimeout, now: .uptimeNanoseconds(0))
    }

    /// The current request is fully read and its answer not yet written: later parts wait.
    private var holding: Bool {
        if case .waiting(_, _, _, true, _) = current { return true }
        return false
    }

    func handlerAdded(context: ChannelHandlerContext) {
        state = ConnectionState(idleTimeout: state.idleTimeout, now: context.eventLoop.now)
        if context.channel.isActive { perform(state.activated(now: context.eventLoop.now), context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        perform(state.activated(now: context.eventLoop.now), context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head: state.requestHead(now: context.eventLoop.now)
        case .body: state.requestBody(now: context.eventLoop.now)
        case .end: state.requestEnd(now: context.eventLoop.now)
        }
        if case .closing = current { return }
        // Behind an outstanding answer, or while the socket takes no more (the client does not read its answers),
        // later parts wait here and the connection is not read further: what a client can make this connection hold
        // is bounded by one read, never by the answers it would pile up.
        if holding || !held.isEmpty || !context.channel.isWritable {
            held.append(part)
            return
        }
        process(part, context: context)
    }

    /// The held parts, in order, while nothing holds them (an answer outstanding, a socket that takes no more);
    /// then the answer to a request the decoder could not read, if one waits; then the next read, if one was asked
    /// for.
    private func replayHeld(context: ChannelHandlerContext) {
        while !holding, context.channel.isWritable, let part = held.popFirst() {
            process(part, context: context)
        }
        if case .idle = current, held.isEmpty, let answer = unreadable {
            unreadable = nil
            current = .closing
            write(answer, close: true, context: context)
            return
        }
        if readWanted && !holding && held.isEmpty && context.channel.isWritable {
            readWanted = false
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { replayHeld(context: context) }
        context.fireChannelWritabilityChanged()
    }

    /// Whether a head may be one of the store's routes (`FastHandoff`); the rest are `PageAPI`'s.
    private static func isCandidate(_ head: HTTPRequestHead, target: String) -> Bool {
        (head.method == .GET || head.method == .POST) && FastHandoff.takenPrefixes.contains { target.utf8.starts(with: $0.utf8) }
    }

    /// The head as `HTTPTypes` has it, its path the target in origin form: as sent, or an absolute-form target's
    /// path and query (`http://host/healthz` is `/healthz`; RFC 9112 §3.2.2 has a server accept it); nil when the
    /// method is not one `HTTPTypes` takes.
    private static func request(_ head: HTTPRequestHead) -> HTTPRequest? {
        guard let method = try? HTTPRequest.Method(head.method) else { return nil }
        return HTTPRequest(
            method: method, scheme: "http", authority: head.headers.first(name: "host"), path: originForm(head.uri),
            headerFields: HTTPFields(head.headers, splitCookie: false))
    }

    /// `target` in origin form: an absolute-form target (`scheme://authority/path?query`) without its scheme and
    /// authority; any other target as sent (an origin-form one, or `*`, which no route takes).
    static func originForm(_ target: String) -> String {
        let bytes = target.utf8
        guard bytes.first != UInt8(ascii: "/"), let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
            bytes[colon...].starts(with: "://".utf8)
        else { return target }
        let authority = bytes.index(colon, offsetBy: 3)
        guard let start = bytes[authority...].firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) else {
            return "/"
        }
        return bytes[start] == UInt8(ascii: "?") ? "/" + target[start...] : String(target[start...])
    }

    /// `target` with its path's empty segments dropped (`//v1/data/` is `/v1/data`), its query kept: every route
    /// is matched on the segments that have something in them.
    static func canonical(_ target: String) -> String {
        let bytes = target.utf8
        let pathEnd = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
        var previous: UInt8 = 0
        var empty = false
        for byte in bytes[..<pathEnd] {
            if byte == UInt8(ascii: "/") && previous == byte { empty = true }
            previous = byte
        }
        let trailing = previous == UInt8(ascii: "/") && bytes.distance(from: bytes.startIndex, to: pathEnd) > 1
        guard empty || trailing else { return target }
        let segments = target[..<pathEnd].split(separator: "/")
        return "/" + segments.joined(separator: "/") + target[pathEnd...]
    }

    private func process(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let nioHead):
            headsSeen &+= 1
            guard let sent = Self.request(nioHead) else {
                current = .closing
                write(
                    handoff.malformed("the request method \(quoted(nioHead.method.rawValue, limit: 40)) is not a token"), close: true,
                    context: context)
                return
            }
            do {
                // `Connection: close`, or HTTP/1.0 without keep-alive, ends the connection after the answer.
                let close = !nioHead.isKeepAlive
                // The store's routes are matched on the target without empty segments (`//v1/data/` is `/v1/data`).
                // (Set only when it differs: setting a path validates and stores a new field.)
                var head = sent
                let target = sent.path ?? "/"
                let canonical = Self.canonical(target)
                let rewritten = canonical.utf8.count != target.utf8.count
                if rewritten { head.path = canonical }
                if Self.isCandidate(nioHead, target: canonical) {
                    let taken = handoff.takes(head) ?? (handoff.drains(head) ? .collect(.read) : nil)
                    if case .refused(let answer) = taken {
                        // Written at once; its body, if any, is dropped as it arrives (the router's refusal is written
                        // before the body too, which Hummingbird then drains).
                        // With `Connection: close` too: the body still has the body timeout, as the router's guard gives it.
                        write(answer, close: close, context: context)
                        let timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
                            drainTimedOut(context: context)
                        }
                        current = .draining(timer, close: close)
                        return
                    }
                    if case .collect(let posted) = taken {
                        let timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
                            bodyTimedOut(context: context)
                        }
                        current = .collecting(posted, head, context.channel.allocator.buffer(capacity: 0), timer, close: close)
                        return
                    }
                    let answer = handoff.answer(
                        head, deliver: { delivery(context: context) }, resume: { resumption(context: context) })
                    switch answer {
                    case .now(let answer)?:
                        current = .answered(answer, close: close)
                        return
                    case .later(let wait, let deadline)?:
                        let timer = handoff.expire(wait, after: deadline, on: context.eventLoop)
                        current = .waiting(wait, timer, close: close, ended: false, ready: nil)
                        return
                    case .underway?:
                        // A ticket is on its way from another replica: the read goes on in `resume`.
                        current = .waiting(nil, nil, close: close, ended: false, ready: nil)
                        return
                    case nil:
                        break
                    }
                }
                cold(api.head(sent), sent, close: close, context: context)
            }
        case .body(let buffer):
            switch current {
            case .collecting(.read, _, _, _, _), .draining:
                // A read's body is dropped, as the router's reads drop it; so is a refused request's.
                break
            case .collecting(let posted, let head, var body, let timer, let close):
                // Bounded: past the router's limit it is refused at once, and the rest dropped as it arrives; so it is
                // when the bodies all connections hold would pass their budget with these bytes (`503 overloaded`).
                current = .idle
                guard body.readableBytes + buffer.readableBytes <= handoff.bodyLimit else {
                    releaseBody()
                    write(handoff.bodyTooLarge(head, posted), close: close, context: context)
                    current = .draining(timer, close: close)
                    return
                }
                let budget = handoff.orchestrator.requestBodies
                let more = budget.charge(body.readableBytes + buffer.readableBytes) - bodyHeld
                if more > 0 {
                    guard budget.reserve(more) else {
                        releaseBody()
                        write(handoff.bodiesOverloaded(head, posted), close: close, context: context)
                        current = .draining(timer, close: close)
                        return
                    }
                    bodyHeld += more
                }
                body.writeImmutableBuffer(buffer)
                current = .collecting(posted, head, body, timer, close: close)
            default:
                // A GET's body (if any) is not read by the endpoints answered here; dropped as they drop it.
                break
            }
        case .end:
            switch current {
            case .idle:
                break
            case .answered(let answer, let close):
                current = .idle
                write(answer, close: close, context: context)
            case .draining(let timer, let close):
                current = close ? .closing : .idle
                timer?.cancel()
            case .collecting(.read, let head, _, let timer, let close):
                current = .idle
                timer?.cancel()
                read(head, close: close, context: context)
            case .collecting(let posted, let head, let body, let timer, let close):
                current = .idle
                timer?.cancel()
                let caller = context.channel.remoteAddress?.ipAddress ?? "unknown"
                let makeDelivery = { self.delivery(context: context) }
                let answered =
                    switch posted {
                    case .trigger: handoff.trigger(head, body: body, caller: caller, deliver: makeDelivery)
                    case .open:
                        handoff.open(head, body: body, caller: caller, deliver: makeDelivery, onGone: { self.onGone = $0 })
                    case .read: preconditionFailure("a read is answered by read(_:_:close:context:)")
                    case .cold(let route):
                        cold(route, head, body: body, caller: caller, deliver: makeDelivery(), onGone: { self.onGone = $0 })
                    }
                // The body's bytes stay taken from the budget until its answer: a route answered in a task (a renderer
                // lease, an invalidation on Redis) holds the body that long.
                switch answered {
                case .now(let answer)?:
                    releaseBody()
                    write(answer, close: close, context: context)
                case .underway?:
                    // Its end is in: later requests are held until the answer is written (``ready(_:context:)``).
                    current = .waiting(nil, nil, close: close, ended: true, ready: nil)
                case .later?:
                    preconditionFailure("a trigger never waits on a ticket")
                case nil:
                    releaseBody()
                    write(handoff.unanswerable(head), close: close, context: context)
                }
            case .waiting(let wait, let timer, let close, _, let ready):
                if let answer = ready {
                    current = .idle
                    write(answer, close: close, context: context)
                } else {
                    current = .waiting(wait, timer, close: close, ended: true, ready: nil)
                }
            case .closing:
                break
            }
        }
    }

    /// A request of ``PageAPI``, decided at its head: its answer is written at its end (at once when it announces a
    /// body, which is then dropped under the body timeout), or its body is collected first.
    private func cold(
        _ decided: PageAPI.Cold, _ head: HTTPRequest, close: Bool, context: ChannelHandlerContext
    ) {
        switch decided {
        case .now(let answer):
            let announcesBody =
                head.headerFields[.transferEncoding] != nil || (head.headerFields[.contentLength].map { $0 != "0" } ?? false)
            guard announcesBody else {
                current = .answered(answer, close: close)
                return
            }
            write(answer, close: close, context: context)
            let timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
                drainTimedOut(context: context)
            }
            current = .draining(timer, close: close)
        case .collect(let route):
            let timer = context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { [self] in
                bodyTimedOut(context: context)
            }
            current = .collecting(.cold(route), head, context.channel.allocator.buffer(capacity: 0), timer, close: close)
        }
    }

    /// A request of ``PageAPI`` whose body is in: answered by a task of its own (these routes wait on the renderer
    /// pool or a shared store, and are not on a page open's path), the answer handed back to this event loop.
    private func cold(
        _ route: PageRoute, _ head: HTTPRequest, body: ByteBuffer, caller: String, deliver: @escaping FastHandoff.Deliver,
        onGone: (@escaping @Sendable () -> Void) -> Void
    ) -> FastHandoff.Answer? {
        let api = api
        let left = Abandonment()
        onGone { left.leave() }
        Task { deliver(await api.answer(route, head, body: body, caller: caller, left: left)) }
        return .underway
    }

    /// A read whose body ended (dropped): answered as its head alone would be, now or later.
    private func read(_ head: HTTPRequest, close: Bool, context: ChannelHandlerContext) {
        let head = FastHandoff.withoutBody(head)
        let answer = handoff.answer(head, deliver: { delivery(context: context) }, resume: { resumption(context: context) })
        switch answer {
        case .now(let answer)?:
            write(answer, close: close, context: context)
        case .later(let wait, let deadline)?:
            let timer = handoff.expire(wait, after: deadline, on: context.eventLoop)
            current = .waiting(wait, timer, close: close, ended: true, ready: nil)
        case .underway?:
            current = .waiting(nil, nil, close: close, ended: true, ready: nil)
        case nil:
            write(handoff.unanswerable(head), close: close, context: context)
        }
    }

    /// The function an answer that comes later goes to: it brings the answer to this connection's event loop.
    private func delivery(context: ChannelHandlerContext) -> FastHandoff.Deliver {
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        return { answer in
            loop.execute {
                let (handler, context) = bound.value
                handler.ready(answer, context: context)
            }
        }
    }

    /// How a read goes on once what it waited for is in: its next step runs on this connection's event loop.
    private func resumption(context: ChannelHandlerContext) -> FastHandoff.Resume {
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        let request = headsSeen
        return FastHandoff.Resume { step in
            loop.execute {
                let (handler, context) = bound.value
                handler.resume(step, request: request, context: context)
            }
        }
    }

    /// Runs a read's next step, unless the connection has moved on (closed, or on to another request): then nothing
    /// is read, so nothing is consumed for a reader who has gone.
    private func resume(_ step: FastHandoff.Step, request: UInt64, context: ChannelHandlerContext) {
        guard request == headsSeen, case .waiting(nil, nil, let close, let ended, nil) = current else { return }
        let answer = step({ self.delivery(context: context) }, { self.resumption(context: context) })
        switch answer {
        case .now(let answer):
            ready(answer, context: context)
        case .later(let wait, let deadline):
            let timer = handoff.expire(wait, after: deadline, on: context.eventLoop)
            current = .waiting(wait, timer, close: close, ended: ended, ready: nil)
        case .underway:
            break
        }
    }

    /// A trigger body collected here missed the body timeout: the guard's `408`, then the connection closes (as
    /// ``ConnectionGuardHandler`` does for a routed request; nothing else is outstanding while one is collected).
    /// A body being dropped after its request's answer (over the limit) closes the connection instead.
    private func bodyTimedOut(context: ChannelHandlerContext) {
        if case .draining = current { return drainTimedOut(context: context) }
        guard case .collecting = current else { return }
        current = .closing
        releaseBody()
        guards.bodyTimedOut()
        let answer = guards.timeoutAnswer
        context.write(wrapOutboundOut(.head(HTTPResponseHead(answer.head))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(answer.body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        // A client that does not read could hold the answer in the socket: one more body timeout, then it closes.
        context.eventLoop.assumeIsolated().scheduleTask(in: guards.bodyTimeout) { context.close(promise: nil) }
    }

    /// The body of a request refused at its head missed the body timeout: its answer is written, so the connection
    /// closes (as ``ConnectionGuardHandler`` closes one whose answered request's body stops arriving).
    private func drainTimedOut(context: ChannelHandlerContext) {
        guard case .draining = current else { return }
        current = .closing
        guards.bodyTimedOut()
        context.close(promise: nil)
    }

    /// Gives the bytes of the body being collected back to the listener's budget.
    private func releaseBody() {
        handoff.orchestrator.requestBodies.release(bodyHeld)
        bodyHeld = 0
    }

    /// A waiting read's answer, on the event loop.
    private func ready(_ answer: PageAnswer, context: ChannelHandlerContext) {
        guard case .waiting(let wait, let timer, let close, let ended, nil) = current else { return }
        timer?.cancel()
        // A posted request's body was held until now (a read holds none).
        releaseBody()
        guard ended else {
            current = .waiting(wait, nil, close: close, ended: false, ready: answer)
            return
        }
        current = .idle
        onGone = nil
        write(answer, close: close, context: context)
        // Later requests that waited behind it, in order; one of them may wait in turn.
        replayHeld(context: context)
    }

    /// Writes an answer of the page API: its head encoded here (a replay's kept in ``heads``) and its body below NIO's
    /// response encoder, in one `writev` (``EncodedAnswerWriter``); a head the encoder must frame through it.
    private func write(_ answer: PageAnswer, close: Bool, context: ChannelHandlerContext) {
        let answer = EncodedAnswer(answer, heads: heads)
        switch answer.head {
        case .bytes(let head):
            guard let wire = writer.context else {
                preconditionFailure("the encoded-answer writer left the pipeline before its connection closed")
            }
            wire.write(NIOAny(IOData.byteBuffer(head)), promise: nil)
            if close {
                _ = state.answerEnd(now: context.eventLoop.now)
                wire.writeAndFlush(NIOAny(IOData.byteBuffer(answer.body))).assumeIsolated().whenComplete { _ in
                    context.close(mode: .output, promise: nil)
                }
                return
            }
            switch state.answerEnd(now: context.eventLoop.now) {
            case .close:
                wire.writeAndFlush(NIOAny(IOData.byteBuffer(answer.body)), promise: nil)
                context.close(promise: nil)
            case .armTimer(let deadline):
                armIdleTimer(deadline, context: context)
                fallthrough
            case .none:
                wire.writeAndFlush(NIOAny(IOData.byteBuffer(answer.body)), promise: nil)
            }
        case .framedByEncoder(let response):
            context.write(wrapOutboundOut(.head(HTTPResponseHead(response))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(answer.body))), promise: nil)
            let end = wrapOutboundOut(.end(nil))
            if close {
                _ = state.answerEnd(now: context.eventLoop.now)
                context.writeAndFlush(end).assumeIsolated().whenComplete { _ in
                    context.close(mode: .output, promise: nil)
                }
            } else {
                writeEnd(end, promise: nil, flush: true, context: context)
            }
        }
    }

    /// An answer's end, with the connection's bookkeeping: the idle timer re-armed, or the close a graceful
    /// shutdown waits for.
    private func writeEnd(_ end: NIOAny?, promise: EventLoopPromise<Void>?, flush: Bool, context: ChannelHandlerContext) {
        // An end that writes nothing (a bodiless answer's) completes at once; what precedes it is flushed.
        let send = { (flush: Bool) in
            if let end {
                if flush { context.writeAndFlush(end, promise: promise) } else { context.write(end, promise: promise) }
            } else {
                if flush { context.flush() }
                promise?.succeed(())
            }
        }
        switch state.answerEnd(now: context.eventLoop.now) {
        case .close:
            send(true)
            context.close(promise: nil)
        case .armTimer(let deadline):
            armIdleTimer(deadline, context: context)
            fallthrough
        case .none:
            send(flush)
        }
    }

    private func perform(_ action: ConnectionState.Action, context: ChannelHandlerContext) {
        switch action {
        case .none: break
        case .armTimer(let deadline): armIdleTimer(deadline, context: context)
        case .close: context.close(promise: nil)
        }
    }

    private func armIdleTimer(_ deadline: NIODeadline, context: ChannelHandlerContext) {
        guard idleTimer == nil else { return }
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            idleTimer = nil
            perform(state.timerFired(now: context.eventLoop.now), context: context)
        }
    }

    /// A request the decoder cannot read is answered in the API's JSON shape with the page surface's security
    /// headers, and the connection closes (nothing after it can be framed): a head over the limit `431 too-large`,
    /// any other `400 malformed-request`. Behind an answer still outstanding it is written after that answer, in
    /// order. Any other error (the socket's) closes the connection.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parser = error as? HTTPParserError else {
            context.close(promise: nil)
            return
        }
        let answer =
            parser == .headerOverflow
            ? handoff.headTooLarge(limit: headLimit) : handoff.malformed("the request is not an HTTP/1.1 message: \(parser)")
        switch current {
        case .idle where held.isEmpty:
            current = .closing
            write(answer, close: true, context: context)
        case .collecting(_, _, _, let timer, _):
            // A body that cannot be read (a malformed chunk): refused now, not at the body timeout.
            timer?.cancel()
            releaseBody()
            current = .closing
            write(answer, close: true, context: context)
        case .draining(let timer, _):
            // Its answer is written; the rest cannot be framed.
            timer?.cancel()
            current = .closing
            context.close(promise: nil)
        case .answered(let written, _):
            // Answered at its head; its body cannot be framed: the answer, then the close.
            current = .closing
            write(written, close: true, context: context)
        case .closing:
            break
        default:
            // Written once the outstanding answer is (`ready`), or the held requests are (`replayHeld`); nothing
            // more is read.
            unreadable = answer
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        state.deactivated()
        endWait()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = nil
        endWait()
    }

    /// The connection is gone: a waiting read's wait ends now (its readers leave the store's flights), and a
    /// collected body's timer stops and its bytes go back to the budget.
    private func endWait() {
        releaseBody()
        if case .waiting(_, _, _, _, nil) = current, let gone = onGone { gone() }
        onGone = nil
        switch current {
        case .waiting(let wait, let timer, _, _, _):
            current = .idle
            timer?.cancel()
            wait?.expire()
        case .collecting(_, _, _, let timer, _), .draining(let timer, _):
            current = .idle
            timer?.cancel()
        default:
            break
        }
    }
}

extension FastHandoffHandler {
    /// No further read while later requests are held behind an outstanding answer.
    func read(context: ChannelHandlerContext) {
        if holding || !held.isEmpty || !context.channel.isWritable {
            readWanted = true
        } else {
            context.read()
        }
    }

    /// A graceful shutdown: this handler keeps the connection's graceful close (the state handler above it does
    /// not see the requests answered here), so the event stops here.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            // The client closed its side: with nothing outstanding the connection closes once the answers written are
            // flushed; with an answer still to come the client is taken as gone (as a proxy takes a client's close),
            // so nothing is kept or leased for it (`endWait`).
            inputEnded = true
            if case .idle = current, held.isEmpty {
                closeIfInputEnded(context: context)
            } else {
                context.close(promise: nil)
            }
            return
        }
        guard event is ChannelShouldQuiesceEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        perform(state.quiesce(), context: context)
    }

    /// The client closed its side and every request it sent is answered: the connection closes once the answers are
    /// flushed.
    private func closeIfInputEnded(context: ChannelHandlerContext) {
        guard inputEnded, case .idle = current, held.isEmpty else { return }
        current = .closing
        // An empty write completes after every write before it.
        guard let wire = writer.context else { return context.close(promise: nil) }
        wire.writeAndFlush(NIOAny(IOData.byteBuffer(ByteBuffer()))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}

/// The connection's outbound end right below NIO's response encoder: ``FastHandoffHandler`` writes the answers it
/// encoded itself (head and body, as bytes) through this handler's context, so they reach the socket without
/// passing the encoder. Everything the encoder writes passes through untouched.
final class EncodedAnswerWriter: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// Its place in the pipeline while it is there.
    private(set) var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }
}
