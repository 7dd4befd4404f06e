import Digests
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PageAPI
import PrefetchCore
import PrefetchEngine
import PrefetchStore
import Synchronization

/// A method neither listener implements (``APIError/knownMethods``) is refused `501 not-implemented` before any
/// other middleware: Hummingbird's `MetricsMiddleware` labels its series by method, so each made-up method would
/// be a new series, and the admin guard and the `404`/`405` would tell which paths exist.
/// The refusal is counted as the page listener counts it (`hb.requests` with the route `Unknown`, the method `_OTHER`).
struct KnownMethodMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: FastHandoffMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let refusal = APIError.unknownMethod(request.method) {
            let started = DispatchTime.now().uptimeNanoseconds
            let response = try refusal.response(from: request, context: context)
            metrics.record(
                route: "Unknown", method: request.method, status: refusal.status,
                nanoseconds: DispatchTime.now().uptimeNanoseconds - started)
            return response
        }
        return try await next(request, context)
    }
}

/// `POST`s must say their body is JSON: any other `Content-Type` (a cross-site form can send `text/plain`
/// without a preflight) is refused with `415` before the handler runs. Mounted on the route groups that hold
/// the API's routes, so it runs only for routes that exist.
struct JSONBodyMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if request.method == .post, let refusal = JSONBody.refusal(contentType: request.headers[.contentType]) {
            throw refusal
        }
        return try await next(request, context)
    }
}

/// The operator surface's door: with a token configured, every request must carry `Authorization: Bearer
/// <token>` (compared in constant time); no browser page of another origin may drive it (a request whose
/// `Origin` is not this listener's own is refused), so a page cannot reach it through a user's browser; and
/// without a token, only requests addressed to an IP address, `localhost` or the configured admin host are
/// answered, so a page cannot reach a loopback listener by rebinding its own DNS name to 127.0.0.1.
struct AdminGuardMiddleware<Context: RequestContext>: RouterMiddleware {
    let token: [UInt8]?
    let adminHost: String
    let metrics: EngineMetrics

    init(token: String?, adminHost: String, metrics: EngineMetrics) {
        self.token = token.map { SHA256.hash(data: Array($0.utf8)) }
        self.adminHost = adminHost.lowercased()
        self.metrics = metrics
    }

    /// Whether `authority` (`host[:port]`) names this listener by address rather than by some other name.
    func isOwnAuthority(_ authority: String?) -> Bool {
        guard let authority = authority?.lowercased(), !authority.isEmpty else { return false }
        let host: Substring
        if authority.hasPrefix("[") {
            host = authority.dropFirst().prefix { $0 != "]" }
            return !host.isEmpty && host.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        host = authority.prefix { $0 != ":" }
        let port = authority.dropFirst(host.count)
        guard port.isEmpty || (port.count > 1 && port.dropFirst().allSatisfy { $0.isASCII && $0.isNumber }) else { return false }
        return host == "localhost" || host == adminHost || (!host.isEmpty && host.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") })
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // A second `Host` stays among the fields (the first became the authority): RFC 9112 §3.2 says 400.
        if let host = HTTPField.Name("Host"), !request.headers[values: host].isEmpty {
            throw APIError.badRequest(.badHost, "the request has more than one Host header")
        }
        if token == nil, !isOwnAuthority(request.head.authority) {
            metrics.denied("admin-unauthorized")
            throw APIError(
                status: .forbidden, code: .hostNotAllowed,
                message:
                    "the operator surface answers requests addressed to an IP address, localhost or its --admin-host; set --admin-token to answer other names"
            )
        }
        if let origin = request.headers[.origin] {
            let own = "http://" + (request.head.authority ?? "").lowercased()
            if origin.lowercased() != own {
                metrics.denied("admin-unauthorized")
                throw APIError(
                    status: .forbidden, code: .originNotAllowed, message: "the operator surface does not answer pages of other origins")
            }
        }
        if let token {
            let presented = request.headers[.authorization].flatMap { value -> String? in
                value.lowercased().hasPrefix("bearer ") ? String(value.dropFirst(7)).trimmingCharacters(in: .whitespaces) : nil
            }
            // Hashing both sides first makes the comparison independent of the token's length as well.
            guard let presented, constantTimeEqual(SHA256.hash(data: Array(presented.utf8)), token) else {
                metrics.denied("admin-unauthorized")
                var error = try APIError(
                    status: .unauthorized, code: .adminUnauthorized,
                    message: "the operator surface needs Authorization: Bearer <admin token>"
                )
                .response(from: request, context: context)
                error.headers[.wwwAuthenticate] = "Bearer realm=\"prefetch-admin\""
                return error
            }
        }
        return try await next(request, context)
    }
}
