import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PageAPI
import PrefetchCore
import PrefetchEngine
import ResourceProvider

// The page API's types as the operator router (Hummingbird) answers with them: each renders the same parts the page
// pipeline writes (`parts()`), so the two listeners answer alike.

extension Response {
    /// The router's response for an answer's parts as the page API makes them.
    init(parts: (HTTPResponse.Status, HTTPFields, ByteBuffer)) {
        self.init(status: parts.0, headers: parts.1, body: .init(byteBuffer: parts.2))
    }
}

extension APIError: HTTPResponseError {
    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(parts: try parts())
    }
}

/// A `JSONAnswer` the operator router returns: `200` with its JSON.
extension JSONAnswer {
    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(parts: try parts())
    }
}

extension InvalidationRoutes.Dropped: ResponseGenerator {}
extension PoolsAnswer: ResponseGenerator {}

extension Answer: ResponseGenerator {
    func response(from request: Request, context: some RequestContext) throws -> Response {
        try JSONEncoding.response(status, value)
    }
}

extension JSONEncoding {
    /// `value` as an `application/json` response with `status`.
    static func response(_ status: HTTPResponse.Status, _ value: some Encodable) throws -> Response {
        let data = try encoder.encode(value)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension WebFiles {
    /// The file `name` as the operator router answers it (`/ui`), its `ETag` checked against the request's.
    static func response(_ name: String, request: Request) -> Response {
        Response(parts: parts(name, ifNoneMatch: request.headers[.ifNoneMatch]))
    }
}

extension ResourceRoutes {
    var operatorRoutes: RouteCollection<BasicRequestContext> {
        let routes = RouteCollection(context: BasicRequestContext.self)
        routes.get("/v1/resources/status") { _, _ in try JSONEncoding.response(.ok, provider.status()) }
        return routes
    }
}

extension RendererRoutes {
    var statisticsRoutes: RouteCollection<BasicRequestContext> {
        let router = RouteCollection(context: BasicRequestContext.self)
        router.get("/v1/renderers") { _, _ in await snapshot() }
        return router
    }
}

extension InvalidationRoutes {
    var operatorRoutes: RouteCollection<BasicRequestContext> {
        let router = RouteCollection(context: BasicRequestContext.self)
        router.post("/v1/store/invalidate") { request, _ -> Dropped in
            let buffer = try await readBody(request, limit: Self.maximumOperatorBody, timeout: prefetch.bodyTimeout)
            guard case .object(let object)? = try? JSONParser.parse(Array(buffer.readableBytesView)) else {
                throw APIError.badRequest(
                    .badJSON, #"the body must be a JSON object: {"interface": "<name>"} or {"surrogateKey": "<key>"}"#)
            }
            try Self.refuseUnknownMembers(object, known: ["interface", "surrogateKey"])
            switch (object["interface"], object["surrogateKey"]) {
            case (nil, nil):
                throw APIError.badRequest(.missingTarget, #"give one of "interface" (an interface name) or "surrogateKey""#)
            case (.some, .some):
                throw APIError.badRequest(.ambiguousTarget, #"give only one of "interface" and "surrogateKey", not both"#)
            case (.some(let value), nil):
                let name = try Self.interfaceName(value)
                return try await invalidate(interface: name)
            case (nil, .some(let value)):
                let key = try Self.surrogateKey(value)
                return try await invalidate(surrogateKey: key)
            }
        }
        return router
    }
}

/// Reads a request body of at most `limit` bytes, giving up after `timeout`.
func readBody(_ request: Request, limit: Int, timeout: Duration) async throws(APIError) -> ByteBuffer {
    do {
        return try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask {
                var request = request
                return try await request.collectBody(upTo: limit)
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let buffer = first else { throw APIError.bodyTimeout(timeout) }
            return buffer
        }
    } catch let error as APIError {
        throw error
    } catch is NIOTooManyBytesError {
        throw APIError.bodyTooLarge(limit: limit)
    } catch {
        throw APIError.badRequest(.badBody, "the request body could not be read")
    }
}
