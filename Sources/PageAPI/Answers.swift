package import Foundation
package import HTTPTypes
package import NIOCore
package import PrefetchCore
package import PrefetchEngine
package import PrefetchStore
import Synchronization

/// `POST /v1/prefetch`: the ticket, the read key for the page, and what each request is doing.
package struct TriggerAnswer: Codable, Sendable {
    package struct Request: Codable, Sendable {
        /// Whether a request's response was already there when the page was triggered.
        package enum State: String, Codable, Sendable {
            case stored
            case pending
        }

        package var name: String
        package var api: String
        package var method: String
        package var url: String
        package var state: State
        /// `leader`, `joined` or `fresh` (`remote` only for a ticket read back from another replica, never here).
        package var flight: FlightRole
    }

    package var ticket: String
    package var page: String
    package var matched: String
    package var version: String
    /// What the shell hands its page (a JS bridge or an injected value; never a URL) when the page cannot present
    /// the user's credentials: sent back in `X-Prefetch-Key`, accepted only from the page's origin.
    package var readKey: String
    package var readKeyExpiresAt: Date
    package var requests: [Request]

    package init(_ triggered: Triggered) {
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
                state: origin == .fresh ? .stored : .pending, flight: origin)
        }
    }
}

/// `POST /v1/prefetch`'s 202: the ``TriggerAnswer`` written with ``JSONBytesWriter`` (the trigger is on every
/// page open's path; `JSONEncoder` was a tenth of its CPU). Same bytes as ``JSONEncoding/encoder`` would write: keys
/// sorted, the date in ISO 8601 (a test holds the two to each other).
package struct TriggerResponse: Sendable {
    package var answer: TriggerAnswer

    /// The answer as both listeners write it (the page pipeline, and the operator router through `response(from:context:)`).
    package func parts() -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        (.accepted, [.contentType: "application/json"], ByteBuffer(bytes: bytes()))
    }

    package func bytes() -> [UInt8] {
        var writer = JSONBytesWriter(capacity: 512 + answer.requests.count * 256)
        writer.beginObject()
        writer.key("matched")
        writer.string(answer.matched)
        writer.key("page")
        writer.string(answer.page)
        writer.key("readKey")
        writer.string(answer.readKey)
        writer.key("readKeyExpiresAt")
        writer.string(answer.readKeyExpiresAt.formatted(.iso8601))
        writer.key("requests")
        writer.beginArray()
        for item in answer.requests {
            writer.beginObject()
            writer.key("api")
            writer.string(item.api)
            writer.key("flight")
            writer.string(item.flight.rawValue)
            writer.key("method")
            writer.string(item.method)
            writer.key("name")
            writer.string(item.name)
            writer.key("state")
            writer.string(item.state.rawValue)
            writer.key("url")
            writer.string(item.url)
            writer.endObject()
        }
        writer.endArray()
        writer.key("ticket")
        writer.string(answer.ticket)
        writer.key("version")
        writer.string(answer.version)
        writer.endObject()
        return writer.bytes
    }
}

/// `GET /v1/prefetch/{ticket}`: every result of a ticket. Upstream bodies are embedded as they are when they are
/// JSON (checked by a validator that builds nothing, then spliced as bytes: no parse and re-serialisation), as
/// text when they are UTF-8, else base64. `Set-Cookie` and the upstream's `Access-Control-*` headers are never
/// included: page script may read this answer, and cookies are replayed only as real headers by the data endpoints.
/// Written with ``JSONBytesWriter`` rather than an `Encodable` type because of the spliced bodies.
package struct ResultsAnswer: Sendable {
    package var ticket: Ticket
    package var outcomes: [ReadOutcome]
    package var timings: [RequestTiming]

    /// Header names never shown in JSON a page can read.
    package static func isHidden(_ name: HTTPField.Name) -> Bool {
        let lower = name.canonicalName
        return lower == "set-cookie" || lower == "set-cookie2" || lower.hasPrefix("access-control-")
    }

    /// The answer as both listeners write it (the page pipeline, and the operator router through `response(from:context:)`).
    package func parts() -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        var writer = JSONBytesWriter(
            capacity: 512
                + outcomes.reduce(0) { total, outcome in
                    if case .ready(let response, _) = outcome { return total + response.bodyCount + 256 }
                    return total + 128
                })
        writer.beginObject()
        writer.key("ticket")
        writer.string(ticket.id)
        writer.key("page")
        writer.string(ticket.page)
        writer.key("version")
        writer.string(ticket.version)
        writer.key("results")
        writer.beginArray()
        for index in ticket.requests.indices {
            write(ticket.requests[index], outcomes[index], timings[index], into: &writer)
        }
        writer.endArray()
        writer.endObject()
        return (.ok, [.contentType: "application/json"], ByteBuffer(bytes: writer.bytes))
    }

    package func write(_ item: TicketRequest, _ outcome: ReadOutcome, _ timing: RequestTiming, into writer: inout JSONBytesWriter) {
        writer.beginObject()
        writer.key("name")
        writer.string(item.name)
        writer.key("api")
        writer.string(item.api)
        writer.key("method")
        writer.string(item.method.rawValue)
        switch outcome {
        case .ready(let response, let joined):
            writer.key("state")
            writer.string("ready")
            writer.key("served")
            writer.string(joined ? "joined" : "hit")
            writer.key("status")
            writer.integer(Int64(response.status))
            writer.key("headers")
            writer.beginArray()
            for header in response.headers where !Self.isHidden(header.name) {
                writer.beginArray()
                writer.string(header.name.rawName)
                writer.string(header.value)
                writer.endArray()
            }
            writer.endArray()
            writer.key("body")
            let encoding = Self.writeBody(response, into: &writer)
            writer.key("bodyEncoding")
            writer.string(encoding)
            writer.key("error")
            writer.null()
        case .failed(let failure, _):
            writer.key("state")
            writer.string("failed")
            writer.key("status")
            if let status = timing.status { writer.integer(Int64(status)) } else { writer.null() }
            writer.key("error")
            writer.string(failure.code.rawValue)
            writer.key("message")
            writer.string(failure.message)
        case .pending:
            writer.key("state")
            writer.string("pending")
            writer.key("error")
            writer.null()
        case .absent(let reason):
            writer.key("state")
            writer.string("missing")
            writer.key("error")
            writer.string(reason.rawValue)
        }
        writer.key("elapsedMs")
        if let finished = timing.finishedAt { writer.integer((finished - timing.startedAt).milliseconds) } else { writer.null() }
        writer.endObject()
    }

    /// Writes the body as JSON when it is JSON, as text when it is UTF-8, else base64; returns which.
    /// Whether a `Content-Type` value says JSON: `json` anywhere in it, in any letter case (`application/json`,
    /// `application/problem+json`, `text/JSON`), read on its bytes.
    package static func namesJSON(_ contentType: HTTPField) -> Bool {
        contentType.withUnsafeBytesOfValue { value in
            let text = ByteText(value)
            return value.count >= 4 && (0...(value.count - 4)).contains { text.equalsIgnoringASCIICase($0..<($0 + 4), "json") }
        }
    }

    package static func writeBody(_ response: StoredResponse, into writer: inout JSONBytesWriter) -> String {
        let json = response.headers.first { $0.name == .contentType }.map(Self.namesJSON) ?? false
        // Straight from the stored body's storage: validated and spliced without a copy.
        let spliced = response.bodyBuffer.withUnsafeReadableBytes { raw -> Bool in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard json, JSONBytes.isValid(bytes) else { return false }
            writer.raw(bytes)
            return true
        }
        if spliced { return "json" }
        let body = response.body
        if let text = String(validating: body, as: UTF8.self) {
            writer.string(text)
            return "text"
        }
        writer.string(Data(body).base64EncodedString())
        return "base64"
    }
}

extension ResultsAnswer {
    /// The answer as a client reads it (`openapi.yaml` `Results`): what ``parts()`` writes, decoded. It encodes the
    /// same members back (the nulls the writer writes included), so a test can hold it to the written bytes.
    package struct Body: Codable, Sendable, Equatable {
        package var ticket: String
        package var page: String
        package var version: String
        package var results: [Result]
    }

    /// One request's result in ``Body`` (`openapi.yaml` `Result`).
    package struct Result: Codable, Sendable, Equatable {
        package enum State: String, Codable, Sendable { case pending, ready, failed, missing }
        package enum Served: String, Codable, Sendable { case hit, joined }
        package enum BodyEncoding: String, Codable, Sendable { case json, text, base64 }

        package var name: String
        package var api: String
        package var method: String
        package var state: State
        /// How a ready result was served.
        package var served: Served?
        /// The upstream's status: ready, and failed when the upstream answered.
        package var status: Int?
        /// The upstream's response headers in order, as `[name, value]` pairs (ready).
        package var headers: [[String]]?
        /// The upstream's body (ready): its JSON when `bodyEncoding` is `json`, else a string.
        package var body: Value?
        package var bodyEncoding: BodyEncoding?
        /// The failure code (failed) or why nothing is there (missing).
        package var error: String?
        /// What failed (failed).
        package var message: String?
        /// How long the fetch took; nil while it is in flight.
        package var elapsedMs: Int?

        private enum CodingKeys: String, CodingKey {
            case name, api, method, state, served, status, headers, body, bodyEncoding, error, message, elapsedMs
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(api, forKey: .api)
            try container.encode(method, forKey: .method)
            try container.encode(state, forKey: .state)
            try container.encodeIfPresent(served, forKey: .served)
            // A failure without an upstream answer says `"status": null`; pending and missing results say nothing.
            if state == .failed {
                try container.encode(status, forKey: .status)
            } else {
                try container.encodeIfPresent(status, forKey: .status)
            }
            try container.encodeIfPresent(headers, forKey: .headers)
            // A ready result always has a body: decoding reads an upstream's JSON `null` as nil.
            if bodyEncoding != nil { try container.encode(body ?? .null, forKey: .body) }
            try container.encodeIfPresent(bodyEncoding, forKey: .bodyEncoding)
            try container.encode(error, forKey: .error)
            try container.encodeIfPresent(message, forKey: .message)
            try container.encode(elapsedMs, forKey: .elapsedMs)
        }
    }

    /// A JSON value in a ``Result``'s body, as it decodes (numbers as `Double`).
    package enum Value: Codable, Sendable, Equatable {
        case null
        case bool(Bool)
        case number(Double)
        case string(String)
        case array([Value])
        case object([String: Value])

        package init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Double.self) {
                self = .number(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else if let values = try? container.decode([Value].self) {
                self = .array(values)
            } else {
                self = .object(try container.decode([String: Value].self))
            }
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let value): try container.encode(value)
            case .number(let value): try container.encode(value)
            case .string(let value): try container.encode(value)
            case .array(let values): try container.encode(values)
            case .object(let members): try container.encode(members)
            }
        }

        /// The member `name` of an object.
        package subscript(name: String) -> Value? {
            if case .object(let members) = self { members[name] } else { nil }
        }

        /// The string, when this is one (a text or base64 body, or a string in a JSON one).
        package var string: String? {
            if case .string(let value) = self { value } else { nil }
        }
    }
}

/// `GET /healthz`.
package struct HealthAnswer: JSONAnswer, Decodable {
    package var status = "ok"
}

/// `GET /readyz` on the page listener: ready or not, and a code. Nothing else: the page listener is reachable from
/// where pages are, so why a replica is not ready (a config URL, a store address, an error text) is told only on
/// the operator listener (`GET /v1/config`, `GET /v1/debug/status`).
package struct ReadinessAnswer: Codable, Sendable {
    /// `ok` (ready), `degraded` (ready, the shared store unreachable: each replica serves on its own) or
    /// `no-config` (no valid prefetch config is loaded).
    package enum Code: String, Codable, Sendable {
        case ok
        case degraded
        case noConfig = "no-config"
    }

    package var ready: Bool
    package var code: Code
}
