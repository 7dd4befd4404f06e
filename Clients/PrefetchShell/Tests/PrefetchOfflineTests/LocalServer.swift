import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real HTTP/1.1 server on 127.0.0.1 at a port the kernel picks, one connection at a time on a thread of its own
/// (`Connection: close`). Its answers are set per path (query left out) and may change during a test; every request
/// target it received is kept, in order.
final class LocalServer: @unchecked Sendable {
    struct Response: Sendable {
        var status: Int
        var body: Data
        var contentType: String

        init(status: Int = 200, body: Data, contentType: String = "application/octet-stream") {
            self.status = status
            self.body = body
            self.contentType = contentType
        }

        static func json(_ text: String, status: Int = 200) -> Response {
            Response(status: status, body: Data(text.utf8), contentType: "application/json")
        }
    }

    let port: Int
    private let descriptor: Int32
    private let lock = NSLock()
    private var routes: [String: Response] = [:]
    private var received: [String] = []

    init() throws {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 64) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard descriptor >= 0, bound else { throw ServerError(description: "no listening socket: errno \(errno)") }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    var base: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Answers `path` (without query) with `response` from now on.
    func set(_ path: String, _ response: Response) {
        lock.withLock { routes[path] = response }
    }

    /// The request targets (path and query) received so far.
    var requests: [String] { lock.withLock { received } }

    /// How many requests asked for `path` (query left out).
    func count(_ path: String) -> Int { requests.filter { $0.split(separator: "?", maxSplits: 1).first.map(String.init) == path }.count }

    /// Stops accepting: later connections are refused. The serving thread closes the socket once its `accept` fails,
    /// so the descriptor's number is not reused (by another test's listener) while that thread may still accept on it.
    func close() {
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

    private func serve() {
        while true {
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else {
                Self.closeDescriptor(descriptor)
                return
            }
            var bytes = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while String(decoding: bytes, as: UTF8.self).range(of: "\r\n\r\n") == nil {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { break }
                bytes += buffer[..<count]
            }
            let line = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n").first ?? ""
            let parts = line.split(separator: " ")
            let target = parts.count > 1 ? String(parts[1]) : "/"
            let path = String(target.split(separator: "?", maxSplits: 1).first ?? "")
            let response = lock.withLock {
                received.append(target)
                return routes[path]
            }
            let answer = response ?? Response(status: 404, body: Data("not found".utf8), contentType: "text/plain")
            var head = "HTTP/1.1 \(answer.status) \(answer.status == 200 ? "OK" : "Status")\r\n"
            head += "Content-Type: \(answer.contentType)\r\nContent-Length: \(answer.body.count)\r\nConnection: close\r\n\r\n"
            let whole = Array(head.utf8) + Array(answer.body)
            var sent = 0
            while sent < whole.count {
                let count = whole[sent...].withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                sent += count
            }
            Self.closeDescriptor(connection)
        }
    }

    private static func closeDescriptor(_ descriptor: Int32) {
        #if canImport(Glibc)
        _ = Glibc.close(descriptor)
        #else
        _ = Darwin.close(descriptor)
        #endif
    }
}

struct ServerError: Error, CustomStringConvertible {
    var description: String
}

/// A clock that moves only when a test advances it.
final class ManualClock: Clock, @unchecked Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let lock = NSLock()
    private var current = Instant(offset: .zero)

    var now: Instant { lock.withLock { current } }
    var minimumResolution: Duration { .zero }

    func advance(by duration: Duration) {
        lock.withLock { current = current.advanced(by: duration) }
    }

    /// The package never sleeps on its clock; a sleeper here waits for the test to advance the clock past `deadline`.
    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        while now < deadline {
            try Task.checkCancellation()
            await Task.yield()
        }
    }
}
