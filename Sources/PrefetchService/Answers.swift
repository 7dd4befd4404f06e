import Synchronization
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PrefetchCore
import PrefetchEngine
import PrefetchStore

/// `POST /v1/prefetch`: the ticket, the read key for the page, and what each request is doing.
struct TriggerAnswer: Codable, Sendable {
    struct Request: Codable, Sendable {
        var name: String
        var api: String
        var method: String
        var url: String
        /// `stored` (already there) or `pending`.
        var state: String
        /// `leader`, `joined` or `fresh`.
        var flight: String
    }

    var ticket: String
    var page: String
    var matched: String
    var version: String
    /// What the shell hands its page (a JS bridge or an injected value; never a URL) when the page cannot present
    /// the user's credentials: sent back in `X-Prefetch-Key`, accepted only from the page's origin.
    var readKey: String
    var readKeyExpiresAt: Date
    var requests: [Request]

    init(_ triggered: Triggered) {
        let ticket = triggered.ticket
        let timings = ticket.timings.withLock { $0 }
        self.ticket = ticket.id
        page = ticket.page
        matched = ticket.matched
        version = ticket.version
        readKey = triggered.readKey.value
        readKeyExpiresAt = triggered.readKey.expiresAt
        requests = ticket.requests.indices.map { index in
            let request = ticket.requests[index]
            let origin = timings[index].origin
            return Request(
                name: request.name, api: request.api, method: request.method.rawValue, url: triggered.urls[index],
                state: origin == "fresh" ? "stored" : "pending", flight: origin)
        }
    }
}

/// `GET /v1/prefetch/{ticket}`: every result of a ticket. Upstream bodies are embedded as JSON when they are
/// JSON (so this one answer is written with the JSON writer that keeps number literals exactly), as text when
/// they are UTF-8, else base64. `Set-Cookie` and the upstream's `Access-Control-*` headers are never included:
/// page script may read this answer, and cookies are replayed only as real headers by the data endpoints.
struct ResultsAnswer: ResponseGenerator, Sendable {
    var ticket: Ticket
    var outcomes: [ReadOutcome]
    var timings: [RequestTiming]

    /// Header names never shown in JSON a page can read.
    static func isHidden(_ name: String) -> Bool {
        let lower = name.lowercased()
        return lower == "set-cookie" || lower == "set-cookie2" || lower.hasPrefix("access-control-")
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let results = ticket.requests.indices.map { index in
            result(ticket.requests[index], outcomes[index], timings[index])
        }
        let body = JSONValue.object(JSONObject([
            .init(name: "ticket", value: .string(ticket.id)), .init(name: "page", value: .string(ticket.page)),
            .init(name: "version", value: .string(ticket.version)), .init(name: "results", value: .array(results)),
        ]))
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body.jsonText)))
    }

    func result(_ item: TicketRequest, _ outcome: ReadOutcome, _ timing: RequestTiming) -> JSONValue {
        var members: [JSONObject.Member] = [
            .init(name: "name", value: .string(item.name)), .init(name: "api", value: .string(item.api)),
            .init(name: "method", value: .string(item.method.rawValue)),
        ]
        let elapsed: JSONValue = timing.finishedAt.map { .number(String(($0 - timing.startedAt).milliseconds)) } ?? .null
        switch outcome {
        case .ready(let response, let joined):
            let (encoding, body) = Self.encodeBody(response)
            let headers = response.headers.filter { !Self.isHidden($0.name) }.map { JSONValue.array([.string($0.name), .string($0.value)]) }
            members += [
                .init(name: "state", value: .string("ready")), .init(name: "served", value: .string(joined ? "joined" : "hit")),
                .init(name: "status", value: .number(String(response.status))), .init(name: "headers", value: .array(headers)),
                .init(name: "body", value: body), .init(name: "bodyEncoding", value: .string(encoding)), .init(name: "error", value: .null),
            ]
        case .failed(let failure, _):
            let status: JSONValue = timing.status.map { .number(String($0)) } ?? .null
            members += [
                .init(name: "state", value: .string("failed")), .init(name: "status", value: status),
                .init(name: "error", value: .string(failure.code)), .init(name: "message", value: .string(failure.message)),
            ]
        case .pending:
            members += [.init(name: "state", value: .string("pending")), .init(name: "error", value: .null)]
        case .absent(let reason):
            members += [.init(name: "state", value: .string("missing")), .init(name: "error", value: .string(reason.rawValue))]
        }
        members.append(.init(name: "elapsedMs", value: elapsed))
        return .object(JSONObject(members))
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
}

/// `GET /healthz`.
struct HealthAnswer: JSONAnswer {
    var status = "ok"
}

/// `GET /readyz`.
struct ReadinessAnswer: Codable, Sendable {
    var ready: Bool
    var version: String?
    var reason: String?
    /// `ok` or `degraded`, with a shared store.
    var store: String?
}
