import Tracing

/// The OTLP export requests in protobuf (opentelemetry-proto's `collector/trace/v1` and `collector/metrics/v1`),
/// written field by field with ``ProtobufWriter``. The field numbers are the protocol's; each message's comment
/// names it.
enum OTLPEncoding {
    /// The instrumentation scope every span and metric is exported under.
    static let scopeName = "prefetch"
    /// Attributes kept per span, event or link; later ones are counted as dropped.
    static let maximumAttributes = 128

    /// `ExportTraceServiceRequest` of `spans`, all under one resource and scope.
    static func traces(_ spans: [FinishedSpan], resource: [(key: String, value: String)]) -> [UInt8] {
        var writer = ProtobufWriter()
        // ExportTraceServiceRequest.resource_spans = 1
        writer.messageField(1) { resourceSpans in
            // ResourceSpans.resource = 1
            resourceSpans.messageField(1) { self.resource(resource, into: &$0) }
            // ResourceSpans.scope_spans = 2
            resourceSpans.messageField(2) { scopeSpans in
                // ScopeSpans.scope = 1
                scopeSpans.messageField(1) { scope(into: &$0) }
                // ScopeSpans.spans = 2
                for span in spans {
                    scopeSpans.messageField(2) { self.span(span, into: &$0) }
                }
            }
        }
        return writer.bytes
    }

    /// `ExportMetricsServiceRequest` of `metrics`, all under one resource and scope.
    static func metrics(_ metrics: [MetricData], resource: [(key: String, value: String)]) -> [UInt8] {
        var writer = ProtobufWriter()
        // ExportMetricsServiceRequest.resource_metrics = 1
        writer.messageField(1) { resourceMetrics in
            // ResourceMetrics.resource = 1
            resourceMetrics.messageField(1) { self.resource(resource, into: &$0) }
            // ResourceMetrics.scope_metrics = 2
            resourceMetrics.messageField(2) { scopeMetrics in
                // ScopeMetrics.scope = 1
                scopeMetrics.messageField(1) { scope(into: &$0) }
                // ScopeMetrics.metrics = 2
                for metric in metrics {
                    scopeMetrics.messageField(2) { self.metric(metric, into: &$0) }
                }
            }
        }
        return writer.bytes
    }

    // MARK: Common

    /// `Resource`: attributes = 1.
    private static func resource(_ attributes: [(key: String, value: String)], into writer: inout ProtobufWriter) {
        for (key, value) in attributes {
            writer.messageField(1) { keyValue(key, into: &$0) { $0.stringField(1, value) } }
        }
    }

    /// `InstrumentationScope`: name = 1.
    private static func scope(into writer: inout ProtobufWriter) {
        writer.stringField(1, scopeName)
    }

    /// `KeyValue`: key = 1, value = 2 (an `AnyValue` that `value` writes).
    private static func keyValue(_ key: String, into writer: inout ProtobufWriter, value: (inout ProtobufWriter) -> Void) {
        writer.stringField(1, key)
        writer.messageField(2, value)
    }

    /// `attributes` as `KeyValue` fields numbered `field`, sorted by key, at most ``maximumAttributes``; returns how
    /// many were left out.
    @discardableResult
    private static func attributes(_ attributes: SpanAttributes, field: Int, into writer: inout ProtobufWriter) -> Int {
        var pairs: [(String, SpanAttribute)] = []
        pairs.reserveCapacity(attributes.count)
        attributes.forEach { pairs.append(($0, $1)) }
        pairs.sort { $0.0 < $1.0 }
        for (key, attribute) in pairs.prefix(maximumAttributes) {
            writer.messageField(field) { keyValue(key, into: &$0) { anyValue(attribute, into: &$0) } }
        }
        return max(0, pairs.count - maximumAttributes)
    }

    /// `AnyValue`: string_value = 1, bool_value = 2, int_value = 3, double_value = 4, array_value = 5 (`ArrayValue`:
    /// values = 1). A `oneof`: the member is written even at its default, so it is present.
    private static func anyValue(_ attribute: SpanAttribute, into writer: inout ProtobufWriter) {
        func array<T>(_ values: [T], _ element: @escaping (T, inout ProtobufWriter) -> Void) {
            writer.messageField(5) { list in
                for value in values { list.messageField(1) { element(value, &$0) } }
            }
        }
        switch attribute {
        case .int32(let value): writer.int64Field(3, Int64(value))
        case .int64(let value): writer.int64Field(3, value)
        case .double(let value): writer.doubleField(4, value)
        case .bool(let value): writer.boolField(2, value)
        case .string(let value): writer.stringField(1, value)
        case .stringConvertible(let value): writer.stringField(1, value.description)
        case .int32Array(let values): array(values) { $1.int64Field(3, Int64($0)) }
        case .int64Array(let values): array(values) { $1.int64Field(3, $0) }
        case .doubleArray(let values): array(values) { $1.doubleField(4, $0) }
        case .boolArray(let values): array(values) { $1.boolField(2, $0) }
        case .stringArray(let values): array(values) { $1.stringField(1, $0) }
        case .stringConvertibleArray(let values): array(values) { $1.stringField(1, $0.description) }
        default: writer.stringField(1, "")
        }
    }

    // MARK: Traces

    /// `Span.flags`' bits beside the trace flags: whether the parent's remoteness is known, and that it is remote.
    private static let hasIsRemote: UInt32 = 0x100
    private static let isRemote: UInt32 = 0x200

    /// `Span`: trace_id = 1, span_id = 2, trace_state = 3, parent_span_id = 4, name = 5, kind = 6,
    /// start_time_unix_nano = 7, end_time_unix_nano = 8, attributes = 9, dropped_attributes_count = 10, events = 11,
    /// dropped_events_count = 12, links = 13, dropped_links_count = 14, status = 15, flags = 16.
    private static func span(_ span: FinishedSpan, into writer: inout ProtobufWriter) {
        writer.bytesField(1, span.context.traceID.bytes)
        writer.bytesField(2, span.context.spanID.bytes)
        if let state = span.context.traceState, !state.isEmpty { writer.stringField(3, state) }
        if let parent = span.parentSpanID { writer.bytesField(4, parent.bytes) }
        writer.stringField(5, span.name)
        writer.varintField(6, kind(span.kind))
        writer.fixed64Field(7, span.startNanoseconds)
        writer.fixed64Field(8, span.endNanoseconds)
        let droppedAttributes = attributes(span.attributes, field: 9, into: &writer)
        if droppedAttributes > 0 { writer.varintField(10, UInt64(droppedAttributes)) }
        for event in span.events {
            // Span.Event: time_unix_nano = 1, name = 2, attributes = 3, dropped_attributes_count = 4.
            writer.messageField(11) { eventWriter in
                eventWriter.fixed64Field(1, event.nanosecondsSinceEpoch)
                eventWriter.stringField(2, event.name)
                let dropped = attributes(event.attributes, field: 3, into: &eventWriter)
                if dropped > 0 { eventWriter.varintField(4, UInt64(dropped)) }
            }
        }
        if span.droppedEvents > 0 { writer.varintField(12, UInt64(span.droppedEvents)) }
        for link in span.links {
            // Span.Link: trace_id = 1, span_id = 2, trace_state = 3, attributes = 4, dropped_attributes_count = 5,
            // flags = 6.
            writer.messageField(13) { linkWriter in
                linkWriter.bytesField(1, link.context.traceID.bytes)
                linkWriter.bytesField(2, link.context.spanID.bytes)
                if let state = link.context.traceState, !state.isEmpty { linkWriter.stringField(3, state) }
                let dropped = attributes(link.attributes, field: 4, into: &linkWriter)
                if dropped > 0 { linkWriter.varintField(5, UInt64(dropped)) }
                linkWriter.fixed32Field(6, UInt32(link.context.flags) | hasIsRemote | (link.context.isRemote ? isRemote : 0))
            }
        }
        if span.droppedLinks > 0 { writer.varintField(14, UInt64(span.droppedLinks)) }
        if let status = span.status {
            // Status: message = 2, code = 3 (OK 1, ERROR 2).
            writer.messageField(15) { statusWriter in
                if status.code == .error, let message = status.message, !message.isEmpty { statusWriter.stringField(2, message) }
                statusWriter.varintField(3, status.code == .ok ? 1 : 2)
            }
        }
        writer.fixed32Field(16, UInt32(span.context.flags) | hasIsRemote | (span.parentIsRemote ? isRemote : 0))
    }

    /// `Span.SpanKind`: INTERNAL 1, SERVER 2, CLIENT 3, PRODUCER 4, CONSUMER 5.
    static func kind(_ kind: SpanKind) -> UInt64 {
        switch kind {
        case .internal: 1
        case .server: 2
        case .client: 3
        case .producer: 4
        case .consumer: 5
        }
    }

    // MARK: Metrics

    /// `AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE`.
    private static let cumulative: UInt64 = 2

    /// `Metric`: name = 1, description = 2, unit = 3, gauge = 5, sum = 7, histogram = 9. Timers are in seconds.
    private static func metric(_ metric: MetricData, into writer: inout ProtobufWriter) {
        writer.stringField(1, metric.name)
        if !metric.identity.description.isEmpty { writer.stringField(2, metric.identity.description) }
        let unit = metric.identity.unit.isEmpty && metric.kind == .timer ? "s" : metric.identity.unit
        if !unit.isEmpty { writer.stringField(3, unit) }
        switch metric.kind {
        case .counter, .floatingPointCounter:
            // Sum: data_points = 1, aggregation_temporality = 2, is_monotonic = 3.
            writer.messageField(7) { sum in
                for point in metric.points { sum.messageField(1) { numberPoint(point, into: &$0) } }
                sum.varintField(2, cumulative)
                sum.boolField(3, true)
            }
        case .gauge:
            // Gauge: data_points = 1.
            writer.messageField(5) { gauge in
                for point in metric.points { gauge.messageField(1) { numberPoint(point, into: &$0) } }
            }
        case .histogram, .timer:
            // Histogram: data_points = 1, aggregation_temporality = 2.
            writer.messageField(9) { histogram in
                for point in metric.points { histogram.messageField(1) { histogramPoint(point, into: &$0) } }
                histogram.varintField(2, cumulative)
            }
        }
    }

    /// A point's attributes, as `KeyValue`s numbered `field`.
    private static func pointAttributes(_ point: MetricPoint, field: Int, into writer: inout ProtobufWriter) {
        for attribute in point.attributes {
            writer.messageField(field) { keyValue(attribute.key, into: &$0) { $0.stringField(1, attribute.value) } }
        }
    }

    /// `NumberDataPoint`: start_time_unix_nano = 2, time_unix_nano = 3, as_double = 4, as_int = 6, attributes = 7.
    private static func numberPoint(_ point: MetricPoint, into writer: inout ProtobufWriter) {
        writer.fixed64Field(2, point.start)
        writer.fixed64Field(3, point.time)
        switch point.value {
        case .int(let value): writer.sfixed64Field(6, value)
        case .double(let value): writer.doubleField(4, value)
        case .histogram: break
        }
        pointAttributes(point, field: 7, into: &writer)
    }

    /// `HistogramDataPoint`: start_time_unix_nano = 2, time_unix_nano = 3, count = 4, sum = 5, bucket_counts = 6,
    /// explicit_bounds = 7, attributes = 9, min = 11, max = 12.
    private static func histogramPoint(_ point: MetricPoint, into writer: inout ProtobufWriter) {
        guard case .histogram(let histogram) = point.value else { return }
        writer.fixed64Field(2, point.start)
        writer.fixed64Field(3, point.time)
        writer.fixed64Field(4, histogram.count)
        writer.doubleField(5, histogram.sum)
        writer.packedFixed64Field(6, histogram.counts)
        writer.packedDoubleField(7, histogram.bounds)
        pointAttributes(point, field: 9, into: &writer)
        if let min = histogram.min { writer.doubleField(11, min) }
        if let max = histogram.max { writer.doubleField(12, max) }
    }
}
