// The WebKit interceptor over the platform-neutral package. Compiled only where WebKit exists (iOS, macOS); Linux CI
// builds and tests everything else, so this file is not compiled there: docs/offline-packages.md says how to use it.
#if canImport(WebKit)
public import Foundation
public import WebKit

/// Answers a webview's requests for a custom scheme from the offline package, and from the network otherwise.
///
/// WebKit hands `WKURLSchemeHandler`s only schemes it does not handle itself, so the shell loads its pages under a
/// scheme of its own (say `offline-https`): the handler maps each request's URL back to the resource URL
/// (`resourceURL`, by default the scheme with its `offline-` prefix removed), answers it from ``OfflinePackage/lookup(url:)``
/// when the map has its verified body, and fetches it otherwise. Register it with
/// `configuration.setURLSchemeHandler(handler, forURLScheme: "offline-https")` before the webview is made.
/// Requests with a body (POST) lose it under a scheme handler before iOS 11.3 only for `Blob` bodies; the page's
/// API calls should stay on https, which the handler never sees.
@MainActor
public final class OfflineSchemeHandler: NSObject, WKURLSchemeHandler {
    private let package: OfflinePackage
    private let resourceURL: @Sendable (URL) -> URL?
    private let session: URLSession
    /// The tasks WebKit has not stopped: an answer to a stopped task would raise an exception.
    private var live: Set<ObjectIdentifier> = []

    /// A handler answering from `package`; `resourceURL` maps a request URL to the resource URL (nil: refuse it).
    public init(
        package: OfflinePackage, session: URLSession = .shared,
        resourceURL: @escaping @Sendable (URL) -> URL? = OfflineSchemeHandler.removingOfflinePrefix
    ) {
        self.package = package
        self.session = session
        self.resourceURL = resourceURL
    }

    /// `offline-https://host/path` to `https://host/path` (and `offline-http` to `http`); nil for other schemes.
    public nonisolated static func removingOfflinePrefix(_ url: URL) -> URL? {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true), let scheme = components.scheme?.lowercased(),
            scheme.hasPrefix("offline-")
        else { return nil }
        components.scheme = String(scheme.dropFirst("offline-".count))
        return components.url
    }

    public func webView(_ webView: WKWebView, start urlSchemeTask: any WKURLSchemeTask) {
        let id = ObjectIdentifier(urlSchemeTask)
        live.insert(id)
        guard let requestURL = urlSchemeTask.request.url, let url = resourceURL(requestURL) else {
            finish(urlSchemeTask, id: id, error: URLError(.unsupportedURL))
            return
        }
        var request = urlSchemeTask.request
        request.url = url
        let (package, session) = (package, session)
        // WebKit calls in from its own callback: the task is the only way back to the main actor after the lookup.
        Task { @MainActor in
            if let resource = await package.lookup(url: url) {
                let response = HTTPURLResponse(
                    url: requestURL, statusCode: 200, httpVersion: "HTTP/1.1",
                    headers: ["Content-Type": resource.contentType, "Content-Length": String(resource.bytes.count)])
                self.answer(urlSchemeTask, id: id, response: response, body: resource.bytes)
                return
            }
            do {
                let (body, network) = try await session.data(for: request)
                let status = (network as? HTTPURLResponse)?.statusCode ?? 200
                var headers: [String: String] = [:]
                for (name, value) in (network as? HTTPURLResponse)?.allHeaderFields ?? [:] {
                    if let name = name as? String, let value = value as? String { headers[name] = value }
                }
                let response = HTTPURLResponse(url: requestURL, statusCode: status, httpVersion: "HTTP/1.1", headers: headers)
                self.answer(urlSchemeTask, id: id, response: response, body: body)
            } catch {
                self.finish(urlSchemeTask, id: id, error: error)
            }
        }
    }

    public func webView(_ webView: WKWebView, stop urlSchemeTask: any WKURLSchemeTask) {
        live.remove(ObjectIdentifier(urlSchemeTask))
    }

    private func answer(_ task: any WKURLSchemeTask, id: ObjectIdentifier, response: HTTPURLResponse?, body: Data) {
        guard live.remove(id) != nil else { return }
        guard let response else {
            task.didFailWithError(URLError(.badServerResponse))
            return
        }
        task.didReceive(response)
        task.didReceive(body)
        task.didFinish()
    }

    private func finish(_ task: any WKURLSchemeTask, id: ObjectIdentifier, error: any Error) {
        guard live.remove(id) != nil else { return }
        task.didFailWithError(error)
    }
}
#endif
