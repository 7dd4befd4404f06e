import Foundation
import ShellTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The real service for the live tests: `prefetch serve` and the project's test upstream (`prefetch-upstream`) as
// child processes on 127.0.0.1, on free ports they report, always stopped. The binaries come from PREFETCH_BIN and
// PREFETCH_UPSTREAM_BIN (scripts/test-clients.sh passes the repository's build); without them the tests fail.

/// A running service and its upstream.
struct LiveService {
    /// The page surface.
    let port: Int
    /// The test upstream.
    let upstreamPort: Int

    var base: URL { URL(string: "http://127.0.0.1:\(port)")! }
}

/// Runs `body` with the test upstream and `prefetch serve` started on free ports, the service's config made by
/// `config` from the upstream's port, and both always stopped afterwards.
func withLiveService<T>(
    config: (_ upstreamPort: Int) -> String, arguments: [String] = [], _ body: (LiveService) async throws -> T
) async throws -> T {
    let prefetch = try requiredBinary("PREFETCH_BIN")
    let upstreamBinary = try requiredBinary("PREFETCH_UPSTREAM_BIN")
    let upstream = try ChildProcess(upstreamBinary, ["--port", "0"])
    do {
        let upstreamPort = try await upstream.port(after: "listening on 127.0.0.1:")
        let file = upstream.directory.appendingPathComponent("config.json")
        try config(upstreamPort).write(to: file, atomically: true, encoding: .utf8)
        let serve = try ChildProcess(
            prefetch, ["serve", "--config", file.path, "--port", "0", "--admin-port", "0", "--log-level", "warning"] + arguments)
        do {
            let port = try await serve.port(after: "prefetch listening on http://127.0.0.1:")
            let result = try await body(LiveService(port: port, upstreamPort: upstreamPort))
            await serve.stop()
            await upstream.stop()
            return result
        } catch {
            await serve.stop()
            throw error
        }
    } catch {
        await upstream.stop()
        throw error
    }
}

/// A listener on 127.0.0.1 that completes TCP handshakes (the kernel's backlog) and never answers: a hung service.
final class SilentListener {
    let descriptor: Int32
    let port: Int

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
        guard descriptor >= 0, bound else { throw LiveTestError(description: "no listening socket: errno \(errno)") }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() {
        #if canImport(Glibc)
        _ = Glibc.close(descriptor)
        #else
        _ = Darwin.close(descriptor)
        #endif
    }
}

/// Runs a tool to completion with `input` on its standard input; its standard output.
func runProcess(_ executable: String, _ arguments: [String], input: Data) throws -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-shell-tool-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let inputURL = directory.appendingPathComponent("in")
    let outputURL = directory.appendingPathComponent("out")
    try input.write(to: inputURL)
    _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
    let inputHandle = try FileHandle(forReadingFrom: inputURL)
    let outputHandle = try FileHandle(forWritingTo: outputURL)
    process.standardInput = inputHandle
    process.standardOutput = outputHandle
    try launchSerially(process)
    process.waitUntilExit()
    try? inputHandle.close()
    try? outputHandle.close()
    guard process.terminationStatus == 0 else { throw LiveTestError(description: "\(executable) exited with \(process.terminationStatus)") }
    return try Data(contentsOf: outputURL)
}

/// One plain HTTP exchange (as a page or a tool would make it), with a session that keeps no cookies.
func fetch(
    _ url: URL, method: String = "GET", headers: [String: String] = [:]
) async throws -> (status: Int, headers: [String: String], body: Data) {
    var request = URLRequest(url: url)
    request.httpMethod = method
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpCookieStorage = nil
    configuration.httpShouldSetCookies = false
    let session = URLSession(configuration: configuration)
    defer { session.finishTasksAndInvalidate() }
    let (data, response) = try await session.data(for: request)
    let http = try #require(response as? HTTPURLResponse)
    var fields: [String: String] = [:]
    for (name, value) in http.allHeaderFields {
        if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
    }
    return (http.statusCode, fields, data)
}

/// A listener on 127.0.0.1 that answers every connection's first request with `response` (raw HTTP) on a thread of
/// its own, and keeps the request heads it read.
final class ScriptedResponder: @unchecked Sendable {
    let listener: SilentListener
    private let lock = NSLock()
    private var heads: [String] = []

    init(response: String) throws {
        listener = try SilentListener()
        let descriptor = listener.descriptor
        let thread = Thread { [self] in
            while true {
                let connection = accept(descriptor, nil, nil)
                guard connection >= 0 else { return }
                var received = [UInt8]()
                var buffer = [UInt8](repeating: 0, count: 4096)
                // The whole request, body included: closing with unread bytes would reset the connection.
                while !Self.isComplete(received) {
                    let count = read(connection, &buffer, buffer.count)
                    guard count > 0 else { break }
                    received += buffer[..<count]
                }
                lock.withLock { heads.append(String(decoding: received, as: UTF8.self)) }
                _ = Array(response.utf8).withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                #if canImport(Glibc)
                _ = Glibc.close(connection)
                #else
                _ = Darwin.close(connection)
                #endif
            }
        }
        thread.start()
    }

    var port: Int { listener.port }

    /// Whether `bytes` hold a request head and as many body bytes as its `Content-Length` says.
    static func isComplete(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return false }
        let length =
            text[..<end.lowerBound].split(separator: "\r\n")
            .first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        return text[end.upperBound...].utf8.count >= length
    }

    /// The request heads received so far.
    var requests: [String] { lock.withLock { heads } }

    /// Stops accepting (the thread's `accept` fails once the socket is shut down).
    func close() {
        shutdown(listener.descriptor, Int32(SHUT_RDWR))
        listener.close()
    }
}
