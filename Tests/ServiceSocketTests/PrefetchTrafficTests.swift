import Foundation
import InMemoryTracing
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// Prefetch traffic says so: what the upstream receives, read back from its echo of each request.
@Suite struct PrefetchTrafficTests {
    static let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    /// A page at `/pages/<path>` whose GET interfaces `names` call `/<path>/<name>`; those in `quiet` opt out of
    /// `Sec-Purpose`.
    static func page(_ base: String, _ path: String, _ names: [String], quiet: Set<String> = []) -> (page: String, config: TestConfig) {
        let page = "\(base)/pages/\(path)"
        let interfaces = names.map { name in
            TestInterface(name: name, api: "\(base)/\(path)/\(name)", secPurpose: quiet.contains(name) ? false : nil)
        }
        return (page, TestConfig([TestPage(page, interfaces)]))
    }

    /// Every upstream request carries `Sec-Purpose: prefetch` unless its interface opts out, and a signed-in
    /// trigger's `traceparent` arrives at each of its per-identity upstream requests as a child span of the same
    /// trace, `tracestate` unchanged.
    @Test func upstreamsSeeThePurposeAndTheTrace() async throws {
        try await withUpstream { upstream in
            let (page, config) = Self.page(upstream.base, "traffic", ["a", "b", "quiet"], quiet: ["quiet"])
            try await withService(config: config) { service in
                let trigger = try await service.trigger(
                    page, credentials: ["Cookie": "sid=alice"],
                    requestHeaders: ["traceparent": Self.traceparent, "tracestate": "vendor=abc,other=1"])
                #expect(trigger.status == 202, "\(trigger.text)")
                let ticket = try trigger.decoded(TriggerAnswer.self).ticket
                var spans: [String] = []
                for name in ["a", "b", "quiet"] {
                    let reply = try await service.get(
                        "/v1/prefetch/\(ticket)/data?name=\(name)&wait=5000", headers: ["Cookie": "sid=alice"])
                    #expect(reply.status == 200, "\(name): \(reply.text)")
                    let echo = Echo(reply)
                    #expect(echo.values("Sec-Purpose") == (name == "quiet" ? [] : ["prefetch"]), "\(name)")
                    let sent = try #require(echo.values("traceparent").first.flatMap { TraceParent(header: $0) }, "\(name)")
                    #expect(sent.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" && sent.flags == "01")
                    #expect(sent.parentID != "00f067aa0ba902b7", "a child span, not the shell's own")
                    #expect(echo.values("tracestate") == ["vendor=abc,other=1"])
                    spans.append(sent.parentID)
                }
                #expect(Set(spans).count == 3, "each upstream request is its own span")
            }
        }
    }

    /// An anonymous trigger's requests make entries anyone may read: each carries a new trace of the service's own,
    /// never the trigger's `traceparent` or `tracestate` (an upstream that reflects them would store them for the
    /// next reader).
    @Test func anAnonymousTriggersTraceNeverReachesASharedFlight() async throws {
        try await withUpstream { upstream in
            let (page, config) = Self.page(upstream.base, "traffic-shared", ["a", "b"])
            try await withService(config: config) { service in
                let trigger = try await service.trigger(
                    page, requestHeaders: ["traceparent": Self.traceparent, "tracestate": "mallory=payload"])
                let ticket = try trigger.decoded(TriggerAnswer.self).ticket
                var traces: Set<String> = []
                for name in ["a", "b"] {
                    let reply = try await service.get("/v1/prefetch/\(ticket)/data?name=\(name)&wait=5000")
                    #expect(reply.status == 200, "\(name): \(reply.text)")
                    let echo = Echo(reply)
                    let sent = try #require(echo.values("traceparent").first.flatMap { TraceParent(header: $0) }, "\(name)")
                    #expect(sent.traceID != "4bf92f3577b34da6a3ce929d0e0e4736", "\(name) carried the trigger's trace")
                    #expect(echo.values("tracestate").isEmpty, "\(name) carried the trigger's tracestate")
                    #expect(!reply.text.contains("mallory"))
                    traces.insert(sent.traceID)
                }
                #expect(traces.count == 2, "each shared flight is a trace of its own")
            }
        }
    }

    /// A malformed `traceparent` is ignored, never refused and never forwarded.
    @Test func aMalformedTraceparentIsDropped() async throws {
        try await withUpstream { upstream in
            let (page, config) = Self.page(upstream.base, "traffic-bad", ["a"])
            try await withService(config: config) { service in
                let trigger = try await service.trigger(
                    page,
                    requestHeaders: ["traceparent": "00-\(String(repeating: "0", count: 32))-00f067aa0ba902b7-01", "tracestate": "x=1"])
                #expect(trigger.status == 202, "\(trigger.text)")
                let ticket = try trigger.decoded(TriggerAnswer.self).ticket
                let echo = Echo(try await service.get("/v1/prefetch/\(ticket)/data?name=a&wait=5000"))
                // The shared flight carries a trace of the service's own, never the malformed one.
                #expect(echo.values("traceparent").count == 1 && echo.values("traceparent").allSatisfy { TraceParent(header: $0) != nil })
                #expect(echo.values("tracestate").isEmpty, "no trace state without a trace")
                #expect(echo.values("Sec-Purpose") == ["prefetch"])
            }
        }
    }

    /// With a tracer (swift-distributed-tracing), the page open is a span continuing the context the tracer extracted
    /// from the trigger, each per-identity upstream request a client span under it, and the tracer's own propagation
    /// reaches the upstream.
    @Test func eachUpstreamRequestIsASpanOfTheTriggersTrace() async throws {
        try await withUpstream { upstream in
            let (page, config) = Self.page(upstream.base, "traced", ["a", "b"])
            let tracer = InMemoryTracer()
            try await withService(config: config, tracer: tracer) { service in
                let trigger = try await service.trigger(
                    page, credentials: ["Cookie": "sid=alice"],
                    requestHeaders: [InMemoryTracer.traceIDKey: "shell-trace", InMemoryTracer.spanIDKey: "shell-span"])
                let ticket = try trigger.decoded(TriggerAnswer.self).ticket
                var seen: [String: String] = [:]
                for name in ["a", "b"] {
                    let echo = Echo(
                        try await service.get("/v1/prefetch/\(ticket)/data?name=\(name)&wait=5000", headers: ["Cookie": "sid=alice"]))
                    #expect(echo.values(InMemoryTracer.traceIDKey) == ["shell-trace"], "\(name)")
                    seen[name] = echo.values(InMemoryTracer.spanIDKey).first
                }
                let open = try #require(tracer.finishedSpans.first { $0.operationName == "prefetch open" })
                #expect(
                    open.spanContext.traceID == "shell-trace" && open.spanContext.parentSpanID == "shell-span",
                    "a child of the shell's span")
                let spans = tracer.finishedSpans.filter { ["prefetch a", "prefetch b"].contains($0.operationName) }
                #expect(spans.count == 2)
                for span in spans {
                    #expect(span.spanContext.traceID == "shell-trace")
                    #expect(span.spanContext.parentSpanID == open.spanContext.spanID, "a child of the page open's span")
                    #expect(seen[String(span.operationName.dropFirst("prefetch ".count))] == span.spanContext.spanID)
                }
            }
        }
    }
}
