import Foundation
import HTTPTypes
import PrefetchCore
public import PrefetchFetcher

/// The two signals this service exports.
public enum OTLPSignal: String, Sendable {
    /// Spans (`/v1/traces`).
    case traces
    /// Metrics (`/v1/metrics`).
    case metrics
}

/// An export request that did not succeed: what happened, and whether sending it again may (a collector that is
/// busy or restarting, a connection that failed) or cannot help.
public struct OTLPSendFailure: Error, Sendable, CustomStringConvertible {
    /// What happened, naming the signal (never a header value).
    public var message: String
    /// Whether a later try may succeed (OTLP/HTTP's retryable statuses 429, 502, 503, 504, or no answer at all).
    public var isRetryable: Bool
    /// How long the collector asked to wait first (`Retry-After`), if it did.
    public var retryAfter: Duration?

    /// A failure of these parts.
    public init(message: String, isRetryable: Bool, retryAfter: Duration? = nil) {
        self.message = message
        self.isRetryable = isRetryable
        self.retryAfter = retryAfter
    }

    /// The message.
    public var description: String { message }
}

/// Delivers encoded export requests (`ExportTraceServiceRequest`, `ExportMetricsServiceRequest`) to a collector.
public protocol OTLPSender: Sendable {
    /// Sends one export request of `signal`; returns when the collector accepted it.
    /// - Throws: ``OTLPSendFailure`` when it did not.
    func send(_ body: [UInt8], signal: OTLPSignal) async throws(OTLPSendFailure)
}

/// OTLP/HTTP through the service's libcurl fetcher: each request a `POST` of `application/x-protobuf` to the
/// signal's URL with its configured headers, bounded by its timeout. TLS is verified as every fetch is.
public struct FetcherSender: OTLPSender {
    let fetcher: Fetcher
    let traces: OTLPConfiguration.Destination
    let metrics: OTLPConfiguration.Destination

    /// A sender through `fetcher` (which must run as a service while it sends) to the configured destinations.
    public init(fetcher: Fetcher, configuration: OTLPConfiguration) {
        self.fetcher = fetcher
        self.traces = configuration.traces
        self.metrics = configuration.metrics
    }

    /// The request that carries `body` for `signal`.
    public func request(_ body: [UInt8], signal: OTLPSignal) -> FetchRequest {
        let destination = signal == .traces ? traces : metrics
        var headers = destination.headers
        headers[.contentType] = "application/x-protobuf"
        return FetchRequest(
            method: "POST", url: destination.url, headers: headers, body: body, timeout: destination.timeout,
            maxResponseBytes: 1024 * 1024)
    }

    /// POSTs `body`; a 2xx is success, anything else an ``OTLPSendFailure`` saying whether to try again.
    public func send(_ body: [UInt8], signal: OTLPSignal) async throws(OTLPSendFailure) {
        let response: FetchResponse
        do {
            response = try await fetcher.fetch(request(body, signal: signal))
        } catch {
            let retryable: Set<FetchErrorCode> = [.timeout, .dns, .connect, .reset]
            throw OTLPSendFailure(message: "\(signal.rawValue) export failed: \(error)", isRetryable: retryable.contains(error.code))
        }
        switch response.status {
        case 200..<300:
            return
        case 429, 502, 503, 504:
            let wait = response.headers[.retryAfter].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map { Duration.seconds($0) }
            throw OTLPSendFailure(
                message: "\(signal.rawValue) export: the collector answered \(response.status)", isRetryable: true, retryAfter: wait)
        default:
            throw OTLPSendFailure(message: "\(signal.rawValue) export: the collector answered \(response.status)", isRetryable: false)
        }
    }
}
