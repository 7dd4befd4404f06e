import Metrics
import Testing
import Tracing

@testable import Telemetry

/// The export requests in protobuf: the writer's wire format, and the OTLP messages decoded back field by field
/// with the tests' own reader, by opentelemetry-proto's field numbers.
@Suite struct EncodingTests {
    @Test func theWriterEncodesTheWireFormatsPrimitives() throws {
        var writer = ProtobufWriter()
        writer.varintField(1, 150)
        #expect(writer.bytes == [0x08, 0x96, 0x01], "the specification's own example")
        writer = ProtobufWriter()
        writer.stringField(2, "testing")
        #expect(writer.bytes == [0x12, 0x07] + Array("testing".utf8))
        writer = ProtobufWriter()
        writer.int64Field(3, -1)
        #expect(writer.bytes == [0x18] + Array(repeating: 0xff, count: 9) + [0x01], "a negative int64 takes ten bytes")
        writer = ProtobufWriter()
        writer.fixed64Field(7, 0x0102_0304_0506_0708)
        #expect(writer.bytes == [0x39, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01])
        writer = ProtobufWriter()
        writer.doubleField(4, 1.5)
        #expect(try Message(writer.bytes).double(4) == 1.5)
        writer = ProtobufWriter()
        writer.fixed32Field(16, 0x301)
        #expect(writer.bytes == [0x85, 0x01, 0x01, 0x03, 0x00, 0x00])
    }

    /// A nested message's length goes in front of it: one byte under 128, more above, and the reader finds every
    /// field after it where it belongs.
    @Test func nestedMessagesOfEveryLengthAreFramedByTheirLength() throws {
        for length in [0, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            var writer = ProtobufWriter()
            writer.messageField(1) { $0.bytesField(2, [UInt8](repeating: 7, count: length)) }
            writer.varintField(3, 42)
            let message = try Message(writer.bytes)
            #expect(try message.message(1).bytes(2)?.count == length)
            #expect(message.varint(3) == 42, "length \(length)")
        }
    }

    @Test func aSpanIsEncodedWithEveryPartOfIt() throws {
        let trace = TraceID(high: 0x0af7_6519_16cd_43dd, low: 0x8448_eb21_1c80_319c)
        let parent = SpanID(0xb7ad_6b71_6920_3331)
        let own = SpanContext(traceID: trace, spanID: SpanID(0x0102_0304_0506_0708), flags: 1, traceState: "vendor=tenant-7")
        let linked = SpanContext(traceID: TraceID(high: 1, low: 2), spanID: SpanID(3), flags: 1, isRemote: true)
        var attributes = SpanAttributes()
        attributes["prefetch.interface"] = "info"
        attributes["http.response.status_code"] = 503
        attributes["ratio"] = 0.25
        attributes["shared"] = true
        attributes["tags"] = ["a", "b"]
        let span = FinishedSpan(
            name: "prefetch info", kind: .client, context: own, parentSpanID: parent, parentIsRemote: true, startNanoseconds: 1_000,
            endNanoseconds: 2_500, attributes: attributes,
            events: [SpanEvent(name: "retry", at: WallClock(nanosecondsSinceEpoch: 1_200), attributes: ["attempt": 2])],
            links: [FinishedSpan.Link(context: linked, attributes: ["why": "shared"])], droppedEvents: 0, droppedLinks: 0,
            status: SpanStatus(code: .error, message: "upstream-5xx"))

        let request = try Message(OTLPEncoding.traces([span], resource: [("service.name", "prefetch")]))
        let resourceSpans = try request.message(1)
        #expect(try resourceSpans.message(1).attributes(1)["service.name"]?.text == "prefetch")
        let scopeSpans = try resourceSpans.message(2)
        #expect(try scopeSpans.message(1).string(1) == "prefetch")
        let decoded = try scopeSpans.message(2)
        #expect(decoded.bytes(1) == trace.bytes && trace.description == "0af7651916cd43dd8448eb211c80319c")
        #expect(decoded.bytes(2) == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(decoded.string(3) == "vendor=tenant-7")
        #expect(decoded.bytes(4) == parent.bytes)
        #expect(decoded.string(5) == "prefetch info")
        #expect(decoded.varint(6) == 3, "SPAN_KIND_CLIENT")
        #expect(decoded.fixed64(7) == 1_000 && decoded.fixed64(8) == 2_500)
        let decodedAttributes = try decoded.attributes(9)
        #expect(decodedAttributes["prefetch.interface"] == .bytes(Array("info".utf8)))
        #expect(decodedAttributes["http.response.status_code"] == .varint(503))
        #expect(decodedAttributes["ratio"] == .fixed64(0.25.bitPattern))
        #expect(decodedAttributes["shared"] == .varint(1))
        let tags = try decoded.messages(9).first { $0.string(1) == "tags" }?.message(2).message(5).messages(1)
        #expect(tags?.map { $0.string(1) } == ["a", "b"])
        let event = try decoded.message(11)
        #expect(event.fixed64(1) == 1_200 && event.string(2) == "retry")
        #expect(try event.attributes(3)["attempt"] == .varint(2))
        let link = try decoded.message(13)
        #expect(link.bytes(1) == linked.traceID.bytes && link.bytes(2) == linked.spanID.bytes)
        #expect(try link.attributes(4)["why"]?.text == "shared")
        #expect(link.fixed32(6) == 0x301, "sampled, remote known, remote")
        let status = try decoded.message(15)
        #expect(status.varint(3) == 2 && status.string(2) == "upstream-5xx", "STATUS_CODE_ERROR with its message")
        #expect(decoded.fixed32(16) == 0x301)
    }

    @Test func aRootSpanHasNoParentAndAnUnsetStatusIsLeftOut() throws {
        let own = SpanContext(traceID: TraceID(high: 9, low: 9), spanID: SpanID(9), flags: 1)
        let span = FinishedSpan(
            name: "prefetch open", kind: .server, context: own, parentSpanID: nil, parentIsRemote: false, startNanoseconds: 1,
            endNanoseconds: 2, attributes: [:], events: [], links: [], droppedEvents: 0, droppedLinks: 0, status: nil)
        let decoded = try Message(OTLPEncoding.traces([span, span], resource: [])).message(1).message(2).messages(2)
        #expect(decoded.count == 2)
        #expect(decoded[0].bytes(4) == nil && decoded[0].all(15).isEmpty && decoded[0].string(3) == nil)
        #expect(decoded[0].varint(6) == 2, "SPAN_KIND_SERVER")
        #expect(decoded[0].fixed32(16) == 0x101, "sampled, local parent")
    }

    @Test func metricsAreEncodedAsCumulativeSumsGaugesAndHistograms() throws {
        let factory = OTLPMetricsFactory()
        Counter(label: "prefetch_triggers_total", dimensions: [("result", "accepted")], factory: factory).increment(by: 3)
        FloatingPointCounter(label: "cpu_seconds_total", factory: factory).increment(by: 1.5)
        Gauge(label: "prefetch_in_flight", dimensions: [("unit", "1")], factory: factory).record(7)
        let histogram = Recorder(label: "sizes", factory: factory)
        histogram.record(3)
        histogram.record(600)
        Timer(label: "latency", factory: factory).recordMilliseconds(20)

        let request = try Message(OTLPEncoding.metrics(factory.collect(now: 99), resource: [("service.name", "prefetch")]))
        let resourceMetrics = try request.message(1)
        #expect(try resourceMetrics.message(1).attributes(1)["service.name"]?.text == "prefetch")
        let metrics = try resourceMetrics.message(2).messages(2)
        let byName = Dictionary(uniqueKeysWithValues: metrics.map { ($0.string(1) ?? "", $0) })
        #expect(byName.keys.sorted() == ["cpu_seconds_total", "latency", "prefetch_in_flight", "prefetch_triggers_total", "sizes"])

        let triggers = try #require(byName["prefetch_triggers_total"]).message(7)
        #expect(triggers.varint(2) == 2 && triggers.varint(3) == 1, "cumulative and monotonic")
        let point = try triggers.message(1)
        #expect(point.fixed64(6) == 3, "as_int")
        #expect(point.fixed64(3) == 99)
        #expect(try point.attributes(7)["result"]?.text == "accepted")

        #expect(try #require(byName["cpu_seconds_total"]).message(7).message(1).double(4) == 1.5)
        let gauge = try #require(byName["prefetch_in_flight"])
        #expect(gauge.string(3) == "1", "the unit dimension is the unit, not an attribute")
        #expect(try gauge.message(5).message(1).double(4) == 7)
        #expect(try gauge.message(5).message(1).attributes(7).isEmpty)

        let sizes = try #require(byName["sizes"]).message(9)
        #expect(sizes.varint(2) == 2)
        let sizesPoint = try sizes.message(1)
        #expect(sizesPoint.fixed64(4) == 2 && sizesPoint.double(5) == 603)
        let bounds = sizesPoint.packedFixed64(7).map(Double.init(bitPattern:))
        #expect(bounds == OTLPMetricsFactory.defaultValueBounds)
        let counts = sizesPoint.packedFixed64(6)
        #expect(counts.count == bounds.count + 1)
        #expect(counts[1] == 1 && counts[9] == 1 && counts.reduce(0, +) == 2, "3 in (0, 5], 600 in (500, 750]")
        #expect(sizesPoint.double(11) == 3 && sizesPoint.double(12) == 600)

        let latency = try #require(byName["latency"])
        #expect(latency.string(3) == "s")
        let latencyPoint = try latency.message(9).message(1)
        #expect(latencyPoint.double(5) == 0.02, "timers in seconds")
        #expect(latencyPoint.packedFixed64(6)[3] == 1, "20 ms in (0.01, 0.025]")
    }
}

/// A fixed instant for events.
struct WallClock: TracerInstant {
    var nanosecondsSinceEpoch: UInt64
    static func < (lhs: Self, rhs: Self) -> Bool { lhs.nanosecondsSinceEpoch < rhs.nanosecondsSinceEpoch }
}
