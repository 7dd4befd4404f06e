import Foundation
import HTTPTypes
import Hummingbird
import PageAPI
import PrefetchCore
import PrefetchEngine

/// Answers requests that no route takes in the API's error shape instead of the router's empty 404:
/// `405 method-not-allowed` with `Allow` when the path is an endpoint of this surface in `openapi.yaml` under
/// other methods (RFC 9110 §15.5.6), else `404 not-found`. Both bodies are `{"error", "message"}` like every
/// other error. An operation belongs to the surface its first tag names (`page` or `operator`).
struct UnmatchedRouteMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The surface's endpoints, as `openapi.yaml` lists them.
    let table: EndpointTable

    init(surface: String, spec: [UInt8] = OpenAPIDocument.bytes) {
        table = EndpointTable(surface: surface, spec: spec)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            // Handlers render their own misses as responses; a thrown 404 is the router finding no route.
            let methods = table.allowedMethods(path: request.uri.path)
            guard !methods.isEmpty else {
                let message = "no endpoint at \(quoted(request.uri.path, limit: 120)); see /openapi.yaml"
                return try APIError(status: .notFound, code: .notFound, message: message).response(from: request, context: context)
            }
            let allow = methods.joined(separator: ", ")
            let message = "\(request.method.rawValue) is not allowed on \(quoted(request.uri.path, limit: 120)); allowed: \(allow)"
            var response = try APIError(status: .methodNotAllowed, code: .methodNotAllowed, message: message).response(
                from: request, context: context)
            response.headers[.allow] = allow
            return response
        }
    }
}
