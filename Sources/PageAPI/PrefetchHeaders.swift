package import HTTPTypes
import PrefetchEngine

/// The product's own headers.
package enum PrefetchHeaders {
    /// How a replay was served: `hit` or `joined`.
    package static let served = HTTPField.Name("X-Prefetch")!
    /// Why a read missed (the error code).
    package static let reason = HTTPField.Name("X-Prefetch-Reason")!
    /// A page's read key.
    package static let readKey = HTTPField.Name(TicketAccess.readKeyHeader)!
    package static let contentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
    package static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    package static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
}
