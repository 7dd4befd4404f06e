package import Foundation
package import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOPosix
package import PrefetchCore
import PrefetchEngine
package import PrefetchRuntime
package import PrefetchTestSupport
package import PrefetchTestUpstream
package import Prometheus
import Synchronization
import Testing
package import Tracing

@testable import PageAPI
@testable import PrefetchService

// MARK: Upstream

extension TestUpstream {
    /// `http://127.0.0.1:PORT`.
    package var base: String { "http://\(host):\(port)" }
}

// MARK: Config

extension TestUpstream {
    /// An interface of this upstream: `api` is `path` on it.
    package func interface(
        _ name: String, _ path: String, method: PrefetchCore.HTTPMethod = .GET, urlParam: Bool? = nil, bodyParam: Bool? = nil,
        credentials: CredentialsMode? = nil
    ) -> TestInterface {
        TestInterface(name: name, api: base + path, method: method, urlParam: urlParam, bodyParam: bodyParam, credentials: credentials)
    }
}

/// A config document as a test gives it: typed (``TestConfig``, a canary included), or JSON text where the text
/// itself is the point (a config that is not valid).
package protocol ConfigDocument: Sendable {
    var documentText: String { get }
}

extension String: ConfigDocument {
    package var documentText: String { self }
}

extension TestConfig: ConfigDocument {
    package var documentText: String { text }
}

/// A config file in a fresh temporary directory, removed by `remove()`.
package struct TempConfig {
    package let directory: URL
    package let path: String

    package init(_ config: some ConfigDocument) throws {
        let text = config.documentText
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-service-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("prefetch.json").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    package func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}

// MARK: The service in-process

/// An HTTP answer, read whole.
package struct Reply: Sendable {
    package var status: Int
    package var headers: HTTPFields
    package var body: [UInt8]

    package init(_ response: ClientResponse) {
        status = response.status.code
        headers = response.headers
        var buffer = response.body
        body = buffer.readBytes(length: buffer.readableBytes) ?? []
    }

    package var text: String { String(decoding: body, as: UTF8.self) }

    /// The value of the header `name` (case-insensitive), if present.
    package func header(_ name: String) -> String? {
        HTTPField.Name(name).flatMap { headers[$0] }
    }

    /// The body parsed as a JSON object (empty when it is not one).
    package var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    /// The body decoded as the answer type `type` (dates in ISO 8601, as the service writes them); a body that is
    /// not one fails with the status and the text it was.
    package func decoded<T: Decodable>(_ type: T.Type) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(type, from: Data(body))
        } catch {
            throw UndecodableReply(type: "\(type)", status: status, text: String(text.prefix(500)), error: error)
        }
    }
}

/// A reply whose body is not the answer a test expected.
package struct UndecodableReply: Error, CustomStringConvertible {
    package var type: String
    package var status: Int
    package var text: String
    package var error: any Error

    package var description: String { "not a \(type): \(status) \(text) (\(error))" }
}

extension Echo {
    /// The echo in a service reply's JSON body.
    package init(_ reply: Reply) {
        self.init(json: reply.json)
    }
}

/// A port learned from a server's start callback.
package final class PortBox: Sendable {
    private let port = Mutex<Int?>(nil)

    package init() {}

    package func set(_ value: Int) { port.withLock { $0 = value } }

    /// The port, once known (the server calls back as it starts; at most 10 s).
    package func value() async -> Int? {
        _ = await eventually(within: 10) { port.withLock { $0 } != nil }
        return port.withLock { $0 }
    }
}

/// A running service (the application `prefetch serve` runs) with a client connected to its page surface.
package struct LiveService: Sendable {
    package let client: SocketClient
    package let registry: PrometheusCollectorRegistry
    package let port: Int
    /// The operator surface's port.
    package let adminPort: Int

    /// One request to the operator surface.
    package func admin(
        _ method: HTTPRequest.Method, _ uri: String, headers: [String: String] = [:], body: String? = nil
    ) async throws -> Reply {
        try await oneRequest(port: adminPort, method, uri, headers: headers, body: body)
    }

    /// Sends one request on the shared test connection.
    package func request(
        _ method: HTTPRequest.Method, _ uri: String, headers: [String: String] = [:], body: String? = nil
    ) async throws -> Reply {
        try await send(client, method, uri, headers: headers, body: body)
    }

    package func get(_ uri: String, headers: [String: String] = [:]) async throws -> Reply {
        try await request(.get, uri, headers: headers)
    }

    /// `POST /v1/prefetch` with `{"url": page}` plus `headers` as the JSON `headers` member when given, and `jar`
    /// (a `Cookie` value) as the `cookies` member (``testJar(_:domain:)``).
    package func trigger(
        _ page: String, credentials: [String: String]? = nil, jar: String? = nil, requestHeaders: [String: String] = [:]
    ) async throws -> Reply {
        var object: [String: Any] = ["url": page]
        if let credentials { object["headers"] = credentials }
        if let jar { object["cookies"] = testJar(jar) }
        let data = try JSONSerialization.data(withJSONObject: object)
        return try await request(.post, "/v1/prefetch", headers: requestHeaders, body: String(decoding: data, as: UTF8.self))
    }

    /// Triggers `page` and returns the ticket id, failing the test unless the answer is 202.
    package func ticket(_ page: String, credentials: [String: String]? = nil) async throws -> String {
        let reply = try await trigger(page, credentials: credentials)
        #expect(reply.status == 202, "trigger of \(page): \(reply.text)")
        return try reply.decoded(TriggerAnswer.self).ticket
    }

    /// Sends one request on a connection of its own (for concurrent requests).
    package func separateRequest(
        _ method: HTTPRequest.Method, _ uri: String, headers: [String: String] = [:], body: String? = nil
    ) async throws -> Reply {
        try await oneRequest(port: port, method, uri, headers: headers, body: body)
    }
}

/// Sends one request through a test client (a live connection or the router in process); a body is JSON unless
/// `headers` say otherwise.
package func send(
    _ client: any TestHTTPClient, _ method: HTTPRequest.Method, _ uri: String, headers: [String: String] = [:], body: String? = nil
) async throws -> Reply {
    var fields = HTTPFields()
    for (name, value) in headers { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
    if body != nil, fields[.contentType] == nil { fields[.contentType] = "application/json" }
    let response = try await client.executeRequest(uri: uri, method: method, headers: fields, body: body.map { ByteBuffer(string: $0) })
    return Reply(response)
}

/// Sends one request to 127.0.0.1:`port` on a connection of its own.
package func oneRequest(
    port: Int, _ method: HTTPRequest.Method, _ uri: String, headers: [String: String] = [:], body: String? = nil
) async throws -> Reply {
    try await withSocketClient(port: port) { client in
        try await send(client, method, uri, headers: headers, body: body)
    }
}

/// Settings for a test service: free ports on 127.0.0.1, waits bounded to a few seconds, no trigger rate limit
/// (tests that are about the limit set one).
package func testSettings() -> ServiceSettings {
    var settings = ServiceSettings()
    settings.listeners.host = "127.0.0.1"
    settings.listeners.port = 0
    settings.listeners.adminPort = 0
    settings.engine.maximumWait = .seconds(5)
    settings.engine.triggerRate = 0
    // A failure and a `private` marker are kept far longer than any test reads them (at the default 5 s, reads a
    // loaded machine made a few seconds late found them expired). A test about their end moves a `ManualClock`.
    settings.engine.negativeTTL = .seconds(120)
    return settings
}

/// Runs `body` against the real application on a live socket (its services, fetcher included, running);
/// the application is shut down gracefully afterwards, even when `body` throws.
package func withService<T: Sendable>(
    config: some ConfigDocument,
    settings: ServiceSettings = testSettings(),
    clock: any ServiceClock = ContinuousClock(),
    tracer: any Tracer = InstrumentationSystem.tracer,
    _ body: @Sendable (LiveService) async throws -> T
) async throws -> T {
    let loaded = try ConfigLoader.parse(Array(config.documentText.utf8), source: "test config")
    var logger = Logger(label: "prefetch.service.test")
    logger.logLevel = .warning
    let registry = PrometheusCollectorRegistry()
    let (pagePort, adminPort) = (PortBox(), PortBox())
    let app = try buildApplication(
        settings: settings, config: ConfigHolder(loaded.config), registry: registry, logger: logger,
        onServerRunning: { pagePort.set($0) }, onAdminRunning: { adminPort.set($0) }, clock: clock, tracer: tracer)
    return try await withLiveApplication(app, port: pagePort) { client in
        let admin = try #require(await adminPort.value(), "the operator surface did not start")
        return try await body(LiveService(client: client, registry: registry, port: client.port, adminPort: admin))
    }
}

/// Percent-encodes `text` as one query value.
package func q(_ text: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
}

// MARK: Processes

/// A child process whose stdout and stderr go to files (read without blocking any thread), killed by `stop`
/// if it is still running.
package final class ChildProcess: Sendable {
    package let process: TestProcess
    package let directory: URL
    package let stdoutPath: String
    package let stderrPath: String

    /// Starts the package executable `name` with `arguments`, and `environment` added to this process's.
    package init(_ name: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        let url = try #require(builtExecutable(name), "\(name) executable not found next to the test bundle")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        stdoutPath = directory.appendingPathComponent("stdout").path
        stderrPath = directory.appendingPathComponent("stderr").path
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let process = TestProcess()
        process.executableURL = url
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        defer {
            // The child has its own copies; the parent's would only leak.
            try? out.close()
            try? err.close()
        }
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try launch(process)
        self.process = process
    }

    package var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    package var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    package func signal(_ number: Int32) {
        if process.isRunning { kill(process.processIdentifier, number) }
    }

    /// Waits at most `seconds` for the process to exit; its exit status, or nil if it is still running.
    package func exitStatus(within seconds: Double = 10) async -> Int32? {
        _ = await eventually(within: seconds) { !process.isRunning }
        if process.isRunning { return nil }
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }

    /// Kills the process if it still runs, and removes its output files.
    package func stop() async {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            _ = await eventually(within: 5) { !process.isRunning }
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Runs a package executable to completion (at most 30 s) and returns its exit status and output.
package func runExecutable(_ name: String, _ arguments: [String]) async throws -> (status: Int32?, stdout: String, stderr: String) {
    let child = try ChildProcess(name, arguments)
    let status = await child.exitStatus(within: 30)
    let result = (status, child.stdout, child.stderr)
    await child.stop()
    return result
}

/// Sends `text` (a whole HTTP/1.1 request, with `Connection: close`) on a raw connection from `localAddress` (any
/// 127.x.y.z: a different client address on loopback) and returns everything the server answers until it closes
/// (at most 10 s).
package func rawExchange(port: Int, from localAddress: String = "127.0.0.1", _ text: String) async throws -> String {
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(to: try SocketAddress(ipAddress: localAddress, port: 0))
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
        }
    return try await channel.executeThenClose { inbound, outbound in
        try await outbound.write(ByteBuffer(string: text))
        return try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                var answer = ""
                for try await buffer in inbound { answer += String(buffer: buffer) }
                return answer
            }
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            return first ?? ""
        }
    }
}

/// A JSON POST as raw HTTP/1.1 text.
package func rawPost(_ path: String, port: Int, body: String, headers: [String: String] = [:]) -> String {
    let extra = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
    return
        "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\(extra)Connection: close\r\n\r\n\(body)"
}

/// The status code of a raw HTTP answer.
package func rawStatus(_ answer: String) -> Int? {
    Int(answer.dropFirst("HTTP/1.1 ".count).prefix(3))
}

/// Foundation's `Process.run()` crashed once here (a bad pointer in `memcpy` inside `Process.run`) while several
/// suites spawned children at the same moment; the tests start their child processes one at a time.
/// Starts `process`, one launch at a time (see `launchSerially`).
package func launch(_ process: TestProcess) throws {
    try launchSerially(process)
}

/// A trigger's cookie jar (`cookies`) holding each `name=value` of `header` as a host-only `SameSite=None` cookie of
/// `domain` (the test upstream's host): what a shell sends for a user whose cookies belong to the api host, so they
/// reach its upstream from a page on any site. The ticket is entitled by `header` itself.
package func testJar(_ header: String, domain: String = "127.0.0.1") -> [[String: Any]] {
    header.split(separator: ";").compactMap { part in
        let pair = part.trimmingCharacters(in: .whitespaces)
        guard let equals = pair.firstIndex(of: "=") else { return nil }
        return [
            "name": String(pair[..<equals]), "value": String(pair[pair.index(after: equals)...]), "domain": domain,
            "sameSite": "none",
        ]
    }
}
