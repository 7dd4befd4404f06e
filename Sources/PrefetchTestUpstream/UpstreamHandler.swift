import NIOCore
package import NIOHTTP1

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Serves one connection: answers decoded requests one at a time with raw response bytes.
final class UpstreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    private typealias Request = ScriptedRequest

    private let counters: UpstreamCounters
    private let connection: ConnectionInfo
    private var current: Request?
    private var waiting: [Request] = []
    private var busy = false
    private var open = true

    init(counters: UpstreamCounters, connection: ConnectionInfo) {
        self.counters = counters
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            current = Request(head: head, body: nil)
        case .body(var chunk):
            let bytes = chunk.readBytes(length: chunk.readableBytes) ?? []
            if var request = current {
                request.body = (request.body ?? []) + bytes
                current = request
            }
        case .end:
            if let request = current {
                waiting.append(request)
                current = nil
                startNext(context: context)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        open = false
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Malformed input from a client: drop the connection.
        open = false
        context.close(promise: nil)
    }

    private func startNext(context: ChannelHandlerContext) {
        guard !busy, open, !waiting.isEmpty else { return }
        busy = true
        let request = waiting.removeFirst()
        handle(request, context: context)
    }

    /// Called when the current response is fully written; serves the next request or closes.
    private func finished(_ request: Request, context: ChannelHandlerContext) {
        busy = false
        if request.head.isKeepAlive {
            startNext(context: context)
        } else {
            open = false
            context.close(promise: nil)
        }
    }

    private func handle(_ request: Request, context: ChannelHandlerContext) {
        let (path, query) = splitURI(request.head.uri)
        if path.hasPrefix("/__") {
            control(path: path, query: query, request: request, context: context)
            return
        }
        if request.head.method == .OPTIONS, request.head.headers.contains(name: "Access-Control-Request-Method") {
            preflight(request, context: context)
            return
        }
        let hit = counters.recordHit(
            SeenRequest(
                path: path,
                host: request.head.headers.first(name: "host"),
                serverName: connection.serverName,
                tls: connection.tls
            )
        )
        let script = UpstreamScript(query: query)
        if script.hang { return }
        if let gate = script.hold {
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            counters.hold(gate) {
                loop.execute {
                    let (handler, context) = bound.value
                    handler.answer(request, path: path, query: query, hit: hit, script: script, context: context)
                }
            }
            return
        }
        answer(request, path: path, query: query, hit: hit, script: script, context: context)
    }

    /// Answers `request` now, or after its script's delay.
    private func answer(_ request: Request, path: String, query: String?, hit: Int, script: UpstreamScript, context: ChannelHandlerContext)
    {
        if script.delayMilliseconds > 0 {
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(script.delayMilliseconds))) {
                self.respond(request, path: path, query: query, hit: hit, script: script, context: context)
            }
        } else {
            respond(request, path: path, query: query, hit: hit, script: script, context: context)
        }
    }

    private func control(path: String, query: String?, request: Request, context: ChannelHandlerContext) {
        let (status, json) = controlAnswer(method: request.head.method, path: path, query: query, counters: counters)
        let head = responseHead(status: status, headers: [("Content-Type", "application/json")], contentLength: json.utf8.count)
        write(head + Array(json.utf8), context: context).whenComplete { _ in
            self.finished(request, context: context)
        }
    }

    /// Answers a CORS preflight: any origin, method and headers may call (not counted as a hit).
    private func preflight(_ request: Request, context: ChannelHandlerContext) {
        var headers = [
            ("Access-Control-Allow-Origin", "*"),
            ("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE"),
            ("Access-Control-Max-Age", "600"),
        ]
        if let asked = request.head.headers.first(name: "Access-Control-Request-Headers") {
            headers.append(("Access-Control-Allow-Headers", asked))
        }
        write(responseHead(status: 204, headers: headers, contentLength: 0), context: context).whenComplete { _ in
            self.finished(request, context: context)
        }
    }

    private func respond(
        _ request: Request,
        path: String,
        query: String?,
        hit: Int,
        script: UpstreamScript,
        context: ChannelHandlerContext
    ) {
        guard open else { return }
        if script.garbage {
            let garbage = Array("\u{1}\u{2}this is not HTTP at all\r\n\r\n".utf8)
            write(garbage, context: context).whenComplete { _ in
                self.open = false
                context.close(promise: nil)
            }
            return
        }

        let (headers, body) = scriptedAnswer(request, path: path, query: query, hit: hit, script: script)

        if let sent = script.resetAfter ?? script.shortAfter {
            // Announce more than will arrive, send `sent` bytes, then break the connection.
            let partial = Array(patternBytes(sent))
            let head = responseHead(status: script.status, headers: headers, contentLength: sent + 1024)
            let hardReset = script.resetAfter != nil
            write(head + partial, context: context).whenComplete { _ in
                self.open = false
                if hardReset {
                    context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(20)) {
                        self.resetConnection(context: context)
                    }
                } else {
                    context.close(promise: nil)
                }
            }
            return
        }

        let head = responseHead(status: script.status, headers: headers, contentLength: body.count)
        if let interval = script.dripMilliseconds {
            write(head, context: context).whenComplete { _ in
                self.drip(body[...], every: interval, request: request, context: context)
            }
        } else {
            write(head + body, context: context).whenComplete { _ in
                self.finished(request, context: context)
            }
        }
    }

    private func drip(_ rest: ArraySlice<UInt8>, every interval: Int, request: Request, context: ChannelHandlerContext) {
        guard open else { return }
        guard !rest.isEmpty else {
            finished(request, context: context)
            return
        }
        let chunk = rest.prefix(16)
        write(Array(chunk), context: context).whenComplete { _ in
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(interval))) {
                self.drip(rest.dropFirst(chunk.count), every: interval, request: request, context: context)
            }
        }
    }

    /// Closes with SO_LINGER 0, so the peer sees a TCP reset instead of an orderly close.
    private func resetConnection(context: ChannelHandlerContext) {
        guard let provider = context.channel as? any SocketOptionProvider else {
            context.close(promise: nil)
            return
        }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    private func responseHead(status: Int, headers: [(String, String)], contentLength: Int) -> [UInt8] {
        let reason = HTTPResponseStatus(statusCode: status).reasonPhrase
        var text = "HTTP/1.1 \(status) \(reason)\r\n"
        for (name, value) in headers {
            text += "\(name): \(value)\r\n"
        }
        text += "Content-Length: \(contentLength)\r\n\r\n"
        return Array(text.utf8)
    }

    private func write(_ bytes: [UInt8], context: ChannelHandlerContext) -> EventLoopFuture<Void>.Isolated {
        let buffer = context.channel.allocator.buffer(bytes: bytes)
        return context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated()
    }
}

/// A request as the scripted handlers see it, whatever the HTTP version.
package struct ScriptedRequest {
    package var head: HTTPRequestHead
    package var body: [UInt8]?

    package init(head: HTTPRequestHead, body: [UInt8]?) {
        self.head = head
        self.body = body
    }
}

/// The path and the query (without `?`) of a request target.
package func splitURI(_ uri: String) -> (path: String, query: String?) {
    guard let mark = uri.firstIndex(of: "?") else { return (uri, nil) }
    return (String(uri[..<mark]), String(uri[uri.index(after: mark)...]))
}

/// The headers and body a script asks for: a literal body, a pattern of N bytes, or the echo of the request.
package func scriptedAnswer(
    _ request: ScriptedRequest, path: String, query: String?, hit: Int, script: UpstreamScript
) -> (headers: [(String, String)], body: [UInt8]) {
    var headers: [(String, String)] = []
    let body: [UInt8]
    if let literal = script.body {
        body = Array(literal.utf8)
        headers.append(("Content-Type", script.contentType ?? "application/json"))
    } else if let count = script.bytes {
        body = patternBytes(count)
        headers.append(("Content-Type", script.contentType ?? "application/octet-stream"))
    } else if script.mirror {
        let answer = mirror(request, path: path, query: query, token: script.token, reflect: script.reflect)
        body = Array(answer.json.utf8)
        headers.append(("Content-Type", "application/json"))
        if let token = answer.token { headers.append(("Set-Cookie", "guest=\(token); Path=/")) }
    } else {
        body = Array(echo(request, path: path, query: query, hit: hit).utf8)
        headers.append(("Content-Type", script.contentType ?? "application/json"))
    }
    if request.head.headers.contains(name: "Origin") {
        // Browsers read a cross-origin answer only with this: lets pages in a real browser call the upstream.
        headers.append(("Access-Control-Allow-Origin", "*"))
    }
    if let cacheControl = script.cacheControl { headers.append(("Cache-Control", cacheControl)) }
    for cookie in script.setCookies { headers.append(("Set-Cookie", cookie)) }
    for keys in script.surrogateKeys { headers.append(("Surrogate-Key", keys)) }
    if let count = script.generatedSurrogateKeys {
        headers.append(("Surrogate-Key", (0..<count).map { "key-\($0)" }.joined(separator: " ")))
    }
    return (headers, body)
}

/// The mirror: `{"path","query","cookie","auth","x","body","uid","token"}`, a function of exactly the parts of a
/// request that a personalised upstream answers from (its target, its credentials, the `X-Val` header, its body)
/// and nothing that varies per attempt (no hit count, no trace span), so two fetches of the same request with the
/// same credentials answer the same bytes. `uid` stands for an id the upstream derives from the credentials; with
/// `token`, `token` is a guest token of the page open (the trace id of its `traceparent`), also set as a cookie. With
/// `reflect`, `headers` is every request header but `traceparent`, sorted by name (`name: value` lines).
func mirror(_ request: ScriptedRequest, path: String, query: String?, token: Bool, reflect: Bool = false) -> (json: String, token: String?)
{
    let cookie = request.head.headers["Cookie"].joined(separator: "; ")
    let auth = request.head.headers["Authorization"].joined(separator: ", ")
    let guest: String? =
        token
        ? "tok-"
            + (request.head.headers["traceparent"].first.map { String($0.split(separator: "-").dropFirst().first ?? "none") } ?? "none")
        : nil
    let fields: [(String, String)] =
        [
            ("path", path), ("query", query ?? ""), ("cookie", cookie), ("auth", auth),
            ("x", request.head.headers["X-Val"].joined(separator: ", ")),
            ("body", request.body.map { String(decoding: $0, as: UTF8.self) } ?? ""),
            ("uid", "uid-of[\(cookie)\(auth)]"), ("token", guest ?? ""),
        ]
        + (reflect
            ? [
                (
                    "headers",
                    request.head.headers.filter { $0.name.lowercased() != "traceparent" }
                        .map { "\($0.name.lowercased()): \($0.value)" }.sorted().joined(separator: "\n")
                )
            ] : [])
    return ("{" + fields.map { "\(jsonString($0.0)):\(jsonString($0.1))" }.joined(separator: ",") + "}", guest)
}

/// `{"method","path","query","headers","body","hit"}` for a request.
func echo(_ request: ScriptedRequest, path: String, query: String?, hit: Int) -> String {
    let headers = request.head.headers.map { "[\(jsonString($0.name)),\(jsonString($0.value))]" }
    let body = request.body.map { jsonString(String(decoding: $0, as: UTF8.self)) } ?? "null"
    return "{\"method\":\(jsonString(request.head.method.rawValue)),"
        + "\"path\":\(jsonString(path)),"
        + "\"query\":\(query.map(jsonString) ?? "null"),"
        + "\"headers\":[\(headers.joined(separator: ","))],"
        + "\"body\":\(body),"
        + "\"hit\":\(hit)}"
}

/// The answer of a control endpoint (`/__hits`, `/__requests`, `/__connections`, `POST /__reset`).
package func controlAnswer(method: HTTPMethod, path: String, query: String?, counters: UpstreamCounters) -> (status: Int, json: String) {
    switch (method, path) {
    case (.GET, "/__hits"):
        if let wanted = parseQuery(query).first(where: { $0.0 == "path" })?.1 {
            return (200, "{\"path\":\(jsonString(wanted)),\"hits\":\(counters.hits(path: wanted))}")
        }
        let entries = counters.allHits().sorted { $0.key < $1.key }.map { "\(jsonString($0.key)):\($0.value)" }
        return (
            200,
            "{\"hits\":{\(entries.joined(separator: ","))},\"connections\":\(counters.connections()),"
                + "\"peakStreams\":\(counters.peakStreams())}"
        )
    case (.GET, "/__requests"):
        let entries = counters.requests().map { seen in
            "{\"path\":\(jsonString(seen.path)),\"host\":\(seen.host.map(jsonString) ?? "null"),"
                + "\"sni\":\(seen.serverName.map(jsonString) ?? "null"),\"tls\":\(seen.tls)}"
        }
        return (200, "{\"requests\":[\(entries.joined(separator: ","))]}")
    case (.GET, "/__connections"):
        return (200, "{\"connections\":\(counters.connections()),\"peakStreams\":\(counters.peakStreams())}")
    case (.POST, "/__release"):
        guard let name = parseQuery(query).first(where: { $0.0 == "name" })?.1 else {
            return (400, "{\"error\":\"name the gate to release: /__release?name=NAME\"}")
        }
        return (200, "{\"released\":\(jsonString(name)),\"answered\":\(counters.release(name))}")
    case (.POST, "/__reset"):
        counters.reset()
        return (200, "{\"reset\":true}")
    default:
        return (404, "{\"error\":\"unknown control endpoint\"}")
    }
}
