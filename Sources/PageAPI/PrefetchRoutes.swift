import Foundation
package import HTTPTypes
package import NIOCore
package import PrefetchCore
package import PrefetchEngine
package import PrefetchStore
import Synchronization

/// The prefetch endpoints of the page surface (described in `openapi.yaml`, tag `page`).
///
/// Shell sequence: on tap, `POST /v1/prefetch` with the page URL and the user's credentials; it answers 202 with
/// a ticket and a read key at once. The shell (native code holding the credentials) reads results with
/// `GET /v1/prefetch/{ticket}` and replays with `GET /v1/prefetch/{ticket}/data`, presenting the same
/// credentials. The page reads its data with `GET /v1/data`: with its own credentials and `page=` when it can
/// send them to the service (same site), or with the read key in `X-Prefetch-Key` when it cannot. Who may read
/// what is ``TicketAccess``; every miss says why (`X-Prefetch-Reason`).
package struct PrefetchRoutes: Sendable {
    package let orchestrator: Orchestrator
    /// The listener's body timeout (`ListenerSettings.bodyTimeout`): how long a request body may take to arrive.
    package let bodyTimeout: Duration

    package init(orchestrator: Orchestrator, bodyTimeout: Duration) {
        self.orchestrator = orchestrator
        self.bodyTimeout = bodyTimeout
    }

    /// A request body as a JSON object, or the 400 saying why it is not one.
    package static func jsonObject(_ buffer: ByteBuffer) throws(APIError) -> JSONObject {
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(buffer.readableBytesView))
        } catch {
            throw APIError.badRequest(.badJSON, "the request body is not valid JSON: \(error)")
        }
        guard case .object(let object) = value else {
            throw APIError.badRequest(.badJSON, "the request body must be a JSON object, got \(value.kindName)")
        }
        return object
    }

    /// The user's headers: the body's `headers` object, or `requestHeaders` when it has none.
    package static func credentialHeaders(_ object: JSONObject, requestHeaders: HTTPFields) throws(APIError) -> HTTPFields {
        var headers = HTTPFields()
        switch object["headers"] {
        case nil:
            headers = requestHeaders
        case .object(let given):
            for member in given.members {
                // The config's rule for a header (`HeaderRules`): a value without control characters, and a token
                // name. A member whose name is no token names no header, so it is dropped, never sent: the document
                // cannot constrain an object's member names (OpenAPI 3.0), so the service accepts any.
                guard case .string(let text) = member.value else {
                    throw APIError.badRequest(.badHeaders, "headers.\(member.name) must be a string, got \(member.value.kindName)")
                }
                if HeaderRules.hasControlCharacter(text) {
                    throw APIError.badRequest(.badHeaders, "headers.\(member.name) contains a control character")
                }
                guard let name = HeaderRules.name(member.name) else { continue }
                headers.append(HTTPField(name: name, value: text))
            }
        case .some(let other):
            throw APIError.badRequest(.badHeaders, "\"headers\" must be an object of strings, got \(other.kindName)")
        }
        return headers
    }

    /// The members a jar's cookie may have, as the document lists them.
    static let cookieAttributes = ["name", "value", "domain", "hostOnly", "path", "secure", "expires", "sameSite", "httpOnly"]

    /// The user's cookie jar (`cookies`): each cookie with its attributes, so each upstream request carries only the
    /// cookies a browser would send to its URL. nil when the body has none. At most ``CookieJar/maximumCookies``.
    /// A cookie of the wrong shape (a member missing, null, of the wrong type, or one that is no cookie attribute: the
    /// document closes the cookie object, so a shell sending another shape learns it at once) refuses the jar, naming
    /// it; one whose name or value cannot travel in a `Cookie` header (not a token, a control character, a `;`) is
    /// left out, as a cookie store holding one must not cost its user every prefetch.
    package static func cookieJar(_ object: JSONObject) throws(APIError) -> CookieJar? {
        guard let value = object["cookies"] else { return nil }
        guard case .array(let items) = value else {
            throw APIError.badRequest(.badHeaders, "\"cookies\" must be an array of cookie objects, got \(value.kindName)")
        }
        guard items.count <= CookieJar.maximumCookies else {
            throw APIError.badRequest(.badHeaders, "\"cookies\" holds \(items.count) cookies; at most \(CookieJar.maximumCookies)")
        }
        var cookies: [CookieJar.Cookie] = []
        for (index, item) in items.enumerated() {
            let at = "cookies[\(index)]"
            guard case .object(let cookie) = item else {
                throw APIError.badRequest(.badHeaders, "\(at) must be an object, got \(item.kindName)")
            }
            if let unknown = cookie.members.first(where: { !Self.cookieAttributes.contains($0.name) })?.name {
                throw APIError.badRequest(
                    .badHeaders,
                    "\(at) has \(quoted(unknown, limit: 60)), which is not a cookie attribute (\(Self.cookieAttributes.joined(separator: ", ")))"
                )
            }
            func string(_ name: String, required: Bool) throws(APIError) -> String? {
                switch cookie[name] {
                case nil where !required: return nil
                case .string(let text)?: return text
                default: throw APIError.badRequest(.badHeaders, "\(at).\(name) must be a string")
                }
            }
            func travels(_ text: String) -> Bool { !HeaderRules.hasControlCharacter(text) && !text.contains(";") }
            func flag(_ name: String) throws(APIError) -> Bool {
                switch cookie[name] {
                case nil: return false
                case .bool(let value)?: return value
                default: throw APIError.badRequest(.badHeaders, "\(at).\(name) must be a boolean")
                }
            }
            guard let name = try string("name", required: true) else {
                throw APIError.badRequest(.badHeaders, "\(at).name (the cookie's name) is required")
            }
            guard let domain = try string("domain", required: true), !domain.isEmpty else {
                throw APIError.badRequest(.badHeaders, "\(at).domain (the host or domain the cookie belongs to) is required")
            }
            let value = try string("value", required: true) ?? ""
            let path = try string("path", required: false) ?? "/"
            var expires: Int64?
            switch cookie["expires"] {
            case nil: expires = nil
            case .number(let text)?:
                guard let seconds = Double(text) else { throw APIError.badRequest(.badHeaders, "\(at).expires must be seconds since 1970") }
                expires = Int64(max(min(seconds, 1e15), -1e15))
            default: throw APIError.badRequest(.badHeaders, "\(at).expires must be seconds since 1970")
            }
            let hostOnly = cookie["hostOnly"] == nil ? true : try flag("hostOnly")
            let secure = try flag("secure")
            // Checked, not used: `HttpOnly` keeps a cookie from scripts; it is sent with requests all the same.
            _ = try flag("httpOnly")
            let sameSite: CookieJar.Cookie.SameSite
            switch try string("sameSite", required: false) {
            case nil, "lax": sameSite = .lax
            case "strict": sameSite = .strict
            case "none": sameSite = .none
            case let other?:
                throw APIError.badRequest(.badHeaders, "\(at).sameSite must be \"strict\", \"lax\" or \"none\", got \"\(other)\"")
            }
            guard HeaderRules.name(name) != nil, !name.contains("="), travels(value), travels(domain), travels(path) else { continue }
            cookies.append(
                CookieJar.Cookie(
                    name: name, value: value, domain: domain, hostOnly: hostOnly, path: path, secure: secure, expires: expires,
                    sameSite: sameSite))
        }
        return CookieJar(cookies)
    }

    /// The W3C trace context a trigger carries: a valid `traceparent` (anything else is ignored, never refused) and
    /// its `tracestate` within the cap (``TraceParent/cappedState(_:)``).
    package static func traceContext(_ headers: HTTPFields) -> TraceParent.Context? {
        guard let value = headers[HTTPField.Name("traceparent")!], let parent = TraceParent(header: value) else { return nil }
        let state = headers[HTTPField.Name("tracestate")!].flatMap(TraceParent.cappedState)
        return (parent, state)
    }

    /// The page URL of a trigger body.
    package static func pageURL(_ object: JSONObject) throws(APIError) -> String {
        guard case .string(let page)? = object["url"] else {
            throw APIError.badRequest(
                .missingURL, object["url"] == nil ? "\"url\" (the page URL) is required" : "\"url\" must be a string")
        }
        return page
    }

    /// What a trigger's body asks for: the page, the user's headers and cookie jar. One parser for the
    /// trigger and the open (`RendererRoutes.openRequest`).
    package struct TriggerRequest {
        package var page: String
        package var headers: HTTPFields
        package var cookies: CookieJar?

        package init(_ object: JSONObject, requestHeaders: HTTPFields) throws(APIError) {
            page = try PrefetchRoutes.pageURL(object)
            headers = try PrefetchRoutes.credentialHeaders(object, requestHeaders: requestHeaders)
            cookies = try PrefetchRoutes.cookieJar(object)
        }
    }

    /// A reader refused a ticket's data (`401`, `403`) is recorded on the ticket too, as a miss of the interface it
    /// asked for, so the debug view shows who was turned away. Both pipelines call it.
    package static func recordRefusedReader(_ ticket: Ticket?, query: PageTarget.Query, _ error: APIError, orchestrator: Orchestrator) {
        guard error.status == .unauthorized || error.status == .forbidden, let ticket,
            let index = try? select(candidates(ticket), query: query)
        else { return }
        ticket.recordRead(index, served: .miss, reason: error.code, askedAt: orchestrator.clock.now, answeredAt: orchestrator.clock.now)
    }

    /// A data read's wait: the query's `wait` clamped, `timeout` without one, or the refusal of a malformed one.
    package static func wait(_ query: PageTarget.Query, default timeout: Duration, orchestrator: Orchestrator) -> Result<Duration, APIError>
    {
        Result { () throws(APIError) in orchestrator.clampWait(try waitParameter(query), default: timeout) }
    }

    /// What a same-site read (`GET /v1/data?page=` with the page's own credentials) names: the store key of the
    /// chosen interface for the reader's identity, the config it was planned with, and the interface's timeout.
    package struct PageRead {
        package var key: StoreKey
        package var role: ConfigRole
        package var timeout: Duration
    }

    /// The one implementation of a `page=` read's checks, for both handoff paths: the page planned under the
    /// config its reader is served (a canary candidate for its share of users, so it reads the keys its own trigger
    /// made), the reader's origin entitled to that page (promise 26), the interface chosen by the query, and its key
    /// for the reader's credentials. Records nothing: the caller counts what it answers.
    package static func pageRead(
        _ orchestrator: Orchestrator, query: PageTarget.Query, headers: HTTPFields, origin: TicketAccess.RequestOrigin
    ) throws(APIError) -> PageRead {
        guard let page = query.get("page") else {
            throw APIError.badRequest(.missingPage, "the query parameter page (the page URL) is required without a read key")
        }
        let credentials = orchestrator.credentials(in: headers)
        let plan: Plan
        let role: ConfigRole
        do {
            (plan, role) = try orchestrator.plan(page: page, identity: credentials.identity)
            try orchestrator.authorize(origin, for: plan.origins)
        } catch .noConfig(let message) {
            // For a page asking for its data, a page without a config entry is a miss like any other.
            throw APIError.miss(.noConfig, message)
        } catch {
            throw APIError(error)
        }
        let index = try select(plan.requests.map { ($0.name, $0.interface.api, $0.method) }, query: query)
        return PageRead(
            key: orchestrator.key(of: index, in: plan, credentials: credentials), role: role,
            timeout: .milliseconds(plan.requests[index].interface.timeoutMilliseconds))
    }

    /// What a ticket's interfaces are chosen by (``select(_:query:)``).
    package static func candidates(_ ticket: Ticket) -> [(name: String, api: String, method: HTTPMethod)] {
        ticket.requests.map { ($0.name, $0.api, $0.method) }
    }

    /// The index of the interface chosen by `api` (as written in the config), `method` and `name`; without `api`
    /// and `name`, the only interface. A selection that fits several is a 409: the request names no single one.
    package static func select(
        _ candidates: [(name: String, api: String, method: HTTPMethod)], query: PageTarget.Query
    ) throws(APIError) -> Int {
        let api = query.get("api")
        let name = query.get("name")
        var method: HTTPMethod?
        if let text = query.get("method") {
            guard let parsed = HTTPMethod(rawValue: text.uppercased()) else {
                throw APIError.badRequest(.invalidMethod, "method \(quoted(text, limit: 40)) is not one of GET, POST, PUT, PATCH, DELETE")
            }
            method = parsed
        }
        let matches = candidates.indices.filter { index in
            (api == nil || candidates[index].api == api) && (name == nil || candidates[index].name == name)
                && (method == nil || candidates[index].method == method)
        }
        if matches.isEmpty {
            let what = [api.map { "api \(quoted($0))" }, name.map { "name \(quoted($0))" }, method.map { "method \($0.rawValue)" }]
                .compactMap { $0 }.joined(separator: ", ")
            throw APIError.miss(.unknownAPI, "the page has no interface with \(what)")
        }
        if matches.count > 1 {
            let names = matches.map { candidates[$0].name }.joined(separator: ", ")
            throw APIError(status: .conflict, code: .ambiguousAPI, message: "several interfaces match (\(names)); add name= or method=")
        }
        return matches[0]
    }

    /// The `wait` query parameter in milliseconds (a negative one is 0), nil without one, or the 400 for a value
    /// that is no whole number.
    package static func waitParameter(_ query: PageTarget.Query) throws(APIError) -> Int? {
        guard let text = query.get("wait") else { return nil }
        let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw APIError.badRequest(.invalidWait, "wait \(quoted(text, limit: 40)) must be a whole number of milliseconds")
        }
        if text.hasPrefix("-") { return 0 }
        return Int(digits) ?? Int.max
    }

    /// Headers a replay never carries: the upstream's CORS decisions (the service makes its own) and caching
    /// directives for any cache, a CDN's included (`CDN-Cache-Control`, `Surrogate-Control`, ...): a replay is for
    /// one reader, once.
    package static func isDropped(_ name: HTTPField.Name) -> Bool {
        let lower = name.canonicalName
        return lower.hasPrefix("access-control-") || lower.hasSuffix("cache-control") || lower.hasPrefix("surrogate-")
            || lower == "expires" || lower == "pragma" || lower == "content-security-policy" || lower == "x-content-type-options"
            || lower == "referrer-policy"
    }

    /// The status, headers and body of a ready response's replay: the upstream's headers without the dropped
    /// ones, then `X-Prefetch`, `Cache-Control: private, no-store` and a sandboxing CSP. Both handoff paths use it.
    package static func replayParts(_ response: StoredResponse, joined: Bool) -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        var fields = HTTPFields()
        for header in response.headers where !isDropped(header.name) {
            fields.append(header)
        }
        fields[PrefetchHeaders.served] = ReadResult(joined: joined).rawValue
        fields[.cacheControl] = "private, no-store"
        fields[.contentSecurityPolicy] = "default-src 'none'; sandbox"
        return (HTTPResponse.Status(code: response.status), fields, response.bodyBuffer)
    }

}
