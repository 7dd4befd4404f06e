import CCurl
import HTTPTypes
@_spi(CustomByteBufferAllocator) import NIOCore
import PrefetchCore

#if canImport(Glibc)
import Glibc
#endif

/// Easy handles kept for the next transfer: `curl_easy_reset` returns a handle to its defaults but keeps what it
/// allocated (buffers, the DNS and connection caches belong to the multi handle anyway), so a busy fetcher does not
/// build and free a handle per request. Confined to the loop thread; holds at most `capacity` idle handles.
final class EasyHandlePool {
    private var idle: [UnsafeMutableRawPointer] = []
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = max(0, capacity)
        idle.reserveCapacity(self.capacity)
    }

    deinit {
        for handle in idle { curl_easy_cleanup(handle) }
    }

    /// An idle handle, or a new one (nil only when libcurl is out of memory).
    func take() -> UnsafeMutableRawPointer? {
        idle.popLast() ?? curl_easy_init()
    }

    /// Takes back a handle no multi handle holds: reset and kept, or cleaned up when the pool is full.
    func recycle(_ handle: UnsafeMutableRawPointer) {
        guard idle.count < capacity else {
            curl_easy_cleanup(handle)
            return
        }
        curl_easy_reset(handle)
        idle.append(handle)
    }
}

/// One admitted transfer: a configured easy handle and the response being collected.
///
/// Confined to the loop thread. libcurl's callbacks get an unretained pointer to it; the loop's table keeps it
/// alive until the handle has been removed from the multi handle. Deinit frees the handle, then the lists it used.
final class EasyTransfer {
    let ticket: FetchTicket
    let handle: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var connectToList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let maxResponseBytes: Int
    private let budget: BufferBudget
    private let handles: EasyHandlePool
    /// This transfer may not reuse a pooled connection (a retry after an HTTP/2 framing error).
    let freshConnection: Bool

    fileprivate var responseHeaders = HTTPFields()
    fileprivate var body = ByteBuffer()
    /// The final response's `Content-Length`, when it sent one: the body's storage is sized to it at the first byte.
    fileprivate var announcedLength: Int?
    fileprivate var exceededLimit = false
    /// The shared budget was full when this transfer's body grew (a `.tooLarge` for the service, not the response).
    fileprivate var exceededBudget = false
    /// When the transfer got its slot.
    private let admitted = ContinuousClock.now

    init(
        ticket: FetchTicket, configuration: FetcherConfiguration, budget: BufferBudget, handles: EasyHandlePool, timeout: Duration,
        freshConnection: Bool = false
    ) throws(FetchError) {
        let request = ticket.request
        guard let handle = handles.take() else {
            throw FetchError(code: .other, message: "curl_easy_init failed (host: \(request.hostForMessages))")
        }
        self.ticket = ticket
        self.handle = handle
        self.maxResponseBytes = max(0, request.maxResponseBytes)
        self.budget = budget
        self.handles = handles
        self.freshConnection = freshConnection
        let errorSize = prefetch_error_size()
        errorBuffer = .allocate(capacity: errorSize)
        errorBuffer.initialize(repeating: 0, count: errorSize)

        var failure: CURLcode = CURLE_OK
        func check(_ code: CURLcode) {
            if failure == CURLE_OK, code != CURLE_OK { failure = code }
        }
        let userdata = Unmanaged.passUnretained(self).toOpaque()

        check(prefetch_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
        check(prefetch_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        if freshConnection { check(prefetch_easy_setopt_long(handle, CURLOPT_FRESH_CONNECT, 1)) }
        check(prefetch_easy_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        check(prefetch_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
        check(prefetch_easy_setopt_string(handle, CURLOPT_URL, request.url))
        // A URL libcurl rejects is the caller's input error, reported as such.
        if failure != CURLE_OK {
            let code = failure
            let message = String(cString: curl_easy_strerror(code))
            handles.recycle(handle)
            errorBuffer.deallocate()
            throw FetchError(code: mapCurlCode(code, exceededLimit: false), message: "\(message) (host: \(request.hostForMessages))")
        }
        check(prefetch_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(clamping: timeout.wholeMillisecondsRoundedUp)))
        check(
            prefetch_easy_setopt_long(
                handle,
                CURLOPT_HTTP_VERSION,
                configuration.enableHTTP2 ? prefetch_http_version_2tls() : prefetch_http_version_1_1()
            )
        )
        if configuration.enableHTTP2, request.url.lowercased().hasPrefix("https:") {
            // Wait for a connection that may multiplex rather than opening a parallel one per request.
            check(prefetch_easy_setopt_long(handle, CURLOPT_PIPEWAIT, 1))
        }
        if let caBundlePath = configuration.caBundlePath {
            check(prefetch_easy_setopt_string(handle, CURLOPT_CAINFO, caBundlePath))
        }
        check(
            prefetch_easy_setopt_long(
                handle,
                CURLOPT_DNS_CACHE_TIMEOUT,
                Int(configuration.dnsCacheTimeout.components.seconds)
            )
        )
        check(prefetch_easy_setopt_string(handle, CURLOPT_USERAGENT, configuration.userAgent))
        check(prefetch_easy_setopt_off_t(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxResponseBytes)))

        // Method and body. Bodies are copied into libcurl, so the request may go away.
        let method = request.method
        if let requestBody = request.body {
            check(prefetch_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(requestBody.count)))
            if requestBody.isEmpty {
                check(prefetch_easy_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, ""))
            } else {
                requestBody.withUnsafeBytes { bytes in
                    check(
                        prefetch_easy_setopt_pointer(
                            handle,
                            CURLOPT_COPYPOSTFIELDS,
                            UnsafeMutableRawPointer(mutating: bytes.baseAddress)
                        )
                    )
                }
            }
            if method != "POST" {
                check(prefetch_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method))
            }
        } else if method == "POST" {
            check(prefetch_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, 0))
            check(prefetch_easy_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, ""))
        } else if method == "HEAD" {
            check(prefetch_easy_setopt_long(handle, CURLOPT_NOBODY, 1))
        } else if method != "GET" {
            check(prefetch_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method))
        }

        // Headers in the caller's order. libcurl's own defaults that the caller did not ask for (Accept, the
        // form Content-Type of a body, Expect: 100-continue) are suppressed so the upstream sees the request as
        // composed.
        var lines: [String] = request.headers.map { header in
            header.value.isEmpty ? "\(header.name.rawName);" : "\(header.name.rawName): \(header.value)"
        }
        if !request.headers.contains(.accept) { lines.append("Accept:") }
        if request.body != nil || method == "POST" {
            if !request.headers.contains(.contentType) { lines.append("Content-Type:") }
            if !request.headers.contains(.expect) { lines.append("Expect:") }
        }
        for line in lines {
            headerList = curl_slist_append(headerList, line)
        }
        check(prefetch_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList))
        if let pin = ticket.pin {
            // CURLOPT_CONNECT_TO, not CURLOPT_RESOLVE: RESOLVE would write into the DNS cache every transfer of the
            // multi handle shares; CONNECT_TO changes where this transfer connects and nothing else.
            connectToList = curl_slist_append(connectToList, pin.connectToEntry)
            check(prefetch_easy_setopt_slist(handle, CURLOPT_CONNECT_TO, connectToList))
        }

        check(prefetch_easy_setopt_write_function(handle, receiveBody))
        check(prefetch_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, userdata))
        check(prefetch_easy_setopt_header_function(handle, receiveHeader))
        check(prefetch_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, userdata))

        if failure != CURLE_OK {
            throw FetchError(
                code: .other,
                message: "\(String(cString: curl_easy_strerror(failure))) while configuring (host: \(request.hostForMessages))"
            )
        }
    }

    deinit {
        budget.release(body.readableBytes)
        handles.recycle(handle)
        curl_slist_free_all(headerList)
        curl_slist_free_all(connectToList)
        errorBuffer.deallocate()
    }

    /// Whether any byte of a response (a status line, a header, the body) arrived.
    private(set) var receivedAnything = false

    /// The outcome once libcurl reports the transfer done with `code`.
    func result(code: CURLcode) -> Result<FetchResponse, FetchError> {
        let elapsed = ticket.submitted.duration(to: .now)
        guard code == CURLE_OK else {
            let detail = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
            let errorCode = mapCurlCode(code, exceededLimit: exceededLimit)
            let message: String
            if errorCode == .tooLarge, exceededBudget {
                message = "responses in flight fill the fetcher's budget of \(budget.limit) bytes (host: \(ticket.request.hostForMessages))"
            } else if errorCode == .tooLarge {
                message = "response body exceeds \(maxResponseBytes) bytes (host: \(ticket.request.hostForMessages))"
            } else if errorCode == .timeout {
                message = "\(detail); timeout \(ticket.request.timeout) (host: \(ticket.request.hostForMessages))"
            } else {
                message = "\(detail) (host: \(ticket.request.hostForMessages))"
            }
            return .failure(FetchError(code: errorCode, message: message))
        }
        var status = 0
        _ = prefetch_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var version = 0
        _ = prefetch_easy_getinfo_long(handle, CURLINFO_HTTP_VERSION, &version)
        return .success(
            FetchResponse(
                status: status,
                headers: responseHeaders,
                bodyBuffer: body,
                httpVersion: httpVersionName(version),
                elapsed: elapsed,
                queued: ticket.submitted.duration(to: admitted)
            )
        )
    }

    fileprivate func appendBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        receivedAnything = true
        guard body.readableBytes + bytes.count <= maxResponseBytes else {
            exceededLimit = true
            return false
        }
        guard budget.reserve(bytes.count) else {
            exceededLimit = true
            exceededBudget = true
            return false
        }
        if body.readableBytes == 0, let announcedLength, announcedLength >= bytes.count, announcedLength <= maxResponseBytes,
            let memory = malloc(max(1, announcedLength))
        {
            // One allocation of exactly the announced size (NIO's allocator rounds up to a power of two): appending
            // chunk by chunk would grow the storage by doubling, so a body would be copied several times and could
            // end in storage of up to twice its size; this storage is what the store keeps, as it is.
            body = ByteBuffer(
                takingOwnershipOf: UnsafeMutableRawBufferPointer(start: memory, count: max(1, announcedLength)),
                allocator: Self.allocator)
            // The storage is taken as written bytes: nothing is written yet.
            body.clear()
        }
        body.writeBytes(bytes)
        return true
    }

    /// The default allocator (`malloc`, `realloc`, `free`): it frees the storage `appendBody` hands a body.
    private static let allocator = ByteBufferAllocator()

    fileprivate func appendHeaderLine(_ bytes: UnsafeRawBufferPointer) {
        receivedAnything = true
        // Trim the line ending on bytes: as a String, "\r\n" is one Character.
        var end = bytes.count
        while end > 0, bytes[end - 1] == UInt8(ascii: "\r") || bytes[end - 1] == UInt8(ascii: "\n") { end -= 1 }
        let line = Substring(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<end]), as: UTF8.self))
        if line.isEmpty { return }
        if line.hasPrefix("HTTP/") {
            // A new status line: an interim (1xx) response's headers are not the final response's.
            responseHeaders.removeAll()
            announcedLength = nil
            return
        }
        if let first = line.first, first == " " || first == "\t" {
            // Obsolete line folding: continues the previous header's value.
            if !responseHeaders.isEmpty {
                let continuation = line.trimmingWhitespace()
                responseHeaders[responseHeaders.count - 1].value += " " + continuation
            }
            return
        }
        if let header = headerField(line) {
            if header.name == .contentLength { announcedLength = Int(header.value) }
            responseHeaders.append(header)
        }
    }
}

/// One `name: value` header line as a header field. Whitespace between the name and the colon is removed, as RFC
/// 9112 §5.1 requires of a proxy, so `Set-Cookie : a=1` is the `Set-Cookie` it is to every client (and to the rules
/// that keep cookies private). A line without a colon, or whose name is not a valid field name, is dropped.
func headerField(_ line: Substring) -> HTTPField? {
    guard let colon = line.firstIndex(of: ":") else { return nil }
    guard let name = HTTPField.Name(String(line[..<colon].trimmingWhitespace())) else { return nil }
    return HTTPField(name: name, value: String(line[line.index(after: colon)...].trimmingWhitespace()))
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}

private func receiveBody(
    _ data: UnsafeMutablePointer<CChar>?,
    _ size: Int,
    _ count: Int,
    _ userdata: UnsafeMutableRawPointer?
) -> Int {
    guard let userdata else { return 0 }
    let transfer = Unmanaged<EasyTransfer>.fromOpaque(userdata).takeUnretainedValue()
    let length = size * count
    // Returning less than `length` makes libcurl stop with CURLE_WRITE_ERROR, mapped to .tooLarge.
    return transfer.appendBody(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

private func receiveHeader(
    _ data: UnsafeMutablePointer<CChar>?,
    _ size: Int,
    _ count: Int,
    _ userdata: UnsafeMutableRawPointer?
) -> Int {
    guard let userdata else { return 0 }
    let transfer = Unmanaged<EasyTransfer>.fromOpaque(userdata).takeUnretainedValue()
    let length = size * count
    transfer.appendHeaderLine(UnsafeRawBufferPointer(start: data, count: length))
    return length
}

func httpVersionName(_ version: Int) -> String {
    switch version {
    case CURL_HTTP_VERSION_1_0: "1.0"
    case CURL_HTTP_VERSION_1_1: "1.1"
    case CURL_HTTP_VERSION_2_0: "2"
    case CURL_HTTP_VERSION_3: "3"
    default: "unknown"
    }
}

/// The bounded category of a libcurl failure. `exceededLimit` tells a write error caused by the size cap apart.
func mapCurlCode(_ code: CURLcode, exceededLimit: Bool) -> FetchErrorCode {
    switch code {
    case CURLE_OPERATION_TIMEDOUT:
        return .timeout
    case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
        return .dns
    case CURLE_COULDNT_CONNECT:
        return .connect
    case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
        CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED,
        CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
        CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
        return .tls
    case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE:
        return .reset
    case CURLE_FILESIZE_EXCEEDED:
        return .tooLarge
    case CURLE_WRITE_ERROR:
        return exceededLimit ? .tooLarge : .other
    case CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_HTTP3,
        CURLE_URL_MALFORMAT, CURLE_BAD_CONTENT_ENCODING:
        return .protocol
    case CURLE_ABORTED_BY_CALLBACK:
        return .cancelled
    default:
        return .other
    }
}
