import Foundation
import HTTPTypes
import Hummingbird
import PrefetchCore
import PrefetchEngine

/// Answers requests that no route takes in the API's error shape instead of the router's empty 404:
/// `405 method-not-allowed` with `Allow` when the path is an endpoint of this surface in `openapi.yaml` under
/// other methods (RFC 9110 §15.5.6), else `404 not-found`. Both bodies are `{"error", "message"}` like every
/// other error. An operation belongs to the surface its first tag names (`page` or `operator`).
struct UnmatchedRouteMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Each endpoint's path segments (`nil` for a `{parameter}`) and its methods, as the spec lists them.
    let endpoints: [(segments: [String?], methods: [String])]

    init(surface: String, spec: [UInt8] = OpenAPIDocument.bytes) {
        endpoints = Self.endpoints(in: String(decoding: spec, as: UTF8.self), surface: surface)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            // Handlers render their own misses as responses; a thrown 404 is the router finding no route.
            let methods = allowedMethods(path: request.uri.path)
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

    /// The methods of the endpoint whose template matches `path`, or none.
    func allowedMethods(path: String) -> [String] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        for endpoint in endpoints where endpoint.segments.count == segments.count {
            let matches = zip(endpoint.segments, segments).allSatisfy { template, segment in
                template.map { $0 == segment } ?? !segment.isEmpty
            }
            if matches { return endpoint.methods }
        }
        return []
    }

    /// Reads the `paths` section of the spec (this repository's own layout: paths at two spaces, operations at
    /// four, their `tags: [surface]` at six), so the endpoints known here are exactly the documented ones.
    static func endpoints(in spec: String, surface: String) -> [(segments: [String?], methods: [String])] {
        let operations: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
        var result: [(segments: [String?], methods: [String])] = []
        var inPaths = false
        var pending: String?
        for line in spec.split(separator: "\n", omittingEmptySubsequences: true) {
            if !line.hasPrefix(" ") {
                inPaths = line.hasPrefix("paths:")
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), !line.hasPrefix("   "), line.hasSuffix(":") {
                let template = line.dropFirst(2).dropLast()
                let segments = template.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { segment -> String? in
                    segment.hasPrefix("{") && segment.hasSuffix("}") ? nil : String(segment)
                }
                result.append((segments, []))
                pending = nil
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":"), !result.isEmpty {
                let key = String(line.dropFirst(4).dropLast())
                pending = operations.contains(key) ? key.uppercased() : nil
            } else if line.hasPrefix("      tags: ["), let method = pending, !result.isEmpty {
                let tags = line.dropFirst("      tags: [".count).prefix { $0 != "]" }.split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                if tags.contains(surface) { result[result.count - 1].methods.append(method) }
                pending = nil
            }
        }
        return result.filter { !$0.methods.isEmpty }
    }
}
