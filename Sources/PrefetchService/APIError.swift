import Foundation
import HTTPTypes
import Hummingbird
import PrefetchCore
import PrefetchEngine

/// An API failure: an HTTP status, a short stable code (also a metric label and the `X-Prefetch-Reason` of a
/// miss) and a message naming the input and what was wrong with it. Handlers throw it; Hummingbird renders it
/// as `{"error": "<code>", "message": "<message>"}` with the status, plus `Retry-After` when given.
struct APIError: HTTPResponseError, Sendable {
    var status: HTTPResponse.Status
    var code: FailureCode
    var message: String
    /// Whether this is a prefetch miss (so the response carries `X-Prefetch-Reason`).
    var isMiss: Bool = false
    /// Seconds the caller should wait before retrying (429, 503).
    var retryAfter: Int64?
    /// The methods the path allows (`405`).
    var allow: String?

    static func badRequest(_ code: FailureCode, _ message: String) -> APIError {
        APIError(status: .badRequest, code: code, message: message)
    }

    static func miss(_ status: HTTPResponse.Status, _ code: FailureCode, _ message: String) -> APIError {
        APIError(status: status, code: code, message: message, isMiss: true)
    }

    /// The wire form of every error.
    struct Body: Codable, Sendable {
        var error: String
        var message: String
    }

    var body: Body { Body(error: code.rawValue, message: message) }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let (status, headers, body) = try parts()
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    /// The answer as the routed path and the event loop's fast path both write it.
    func parts() throws -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        var headers: HTTPFields = [.contentType: "application/json"]
        if isMiss { headers[PrefetchHeaders.reason] = code.rawValue }
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        let data = try JSONEncoding.encoder.encode(body)
        return (status, headers, ByteBuffer(bytes: data))
    }
}

extension APIError {
    /// The methods either listener recognises: RFC 9110's, `PATCH` and `QUERY` (the IETF's safe method with a body,
    /// which clients and API fuzzers send): where a path lacks one, `405` with `Allow`. Any other is refused
    /// `501 not-implemented` on every path before anything else looks at the request (RFC 9110 15.6.2), so it never
    /// names a metric series nor tells which paths exist.
    static let knownMethods: Set<HTTPRequest.Method> = [
        .get, .head, .post, .put, .delete, .connect, .options, .trace, .patch, HTTPRequest.Method("QUERY")!,
    ]

    /// The refusal of a method outside ``knownMethods``, or nil.
    static func unknownMethod(_ method: HTTPRequest.Method) -> APIError? {
        guard !knownMethods.contains(method) else { return nil }
        return APIError(
            status: .notImplemented, code: .notImplemented,
            message: "\(quoted(method.rawValue, limit: 40)) is not a method this service implements")
    }

    /// The one place engine refusals become statuses.
    init(_ error: PrefetchError) {
        let status: HTTPResponse.Status =
            switch error {
            case .notReady, .overloaded, .shuttingDown: .serviceUnavailable
            // A page URL over the limit is a bad value of a field (in a body, or a query parameter), not a request
            // target the server cannot read: 400, as RFC 9110 (15.5.1) has it, never 414.
            case .invalidPageURL, .pageURLTooLong: .badRequest
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
