public import HTTPTypes
import Tracing

/// Reads a trace context out of HTTP headers for swift-distributed-tracing.
struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from carrier: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { carrier[$0] }
    }
}

/// Writes a trace context into HTTP headers for swift-distributed-tracing.
struct HTTPFieldsInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout HTTPFields) {
        if let name = HTTPField.Name(key) { carrier[name] = value }
    }
}

extension HTTPField.Name {
    /// Fetch Metadata's purpose header: `prefetch` on every upstream request unless the interface opts out.
    static let secPurpose = HTTPField.Name("Sec-Purpose")!
    /// W3C Trace Context.
    static let traceparent = HTTPField.Name("traceparent")!
    /// W3C Trace Context vendor state, passed on unchanged.
    static let tracestate = HTTPField.Name("tracestate")!
    /// On every stored answer and its replays: `sent` when the upstream request carried the caller's credentials,
    /// `omitted` otherwise (an upstream's own header of that name is dropped).
    public static let prefetchCredentials = HTTPField.Name("X-Prefetch-Credentials")!
}
