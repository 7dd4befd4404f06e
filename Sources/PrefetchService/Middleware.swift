import Digests
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PrefetchCore
import PrefetchEngine
import PrefetchStore
import Synchronization

/// Renders a thrown error as the response it stands for (an `HTTPResponseError` renders itself).
func errorResponse(_ error: any Error, request: Request, context: some RequestContext) throws -> Response {
    if let error = error as? any HTTPResponseError {
        return try error.response(from: request, context: context)
    }
    throw error
}

/// Who may call the page surface from a browser, and the headers every page-surface answer carries (applied by
/// ``PageAPI`` and ``FastHandoff``, each answer through `AllowedOrigins.Admission.decorate`).
///
/// - A request with an `Origin` must come from an allowed origin: a page origin of the config in force, a
///   page's `partnerOrigins`, or a `--cors-origin`. Otherwise it is refused with `403 origin-not-allowed` before any
///   route runs, so a cross-site form post or fetch triggers nothing. `*` among the extra origins lets any origin
///   through, and those not otherwise allowed get `Access-Control-Allow-Origin: *` without credentials.
/// - A request without `Origin` that a browser marks `Sec-Fetch-Site: cross-site` (a no-cors embed such as an
///   image or script tag, which would carry the user's cookies) is refused too, except the page client script,
///   which pages on other sites load with a script tag.
/// - `OPTIONS` (CORS preflights) is answered for any path, with the CORS headers only for allowed origins.
/// - Every answer carries `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`, and
///   `Cache-Control: private, no-store` unless it set its own (only the static files do: the page client, the
///   landing page and the demo's HTML, none of which holds a user's data).
enum PageGuard {
    /// Paths any site may load or link to: the page client (a plain script tag) and the demo pages (a link).
    static let publicAssets: Set<String> = ["/v1/client.js", "/demo", "/demo/shell.html", "/demo/page.html"]

    /// The CORS headers for an allowed `origin`.
    static func decorate(_ headers: inout HTTPFields, origin: String, grant: AllowedOrigins.Grant) {
        switch grant {
        case .withCredentials:
            headers[.accessControlAllowOrigin] = origin
            headers[.accessControlAllowCredentials] = "true"
        case .anyWithoutCredentials:
            headers[.accessControlAllowOrigin] = "*"
        case .none:
            return
        }
        headers[.accessControlExposeHeaders] = "X-Prefetch, X-Prefetch-Reason"
        headers.append(HTTPField(name: .vary, value: "Origin"))
    }

    /// The headers every page-surface answer carries. An answer
    /// of the page surface holds a user's data unless it says otherwise: stored upstream bytes, a ticket's view, a
    /// read key, an identity's refusal. So none may be kept by a shared or the device's HTTP cache, which would hand
    /// it out by URL without the identity check; only an answer that chose its own `Cache-Control` is spared.
    static func secure(_ headers: inout HTTPFields) {
        headers[PrefetchHeaders.contentTypeOptions] = "nosniff"
        headers[PrefetchHeaders.referrerPolicy] = "no-referrer"
        if headers[.cacheControl] == nil { headers[.cacheControl] = "private, no-store" }
    }
}

/// The origins allowed to call the page surface: the config's page origins (recomputed when the config version
/// changes) and the configured extra origins.
final class AllowedOrigins: Sendable {
    enum Grant: Sendable, Equatable {
        /// Not allowed.
        case none
        /// A page origin or a listed origin: echoed, with credentials.
        case withCredentials
        /// Allowed only through `*`: a literal `*`, never with credentials.
        case anyWithoutCredentials
    }

    let extra: Set<String>
    let any: Bool
    /// The configs served now: page origins of the active config and of a canary candidate are allowed.
    let servedConfigs: @Sendable () -> ServedConfigs?
    private let cache = Mutex<(versions: [String], origins: Set<String>)?>(nil)

    init(extra: [String], servedConfigs: @escaping @Sendable () -> ServedConfigs?) {
        self.any = extra.contains("*")
        self.extra = Set(extra.filter { $0 != "*" }.compactMap { try? HTTPURL(parsing: $0).origin })
        self.servedConfigs = servedConfigs
    }

    func grant(for origin: String) -> Grant {
        if origin != "null", let parsed = try? HTTPURL(parsing: origin),
            parsed.origin == origin.lowercased() || parsed.origin + "/" == origin.lowercased()
        {
            if extra.contains(parsed.origin) || configOrigins().contains(parsed.origin) { return .withCredentials }
        }
        return any ? .anyWithoutCredentials : .none
    }

    private func configOrigins() -> Set<String> {
        guard let served = servedConfigs() else { return [] }
        let versions = [served.active.version] + (served.canary.map { [$0.config.version] } ?? [])
        return cache.withLock { cached -> Set<String> in
            if let cached, cached.versions == versions { return cached.origins }
            let pages = served.active.pages + (served.canary?.config.pages ?? [])
            // A page's partners call the surface for that page (the handlers check which page, promise 26).
            let made = Set(pages.flatMap { [$0.parsedURL.origin] + $0.partnerOrigins })
            cached = (versions, made)
            return made
        }
    }
}

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
        if request.method == .post, let refusal = Self.refusal(contentType: request.headers[.contentType]) {
            throw refusal
        }
        return try await next(request, context)
    }

    /// The 415 for a `POST` whose `Content-Type` is not JSON, or nil when it is.
    static func refusal(contentType: String?) -> APIError? {
        let type = contentType ?? ""
        let mediaType = type.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        guard mediaType != "application/json" else { return nil }
        let shown = type.isEmpty ? "no Content-Type" : "Content-Type \(quoted(type, limit: 80))"
        return APIError(
            status: .unsupportedMediaType, code: .unsupportedMediaType, message: "the request has \(shown); send application/json")
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
