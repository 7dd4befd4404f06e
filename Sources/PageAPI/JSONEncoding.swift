package import Foundation
package import HTTPTypes
package import NIOCore
import PrefetchCore

/// The JSON encoder every answer goes through: keys in a stable (sorted) order, no escaped slashes, ISO 8601 dates.
package enum JSONEncoding {
    package static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// `value` as an `application/json` answer with `status`: its status, fields and body.
    package static func parts(_ status: HTTPResponse.Status, _ value: some Encodable) -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        do {
            return (status, [.contentType: "application/json"], ByteBuffer(bytes: try encoder.encode(value)))
        } catch {
            let failure = APIError(status: .internalServerError, code: .other, message: "the answer could not be encoded")
            return (
                .internalServerError, [.contentType: "application/json"], ByteBuffer(bytes: (try? encoder.encode(failure.body)) ?? Data())
            )
        }
    }

}
