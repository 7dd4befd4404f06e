import Foundation
import HTTPTypes
import Hummingbird

/// Answers are Codable types rendered with ``JSONEncoding/encoder`` and status 200.
protocol JSONAnswer: ResponseEncodable, Sendable {}

extension JSONAnswer {
    func response(from request: Request, context: some RequestContext) throws -> Response {
        let (status, headers, body) = try parts()
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    /// The answer as the routed path and the event loop's fast path both write it.
    func parts() throws -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        (.ok, [.contentType: "application/json"], ByteBuffer(bytes: try JSONEncoding.encoder.encode(self)))
    }
}

/// A Codable answer with a status other than 200.
struct Answer<Value: Encodable & Sendable>: ResponseGenerator, Sendable {
    var status: HTTPResponse.Status
    var value: Value

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try JSONEncoding.response(status, value)
    }
}
