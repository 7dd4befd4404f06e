import HTTPTypes
import PrefetchCore
import Testing
import Tracing

@testable import Telemetry

/// The tracer: W3C Trace Context in and out (with the service's `tracestate` cap), parents and roots, the sampler,
/// and the bounded queue finished spans wait in.
@Suite struct TracerTests {
    static let shellTrace = "0af7651916cd43dd8448eb211c80319c"
    static let shellSpan = "b7ad6b7169203331"

    func extracted(_ tracer: OTLPTracer, _ headers: [String: String]) -> ServiceContext {
        var context = ServiceContext.topLevel
        tracer.extract(headers, into: &context, using: DictionaryExtractor())
        return context
    }

    func injected(_ tracer: OTLPTracer, _ context: ServiceContext) -> [String: String] {
        var headers: [String: String] = [:]
        tracer.inject(context, into: &headers, using: DictionaryInjector())
        return headers
    }

    @Test func aChildOfAnExtractedContextContinuesItsTraceAndIsInjectedAsItsOwnSpan() throws {
        let tracer = OTLPTracer()
        let caller = extracted(tracer, ["traceparent": "00-\(Self.shellTrace)-\(Self.shellSpan)-01", "tracestate": "vendor=tenant-7"])
        let remote = try #require(caller.spanContext)
        #expect(remote.isRemote && remote.isSampled && remote.traceState == "vendor=tenant-7")
        let span = tracer.startSpan("prefetch open", context: caller, ofKind: .server)
        let own = try #require(span.context.spanContext)
        #expect(own.traceID.description == Self.shellTrace && own.spanID.description != Self.shellSpan)
        let headers = injected(tracer, span.context)
        #expect(headers["traceparent"] == "00-\(Self.shellTrace)-\(own.spanID)-01")
        #expect(headers["tracestate"] == "vendor=tenant-7")
        span.end()
        let finished = try #require(tracer.queue.takeBatch().first)
        #expect(finished.parentSpanID?.description == Self.shellSpan && finished.parentIsRemote)
        #expect(finished.name == "prefetch open" && finished.kind == .server)
        #expect(finished.endNanoseconds >= finished.startNanoseconds)
    }

    /// SECURITY.md's `tracestate` cap holds with the tracer too: one over 512 characters or 32 members is dropped
    /// on the way in, and the `traceparent` still continues the caller's trace.
    @Test func aTracestateOverTheCapIsDroppedAndTheTraceparentKept() throws {
        let tracer = OTLPTracer()
        let long = (0..<890).map { "k\($0)=v\(String(repeating: "x", count: 5))" }.joined(separator: ",")
        let many = (0..<33).map { "m\($0)=1" }.joined(separator: ",")
        for state in [long, many] {
            let context = extracted(tracer, ["traceparent": "00-\(Self.shellTrace)-\(Self.shellSpan)-01", "tracestate": state])
            #expect(context.spanContext?.traceID.description == Self.shellTrace)
            #expect(context.spanContext?.traceState == nil, "a tracestate of \(state.count) characters was kept")
            let child = tracer.startSpan("prefetch mine", context: context, ofKind: .client)
            #expect(injected(tracer, child.context)["tracestate"] == nil)
        }
        let within = (0..<32).map { "m\($0)=1" }.joined(separator: ",")
        #expect(
            extracted(tracer, ["traceparent": "00-\(Self.shellTrace)-\(Self.shellSpan)-01", "tracestate": within]).spanContext?.traceState
                == within)
    }

    @Test func anInvalidTraceparentIsNoContextAndASpanWithoutOneStartsANewTrace() throws {
        let tracer = OTLPTracer()
        for invalid in [
            "00-\(Self.shellTrace)-0000000000000000-01", "00-XYZ-\(Self.shellSpan)-01", "ff-\(Self.shellTrace)-\(Self.shellSpan)-01", "",
        ] {
            #expect(extracted(tracer, ["traceparent": invalid, "tracestate": "a=b"]).spanContext == nil, "\(invalid)")
        }
        let first = tracer.startSpan("prefetch info", context: .topLevel, ofKind: .client)
        let second = tracer.startSpan("prefetch info", context: .topLevel, ofKind: .client)
        let (one, two) = (try #require(first.context.spanContext), try #require(second.context.spanContext))
        #expect(one.traceID != two.traceID && one.isSampled)
        #expect(injected(tracer, first.context)["traceparent"] == "00-\(one.traceID)-\(one.spanID)-01")
        first.addLink(SpanLink(context: second.context, attributes: [:]))
        first.end()
        let finished = try #require(tracer.queue.takeBatch().first)
        #expect(finished.parentSpanID == nil && finished.links.map(\.context.spanID) == [two.spanID])
    }

    /// Parent-based sampling: a caller that did not sample its trace gets spans that record nothing but still carry
    /// the trace on, unsampled.
    @Test func anUnsampledParentsChildRecordsNothingButPropagates() throws {
        let tracer = OTLPTracer()
        let caller = extracted(tracer, ["traceparent": "00-\(Self.shellTrace)-\(Self.shellSpan)-00"])
        let span = tracer.startSpan("prefetch open", context: caller, ofKind: .server)
        #expect(!span.isRecording)
        span.attributes["prefetch.page"] = "ignored"
        #expect(span.attributes.isEmpty)
        span.end()
        #expect(tracer.queuedSpans == 0)
        #expect(injected(tracer, span.context)["traceparent"]?.hasPrefix("00-\(Self.shellTrace)-") == true)
        #expect(injected(tracer, span.context)["traceparent"]?.hasSuffix("-00") == true)
        let off = OTLPTracer(sampler: .alwaysOff)
        let root = off.startSpan("root", context: .topLevel, ofKind: .internal)
        #expect(!root.isRecording && root.context.spanContext != nil)
    }

    @Test func theTraceIDRatioSamplerDecidesByTheTraceIDAlone() {
        let low = TraceID(high: 1, low: 0x1000_0000_0000_0000)
        let high = TraceID(high: 1, low: 0xf000_0000_0000_0000)
        #expect(OTLPTracer.decide(.traceIDRatio(0.5), traceID: low, parent: nil))
        #expect(!OTLPTracer.decide(.traceIDRatio(0.5), traceID: high, parent: nil))
        #expect(OTLPTracer.decide(.traceIDRatio(1), traceID: high, parent: nil))
        #expect(!OTLPTracer.decide(.traceIDRatio(0), traceID: low, parent: nil))
        let sampledParent = SpanContext(traceID: high, spanID: SpanID(1), flags: 1, isRemote: true)
        #expect(OTLPTracer.decide(.parentBased(root: .traceIDRatio(0)), traceID: high, parent: sampledParent))
    }

    @Test func aSpanRecordsItsAttributesEventsAndStatusUntilItEndsAndIsQueuedOnce() throws {
        let tracer = OTLPTracer()
        let span = tracer.startSpan("prefetch info", context: .topLevel, ofKind: .client)
        span.attributes["http.request.method"] = "GET"
        span.addEvent(SpanEvent(name: "sent"))
        span.setStatus(SpanStatus(code: .error, message: "timeout"))
        span.recordError(TestFailure())
        span.end()
        span.attributes["late"] = "ignored"
        span.setStatus(SpanStatus(code: .ok))
        span.end()
        let batch = tracer.queue.takeBatch()
        #expect(batch.count == 1)
        let finished = try #require(batch.first)
        #expect(finished.attributes.get("http.request.method") == .string("GET") && finished.attributes.get("late") == nil)
        #expect(finished.events.map(\.name) == ["sent", "exception"])
        #expect(finished.status == SpanStatus(code: .error, message: "timeout"))
        #expect(!span.isRecording)
    }

    /// A full queue drops the newest spans and counts them: what waits for a slow collector is bounded.
    @Test func aFullQueueDropsNewSpansAndCountsThem() throws {
        let tracer = OTLPTracer(maxQueueSize: 3, maxExportBatchSize: 2)
        for index in 0..<8 {
            tracer.startSpan("span \(index)", context: .topLevel, ofKind: .internal).end()
        }
        #expect(tracer.queuedSpans == 3)
        #expect(tracer.droppedSpans == 5)
        #expect(tracer.queue.takeDroppedCount() == 5 && tracer.queue.takeDroppedCount() == 0)
        #expect(tracer.queue.takeBatch().map(\.name) == ["span 0", "span 1"], "the oldest first, one batch")
        tracer.startSpan("span 8", context: .topLevel, ofKind: .internal).end()
        #expect(tracer.queue.takeBatch().map(\.name) == ["span 2", "span 8"])
        #expect(tracer.droppedSpans == 5)
    }
}

struct TestFailure: Error {}

struct DictionaryExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}

struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
}
