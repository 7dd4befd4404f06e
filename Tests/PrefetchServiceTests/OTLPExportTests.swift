import Foundation
import HTTPTypes
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `prefetch serve --otlp` exporting to a small OTLP/HTTP receiver on 127.0.0.1 (`scripts/otlp-receiver.py`, which
/// decodes the export requests with opentelemetry-proto; `scripts/ensure-deps.sh test` installs it): one page open's
/// trace arrives whole, linked to the shell's span, and the upstream saw a `traceparent` of that trace.
@Suite(.serialized)
struct OTLPExportTests {
    static let page = "https://m.example.test/traced"
    static let shellTrace = "0af7651916cd43dd8448eb211c80319c"
    static let shellSpan = "b7ad6b7169203331"

    @Test func aPageOpensTraceReachesTheCollectorWithItsParentsAndTheUpstreamsTraceparent() async throws {
        try await withUpstream { upstream in
            let receiver = try OTLPReceiver.start()
            defer { receiver.stop() }
            let config = try TempConfig(
                TestConfig([
                    TestPage(
                        Self.page,
                        [
                            TestInterface(name: "info", api: "\(upstream.base)/traced/info"),
                            TestInterface(name: "broken", api: "\(upstream.base)/traced/broken?status=503"),
                        ])
                ]).text)
            defer { config.remove() }
            let server = try await ServeProcess.start(
                configPath: config.path, arguments: ["--otlp"], logLevel: "warning",
                environment: [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)", "OTEL_BSP_SCHEDULE_DELAY": "100",
                    "OTEL_METRIC_EXPORT_INTERVAL": "500",
                ])
            do {
                let trigger = try await oneRequest(
                    port: server.port, .post, "/v1/prefetch", headers: ["traceparent": "00-\(Self.shellTrace)-\(Self.shellSpan)-01"],
                    body: #"{"url": "\#(Self.page)"}"#)
                #expect(trigger.status == 202, "\(trigger.text)")
                let ticket = try #require(trigger.json["ticket"] as? String)
                let info = try await server.get("/v1/prefetch/\(ticket)/data?name=info&wait=5000")
                #expect(info.status == 200, "\(info.text)")
                let seen = Echo(info).headers.first { $0.first?.lowercased() == "traceparent" }?.last ?? ""
                #expect(try await server.get("/v1/prefetch/\(ticket)/data?name=broken&wait=5000").status == 502)

                // The open, a client span per upstream request and a span per read, in the shell's trace.
                let spans = try #require(
                    await eventuallyValue(within: 30) { () -> [[String: Any]]? in
                        let spans = receiver.spans()
                        return spans.filter { $0["name"] as? String == "prefetch read" }.count >= 2 ? spans : nil
                    }, "spans received: \(receiver.spans())")
                #expect(spans.allSatisfy { $0["traceId"] as? String == Self.shellTrace }, "\(spans)")
                let open = try #require(spans.first { $0["name"] as? String == "prefetch open" })
                #expect(open["parentSpanId"] as? String == Self.shellSpan)
                let openID = try #require(open["spanId"] as? String)
                func attributes(_ span: [String: Any]) -> [String: Any] { span["attributes"] as? [String: Any] ?? [:] }
                let client = spans.filter { ($0["name"] as? String ?? "").hasPrefix("prefetch ") && $0["kind"] as? Int == 3 }
                #expect(client.count == 2 && client.allSatisfy { $0["parentSpanId"] as? String == openID }, "\(client)")
                let fetchedInfo = try #require(client.first { attributes($0)["prefetch.interface"] as? String == "info" })
                #expect(attributes(fetchedInfo)["http.response.status_code"] as? Int == 200)
                let fetchedBroken = try #require(client.first { attributes($0)["prefetch.interface"] as? String == "broken" })
                #expect(attributes(fetchedBroken)["http.response.status_code"] as? Int == 503)
                #expect(fetchedBroken["status"] as? Int == 2, "an upstream 5xx is an error span")
                let reads = spans.filter { $0["name"] as? String == "prefetch read" }
                #expect(reads.allSatisfy { $0["parentSpanId"] as? String == openID })
                #expect(Set(reads.compactMap { attributes($0)["prefetch.interface"] as? String }) == ["info", "broken"])
                let brokenRead = reads.first { attributes($0)["prefetch.interface"] as? String == "broken" }
                #expect(brokenRead.map { attributes($0)["prefetch.served"] as? String } == "miss")
                #expect(brokenRead.map { attributes($0)["prefetch.reason"] as? String } == "upstream-5xx")

                // The upstream's traceparent is the client span of its request, in the same trace.
                let infoSpan = try #require(fetchedInfo["spanId"] as? String)
                #expect(seen.hasPrefix("00-\(Self.shellTrace)-\(infoSpan)-"), "the upstream saw \(seen)")

                // The metrics go out too, the same series /metrics shows.
                #expect(await eventually(within: 30) { receiver.metrics().contains("prefetch_triggers_total") }, "\(receiver.metrics())")
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }
}

/// `scripts/otlp-receiver.py` running on a free port: what it printed, span by span and metric by metric.
final class OTLPReceiver: Sendable {
    let process: TestProcess
    let output: URL
    let port: Int

    private init(process: TestProcess, output: URL, port: Int) {
        self.process = process
        self.output = output
        self.port = port
    }

    /// Starts the receiver and waits (at most 30 s) for its port.
    static func start() throws -> OTLPReceiver {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("otlp-receiver-\(UUID().uuidString)")
        FileManager.default.createFile(atPath: output.path, contents: nil)
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", WebShellBrowser.root + "/scripts/otlp-receiver.py"]
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }
        process.standardOutput = handle
        try launch(process)
        let prefix = "otlp receiver listening on 127.0.0.1:"
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline && process.isRunning {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }), let port = Int(line.dropFirst(prefix.count)) {
                return OTLPReceiver(process: process, output: output, port: port)
            }
            usleep(20_000)
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        throw CommandTestError(
            message: "the OTLP receiver did not start (opentelemetry-proto missing? scripts/ensure-deps.sh test installs it): "
                + ((try? String(contentsOf: output, encoding: .utf8)) ?? ""))
    }

    private func records() -> [[String: Any]] {
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// Every span received so far.
    func spans() -> [[String: Any]] { records().compactMap { $0["span"] as? [String: Any] } }

    /// The names of every metric received so far.
    func metrics() -> Set<String> { Set(records().compactMap { $0["metric"] as? String }) }

    /// Stops the receiver (SIGTERM, then SIGKILL) and removes its output.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        let deadline = ContinuousClock.now + .seconds(10)
        while process.isRunning && ContinuousClock.now < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: output)
    }
}
