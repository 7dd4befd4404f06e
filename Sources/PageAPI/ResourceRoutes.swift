package import HTTPTypes
package import NIOCore
package import ResourceProvider

/// The offline-package provider's routes (docs/offline-packages.md, "Provider"). On the page listener, what shells
/// call: the check `GET /v1/resources?version=V` and the bodies `GET /v1/resources/blob/{sha256}`, both answered from
/// the provider's memory. On the operator listener: `GET /v1/resources/status`. Nothing a caller sends adds a
/// resource or a host: the map comes from the operator's manifest only.
package struct ResourceRoutes: Sendable {
    package let provider: ResourceProvider

    package init(provider: ResourceProvider) {
        self.provider = provider
    }

    /// `GET /v1/resources?version=V`: the map, or what changed since `version` (none or empty: the whole map).
    package func check(version: String?) -> (HTTPResponse.Status, HTTPFields, ByteBuffer) {
        var (status, headers, body) = JSONEncoding.parts(.ok, provider.check(version: version.flatMap { $0.isEmpty ? nil : $0 }))
        headers[.contentLength] = String(body.readableBytes)
        headers[.cacheControl] = "no-cache"
        return (status, headers, body)
    }

}
