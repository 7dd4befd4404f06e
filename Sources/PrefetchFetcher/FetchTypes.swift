public import HTTPTypes
public import NIOCore
public import PrefetchCore
import Synchronization

/// A resolved address a transfer connects to: a connection to `host:port` goes to `address` (an IP literal) while
/// the URL, the Host header, SNI, certificate checks and cookie domains all keep `host`. The URL is never rewritten.
public struct AddressPin: Sendable, Hashable {
    /// The host name as the URL names it (lowercased).
    public var host: String
    /// The URL's effective port; the connection goes to the same port at `address`.
    public var port: Int
    /// An IPv4 or IPv6 literal, without brackets.
    public var address: String
    /// The port connected to at `address`: the URL's port unless a tool says otherwise.
    public var connectPort: Int

    /// A pin of `host:port` to `address` (at `connectPort`, by default the same port).
    public init(host: String, port: Int, address: String, connectPort: Int? = nil) {
        self.host = host
        self.port = port
        self.address = address
        self.connectPort = connectPort ?? port
    }
}

/// Supplies the pinned address of a host and learns when one refused a connection (the DNS layer's resolver).
///
/// The fetcher asks `pin(host:port:)` once per fetch, from the caller's task, and calls `connectFailed(_:)` when a
/// pinned fetch failed with `.connect`, so the provider can give the host back to libcurl's own resolution.
public protocol AddressPinning: Sendable {
    /// The pin for a transfer to `host:port`, or nil to let libcurl resolve the name. Must not block.
    func pin(host: String, port: Int) -> AddressPin?
    /// A fetch pinned to `pin` could not connect to its address.
    func connectFailed(_ pin: AddressPin)
}

/// A fully composed upstream request. The fetcher sends it as given: no re-encoding of the URL, headers in order.
public struct FetchRequest: Sendable {
    /// The HTTP method, e.g. "GET" or "POST".
    public var method: String
    /// An absolute http(s) URL, sent exactly as given.
    public var url: String
    /// Request headers, sent in order, exactly.
    public var headers: HTTPFields
    /// The request body; `nil` sends no body.
    public var body: [UInt8]?
    /// The whole budget of the fetch, counted from submission: queueing behind connection limits, connecting and
    /// transferring all count against it.
    public var timeout: Duration
    /// The largest response body accepted; a larger one fails the fetch with `.tooLarge` and returns no body.
    public var maxResponseBytes: Int
    /// Where the connection may be pinned: asked once per fetch for the URL's host and effective port, and told
    /// directly when the pinned address refused the connection. `nil`: libcurl resolves the host itself.
    public var pinning: (any AddressPinning)?
    /// Fetches of one group (one page open) wait in one line; when transfer slots are short, the group admitted
    /// least recently goes next, so one page's burst cannot starve another page. `nil`: the shared default group.
    public var group: String?

    /// Creates a request; only the method and URL are required.
    public init(
        method: String = "GET",
        url: String,
        headers: HTTPFields = [:],
        body: [UInt8]? = nil,
        timeout: Duration = .milliseconds(3000),
        maxResponseBytes: Int = 2 * 1024 * 1024,
        pinning: (any AddressPinning)? = nil,
        group: String? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
        self.pinning = pinning
        self.group = group
    }
}

/// The final upstream response, exactly as received (redirects are not followed, content encodings not decoded).
public struct FetchResponse: Sendable {
    /// The HTTP status code of the final response.
    public var status: Int
    /// Every header of the final response in order, repeated ones (Set-Cookie) kept; no status line.
    public var headers: HTTPFields
    /// The body bytes as the upstream sent them, received straight into this buffer: when the upstream announced
    /// the length, its storage is exactly that size, so a store keeps it as it is, without a copy.
    public var bodyBuffer: ByteBuffer
    /// The body as an array: a copy of ``bodyBuffer``, for readers that need one.
    public var body: [UInt8] {
        get { Array(bodyBuffer.readableBytesView) }
        set { bodyBuffer = ByteBuffer(bytes: newValue) }
    }
    /// The protocol version used: "1.0", "1.1", "2" or "3".
    public var httpVersion: String
    /// Time from submission to completion.
    public var elapsed: Duration
    /// Time from submission until the fetch got a transfer slot (part of `elapsed`).
    public var queued: Duration

    /// Creates a response value.
    public init(status: Int, headers: HTTPFields, body: [UInt8], httpVersion: String, elapsed: Duration, queued: Duration = .zero) {
        self.init(
            status: status, headers: headers, bodyBuffer: ByteBuffer(bytes: body), httpVersion: httpVersion, elapsed: elapsed,
            queued: queued)
    }

    /// Creates a response value around a received body.
    public init(
        status: Int, headers: HTTPFields, bodyBuffer: ByteBuffer, httpVersion: String, elapsed: Duration, queued: Duration = .zero
    ) {
        self.status = status
        self.headers = headers
        self.bodyBuffer = bodyBuffer
        self.httpVersion = httpVersion
        self.elapsed = elapsed
        self.queued = queued
    }
}

/// Why a fetch failed: the fetcher's codes of the service's one failure vocabulary (`timeout`, `dns`, `connect`,
/// `tls`, `reset`, `too-large`, `protocol`, `cancelled`, `shutdown`, `other`). A small, stable set: safe to use as a
/// metric label.
public typealias FetchErrorCode = FailureCode

/// A failed fetch: a bounded `code` plus a human message (libcurl's own message and the URL's host).
public struct FetchError: Error, Sendable, CustomStringConvertible {
    /// The failure category.
    public var code: FetchErrorCode
    /// A human-readable explanation naming the offending host.
    public var message: String

    /// Creates an error.
    public init(code: FetchErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    /// "code: message".
    public var description: String { "\(code.rawValue): \(message)" }
}

/// Tuning for a `Fetcher`. TLS verification cannot be turned off.
public struct FetcherConfiguration: Sendable {
    /// Maximum transfers in flight at once (and maximum open connections); further fetches wait in a queue.
    public var maxTransfers: Int
    /// Maximum connections to one host; `nil` (the default) allows as many as `maxTransfers`, so a page whose
    /// interfaces share one host never queues behind a per-host cap the transfer limit does not impose. Over
    /// HTTP/2 requests to one host share connections (multiplexing) whatever this is.
    public var maxConnectionsPerHost: Int?
    /// Negotiate HTTP/2 over TLS (ALPN) and multiplex requests over one connection where offered. Cleartext
    /// upstreams are spoken to in HTTP/1.1: Debian 12's libcurl 7.88.1 fails every request after the first on a
    /// reused h2c prior-knowledge connection ("Error in the HTTP2 framing layer", with nghttpd as well).
    public var enableHTTP2: Bool
    /// A CA bundle file (PEM) used to verify upstream certificates (CURLOPT_CAINFO), for private upstreams.
    /// It replaces libcurl's default bundle file; Debian's libcurl also keeps its built-in CA directory
    /// (`/etc/ssl/certs`), so public CAs stay trusted there. Verification itself is never switched off.
    public var caBundlePath: String?
    /// How long resolved host names are cached (shared by all transfers).
    public var dnsCacheTimeout: Duration
    /// The User-Agent sent when a request has none of its own.
    public var userAgent: String
    /// Bytes the bodies of all transfers in progress may hold together. A transfer whose body would grow past it
    /// fails with `.tooLarge` (its message names this budget), so memory held by responses still arriving is
    /// bounded whatever the upstreams send. Default: no bound beyond `maxTransfers` x each request's own cap.
    public var maxBufferedBytes: Int
    /// The name of the loop thread (the kernel keeps its first 15 bytes), as `top -H` and `perf` show it: a second
    /// fetcher in the process (the OTLP exporter's) is told apart from the upstream one by it.
    public var threadName: String

    /// The per-host connection limit in force.
    public var effectiveMaxConnectionsPerHost: Int {
        max(1, maxConnectionsPerHost ?? maxTransfers)
    }

    /// Creates a configuration; every parameter has a production default.
    public init(
        maxTransfers: Int = 512,
        maxConnectionsPerHost: Int? = nil,
        enableHTTP2: Bool = true,
        caBundlePath: String? = nil,
        dnsCacheTimeout: Duration = .seconds(60),
        userAgent: String = "prefetch/1",
        maxBufferedBytes: Int = .max,
        threadName: String = "prefetch-curl"
    ) {
        self.maxTransfers = maxTransfers
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.enableHTTP2 = enableHTTP2
        self.caBundlePath = caBundlePath
        self.dnsCacheTimeout = dnsCacheTimeout
        self.userAgent = userAgent
        self.maxBufferedBytes = maxBufferedBytes
        self.threadName = threadName
    }
}

/// The bytes held by response bodies still arriving, against a fixed budget. Reserved on the loop thread as
/// bytes arrive; read from any thread for admission decisions.
final class BufferBudget: Sendable {
    let limit: Int
    private let used = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = max(0, limit)
    }

    /// Takes `count` bytes; false (and nothing taken) when that would exceed the limit.
    func reserve(_ count: Int) -> Bool {
        let after = used.add(count, ordering: .relaxed).newValue
        if after > limit {
            used.subtract(count, ordering: .relaxed)
            return false
        }
        return true
    }

    /// Gives back `count` bytes.
    func release(_ count: Int) {
        if count > 0 { used.subtract(count, ordering: .relaxed) }
    }

    /// Bytes held now.
    var current: Int { used.load(ordering: .relaxed) }
}

extension AddressPin {
    /// The `CURLOPT_CONNECT_TO` entry `HOST:PORT:ADDRESS:CONNECT-PORT` (an IPv6 address in brackets).
    var connectToEntry: String {
        let target = address.contains(":") ? "[\(address)]" : address
        return "\(host):\(port):\(target):\(connectPort)"
    }
}

/// A fixed set of pins: a fetch to a listed host and port connects to its address, anything else resolves as usual.
/// For tools and tests that point a host name at a known address; a refused connection changes nothing.
public struct StaticPins: AddressPinning {
    private let pins: [AddressPin]

    /// Pins each listed host and port to its address.
    public init(_ pins: [AddressPin]) {
        self.pins = pins
    }

    /// The listed pin for `host:port`, if any (host names compared case-insensitively).
    public func pin(host: String, port: Int) -> AddressPin? {
        let name = host.lowercased()
        return pins.first { $0.host.lowercased() == name && $0.port == port }
    }

    /// Nothing to learn: the pins are fixed.
    public func connectFailed(_ pin: AddressPin) {}
}
