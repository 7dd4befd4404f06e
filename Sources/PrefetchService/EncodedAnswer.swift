import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import PageAPI
import PrefetchStore

/// An answer of the page API (``PageAnswer``) as it goes on the wire: its head in HTTP/1.1 bytes (status line, header
/// lines, the blank line) and its body. ``FastHandoffHandler`` writes both below NIO's response encoder, in one
/// `writev`, so an answer costs no `HTTPResponseHead` conversion, no encoder and one pass through the pipeline.
struct EncodedAnswer: Sendable {
    enum Head: Sendable {
        /// The head's bytes, exactly what NIO's `HTTPResponseEncoder` writes for the same response.
        case bytes(ByteBuffer)
        /// A status that may not carry a body (1xx, `204`, `304`), whose framing headers NIO's encoder rewrites:
        /// written through the encoder.
        case framedByEncoder(HTTPResponse)
    }

    var head: Head
    var body: ByteBuffer

    init(_ response: HTTPResponse, body: ByteBuffer) {
        self.head = AnswerEncoding.head(response).map(Head.bytes) ?? .framedByEncoder(response)
        self.body = body
    }

    init(head: ByteBuffer, body: ByteBuffer) {
        self.head = .bytes(head)
        self.body = body
    }

    /// `answer` in bytes: a replay's head taken from the connection's `heads` when it wrote one for the same stored
    /// response and the same kind of reader, else encoded (and kept there); an answer to `HEAD` as its head alone,
    /// framed as NIO's encoder frames one.
    init(_ answer: PageAnswer, heads: ReplayHeads?) {
        switch answer.head {
        case .response(let response) where answer.headOnly:
            self.init(head: AnswerEncoding.bodiless(HTTPResponseHead(response), answering: .HEAD), body: ByteBuffer())
        case .response(let response):
            self.init(response, body: answer.body)
        case .replay(let stored, let variant):
            if let kept = heads?.head(stored.token, variant) {
                self.init(head: kept, body: answer.body)
                return
            }
            self.init(answer.response, body: answer.body)
            if case .bytes(let encoded) = head { heads?.keep(encoded, stored.token, variant) }
        }
    }
}

/// HTTP/1.1 response heads as bytes, written the way NIO's `HTTPResponseEncoder` writes them (with
/// `HTTPResponseHead(_:)`'s conversion from `HTTPTypes`): `HTTP/1.1`, the status code and NIO's reason phrase, then
/// each field as `name: value` in order, each line ended by CRLF, then CRLF. `AnswerEncodingTests` holds it to
/// NIO's encoder byte for byte.
enum AnswerEncoding {
    /// The head of `response`, or nil when NIO's encoder would change its framing headers (a status that may not
    /// carry a body) or would add some (no `Content-Length`: it would frame the body as chunked).
    static func head(_ response: HTTPResponse) -> ByteBuffer? {
        let status = HTTPResponseStatus(statusCode: response.status.code, reasonPhrase: response.status.reasonPhrase)
        guard status.mayHaveResponseBody, response.headerFields[.contentLength] != nil,
            response.headerFields[.transferEncoding] == nil
        else { return nil }
        var bytes = ByteBuffer()
        bytes.reserveCapacity(minimumWritableBytes: estimatedSize(response.headerFields, reason: status.reasonPhrase))
        writeStatusLine(status, into: &bytes)
        for field in response.headerFields { writeField(field.name.rawName, field.value, into: &bytes) }
        bytes.writeStaticString("\r\n")
        return bytes
    }

    /// `HTTP/<major>.<minor> <code> <reason>` CRLF.
    private static func writeStatusLine(
        _ status: HTTPResponseStatus, version: HTTPVersion = .http1_1, into bytes: inout ByteBuffer
    ) {
        bytes.writeStaticString("HTTP/")
        bytes.writeString(String(version.major))
        bytes.writeStaticString(".")
        bytes.writeString(String(version.minor))
        bytes.writeStaticString(" ")
        bytes.writeString(String(status.code))
        bytes.writeStaticString(" ")
        bytes.writeString(status.reasonPhrase)
        bytes.writeStaticString("\r\n")
    }

    /// `name: value` CRLF.
    private static func writeField(_ name: String, _ value: String, into bytes: inout ByteBuffer) {
        bytes.writeString(name)
        bytes.writeStaticString(": ")
        bytes.writeString(value)
        bytes.writeStaticString("\r\n")
    }

    /// The head of an answer to a `HEAD` or `CONNECT` request, framed as NIO's encoder frames an answer
    /// to one: no body, so a `CONNECT` answer (or a status that may not carry a body) loses its framing headers and a
    /// `HEAD` answer keeps them, or says `chunked` when it has no length, as the `GET` answer would.
    static func bodiless(_ head: HTTPResponseHead, answering method: NIOHTTP1.HTTPMethod) -> ByteBuffer {
        var headers = head.headers
        if method == .CONNECT || !head.status.mayHaveResponseBody {
            headers.remove(name: "content-length")
            headers.remove(name: "transfer-encoding")
        } else if headers.contains(name: "content-length") {
            headers.remove(name: "transfer-encoding")
        } else if head.version.major == 1 && head.version.minor >= 1 {
            headers.replaceOrAdd(name: "transfer-encoding", value: "chunked")
        }
        var bytes = ByteBuffer()
        writeStatusLine(head.status, version: head.version, into: &bytes)
        for (name, value) in headers { writeField(name, value, into: &bytes) }
        bytes.writeStaticString("\r\n")
        return bytes
    }

    private static func estimatedSize(_ fields: HTTPFields, reason: String) -> Int {
        fields.reduce(16 + reason.utf8.count) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count + 4 }
    }
}

/// The heads of the last few replays one connection wrote, by stored response and reader variant: a read of the same
/// entry by the same kind of reader (the same `X-Prefetch`, the same origin's CORS headers) writes the kept head
/// instead of building and encoding it again. One per connection, used on its event loop only: no lock. It keeps
/// ``capacity`` heads at most (each at most ``maximumHead`` bytes), and holds no body and no entry alive, only their
/// tokens.
final class ReplayHeads {
    typealias Variant = PageAnswer.ReplayVariant

    static let capacity = 4
    static let maximumHead = 2048

    private var slots: [(token: ResponseToken, variant: Variant, head: ByteBuffer)] = []
    private var next = 0

    /// The head kept for `token` and `variant`, if any.
    func head(_ token: ResponseToken, _ variant: Variant) -> ByteBuffer? {
        for slot in slots where slot.token === token && slot.variant == variant { return slot.head }
        return nil
    }

    /// Keeps `head` in place of the oldest one kept.
    func keep(_ head: ByteBuffer, _ token: ResponseToken, _ variant: Variant) {
        guard head.readableBytes <= Self.maximumHead else { return }
        if slots.count < Self.capacity {
            slots.append((token, variant, head))
        } else {
            slots[next] = (token, variant, head)
            next = (next + 1) % Self.capacity
        }
    }
}
