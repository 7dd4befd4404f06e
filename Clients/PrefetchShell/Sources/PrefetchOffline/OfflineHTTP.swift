import Foundation
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// GETs of the map and of bodies, through the transport abstraction the SDK's generated client uses
/// (`ClientTransport`; `URLSessionTransport` by default), so the offline package and the page surface share one
/// HTTP stack and its tests run against real local servers.
struct OfflineHTTP: Sendable {
    let transport: any ClientTransport

    /// A session that keeps no cookies and caches nothing: the map and the bodies carry no user state, and the
    /// package verifies and keeps bodies itself.
    init(timeout: Duration) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        configuration.timeoutIntervalForRequest = seconds
        configuration.timeoutIntervalForResource = seconds
        let session = URLSession(configuration: configuration)
        transport = URLSessionTransport(configuration: .init(session: session, httpBodyProcessingMode: .buffered))
    }

    init(transport: any ClientTransport) {
        self.transport = transport
    }

    /// Why a GET gave no body.
    enum Failure: Error, Equatable {
        /// The URL is not an absolute http(s) URL.
        case badURL
        /// The connection failed or timed out.
        case transport
        /// The body was larger than the limit.
        case tooLarge
    }

    /// GETs `url`: its status and at most `limit` bytes of body.
    func get(_ url: URL, limit: Int, operation: String) async throws(Failure) -> (status: Int, body: Data) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let components = URLComponents(url: url, resolvingAgainstBaseURL: true), let host = components.host, !host.isEmpty
        else { throw .badURL }
        var base = URLComponents()
        base.scheme = scheme
        base.host = host
        base.port = components.port
        guard let baseURL = base.url else { throw .badURL }
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }
        let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: path)
        let response: HTTPResponse
        let body: HTTPBody?
        do {
            (response, body) = try await transport.send(request, body: nil, baseURL: baseURL, operationID: operation)
        } catch {
            throw .transport
        }
        guard let body else { return (response.status.code, Data()) }
        if case .known(let length) = body.length, length > limit { throw .tooLarge }
        do {
            return (response.status.code, try await Data(collecting: body, upTo: limit))
        } catch {
            // The buffered transport has the whole body in memory already: collecting fails only over the limit.
            throw .tooLarge
        }
    }
}
