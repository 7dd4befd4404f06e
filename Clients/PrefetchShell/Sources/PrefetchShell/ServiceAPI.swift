import Foundation
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession
import PrefetchShellAPI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The generated client of the page surface, with what the document does not describe: the shell's own `Cookie` and
/// `Authorization` headers on its reads and its logout (the document leaves credentials to the transport), and
/// the replayed `Set-Cookie` headers, which the generated types do not carry.
struct ServiceAPI: Sendable {
    let serverURL: URL
    let transport: URLSessionTransport

    /// A session that keeps no cookies (the service's `Set-Cookie` replays must never land in a shared store and go
    /// back to it), caches nothing and follows no redirect (a redirect would carry the user's cookies elsewhere).
    init(serverURL: URL) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let session = URLSession(configuration: configuration, delegate: NoRedirects(), delegateQueue: nil)
        self.serverURL = serverURL
        self.transport = URLSessionTransport(configuration: .init(session: session, httpBodyProcessingMode: .buffered))
    }

    /// The client, sending `credentials` as the request's own headers when given, and handing each response's head
    /// to `capture`.
    func client(credentials: Credentials = .none, capture: ResponseHeads? = nil) -> Client {
        var middlewares: [any ClientMiddleware] = []
        if !credentials.isEmpty { middlewares.append(CredentialHeaders(credentials: credentials)) }
        if let capture { middlewares.append(CaptureResponseHeads(heads: capture)) }
        return Client(serverURL: serverURL, transport: transport, middlewares: middlewares)
    }
}

/// Refuses every redirect: the answer is the redirect itself.
final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

/// Adds the user's credential headers to a request.
struct CredentialHeaders: ClientMiddleware {
    let credentials: Credentials

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        for field in credentials.fields {
            if let name = HTTPField.Name(field.name) { request.headerFields[name] = field.value }
        }
        return try await next(request, body, baseURL)
    }
}

/// The heads of the responses one client received, in arrival order.
actor ResponseHeads {
    private(set) var heads: [HTTPResponse] = []

    func append(_ head: HTTPResponse) {
        heads.append(head)
    }
}

/// Hands each response head to a ``ResponseHeads``, before the generated code decodes the body.
struct CaptureResponseHeads: ClientMiddleware {
    let heads: ResponseHeads

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, responseBody) = try await next(request, body, baseURL)
        await heads.append(response)
        return (response, responseBody)
    }
}

/// A refusal's error body (`{"error", "message"}`), on the responses that have one.
protocol ErrorAnswer {
    var errorBody: Components.Schemas._Error? { get }
}

extension ErrorAnswer {
    /// The error code, or `status-<code>` when the body is not the error shape.
    func code(status: Int) -> String { errorBody?.error ?? "status-\(status)" }
}

extension Components.Responses.PageBadRequest: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.OriginNotAllowed: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.NoConfig: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.BodyTimeout: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.TooLarge: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.HeadTooLarge: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.UnsupportedMediaType: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.RateLimited: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.Unavailable: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.CredentialsRequired: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.StoreUnavailable: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
extension Components.Responses.PageError: ErrorAnswer { var errorBody: Components.Schemas._Error? { try? body.json } }
