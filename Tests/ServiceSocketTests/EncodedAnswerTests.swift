import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypesHTTP1
import PrefetchCore
import PrefetchStore
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The fast path writes its answers' heads as bytes below NIO's response encoder (`EncodedAnswer`), and frames the
/// router's answers to `HEAD` and `CONNECT` itself: the bytes must be NIO's own, for any status and fields, and a
/// connection mixing them must stay well framed.
@Suite struct EncodedAnswerTests {
    /// What NIO's encoder, alone in a pipeline, writes for `response`'s head.
    static func nioHead(_ response: HTTPResponse) throws -> ByteBuffer {
        let channel = EmbeddedChannel(handler: HTTPResponseEncoder())
        defer { _ = try? channel.finish() }
        try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(response)))
        var written = ByteBuffer()
        while var part = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(var bytes) = part else {
                Issue.record("a file region")
                break
            }
            written.writeBuffer(&bytes)
            part = .byteBuffer(bytes)
        }
        return written
    }

    /// What NIO's server pipeline (its decoder feeding its encoder each request's method, as Hummingbird sets it
    /// up) writes for `head` and an end, answering a request of `method`.
    static func nioServerAnswer(_ head: HTTPResponseHead, answering method: String) throws -> String {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false)
        let target = method == "CONNECT" ? "example.com:443" : "/"
        try channel.writeInbound(ByteBuffer(string: "\(method) \(target) HTTP/1.1\r\nHost: example.com\r\n\r\n"))
        while try channel.readInbound(as: HTTPServerRequestPart.self) != nil {}
        try channel.writeOutbound(HTTPServerResponsePart.head(head))
        _ = try? channel.writeOutbound(HTTPServerResponsePart.end(nil))
        var text = ""
        while let part = try channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(let bytes) = part { text += String(buffer: bytes) }
        }
        return text
    }

    static let names = [
        "Content-Type", "content-type", "Set-Cookie", "X-Custom", "ETag", "Vary", "Content-Length", "Transfer-Encoding", "Link",
    ]
    static let statuses = [200, 201, 203, 206, 226, 299, 301, 304, 204, 100, 103, 400, 404, 413, 418, 422, 451, 499, 500, 502, 599]

    @Test func encodedHeadsAreNIOsBytesForAnyStatusAndFields() throws {
        var generator = SeededRandom(seed: 20_261_125)
        var encoded = 0
        for _ in 0..<600 {
            var fields = HTTPFields()
            for _ in 0..<Int.random(in: 0...7, using: &generator) {
                let name = Self.names.randomElement(using: &generator)!
                let value =
                    name.lowercased() == "content-length"
                    ? String(Int.random(in: 0...99_999, using: &generator))
                    : ["a", "text/html; charset=utf-8", "sid=1; HttpOnly", "  padded  ", "W/\"x\"", ""].randomElement(using: &generator)!
                fields.append(HTTPField(name: HTTPField.Name(name)!, value: value))
            }
            if Bool.random(using: &generator) { fields[.contentLength] = String(Int.random(in: 0...4096, using: &generator)) }
            let response = HTTPResponse(status: .init(code: Self.statuses.randomElement(using: &generator)!), headerFields: fields)
            guard let head = AnswerEncoding.head(response) else {
                let status = HTTPResponseStatus(statusCode: response.status.code)
                #expect(
                    !status.mayHaveResponseBody || fields[.contentLength] == nil || fields[.transferEncoding] != nil,
                    "\(response) was left to the encoder")
                continue
            }
            encoded += 1
            #expect(String(buffer: head) == String(buffer: try Self.nioHead(response)), "\(response)")
        }
        #expect(encoded > 200, "too few responses were encoded to prove anything: \(encoded)")
    }

    @Test func bodilessAnswersAreFramedAsNIOsServerPipelineFramesThem() throws {
        let cases: [(Int, [(String, String)], String)] = [
            (200, [("Content-Type", "application/json"), ("Content-Length", "42")], "HEAD"),
            (200, [("Content-Type", "application/json")], "HEAD"),
            (200, [("Content-Length", "42"), ("Transfer-Encoding", "chunked")], "HEAD"),
            (404, [("Content-Type", "application/json"), ("Content-Length", "17")], "HEAD"),
            (204, [("Content-Length", "0")], "HEAD"),
            (200, [("Content-Length", "5")], "CONNECT"),
            (405, [("Content-Type", "text/plain")], "CONNECT"),
        ]
        for (code, headers, method) in cases {
            let head = HTTPResponseHead(version: .http1_1, status: .init(statusCode: code), headers: HTTPHeaders(headers))
            let ours = String(buffer: AnswerEncoding.bodiless(head, answering: NIOHTTP1.HTTPMethod(rawValue: method)))
            #expect(ours == (try Self.nioServerAnswer(head, answering: method)), "\(method) \(code) \(headers)")
        }
    }

    /// A request head over the parser's limit (128 KiB) is refused `431 too-large` with the API's JSON error, its
    /// content type and the security headers, and the connection closes: a request pipelined after it is never
    /// answered. The service goes on answering others. An over-long target and an over-long header field both
    /// (schemathesis sends the first), on each listener: the page surface's pipeline, and the operator surface,
    /// where Hummingbird alone would answer a bare `400`.
    @Test func anOverLongHeadIsRefusedWithTheAPIsJSONError() async throws {
        let suite = FastHandoffTests()
        try await suite.withOne { fast in
            let long = String(repeating: "a", count: 129 * 1024)
            let listeners = [("page", fast.port), ("operator", fast.adminPort)]
            for (listener, port) in listeners {
                let host = "Host: 127.0.0.1:\(port)\r\n"
                let heads = [
                    "GET /v1/data?page=\(long) HTTP/1.1\r\n\(host)\r\n",
                    "GET /healthz HTTP/1.1\r\n\(host)X-Long: \(long)\r\n\r\n",
                ]
                for head in heads {
                    let answer = try await rawExchange(port: port, head + "GET /healthz HTTP/1.1\r\n\(host)\r\n")
                    let parts = answer.components(separatedBy: "\r\n\r\n")
                    let fields = parts[0].lowercased()
                    #expect(parts[0].hasPrefix("HTTP/1.1 431 "), "\(listener): \(parts[0])")
                    #expect(fields.contains("content-type: application/json"), "\(listener): \(parts[0])")
                    #expect(
                        fields.contains("x-content-type-options: nosniff") && fields.contains("cache-control: private, no-store"),
                        "\(listener): \(parts[0])")
                    #expect(fields.contains("connection: close"), "\(listener): \(parts[0])")
                    let body =
                        try JSONSerialization.jsonObject(with: Data(parts.dropFirst().joined(separator: "\r\n\r\n").utf8))
                        as? [String: String]
                    #expect(
                        body?["error"] == "too-large" && body?["message"]?.contains("request head") == true,
                        "\(listener): \(answer.suffix(300))")
                    // Nothing after it: one answer, then the close.
                    #expect(answer.components(separatedBy: "HTTP/1.1 ").count == 2, "\(listener): \(answer.suffix(600))")
                }
            }
            #expect(try await fast.get("/healthz").status == 200)
            #expect(try await fast.admin(.get, "/metrics").status == 200)
        }
    }

    /// A page URL just over its own limit (8 KiB) is refused by its operation with the precise `400 url-too-long`,
    /// not by the transport: percent-encoded, 8,193 four-byte characters make a 96 KiB request line, under the head
    /// limit. This is what a schema-driven client sends to test `maxLength` (schemathesis expects a 400).
    @Test func aPageURLJustOverItsLimitGetsItsOperationsError() async throws {
        let suite = FastHandoffTests()
        try await suite.withOne { fast in
            let url = "https://m.example.com/?q=" + String(repeating: "%F0%9F%98%8D", count: 8193)
            let targets = [("page", fast.port, "/v1/data?page=\(url)"), ("operator", fast.adminPort, "/v1/plan?url=\(url)")]
            for (listener, port, target) in targets {
                let answer = try await rawExchange(
                    port: port, "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
                let parts = answer.components(separatedBy: "\r\n\r\n")
                #expect(parts[0].hasPrefix("HTTP/1.1 400 "), "\(listener): \(parts[0])")
                let body =
                    try JSONSerialization.jsonObject(with: Data(parts.dropFirst().joined(separator: "\r\n\r\n").utf8))
                    as? [String: String]
                #expect(body?["error"] == "url-too-long", "\(listener): \(answer.suffix(300))")
            }
        }
    }

    /// `HEAD` pipelined between reads on one connection: each answer to it is the head the `GET` would have (its
    /// `Content-Length` the `GET` body's), with no body, so the connection stays framed: the reads' bodies, and nothing
    /// between them but heads.
    @Test func headAnswersKeepAPipelinedConnectionFramed() async throws {
        let suite = FastHandoffTests()
        try await suite.withOne { service in
            let opened = try await suite.openPage(service)
            try await suite.waitReady(service, opened.ticket, "plain")
            let host = "Host: 127.0.0.1:\(service.port)\r\n"
            let text =
                "GET /v1/prefetch/\(opened.ticket)/data?name=plain HTTP/1.1\r\n\(host)\r\n"
                + "HEAD /nowhere HTTP/1.1\r\n\(host)\r\n"
                + "HEAD /v1/prefetch/\(opened.ticket)/data?name=plain HTTP/1.1\r\n\(host)\r\n"
                + "HEAD /healthz HTTP/1.1\r\n\(host)\r\n"
                + "GET /v1/prefetch/\(opened.ticket)/data?name=plain HTTP/1.1\r\n\(host)Connection: close\r\n\r\n"
            let answer = try await rawExchange(port: service.port, text)
            // Both reads' bodies, and nothing between them but heads.
            #expect(answer.components(separatedBy: #"{"ok":true}"#).count == 3, "\(answer)")
            let answers = answer.components(separatedBy: "HTTP/1.1 ").dropFirst()
            // `HEAD` of a store read is refused (a read is counted, a no-store answer consumed); of `/healthz`, its `GET`'s head.
            #expect(answers.map { $0.prefix(3) } == ["200", "404", "405", "200", "200"], "\(answer)")
            for head in answers.dropFirst().prefix(3) {
                #expect(head.hasSuffix("\r\n\r\n"), "a HEAD answer carries a body: \(head)")
                #expect(head.contains("Content-Length: ") && head.contains("X-Content-Type-Options: nosniff"), "\(head)")
            }
            #expect(answers.dropFirst(2).first?.contains("Allow: GET, OPTIONS") == true, "\(answer)")
        }
    }

    /// A ready entry's head is kept for the next read of the same variant: reads from different origins, with and
    /// without one, each get their own CORS headers, never the previous reader's: the same head as the first read of
    /// its kind.
    @Test func eachReaderGetsTheHeadOfItsOwnOrigin() async throws {
        let suite = FastHandoffTests()
        try await suite.withOne { fast in
            let fastPage = try await suite.openPage(fast)
            try await suite.waitReady(fast, fastPage.ticket, "plain")
            var first: [Bool: String] = [:]
            // The ticket's own route without an Origin (as a shell reads), the read key from the page's origin.
            let page = ["Origin": "https://m.example.com"]
            let readers: [(byKey: Bool, headers: [String: String])] = [
                (false, [:]), (true, page), (false, [:]), (true, page), (false, page),
            ]
            for (number, reader) in readers.enumerated() {
                func read(_ service: LiveService, _ opened: (ticket: String, readKey: String)) async throws -> String {
                    reader.byKey
                        ? try await suite.raw(
                            service, "/v1/data?name=plain", headers: reader.headers.merging(["X-Prefetch-Key": opened.readKey]) { $1 })
                        : try await suite.raw(service, "/v1/prefetch/\(opened.ticket)/data?name=plain", headers: reader.headers)
                }
                let a = try await read(fast, fastPage)
                #expect(rawStatus(a) == 200, "reader \(number): \(a)")
                #expect(a.contains("Access-Control-Allow-Origin") == (reader.headers["Origin"] != nil), "reader \(number): \(a)")
                // The same kind of reader gets the very same answer (no other reader's CORS headers kept in it).
                let kind = reader.headers["Origin"] != nil
                if let earlier = first[kind], reader.byKey || !kind { #expect(a == earlier, "reader \(number):\n\(a)\n---\n\(earlier)") }
                if first[kind] == nil { first[kind] = a }
            }
        }
    }
}
