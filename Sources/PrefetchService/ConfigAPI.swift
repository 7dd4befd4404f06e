import ConfigUpdater
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PrefetchCore

/// `GET /v1/config` (what is loaded, from where, how the checks go) and `POST /v1/config/refresh` (what a
/// shell calls on app start, foreground, page open or page exit; the fatigue window keeps it cheap).
struct ConfigAPI: Sendable {
    let updater: ConfigUpdater?
    let currentConfig: @Sendable () -> PrefetchConfig?
    let source: String

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("/v1/config") { _, _ in
            guard let updater else {
                // A fixed config (given in code): no checks happen.
                let loaded = currentConfig()
                return jsonResponse(loaded == nil ? .serviceUnavailable : .ok, JSON.object([
                    ("name", JSON.string(loaded?.name)), ("version", JSON.string(loaded?.version)), ("source", .string(source)),
                    ("active", .string(loaded == nil ? "none" : "primary")), ("ready", .bool(loaded != nil)),
                ]))
            }
            return Self.encoded(.ok, updater.status())
        }
        router.post("/v1/config/refresh") { request, _ in
            var request = request
            let buffer = (try? await request.collectBody(upTo: 4096)) ?? ByteBuffer()
            var trigger = RefreshTrigger.manual
            if buffer.readableBytes > 0 {
                guard case .object(let object)? = try? JSONParser.parse(Array(buffer.readableBytesView)) else {
                    return jsonResponse(.badRequest, APIError.badRequest("bad-json", "the body must be a JSON object like {\"trigger\": \"page_open\"}").json)
                }
                switch object["trigger"] {
                case nil: break
                case .string(let text)?:
                    guard let parsed = RefreshTrigger(rawValue: text) else {
                        let known = RefreshTrigger.allCases.map(\.rawValue).joined(separator: ", ")
                        return jsonResponse(.badRequest, APIError.badRequest("bad-trigger", "trigger \(JSON.quote(text, limit: 40)) is not one of \(known)").json)
                    }
                    trigger = parsed
                case .some(let other):
                    return jsonResponse(.badRequest, APIError.badRequest("bad-trigger", "\"trigger\" must be a string, got \(other.kindName)").json)
                }
            }
            guard let updater else {
                return jsonResponse(.conflict, APIError(status: .conflict, code: "fixed-config", message: "this service runs a fixed config; there is no source to check").json)
            }
            let result = await updater.refresh(trigger: trigger)
            struct Answer: Encodable {
                var outcome: String
                var coalesced: Bool
                var errors: [String]
                var status: ConfigStatus
            }
            return Self.encoded(.ok, Answer(outcome: result.outcome.rawValue, coalesced: result.coalesced, errors: result.errors.map(\.message), status: result.status))
        }
    }

    static func encoded(_ status: HTTPResponse.Status, _ value: some Encodable) -> Response {
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
