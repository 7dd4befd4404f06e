import HTTPTypes
import PrefetchCore

/// An API failure: an HTTP status, a short stable code (also a metric label and the `X-Prefetch-Reason` of a
/// miss) and a message naming the input and what was wrong with it. Rendered as
/// `{"error": "<code>", "message": "<message>"}`.
struct APIError: Error, Sendable {
    var status: HTTPResponse.Status
    var code: String
    var message: String
    /// Whether this is a prefetch miss (so the response carries `X-Prefetch-Reason`).
    var isMiss: Bool = false

    static let notReady = APIError(status: .serviceUnavailable, code: "not-ready", message: "no valid prefetch config is loaded")

    static func badRequest(_ code: String, _ message: String) -> APIError {
        APIError(status: .badRequest, code: code, message: message)
    }

    static func miss(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> APIError {
        APIError(status: status, code: code, message: message, isMiss: true)
    }

    var json: JSONValue {
        .object(JSONObject([.init(name: "error", value: .string(code)), .init(name: "message", value: .string(message))]))
    }
}

/// Small builders for JSON answers.
enum JSON {
    static func object(_ members: [(String, JSONValue)]) -> JSONValue {
        .object(JSONObject(members.map { JSONObject.Member(name: $0.0, value: $0.1) }))
    }

    static func string(_ text: String?) -> JSONValue {
        text.map(JSONValue.string) ?? .null
    }

    static func int(_ value: Int?) -> JSONValue {
        value.map { .number(String($0)) } ?? .null
    }

    static func int64(_ value: Int64) -> JSONValue { .number(String(value)) }

    /// Quotes untrusted text for a message, bounded in length.
    static func quote(_ text: String, limit: Int = 200) -> String {
        let cut = text.count > limit ? String(text.prefix(limit)) + "..." : text
        return JSONValue.string(cut).jsonText
    }
}
