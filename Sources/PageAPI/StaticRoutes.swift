import Foundation
package import HTTPTypes
package import NIOCore
package import PrefetchCore
import PrefetchEngine
import PrefetchStore
import Synchronization

/// The static files pages load from the page surface: the page client (`/v1/client.js`) and, with `--demo` only,
/// the demo shell and page and the demo page's interface list. Static files live in `Resources/web` (plain HTML and
/// JS, no build step) and are read once, on first use.
/// Each answer carries an `ETag` (so a revalidation is a `304`) and `X-Content-Type-Options: nosniff`.
/// `GET /v1/client.js` may be cached for 5 minutes; the HTML is revalidated on every load.
package struct StaticRoutes: Sendable {
    /// The config in force, for the landing page's demo links.
    package let currentConfig: @Sendable () -> PrefetchConfig?
    /// The operator surface's port as configured (0: chosen at start, not linked).
    package let adminPort: Int
    /// Whether the demo is served (`--demo`): without it no `/demo` route exists.
    package let demo: Bool

    package init(currentConfig: @escaping @Sendable () -> PrefetchConfig?, adminPort: Int, demo: Bool) {
        self.currentConfig = currentConfig
        self.adminPort = adminPort
        self.demo = demo
    }

    /// `GET /demo/interfaces?page=URL`: the interfaces the config in force gives `page` (name, api, method), so the
    /// demo page reads only its own configured interfaces and never a URL from its own query.
    package func interfaces(page: String?) throws(APIError) -> DemoInterfaces {
        guard let page, !page.isEmpty else {
            throw APIError.badRequest(.missingPage, "the query parameter \"page\" (the demo page's URL) is required")
        }
        guard let config = currentConfig(), let plan = try? Plan.make(page: page, config: config) else {
            return DemoInterfaces(interfaces: [])
        }
        return DemoInterfaces(
            interfaces: plan.requests.map {
                DemoInterfaces.Interface(name: $0.interface.name, api: $0.interface.api, method: $0.interface.method.rawValue)
            })
    }
}

extension StaticRoutes {
    /// `GET /`: what this service is, where its API is described, and, when the config in force has an entry for
    /// this service's own `/demo/page.html` (the offline demo of `scripts/run.sh`), a link that opens it through the
    /// demo shell, plus the operator surface's waterfall.
    package func landing(authority: String?) -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        let host = authority ?? "127.0.0.1"
        var demos: [String] = []
        for page in demo ? currentConfig()?.pages ?? [] : [] {
            guard let url = try? HTTPURL(parsing: page.url), url.path == "/demo/page.html", !page.interfaces.isEmpty else { continue }
            let query = page.interfaces.map { "api=" + Self.queryValue($0.api) }.joined(separator: "&")
            let names = page.interfaces.map(\.name).joined(separator: ", ")
            demos.append(
                #"<li><a href="/demo/shell.html?\#(Self.html(query))">Open the demo page with prefetch</a> (\#(Self.html(names)))</li>"#)
        }
        let hostName = host.split(separator: ":").first.map(String.init) ?? "127.0.0.1"
        let operatorLink =
            adminPort > 0
            ? #"<a href="http://\#(Self.html(hostName)):\#(adminPort)/ui">the waterfall of recent page opens</a> on the operator surface"#
            : "the waterfall of recent page opens at <code>/ui</code> on the operator surface"
        let body = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Prefetch orchestrator</title>
            <style>body { font: 15px/1.5 system-ui, sans-serif; margin: 2em; max-width: 46em; }</style></head>
            <body>
            <h1>Prefetch orchestrator</h1>
            <p>When a user taps, the app's web shell tells this service which page is opening; the service composes the
            page's API requests from its config and fires them at once, so the page's data is ready when the page asks.</p>
            \(demos.isEmpty ? "<p>No demo page is served (<code>scripts/run.sh</code> without arguments serves one, with <code>--demo</code>).</p>" : "<ul>" + demos.joined() + "</ul>")
            <p>Then see \(operatorLink): each page open, its requests and the page's reads.</p>
            <p>The API: <a href="/openapi.yaml">/openapi.yaml</a>. The page client: <a href="/v1/client.js">/v1/client.js</a>.</p>
            </body></html>
            """
        return (.ok, [.contentType: "text/html; charset=utf-8", .cacheControl: "no-cache"], ByteBuffer(string: body))
    }

    package static func html(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    package static func queryValue(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

/// `GET /demo/interfaces`: a page's configured interfaces.
package struct DemoInterfaces: Codable, Sendable {
    package struct Interface: Codable, Sendable {
        package var name: String
        package var api: String
        package var method: String
    }

    package var interfaces: [Interface]
}
