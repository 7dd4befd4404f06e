package import Foundation
package import HTTPTypes
import NIOCore
import NIOPosix
// Helpers of the reliability suites (faults, coalescing under faults, memory budget, bad input, isolation).
//
// Design
// - The suites drive the real application (in-process through `withService`, or the built `prefetch serve`
//   process when memory or exit codes are the point) against the real scriptable upstream on 127.0.0.1.
// - What a suite needs beyond the shared helpers lives here: requests with raw byte bodies, a connection that
//   is closed mid-request (a page navigating away), Prometheus text parsing, process RSS and a throwaway
//   self-signed certificate made with the openssl CLI.
// - Every wait is bounded; nothing asserts a duration tighter than seconds.
import PrefetchCore
package import PrefetchTestSupport
package import PrefetchTestUpstream
package import PrefetchTestUpstreamTLS
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Sends one request with a raw byte body to 127.0.0.1:`port` on a connection of its own.
package func rawRequest(
    port: Int, _ method: HTTPRequest.Method, _ uri: String, headers: [String: String] = [:], body: [UInt8]
) async throws -> Reply {
    try await withSocketClient(port: port) { client in
        var fields = HTTPFields()
        for (name, value) in headers { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        if fields[.contentType] == nil { fields[.contentType] = "application/json" }
        return Reply(try await client.execute(uri: uri, method: method, headers: fields, body: ByteBuffer(bytes: body)))
    }
}

/// Opens a TCP connection to 127.0.0.1:`port`, sends `GET uri` and closes the connection after `after`, without
/// reading the answer: a page that navigated away while waiting.
package func abandonedRequest(port: Int, uri: String, after: Duration) async throws {
    let group = MultiThreadedEventLoopGroup.singleton
    let channel = try await ClientBootstrap(group: group).connect(host: "127.0.0.1", port: port).get()
    let text = "GET \(uri) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n"
    try await channel.writeAndFlush(ByteBuffer(string: text)).get()
    try? await Task.sleep(for: after)
    try? await channel.close().get()
}

// MARK: Metrics

/// The value of the first sample of `name` (exactly this metric name, optionally with `labels` contained in its
/// label set) in a Prometheus text exposition.
package func metricValue(_ text: String, _ name: String, labels: String? = nil) -> Double? {
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        guard line.hasPrefix(name) else { continue }
        let rest = line.dropFirst(name.count)
        guard let first = rest.first, first == " " || first == "{" else { continue }
        if let labels, !rest.contains(labels) { continue }
        guard let value = rest.split(separator: " ").last else { continue }
        return Double(value)
    }
    return nil
}

// MARK: Processes

/// Resident set size of process `pid` in bytes (`VmRSS` in /proc), or nil when it is gone.
package func residentBytes(pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return nil }
    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
    guard fields.count >= 2, let kilobytes = Int(fields[1]) else { return nil }
    return kilobytes * 1024
}

/// A `prefetch serve` process on free ports (page and operator surfaces) with extra `arguments`; the ports are
/// read from its listening lines.
package struct ServeProcess {
    package let child: ChildProcess
    /// The page surface.
    package let port: Int
    /// The operator surface.
    package let adminPort: Int

    /// Starts `prefetch serve --config <path> --port 0 --admin-port 0 [arguments]` (with `environment` added) and waits
    /// (at most 30 s) for both listening lines; `untilReady`, also for `/readyz` to answer 200 (the listeners open
    /// before the config is loaded, so a trigger sent at once can be `503 not-ready` on a loaded machine).
    package static func start(
        configPath: String, arguments: [String] = [], logLevel: String = "info", environment: [String: String] = [:],
        untilReady: Bool = false
    ) async throws -> ServeProcess {
        let child = try ChildProcess(
            "prefetch", ["serve", "--config", configPath, "--port", "0", "--admin-port", "0", "--log-level", logLevel] + arguments,
            environment: environment)
        var ports: (Int, Int)?
        _ = await eventually(within: 30) {
            if let page = listeningPort(in: child.stdout, prefix: "prefetch listening on http://127.0.0.1:"),
                let admin = listeningPort(in: child.stdout, prefix: "prefetch operator surface on http://127.0.0.1:")
            {
                ports = (page, admin)
            }
            return ports != nil || !child.process.isRunning
        }
        guard let ports else {
            let output = child.stdout + child.stderr
            await child.stop()
            throw CommandTestError(message: "prefetch serve did not report its ports: \(output)")
        }
        let server = ServeProcess(child: child, port: ports.0, adminPort: ports.1)
        if untilReady {
            let ready = await eventually {
                (try? await oneRequest(port: ports.0, .get, "/readyz"))?.status == 200 || !child.process.isRunning
            }
            guard ready, child.process.isRunning else {
                let output = child.stdout + child.stderr
                await child.stop()
                throw CommandTestError(message: "prefetch serve did not become ready: \(output)")
            }
        }
        return server
    }

    package static func listeningPort(in output: String, prefix: String) -> Int? {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
        return Int(line.dropFirst(prefix.count).prefix { $0.isNumber })
    }

    package var pid: Int32 { child.process.processIdentifier }

    package func get(_ uri: String, headers: [String: String] = [:]) async throws -> Reply {
        try await oneRequest(port: port, .get, uri, headers: headers)
    }

    /// One request to the operator surface.
    package func admin(
        _ method: HTTPRequest.Method, _ uri: String, headers: [String: String] = [:], body: String? = nil
    ) async throws -> Reply {
        try await oneRequest(port: adminPort, method, uri, headers: headers, body: body)
    }

    /// Stops the process gracefully (SIGTERM, then SIGKILL after 10 s) and removes its output files.
    package func stop() async {
        child.signal(SIGTERM)
        _ = await child.exitStatus(within: 10)
        await child.stop()
    }
}

/// Runs `prefetch serve` (logging warnings) with the config `config` makes for a local upstream's base URL and extra
/// `arguments`, and stops it however `body` ends.
package func withServeProcess(
    config: @Sendable (String) -> TestConfig, arguments: [String] = [], _ body: @Sendable (ServeProcess, TestUpstream) async throws -> Void
) async throws {
    try await withUpstream { upstream in
        let file = try TempConfig(config(upstream.base))
        defer { file.remove() }
        let server = try await ServeProcess.start(configPath: file.path, arguments: arguments, logLevel: "warning", untilReady: true)
        do {
            try await body(server, upstream)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}

/// Runs a system tool (at most 30 s) and returns its exit status and standard error.
package func runTool(_ path: String, _ arguments: [String]) async throws -> (status: Int32, stderr: String) {
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let errors = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-tool-\(UUID().uuidString)")
    _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: errors) }
    let handle = try FileHandle(forWritingTo: errors)
    process.standardError = handle
    process.standardOutput = FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    try launch(process)
    try? handle.close()
    _ = await eventually(within: 30) { !process.isRunning }
    if process.isRunning {
        process.terminate()
        throw CommandTestError(message: "\(path) did not finish within 30 s")
    }
    return (process.terminationStatus, (try? String(contentsOf: errors, encoding: .utf8)) ?? "")
}

/// A self-signed certificate for 127.0.0.1 (no CA anyone trusts), in a fresh temporary directory.
package struct SelfSignedCertificate {
    package let directory: URL
    package var tls: UpstreamTLS {
        UpstreamTLS(
            certificatePath: directory.appendingPathComponent("cert.pem").path,
            privateKeyPath: directory.appendingPathComponent("key.pem").path)
    }

    package static func make() async throws -> SelfSignedCertificate {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-selfsigned-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let result = try await runTool(
            "/usr/bin/env",
            [
                "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", directory.appendingPathComponent("key.pem").path, "-out", directory.appendingPathComponent("cert.pem").path,
                "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            ])
        guard result.status == 0 else {
            try? FileManager.default.removeItem(at: directory)
            throw CommandTestError(message: "openssl req failed: \(result.stderr)")
        }
        return SelfSignedCertificate(directory: directory)
    }

    package func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}

// MARK: Randomness

/// The seed (for `SeededRandom`, in PrefetchCore) of a randomized test: `PREFETCH_TEST_SEED` when set (to replay a run), else a fresh one.
package func testSeed() -> UInt64 {
    if let text = ProcessInfo.processInfo.environment["PREFETCH_TEST_SEED"], let seed = UInt64(text) { return seed }
    return UInt64.random(in: 1...UInt64.max)
}
