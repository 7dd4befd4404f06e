import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PrefetchCore
import PrefetchStore
import Synchronization

/// The HTTP API for web shells and pages (described in `openapi.yaml`).
///
/// Shell sequence: on tap, `POST /v1/prefetch` with the page URL (and the user's credentials); it answers 202
/// with a ticket at once. The shell opens its webview and hands the ticket to the page, which reads each
/// response with `GET /v1/prefetch/{ticket}/data?api=...` (a replay of the upstream response) or all of them
/// with `GET /v1/prefetch/{ticket}`. Pages that have no ticket ask `GET /v1/data?page=...&api=...` with their
/// own credentials. Every miss says why: `{"error": "<reason>"}` and `X-Prefetch-Reason`.
struct PrefetchAPI: Sendable {
    let orchestrator: Orchestrator
    let cors: CORSPolicy

    static let prefetchHeader = HTTPField.Name("X-Prefetch")!
    static let reasonHeader = HTTPField.Name("X-Prefetch-Reason")!

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.post("/v1/prefetch") { request, context in
            await respond { () async throws(APIError) in try await trigger(request) }
        }
        router.get("/v1/prefetch/:ticket") { request, context in
            await respond(cors: request) { () async throws(APIError) in try await results(request, context: context) }
        }
        router.get("/v1/prefetch/:ticket/data") { request, context in
            await respond(cors: request) { () async throws(APIError) in try await ticketData(request, context: context) }
        }
        router.get("/v1/data") { request, context in
            await respond(cors: request) { () async throws(APIError) in try await pageData(request) }
        }
        router.get("/v1/plan") { request, context in
            await respond { () async throws(APIError) in
                guard let page = request.uri.queryParameters.get("url") else {
                    throw APIError.badRequest("missing-url", "the query parameter url (the page URL) is required")
                }
                return jsonResponse(.ok, try orchestrator.plan(page: page).json)
            }
        }
        for path in ["/v1/prefetch/:ticket", "/v1/prefetch/:ticket/data", "/v1/data"] {
            router.on(RouterPath(path), method: .options) { request, context in
                cors.preflight(request)
            }
        }
    }

    // MARK: Handlers

    /// The request body as a JSON object (at most `maximumRequestBody` bytes).
    func jsonBody(_ request: Request, allowEmpty: Bool = false) async throws(APIError) -> JSONObject {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: orchestrator.settings.maximumRequestBody)
        } catch is NIOTooManyBytesError {
            throw APIError(status: .contentTooLarge, code: "too-large", message: "the request body is over \(orchestrator.settings.maximumRequestBody) bytes")
        } catch {
            throw APIError.badRequest("bad-body", "the request body could not be read")
        }
        if allowEmpty && buffer.readableBytes == 0 { return JSONObject() }
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(buffer.readableBytesView))
        } catch {
            throw APIError.badRequest("bad-json", "the request body is not valid JSON: \(error)")
        }
        guard case .object(let object) = value else {
            throw APIError.badRequest("bad-json", "the request body must be a JSON object, got \(value.kindName)")
        }
        return object
    }

    /// The user's headers: the body's `headers` object, or the request's own headers when it has none.
    func credentialHeaders(_ object: JSONObject, request: Request) throws(APIError) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        switch object["headers"] {
        case nil:
            headers = request.headers.map { ($0.name.rawName, $0.value) }
        case .object(let given):
            for member in given.members {
                guard case .string(let text) = member.value else {
                    throw APIError.badRequest("bad-headers", "headers.\(member.name) must be a string, got \(member.value.kindName)")
                }
                if text.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) {
                    throw APIError.badRequest("bad-headers", "headers.\(member.name) contains a control character")
                }
                headers.append((member.name, text))
            }
        case .some(let other):
            throw APIError.badRequest("bad-headers", "\"headers\" must be an object of strings, got \(other.kindName)")
        }
        return headers
    }

    func trigger(_ request: Request) async throws(APIError) -> Response {
        let object = try await jsonBody(request)
        guard case .string(let page)? = object["url"] else {
            throw APIError.badRequest("missing-url", object["url"] == nil ? "\"url\" (the page URL) is required" : "\"url\" must be a string")
        }
        let headers = try credentialHeaders(object, request: request)
        let ticket = try await orchestrator.trigger(page: page, headers: headers)
        return jsonResponse(.accepted, ticketJSON(ticket))
    }

    /// The answer to a trigger: the ticket and what each request is doing.
    func ticketJSON(_ ticket: Ticket) -> JSONValue {
        let requests = zip(ticket.requests, ticket.timings.withLock { $0 }).map { request, timing in
            JSON.object([
                ("name", .string(request.name)), ("api", .string(request.api)), ("method", .string(request.method.rawValue)),
                ("url", .string(request.url)), ("state", .string(timing.origin == "fresh" ? "stored" : "pending")),
                ("flight", .string(timing.origin)),
            ])
        }
        return JSON.object([
            ("ticket", .string(ticket.id)), ("page", .string(ticket.page)), ("matched", .string(ticket.matched)),
            ("version", .string(ticket.version)), ("requests", .array(requests)),
        ])
    }

    func ticket(_ context: BasicRequestContext) async throws(APIError) -> Ticket {
        let id = context.parameters.get("ticket") ?? ""
        guard Ticket.isWellFormed(id), let ticket = await orchestrator.tickets.ticket(id) else {
            throw APIError.miss(.notFound, "unknown-ticket", "the ticket \(JSON.quote(id, limit: 40)) is unknown or expired")
        }
        return ticket
    }

    /// Refuses a ticket read whose caller presents credentials of another user.
    func checkIdentity(_ request: Request, ticket: Ticket) throws(APIError) {
        let presented = orchestrator.credentials(in: request.headers.map { ($0.name.rawName, $0.value) })
        guard !presented.headers.isEmpty else { return }
        if presented.identity != ticket.identity {
            throw APIError.miss(.forbidden, "identity-mismatch", "the credentials of this request are not those the ticket was triggered with")
        }
    }

    func results(_ request: Request, context: BasicRequestContext) async throws(APIError) -> Response {
        let ticket = try await ticket(context)
        try checkIdentity(request, ticket: ticket)
        let wait = orchestrator.clampWait(try waitParameter(request), default: .zero)
        let outcomes = await withTaskGroup(of: (Int, ReadOutcome).self) { group in
            for (index, item) in ticket.requests.enumerated() {
                group.addTask { (index, await orchestrator.store.read(item.key, wait: wait)) }
            }
            var outcomes = [ReadOutcome](repeating: .pending, count: ticket.requests.count)
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
        let timings = ticket.timings.withLock { $0 }
        let results = ticket.requests.indices.map { index in
            resultJSON(ticket.requests[index], outcomes[index], timings[index], since: ticket.createdAt)
        }
        let body = JSON.object([("ticket", .string(ticket.id)), ("page", .string(ticket.page)), ("version", .string(ticket.version)), ("results", .array(results))])
        return jsonResponse(.ok, body)
    }

    func resultJSON(_ item: TicketRequest, _ outcome: ReadOutcome, _ timing: RequestTiming, since start: ContinuousClock.Instant) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("name", .string(item.name)), ("api", .string(item.api)), ("method", .string(item.method.rawValue)), ("url", .string(item.url)),
        ]
        let elapsed: JSONValue = timing.finishedAt.map { JSON.int64(($0 - timing.startedAt).milliseconds) } ?? .null
        switch outcome {
        case .ready(let response, let joined):
            let (encoding, body) = Self.encodeBody(response)
            members += [
                ("state", .string("ready")), ("served", .string(joined ? "joined" : "hit")), ("status", JSON.int(response.status)),
                ("headers", .array(response.headers.map { .array([.string($0.name), .string($0.value)]) })),
                ("body", body), ("bodyEncoding", .string(encoding)), ("error", .null),
            ]
        case .failed(let failure, _):
            members += [("state", .string("failed")), ("status", JSON.int(timing.status)), ("error", .string(failure.code)), ("message", .string(failure.message))]
        case .pending:
            members += [("state", .string("pending")), ("error", .null)]
        case .absent(let reason):
            members += [("state", .string("missing")), ("error", .string(reason.rawValue))]
        }
        members.append(("elapsedMs", elapsed))
        return JSON.object(members)
    }

    /// The body as JSON when it is JSON, as text when it is UTF-8, else base64.
    static func encodeBody(_ response: StoredResponse) -> (String, JSONValue) {
        let contentType = response.headers.first { $0.name.lowercased() == "content-type" }?.value.lowercased() ?? ""
        if contentType.contains("json"), let value = try? JSONParser.parse(response.body) {
            return ("json", value)
        }
        if let text = String(validating: response.body, as: UTF8.self) {
            return ("text", .string(text))
        }
        return ("base64", .string(Data(response.body).base64EncodedString()))
    }

    func ticketData(_ request: Request, context: BasicRequestContext) async throws(APIError) -> Response {
        let ticket = try await ticket(context)
        let index = try select(ticket.requests.map { ($0.name, $0.api, $0.method) }, request: request)!
        return try await ticket.recordingRead(index) { () async throws(APIError) in
            try checkIdentity(request, ticket: ticket)
            return try await replay(ticket.requests[index].key, request: request, defaultWait: ticket.requests[index].timeout)
        }
    }

    func pageData(_ request: Request) async throws(APIError) -> Response {
        guard let page = request.uri.queryParameters.get("page") else {
            throw APIError.badRequest("missing-page", "the query parameter page (the page URL) is required")
        }
        let plan: Plan
        do {
            plan = try orchestrator.plan(page: page)
        } catch where error.code == "no-config" {
            // For a page asking for its data, a page without a config entry is a miss like any other.
            throw APIError.miss(error.status, error.code, error.message)
        }
        let index = try select(plan.requests.map { ($0.name, $0.interface.api, $0.method) }, request: request)!
        let credentials = orchestrator.credentials(in: request.headers.map { ($0.name.rawName, $0.value) })
        let (key, _) = orchestrator.keyAndHeaders(for: plan.requests[index], page: plan.pageURL, credentials: credentials)
        return try await replay(key, request: request, defaultWait: .milliseconds(plan.requests[index].interface.timeoutMilliseconds))
    }

    /// The index of the interface chosen by `api` (as written in the config), `method` and `name`.
    func select(_ candidates: [(name: String, api: String, method: HTTPMethod)], request: Request) throws(APIError) -> Int? {
        let query = request.uri.queryParameters
        let api = query.get("api")
        let name = query.get("name")
        guard api != nil || name != nil else {
            throw APIError.badRequest("missing-api", "the query parameter api (the interface URL as in the config) or name is required")
        }
        var method: HTTPMethod?
        if let text = query.get("method") {
            guard let parsed = HTTPMethod(rawValue: text.uppercased()) else {
                throw APIError.badRequest("invalid-method", "method \(JSON.quote(text)) is not one of GET, POST, PUT, PATCH, DELETE")
            }
            method = parsed
        }
        let matches = candidates.indices.filter { index in
            (api == nil || candidates[index].api == api) && (name == nil || candidates[index].name == name)
                && (method == nil || candidates[index].method == method)
        }
        if matches.isEmpty {
            let what = [api.map { "api \(JSON.quote($0))" }, name.map { "name \(JSON.quote($0))" }, method.map { "method \($0.rawValue)" }]
                .compactMap { $0 }.joined(separator: ", ")
            throw APIError.miss(.notFound, "unknown-api", "the page has no interface with \(what)")
        }
        if matches.count > 1 {
            let names = matches.map { candidates[$0].name }.joined(separator: ", ")
            throw APIError.badRequest("ambiguous-api", "several interfaces match (\(names)); add method= or name=")
        }
        return matches[0]
    }

    func waitParameter(_ request: Request) throws(APIError) -> Int? {
        guard let text = request.uri.queryParameters.get("wait") else { return nil }
        let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw APIError.badRequest("invalid-wait", "wait \(JSON.quote(text)) must be a whole number of milliseconds")
        }
        if text.hasPrefix("-") { return 0 }
        return Int(digits) ?? Int.max
    }

    /// Replays a stored response as the page's own request would have received it.
    func replay(_ key: StoreKey, request: Request, defaultWait: Duration) async throws(APIError) -> Response {
        let wait = orchestrator.clampWait(try waitParameter(request), default: defaultWait)
        switch await orchestrator.store.read(key, wait: wait) {
        case .ready(let response, let joined):
            orchestrator.metrics.data(joined ? "joined" : "hit")
            var fields = HTTPFields()
            for header in response.headers {
                guard let name = HTTPField.Name(header.name) else { continue }
                fields.append(HTTPField(name: name, value: header.value))
            }
            fields[Self.prefetchHeader] = joined ? "joined" : "hit"
            return Response(status: HTTPResponse.Status(code: response.status), headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: response.body)))
        case .pending:
            orchestrator.metrics.data("pending")
            throw APIError.miss(.gatewayTimeout, "pending", "the upstream response was still pending after \(wait.milliseconds) ms")
        case .failed(let failure, _):
            orchestrator.metrics.data("failed")
            throw APIError.miss(.badGateway, failure.code, "the prefetch failed: \(failure.message)")
        case .absent(let reason):
            orchestrator.metrics.data(reason.rawValue)
            let message: String
            switch reason {
            case .notFound: message = "nothing was prefetched for this interface and these credentials"
            case .expired: message = "the prefetched response expired before it was read"
            case .consumed: message = "the response was marked no-store and was already handed out"
            case .evicted: message = "the prefetched response was evicted"
            }
            throw APIError.miss(.notFound, reason.rawValue, message)
        }
    }

    // MARK: Responses

    func respond(cors request: Request? = nil, _ body: () async throws(APIError) -> Response) async -> Response {
        var response: Response
        do {
            response = try await body()
        } catch {
            response = jsonResponse(error.status, error.json)
            if error.isMiss { response.headers[Self.reasonHeader] = error.code }
        }
        if let request { cors.decorate(&response, for: request) }
        return response
    }
}

func jsonResponse(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
    Response(
        status: status,
        headers: [.contentType: "application/json"],
        body: .init(byteBuffer: ByteBuffer(string: value.jsonText))
    )
}

/// Cross-origin access to the data endpoints: allowed for the origins of the config's pages (pages call from
/// their own origin) and the configured extra origins; `*` allows any.
final class CORSPolicy: Sendable {
    let extra: Set<String>
    let currentConfig: @Sendable () -> PrefetchConfig?
    private let cache = Mutex<(version: String, origins: Set<String>)?>(nil)

    init(extra: [String], currentConfig: @escaping @Sendable () -> PrefetchConfig?) {
        self.extra = Set(extra)
        self.currentConfig = currentConfig
    }

    func allows(_ origin: String) -> Bool {
        if extra.contains("*") || extra.contains(origin) { return true }
        guard let config = currentConfig() else { return false }
        let origins = cache.withLock { cached -> Set<String> in
            if let cached, cached.version == config.version { return cached.origins }
            let made = Set(config.pages.map(\.parsedURL.origin))
            cached = (config.version, made)
            return made
        }
        guard let parsed = try? HTTPURL(parsing: origin) else { return false }
        return origins.contains(parsed.origin)
    }

    func decorate(_ response: inout Response, for request: Request) {
        guard let origin = request.headers[.origin], allows(origin) else { return }
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.accessControlAllowCredentials] = "true"
        response.headers[.accessControlExposeHeaders] = "X-Prefetch, X-Prefetch-Reason"
        response.headers.append(HTTPField(name: .vary, value: "Origin"))
    }

    func preflight(_ request: Request) -> Response {
        var response = Response(status: .noContent)
        guard let origin = request.headers[.origin], allows(origin) else { return response }
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.accessControlAllowCredentials] = "true"
        response.headers[.accessControlAllowMethods] = "GET, OPTIONS"
        response.headers[.accessControlAllowHeaders] = "Authorization, Content-Type"
        response.headers[.accessControlMaxAge] = "600"
        response.headers.append(HTTPField(name: .vary, value: "Origin"))
        return response
    }
}
