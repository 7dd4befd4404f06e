import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `prefetch serve --otlp` exporting to a small OTLP/HTTP receiver on 127.0.0.1 (`scripts/otlp-receiver.py`, which
/// decodes the export requests with opentelemetry-proto; `scripts/ensure-deps.sh test` installs it): one page open's
/// trace arrives whole, linked to the shell's span; an upstream request whose entry others may read is a trace of
/// the service's own linked to the page open, and its upstream saw that trace, never the shell's.
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
                ], untilReady: true)
            do {
                let trigger = try await oneRequest(
                    port: server.port, .post, "/v1/prefetch", headers: ["traceparent": "00-\(Self.shellTrace)-\(Self.shellSpan)-01"],
                    body: #"{"url": "\#(Self.page)"}"#)
                #expect(trigger.status == 202, "\(trigger.text)")
                let ticket = try #require(trigger.json["ticket"] as? String)
                let info = try await server.get("/v1/prefetch/\(ticket)/data?name=info&wait=5000")
                #expect(info.status == 200, "\(info.text)")
                let seen = Echo(info).headers.first { $0.first?.lowercased() == "traceparent" }?.last ?? ""
                #expect(try await server.get("/v1/prefetch/\(ticket)/data?name=broken&wait=5000").status == 404)

                // The open, a client span per upstream request and a span per read, in the shell's trace.
                let spans = try #require(
                    await eventuallyValue(within: 30) { () -> [[String: Any]]? in
                        let spans = receiver.spans()
                        return spans.filter { $0["name"] as? String == "prefetch read" }.count >= 2 ? spans : nil
                    }, "spans received: \(receiver.spans())")
                let open = try #require(spans.first { $0["name"] as? String == "prefetch open" })
                #expect(open["traceId"] as? String == Self.shellTrace, "\(open)")
                #expect(open["parentSpanId"] as? String == Self.shellSpan)
                let openID = try #require(open["spanId"] as? String)
                func attributes(_ span: [String: Any]) -> [String: Any] { span["attributes"] as? [String: Any] ?? [:] }
                let client = spans.filter { ($0["name"] as? String ?? "").hasPrefix("prefetch ") && $0["kind"] as? Int == 3 }
                // Both interfaces send no credentials (the page is on another site): shared flights, each the root of
                // a trace of the service's own, linked to the page open.
                #expect(client.count == 2, "\(client)")
                for span in client {
                    #expect(span["traceId"] as? String != Self.shellTrace, "a shared flight continued the shell's trace: \(span)")
                    #expect((span["parentSpanId"] as? String ?? "").isEmpty, "\(span)")
                    let links = span["links"] as? [[String: Any]] ?? []
                    #expect(links.contains { $0["traceId"] as? String == Self.shellTrace && $0["spanId"] as? String == openID }, "\(span)")
                }
                let fetchedInfo = try #require(client.first { attributes($0)["prefetch.interface"] as? String == "info" })
                #expect(attributes(fetchedInfo)["http.response.status_code"] as? Int == 200)
                let fetchedBroken = try #require(client.first { attributes($0)["prefetch.interface"] as? String == "broken" })
                #expect(attributes(fetchedBroken)["http.response.status_code"] as? Int == 503)
                #expect(fetchedBroken["status"] as? Int == 2, "an upstream 5xx is an error span")
                let reads = spans.filter { $0["name"] as? String == "prefetch read" }
                #expect(reads.allSatisfy { $0["parentSpanId"] as? String == openID && $0["traceId"] as? String == Self.shellTrace })
                #expect(Set(reads.compactMap { attributes($0)["prefetch.interface"] as? String }) == ["info", "broken"])
                let brokenRead = reads.first { attributes($0)["prefetch.interface"] as? String == "broken" }
                #expect(brokenRead.map { attributes($0)["prefetch.served"] as? String } == "miss")
                #expect(brokenRead.map { attributes($0)["prefetch.reason"] as? String } == "upstream-5xx")

                // The upstream's traceparent is the client span of its request, in the service's own trace.
                let infoSpan = try #require(fetchedInfo["spanId"] as? String)
                let infoTrace = try #require(fetchedInfo["traceId"] as? String)
                #expect(seen.hasPrefix("00-\(infoTrace)-\(infoSpan)-"), "the upstream saw \(seen)")

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

extension OTLPExportTests {
    /// SECURITY.md: with `--otlp`, the tracer's propagation is held to the same `tracestate` cap as without it
    /// (512 characters, 32 members): a signed-in user's long `tracestate` (an nginx upstream refuses an 8 KiB header
    /// with a `400`) never reaches a per-identity upstream request, and an anonymous one reaches no shared one.
    @Test func withOTLPATracestateOverTheCapNeverReachesAnUpstream() async throws {
        try await withUpstream { upstream in
            let receiver = try OTLPReceiver.start()
            defer { receiver.stop() }
            let page = "\(upstream.base)/pages/capped"
            let config = try TempConfig(
                TestConfig([
                    TestPage(
                        page,
                        [
                            TestInterface(name: "mine", api: "\(upstream.base)/capped/mine", urlParam: true, credentials: .include),
                            TestInterface(name: "shared", api: "\(upstream.base)/capped/shared", urlParam: true, credentials: .omit),
                        ])
                ]).text)
            defer { config.remove() }
            let server = try await ServeProcess.start(
                configPath: config.path, arguments: ["--otlp"], logLevel: "warning",
                environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)", "OTEL_BSP_SCHEDULE_DELAY": "100"],
                untilReady: true)
            do {
                // A valid tracestate of 890 members, 9,789 characters; one of 33 short members; one within the cap.
                let long = (0..<890).map { "k\($0)=v\(String(repeating: "x", count: 5))" }.joined(separator: ",")
                let many = (0..<33).map { "m\($0)=1" }.joined(separator: ",")
                for (state, passes) in [(long, false), (many, false), ("vendor=tenant-7", true)] {
                    let trigger = try await oneRequest(
                        port: server.port, .post, "/v1/prefetch",
                        headers: ["traceparent": "00-\(Self.shellTrace)-\(Self.shellSpan)-01", "tracestate": state, "Cookie": "sid=alice"],
                        body: #"{"url": "\#(page)?s=\#(state.count)"}"#)
                    #expect(trigger.status == 202, "\(trigger.text)")
                    let ticket = try #require(trigger.json["ticket"] as? String)
                    let mine = try await server.get("/v1/prefetch/\(ticket)/data?name=mine&wait=5000", headers: ["Cookie": "sid=alice"])
                    #expect(mine.status == 200, "\(mine.text)")
                    let sent = Echo(mine).values("tracestate")
                    #expect(
                        sent == (passes ? [state] : []),
                        "a tracestate of \(state.count) characters reached the upstream as \(sent.map(\.count))")
                    let traceparent = Echo(mine).values("traceparent").first ?? ""
                    #expect(
                        traceparent.hasPrefix("00-\(Self.shellTrace)-"),
                        "a per-identity flight continues the caller's trace: \(traceparent)")
                    let shared = try await server.get("/v1/prefetch/\(ticket)/data?name=shared&wait=5000", headers: ["Cookie": "sid=alice"])
                    #expect(shared.status == 200, "\(shared.text)")
                    #expect(Echo(shared).values("tracestate").isEmpty, "a shared flight carried the caller's tracestate")
                    #expect(!(Echo(shared).values("traceparent").first ?? "").contains(Self.shellTrace))
                }
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
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
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
