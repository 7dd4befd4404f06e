import Foundation
import NIOCore
import NIOHTTP1
import PrefetchTestUpstream
import Synchronization

/// What the origin serves and what it saw.
final class OriginState: Sendable {
    struct File: Sendable {
        var body: [UInt8]
        var ctype: String
        var etag: String
    }

    struct Log: Sendable {
        var requests: [String: Int] = [:]
        var notModified = 0
        var headers: [[String: String]] = []
    }

    let files = Mutex<[String: File]>([:])
    let log = Mutex(Log())
    let generation = Mutex(0)
}

/// A real origin on 127.0.0.1 serving files the test sets, with an `ETag` per body and `304` on a matching
/// `If-None-Match`: the resources a provider fetches.
struct FileOrigin: Sendable {
    let state: OriginState
    let upstream: TestUpstream

    var port: Int { upstream.port }

    static func start() async throws -> FileOrigin {
        let state = OriginState()
        let upstream = try await TestUpstream.start(host: "127.0.0.1", port: 0, threads: 1) { channel, _ in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                try channel.pipeline.syncOperations.addHandler(FileOriginHandler(origin: state))
            }
        }
        return FileOrigin(state: state, upstream: upstream)
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func set(_ path: String, _ body: String, ctype: String) {
        let etag = state.generation.withLock { value in
            value += 1
            return "\"g\(value)\""
        }
        state.files.withLock { $0[path] = OriginState.File(body: Array(body.utf8), ctype: ctype, etag: etag) }
    }

    func requests(_ path: String) -> Int { state.log.withLock { $0.requests[path] ?? 0 } }

    var notModified: Int { state.log.withLock { $0.notModified } }

    var seenHeaders: [[String: String]] { state.log.withLock { $0.headers } }

    func shutdown() async throws { try await upstream.shutdown() }
}

/// Runs `body` with a fresh origin, shut down afterwards.
func withOrigin<T: Sendable>(_ body: @Sendable (FileOrigin) async throws -> T) async throws -> T {
    let origin = try await FileOrigin.start()
    do {
        let result = try await body(origin)
        try await origin.shutdown()
        return result
    } catch {
        try? await origin.shutdown()
        throw error
    }
}

final class FileOriginHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let origin: OriginState
    private var head: HTTPRequestHead?

    init(origin: OriginState) { self.origin = origin }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            let path = String(head.uri.prefix { $0 != "?" })
            var seen: [String: String] = [:]
            for (name, value) in head.headers { seen[name.lowercased()] = value }
            origin.log.withLock {
                $0.requests[path, default: 0] += 1
                $0.headers.append(seen)
            }
            var headers = HTTPHeaders()
            var status = HTTPResponseStatus.ok
            var body = ByteBuffer()
            if let file = origin.files.withLock({ $0[path] }) {
                headers.add(name: "ETag", value: file.etag)
                if head.headers["If-None-Match"].first == file.etag {
                    status = .notModified
                    origin.log.withLock { $0.notModified += 1 }
                } else {
                    headers.add(name: "Content-Type", value: file.ctype)
                    body = ByteBuffer(bytes: file.body)
                }
            } else {
                status = .notFound
            }
            headers.add(name: "Content-Length", value: String(body.readableBytes))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            if body.readableBytes > 0 { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            self.head = nil
        }
    }
}
