import CCurl
import HTTPTypes
@_spi(CustomByteBufferAllocator) import NIOCore
import PrefetchCore

#if canImport(Glibc)
import Glibc
#endif

/// Easy handles kept for the next transfer: `curl_easy_reset` returns a handle to its defaults but keeps what it
/// allocated (buffers, the DNS and connection caches belong to the multi handle anyway), so a busy fetcher does not
/// build and free a handle per request. Each handle keeps its error buffer too, and the pool holds what every
/// transfer sets the same way (the `User-Agent` as a C string: a short Swift string is copied into a new array at
/// each call into C). Confined to the loop thread; holds at most `capacity` idle handles.
final class EasyHandlePool {
    /// An easy handle and the buffer libcurl writes its error messages into (`CURLOPT_ERRORBUFFER`).
    struct Handle {
        let easy: UnsafeMutableRawPointer
        let errorBuffer: UnsafeMutablePointer<CChar>
    }

    private var idle: [Handle] = []
    private let capacity: Int
    /// The `User-Agent` every transfer sends, NUL-terminated.
    let userAgent: ContiguousArray<CChar>

    init(capacity: Int, userAgent: String) {
        self.capacity = max(0, capacity)
        self.userAgent = userAgent.utf8CString
        idle.reserveCapacity(self.capacity)
    }

    deinit {
        for handle in idle { Self.free(handle) }
    }

    /// An idle handle, or a new one (nil only when libcurl is out of memory). Its error buffer holds an empty string.
    func take() -> Handle? {
        if let handle = idle.popLast() { return handle }
        guard let easy = curl_easy_init() else { return nil }
        let size = prefetch_error_size()
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
        errorBuffer.initialize(repeating: 0, count: size)
        return Handle(easy: easy, errorBuffer: errorBuffer)
    }

    /// Takes back a handle no multi handle holds: reset and kept, or cleaned up when the pool is full.
    func recycle(_ handle: Handle) {
        guard idle.count < capacity else { return Self.free(handle) }
        curl_easy_reset(handle.easy)
        handle.errorBuffer.pointee = 0
        idle.append(handle)
    }

    private static func free(_ handle: Handle) {
        curl_easy_cleanup(handle.easy)
        handle.errorBuffer.deallocate()
    }
}

/// One admitted transfer: a configured easy handle and the response being collected.
///
/// Confined to the loop thread. libcurl's callbacks get an unretained pointer to it; the loop's table keeps it
/// alive until the handle has been removed from the multi handle. Deinit gives the handle back to the pool (reset, so it points at them no more), then frees the lists it used.
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
        guard let pooled = handles.take() else {
            throw FetchError(code: .other, message: "curl_easy_init failed (host: \(request.hostForMessages))")
        }
        let handle = pooled.easy
        self.ticket = ticket
        self.handle = handle
        self.errorBuffer = pooled.errorBuffer
        self.maxResponseBytes = max(0, request.maxResponseBytes)
        self.budget = budget
        self.handles = handles
        self.freshConnection = freshConnection

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
            handles.recycle(EasyHandlePool.Handle(easy: handle, errorBuffer: errorBuffer))
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
        var url = request.url
        let isHTTPS = url.withUTF8 { $0.count >= 6 && ByteText($0).equalsIgnoringASCIICase(0..<6, "https:") }
        if configuration.enableHTTP2, isHTTPS {
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
        check(handles.userAgent.withUnsafeBufferPointer { prefetch_easy_setopt_string(handle, CURLOPT_USERAGENT, $0.baseAddress) })
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
        // Each line is written into a stack buffer and copied by libcurl: no array and no string per line.
        for header in request.headers {
            headerList = Self.appendHeaderLine(headerList, header)
        }
        if !request.headers.contains(.accept) { headerList = curl_slist_append(headerList, "Accept:") }
        if request.body != nil || method == "POST" {
            if !request.headers.contains(.contentType) { headerList = curl_slist_append(headerList, "Content-Type:") }
            if !request.headers.contains(.expect) { headerList = curl_slist_append(headerList, "Expect:") }
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
        handles.recycle(EasyHandlePool.Handle(easy: handle, errorBuffer: errorBuffer))
        curl_slist_free_all(headerList)
        curl_slist_free_all(connectToList)
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

    /// Appends `field` to `list` as a request header line, `name: value` (`name;`, libcurl's spelling of a header
    /// sent with an empty value, when the value is empty), written NUL-terminated into a temporary buffer that
    /// libcurl copies: no string is made for the line or the value.
    private static func appendHeaderLine(
        _ list: UnsafeMutablePointer<curl_slist>?, _ field: HTTPField
    ) -> UnsafeMutablePointer<curl_slist>? {
        var name = field.name.rawName
        return name.withUTF8 { name in
            field.withUnsafeBytesOfValue { value in
                let length = name.count + (value.isEmpty ? 1 : 2 + value.count)
                return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length + 1) { line in
                    var at = line.initialize(fromContentsOf: name)
                    if value.isEmpty {
                        line[at] = UInt8(ascii: ";")
                        at += 1
                    } else {
                        line[at] = UInt8(ascii: ":")
                        line[at + 1] = UInt8(ascii: " ")
                        at += 2
                        at += UnsafeMutableBufferPointer(rebasing: line[at...]).initialize(fromContentsOf: value)
                    }
                    line[at] = 0
                    return line.withMemoryRebound(to: CChar.self) { curl_slist_append(list, $0.baseAddress) }
                }
            }
        }
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
            // Room for a usual response's headers at the first one, rather than growing the storage at the 2nd, 3rd,
            // 5th, 9th...
            if responseHeaders.isEmpty { responseHeaders.reserveCapacity(16) }
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
