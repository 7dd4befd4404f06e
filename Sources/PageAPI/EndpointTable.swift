import Foundation
import PrefetchCore

/// The endpoints of one surface (`page` or `operator`) as `openapi.yaml` lists them: what a `405` allows, and
/// whether a path is an endpoint at all (`404`). An operation belongs to the surface its first tag names.
package struct EndpointTable: Sendable {
    /// Each endpoint's path segments (`nil` for a `{parameter}`) and its methods, as the spec lists them.
    package let endpoints: [(segments: [String?], methods: [String])]

    package init(surface: String, spec: [UInt8] = OpenAPIDocument.bytes) {
        endpoints = Self.endpoints(in: String(decoding: spec, as: UTF8.self), surface: surface)
    }

    /// The methods of the endpoint whose template matches `path`, or none.
    package func allowedMethods(path: String) -> [String] {
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
    package static func endpoints(in spec: String, surface: String) -> [(segments: [String?], methods: [String])] {
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
