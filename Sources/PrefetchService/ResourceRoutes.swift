import HTTPTypes
import Hummingbird
import NIOCore
import ResourceProvider

/// The offline-package provider's routes (docs/offline-packages.md, "Provider"). On the page listener, what shells
/// call: the check `GET /v1/resources?version=V` and the bodies `GET /v1/resources/blob/{sha256}`, both answered from
/// the provider's memory. On the operator listener: `GET /v1/resources/status`. Nothing a caller sends adds a
/// resource or a host: the map comes from the operator's manifest only.
struct ResourceRoutes: Sendable {
    let provider: ResourceProvider

    /// `GET /v1/resources?version=V`: the map, or what changed since `version` (none or empty: the whole map).
    func check(version: String?) -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        var (status, headers, body) = JSONEncoding.parts(.ok, provider.check(version: version.flatMap { $0.isEmpty ? nil : $0 }))
        headers[.contentLength] = String(body.readableBytes)
        headers[.cacheControl] = "no-cache"
        return (status, headers, body)
    }

    var operatorRoutes: RouteCollection<BasicRequestContext> {
        let routes = RouteCollection(context: BasicRequestContext.self)
        routes.get("/v1/resources/status") { _, _ in try JSONEncoding.response(.ok, provider.status()) }
        return routes
    }
}
