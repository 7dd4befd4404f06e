import PrefetchCore
public import Tracing

/// A trace id: 16 bytes, never all zero (W3C Trace Context's invalid id).
public struct TraceID: Sendable, Hashable, CustomStringConvertible {
    /// The first eight bytes, big-endian.
    public var high: UInt64
    /// The last eight bytes, big-endian (what a trace-id ratio sampler compares).
    public var low: UInt64

    /// The id of these two halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A fresh random id.
    public static func random() -> TraceID {
        var random = SecureRandom()
        var id: TraceID
        repeat { id = TraceID(high: random.next(), low: random.next()) } while id.high == 0 && id.low == 0
        return id
    }

    /// The id in 32 lowercase hex digits, or nil when `hex` is not that or is all zero.
    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 32, let high = UInt64(hexDigits: utf8[0..<16]), let low = UInt64(hexDigits: utf8[16..<32]),
            high != 0 || low != 0
        else { return nil }
        self.init(high: high, low: low)
    }

    /// The 16 bytes, as the protobuf `trace_id` field carries them.
    public var bytes: [UInt8] { high.bigEndianBytes + low.bigEndianBytes }

    /// 32 lowercase hex digits, as `traceparent` carries them.
    public var description: String { Hex.encode(bytes) }
}

/// A span id: 8 bytes, never all zero.
public struct SpanID: Sendable, Hashable, CustomStringConvertible {
    /// The eight bytes, big-endian.
    public var value: UInt64

    /// The id of this value.
    public init(_ value: UInt64) {
        self.value = value
    }

    /// A fresh random id.
    public static func random() -> SpanID {
        var random = SecureRandom()
        var value: UInt64
        repeat { value = random.next() } while value == 0
        return SpanID(value)
    }

    /// The id in 16 lowercase hex digits, or nil when `hex` is not that or is all zero.
    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 16, let value = UInt64(hexDigits: utf8[...]), value != 0 else { return nil }
        self.init(value)
    }

    /// The 8 bytes, as the protobuf `span_id` fields carry them.
    public var bytes: [UInt8] { value.bigEndianBytes }

    /// 16 lowercase hex digits.
    public var description: String { Hex.encode(bytes) }
}

/// What identifies a span across processes (W3C Trace Context): its trace, its own id, the trace flags and the
/// vendors' `tracestate`. A tracer keeps it in the span's ``ServiceContext`` (``ServiceContext/spanContext``).
public struct SpanContext: Sendable, Hashable {
    /// The trace the span belongs to.
    public var traceID: TraceID
    /// The span's own id (for a context read from a `traceparent`, the sender's span).
    public var spanID: SpanID
    /// The W3C trace flags; bit 0 is "sampled".
    public var flags: UInt8
    /// The `tracestate` passed along the trace, already capped (``TraceParent/cappedState(_:)``); nil for none.
    public var traceState: String?
    /// Whether the context came from another process (a `traceparent` header).
    public var isRemote: Bool

    /// A span context of these parts.
    public init(traceID: TraceID, spanID: SpanID, flags: UInt8, traceState: String? = nil, isRemote: Bool = false) {
        self.traceID = traceID
        self.spanID = spanID
        self.flags = flags
        self.traceState = traceState
        self.isRemote = isRemote
    }

    /// Whether the trace is sampled (flag bit 0).
    public var isSampled: Bool { flags & 1 == 1 }

    /// The context a `traceparent` (and `tracestate`) header carries, by the service's own parser and cap
    /// (`TraceParent`): nil for an invalid `traceparent`; a `tracestate` over the cap is dropped and the
    /// `traceparent` kept.
    public init?(traceparent: String, tracestate: String?) {
        guard let parent = TraceParent(header: traceparent), let traceID = TraceID(hex: parent.traceID),
            let spanID = SpanID(hex: parent.parentID), let flags = UInt8(parent.flags, radix: 16)
        else { return nil }
        let state = tracestate.flatMap(TraceParent.cappedState)
        self.init(traceID: traceID, spanID: spanID, flags: flags, traceState: state?.isEmpty == true ? nil : state, isRemote: true)
    }

    /// The `traceparent` header value of this span: version `00`.
    public var traceparent: String {
        "00-\(traceID)-\(spanID)-\(Hex.encode([flags]))"
    }
}

private enum SpanContextKey: ServiceContextKey {
    typealias Value = SpanContext
    static var nameOverride: String? { "prefetch.telemetry.span-context" }
}

extension ServiceContext {
    /// The span this context is in: the parent of a span started with it, what a tracer's `inject` writes.
    public var spanContext: SpanContext? {
        get { self[SpanContextKey.self] }
        set { self[SpanContextKey.self] = newValue }
    }
}

extension UInt64 {
    /// The value of 16 hex digits (either case), or nil.
    fileprivate init?(hexDigits: ArraySlice<UInt8>) {
        guard hexDigits.count == 16 else { return nil }
        var value: UInt64 = 0
        for digit in hexDigits {
            guard let nibble = Hex.value(of: digit) else { return nil }
            value = value << 4 | UInt64(nibble)
        }
        self = value
    }

    /// The eight bytes, most significant first.
    fileprivate var bigEndianBytes: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: self >> (56 - 8 * UInt64($0))) }
    }
}
