import Foundation
package import HTTPTypes
package import PrefetchCore
import PrefetchEngine
import Synchronization

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
package enum PageGuard {
    /// Paths any site may load or link to: the page client (a plain script tag) and the demo pages (a link).
    package static let publicAssets: Set<String> = ["/v1/client.js", "/demo", "/demo/shell.html", "/demo/page.html"]

    /// The CORS headers for an allowed `origin`.
    package static func decorate(_ headers: inout HTTPFields, origin: String, grant: AllowedOrigins.Grant) {
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
    package static func secure(_ headers: inout HTTPFields) {
        headers[PrefetchHeaders.contentTypeOptions] = "nosniff"
        headers[PrefetchHeaders.referrerPolicy] = "no-referrer"
        if headers[.cacheControl] == nil { headers[.cacheControl] = "private, no-store" }
    }
}

/// The origins allowed to call the page surface: the config's page origins (recomputed when the config version
/// changes) and the configured extra origins.
package final class AllowedOrigins: Sendable {
    package enum Grant: Sendable, Equatable {
        /// Not allowed.
        case none
        /// A page origin or a listed origin: echoed, with credentials.
        case withCredentials
        /// Allowed only through `*`: a literal `*`, never with credentials.
        case anyWithoutCredentials
    }

    package let extra: Set<String>
    package let any: Bool
    /// The configs served now: page origins of the active config and of a canary candidate are allowed.
    package let servedConfigs: @Sendable () -> ServedConfigs?
    private let cache = Mutex<(versions: [String], origins: Set<String>)?>(nil)

    package init(extra: [String], servedConfigs: @escaping @Sendable () -> ServedConfigs?) {
        self.any = extra.contains("*")
        self.extra = Set(extra.filter { $0 != "*" }.compactMap { try? HTTPURL(parsing: $0).origin })
        self.servedConfigs = servedConfigs
    }

    package func grant(for origin: String) -> Grant {
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

/// `POST`s must say their body is JSON: any other `Content-Type` (a cross-site form can send `text/plain` without a
/// preflight) is refused with `415` before anything reads the body. The page pipeline asks it at a request's head;
/// the operator router's `JSONBodyMiddleware` asks it for the routes it holds.
package enum JSONBody {
    /// The 415 for a `POST` whose `Content-Type` is not JSON, or nil when it is.
    package static func refusal(contentType: String?) -> APIError? {
        let type = contentType ?? ""
        let mediaType = type.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        guard mediaType != "application/json" else { return nil }
        let shown = type.isEmpty ? "no Content-Type" : "Content-Type \(quoted(type, limit: 80))"
        return APIError(
            status: .unsupportedMediaType, code: .unsupportedMediaType, message: "the request has \(shown); send application/json")
    }
}
