import HTTPTypes
import PrefetchEngine

/// The product's own headers.
enum PrefetchHeaders {
    /// How a replay was served: `hit` or `joined`.
    static let served = HTTPField.Name("X-Prefetch")!
    /// Why a read missed (the error code).
    static let reason = HTTPField.Name("X-Prefetch-Reason")!
    /// A page's read key.
    static let readKey = HTTPField.Name(TicketAccess.readKeyHeader)!
    static let contentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
}
