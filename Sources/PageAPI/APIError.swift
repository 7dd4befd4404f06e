import Foundation
package import HTTPTypes
package import NIOCore
package import PrefetchCore
package import PrefetchEngine

/// An API failure: an HTTP status, a short stable code (also a metric label and the `X-Prefetch-Reason` of a
/// miss) and a message naming the input and what was wrong with it. The page API's functions throw it; it is
/// written (``parts()``: by the page pipeline, and by the operator router through `HTTPResponseError`) as
/// `{"error": "<code>", "message": "<message>"}` with the status, plus `Retry-After` when given.
package struct APIError: Error, Sendable {
    package var status: HTTPResponse.Status
    package var code: FailureCode
    package var message: String
    /// Whether this is a prefetch miss (so the response carries `X-Prefetch-Reason`).
    package var isMiss: Bool = false
    /// Seconds the caller should wait before retrying (429, 503).
    package var retryAfter: Int64?
    /// The methods the path allows (`405`).
    package var allow: String?

    package init(
        status: HTTPResponse.Status, code: FailureCode, message: String, isMiss: Bool = false, retryAfter: Int64? = nil,
        allow: String? = nil
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.isMiss = isMiss
        self.retryAfter = retryAfter
        self.allow = allow
    }

    package static func badRequest(_ code: FailureCode, _ message: String) -> APIError {
        APIError(status: .badRequest, code: code, message: message)
    }

    /// A read that found no response to hand out, with why (`X-Prefetch-Reason`): always `404`, whatever the reason
    /// (nothing prefetched, expired, a prefetch that failed or is still pending...), so a 5xx from the page surface is
    /// the service's own failure only.
    package static func miss(_ code: FailureCode, _ message: String) -> APIError {
        APIError(status: .notFound, code: code, message: message, isMiss: true)
    }

    /// The wire form of every error.
    package struct Body: Codable, Sendable {
        package var error: String
        package var message: String
    }

    package var body: Body { Body(error: code.rawValue, message: message) }

    /// The answer as both listeners write it (the page pipeline, and the operator router through `response(from:context:)`).
    package func parts() throws -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
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
    package static let knownMethods: Set<HTTPRequest.Method> = [
        .get, .head, .post, .put, .delete, .connect, .options, .trace, .patch, HTTPRequest.Method("QUERY")!,
    ]

    /// The refusal of a method outside ``knownMethods``, or nil.
    package static func unknownMethod(_ method: HTTPRequest.Method) -> APIError? {
        guard !knownMethods.contains(method) else { return nil }
        return APIError(
            status: .notImplemented, code: .notImplemented,
            message: "\(quoted(method.rawValue, limit: 40)) is not a method this service implements")
    }

    /// The one place engine refusals become statuses.
    package init(_ error: PrefetchError) {
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

extension APIError {
    /// A request body that did not arrive within `timeout`: the code and message `readBody` gives too.
    package static func bodyTimeout(_ timeout: Duration) -> APIError {
        APIError(
            status: .requestTimeout, code: .bodyTimeout, message: "the request body did not arrive within \(timeout.milliseconds) ms")
    }

    /// A request body over `limit` bytes, refused once the bytes received pass it: the same answer from `readBody`
    /// and the fast path's handler.
    package static func bodyTooLarge(limit: Int) -> APIError {
        APIError(status: .contentTooLarge, code: .tooLarge, message: "the request body is over \(limit) bytes")
    }

    /// The bodies the listener holds while they arrive would pass their `budget` (`--request-body-bytes`) with this
    /// one's next bytes: the service is busy, not the request wrong.
    package static func bodiesOverloaded(budget: Int) -> APIError {
        APIError(
            status: .serviceUnavailable, code: .overloaded,
            message: "request bodies still arriving fill the service's budget of \(budget) bytes; retry in 1 s", retryAfter: 1)
    }

    /// A request head over the parser's `limit` (request line and header fields), refused before it is read: the
    /// same answer from the fast path's handler and from the connection guard.
    package static func headTooLarge(limit: Int) -> APIError {
        APIError(
            status: .requestHeaderFieldsTooLarge, code: .tooLarge,
            message: "the request head (request line and header fields) is over \(limit) bytes")
    }
}
