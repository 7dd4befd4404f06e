import Foundation

/// The API description of each surface, served at its `/openapi.yaml`: made at start from the one source,
/// `openapi.yaml` (the repository root's, copied into the resource bundle), keeping the operations tagged with
/// the surface (an operation tagged with both stays in both), its own server and tag; the components stay whole.
package enum OpenAPIDocument {
    /// The whole source, both surfaces.
    package static let bytes: [UInt8] = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"),
            let data = try? Data(contentsOf: url)
        else { return Array("# openapi.yaml is missing from the resource bundle next to the prefetch binary\n".utf8) }
        return Array(data)
    }()

    /// The page surface's document.
    package static let page = surface("page", of: bytes)
    /// The page surface's document with the demo's operations (tagged `demo`), for `--demo`.
    package static let pageWithDemo = surface("page", alsoTagged: "demo", of: bytes)
    /// The operator surface's document.
    package static let `operator` = surface("operator", of: bytes)
    /// The operator surface's document for a listener without `--admin-token`: no operation asks for the bearer
    /// token and none answers `401` (``withoutToken(_:)``).
    package static let operatorWithoutToken = withoutToken(`operator`)

    /// `document` without the admin token: each operation's `security` requirement and its `401` response
    /// (`AdminUnauthorized`) removed, in this repository's layout (`security:` at six spaces with its `- ` items
    /// at eight; a response's status at eight spaces with its `$ref` at ten). The scheme itself stays in the
    /// components, unused.
    package static func withoutToken(_ document: [UInt8]) -> [UInt8] {
        let lines = String(decoding: document, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        var out: [Substring] = []
        var index = 0
        while index < lines.count {
            let line = lines[index]
            if line == "      security:" {
                index += 1
                while index < lines.count, lines[index].hasPrefix("        - ") { index += 1 }
                continue
            }
            if line == "        \"401\":", index + 1 < lines.count, lines[index + 1].hasSuffix("/AdminUnauthorized\"") {
                index += 2
                continue
            }
            out.append(line)
            index += 1
        }
        return Array(out.joined(separator: "\n").utf8)
    }

    /// The document of `surface` (`page` or `operator`) cut from `source`, this repository's own layout: top-level
    /// keys at column 0, servers and tags as `  - ` items, paths at two spaces, operations at four with their
    /// `tags: [...]` at six.
    package static func surface(_ surface: String, alsoTagged extra: String? = nil, of source: [UInt8]) -> [UInt8] {
        let kept: Set<String> = extra.map { [surface, $0] } ?? [surface]
        let lines = String(decoding: source, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        var out: [Substring] = []
        var section = ""
        var item: [Substring] = []
        var path: [Substring] = []
        var operation: [Substring] = []
        var pathKept = false
        var operationKept = false
        // The servers and tags are kept by their description naming the surface's listener or tag.
        func flushItem() {
            defer { item = [] }
            guard let first = item.first else { return }
            let text = item.joined(separator: "\n")
            let keep =
                section == "servers"
                ? text.contains(surface == "page" ? "Page surface" : "Operator surface")
                : kept.contains { first.hasSuffix("name: \($0)") }
            if keep { out += item }
        }
        func flushOperation() {
            defer { operation = [] }
            if operationKept { path += operation }
            operationKept = false
        }
        func flushPath() {
            flushOperation()
            defer { path = [] }
            if pathKept { out += path }
            pathKept = false
        }
        for line in lines {
            if !line.hasPrefix(" "), !line.isEmpty {
                flushItem()
                flushPath()
                section = String(line.prefix { $0 != ":" })
                out.append(line)
                continue
            }
            switch section {
            case "servers", "tags":
                if line.hasPrefix("  - ") { flushItem() }
                if item.isEmpty && !line.hasPrefix("  - ") { out.append(line) } else { item.append(line) }
            case "paths":
                if line.hasPrefix("  /"), !line.hasPrefix("   ") {
                    flushPath()
                    path = [line]
                } else if line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                    // An operation, or a key of the path itself (its `parameters`), which stays with the path.
                    flushOperation()
                    if Self.methods.contains(String(line.dropFirst(4).dropLast())) { operation = [line] } else { path.append(line) }
                } else if !operation.isEmpty {
                    operation.append(line)
                    if line.hasPrefix("      tags: [") {
                        let tags = line.dropFirst("      tags: [".count).prefix { $0 != "]" }.split(separator: ",").map {
                            $0.trimmingCharacters(in: .whitespaces)
                        }
                        if tags.contains(where: kept.contains) {
                            operationKept = true
                            pathKept = true
                        }
                    }
                } else {
                    path.append(line)
                }
            default:
                out.append(line)
            }
        }
        flushItem()
        flushPath()
        return Array(out.joined(separator: "\n").utf8)
    }

    private static let methods: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
}
