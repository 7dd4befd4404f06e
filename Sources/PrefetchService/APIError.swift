import Foundation
import HTTPTypes
import Hummingbird
import PrefetchEngine

/// An API failure: an HTTP status, a short stable code (also a metric label and the `X-Prefetch-Reason` of a
/// miss) and a message naming the input and what was wrong with it. Handlers throw it; Hummingbird renders it
/// as `{"error": "<code>", "message": "<message>"}` with the status, plus `Retry-After` when given.
struct APIError: HTTPResponseError, Sendable {
    var status: HTTPResponse.Status
    var code: String
    var message: String
    /// Whether this is a prefetch miss (so the response carries `X-Prefetch-Reason`).
    var isMiss: Bool = false
    /// Seconds the caller should wait before retrying (429, 503).
    var retryAfter: Int64?

    static func badRequest(_ code: String, _ message: String) -> APIError {
        APIError(status: .badRequest, code: code, message: message)
    }

    static func miss(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> APIError {
        APIError(status: status, code: code, message: message, isMiss: true)
    }

    /// The wire form of every error.
    struct Body: Codable, Sendable {
        var error: String
        var message: String
    }

    var body: Body { Body(error: code, message: message) }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let (status, headers, body) = try parts()
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    /// The answer as the routed path and the event loop's fast path both write it.
    func parts() throws -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        var headers: HTTPFields = [.contentType: "application/json"]
        if isMiss { headers[PrefetchHeaders.reason] = code }
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        let data = try JSONEncoding.encoder.encode(body)
        return (status, headers, ByteBuffer(bytes: data))
    }
}

extension APIError {
    /// The one place engine refusals become statuses.
    init(_ error: PrefetchError) {
        let status: HTTPResponse.Status =
            switch error {
            case .notReady, .overloaded, .shuttingDown: .serviceUnavailable
            case .invalidPageURL: .badRequest
            case .pageURLTooLong: .uriTooLong
            case .noConfig, .unknownTicket: .notFound
            case .rateLimited: .tooManyRequests
            case .credentialsRequired: .unauthorized
            case .identityMismatch, .invalidReadKey, .originMismatch, .pageOriginNotAllowed: .forbidden
            }
        let isMiss: Bool =
            switch error {
            case .unknownTicket, .credentialsRequired, .identityMismatch, .invalidReadKey, .originMismatch, .pageOriginNotAllowed: true
            default: false
            }
        self.init(
            status: status, code: error.code, message: error.message, isMiss: isMiss, retryAfter: error.retryAfter?.wholeSecondsRoundedUp)
    }
}

/// The product's own headers.
enum PrefetchHeaders {
    /// How a replay was served: `hit` or `joined`.
    static let served = HTTPField.Name("X-Prefetch")!
    /// Why a read missed (the error code).
    static let reason = HTTPField.Name("X-Prefetch-Reason")!
    /// A page's read key.
    static let readKey = HTTPField.Name(TicketAccess.readKeyHeader)!
    static let contentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
}

/// The JSON encoder every answer goes through: keys in a stable (sorted) order, no escaped slashes, ISO 8601 dates.
enum JSONEncoding {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// `value` as an `application/json` response with `status`.
    static func response(_ status: HTTPResponse.Status, _ value: some Encodable) throws -> Response {
        let data = try encoder.encode(value)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// Answers are Codable types rendered with ``JSONEncoding/encoder`` and status 200.
protocol JSONAnswer: ResponseEncodable, Sendable {}

extension JSONAnswer {
    func response(from request: Request, context: some RequestContext) throws -> Response {
        let (status, headers, body) = try parts()
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    /// The answer as the routed path and the event loop's fast path both write it.
    func parts() throws -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        (.ok, [.contentType: "application/json"], ByteBuffer(bytes: try JSONEncoding.encoder.encode(self)))
    }
}

/// A Codable answer with a status other than 200.
struct Answer<Value: Encodable & Sendable>: ResponseGenerator, Sendable {
    var status: HTTPResponse.Status
    var value: Value

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try JSONEncoding.response(status, value)
    }
}
