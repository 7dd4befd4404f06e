import Foundation
package import HTTPTypes
package import NIOCore

/// Answers are Codable types rendered with ``JSONEncoding/encoder`` and status 200.
package protocol JSONAnswer: Encodable, Sendable {}

extension JSONAnswer {
    /// The answer as both listeners write it (the page pipeline, and the operator router through `response(from:context:)`).
    package func parts() throws -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        (.ok, [.contentType: "application/json"], ByteBuffer(bytes: try JSONEncoding.encoder.encode(self)))
    }
}

/// A Codable answer with a status other than 200.
package struct Answer<Value: Encodable & Sendable>: Sendable {
    package var status: HTTPResponse.Status
    package var value: Value

}
