/// A W3C Trace Context `traceparent` (https://www.w3.org/TR/trace-context/): the trace a trigger belongs to, so
/// that each upstream request of the prefetch carries a child span of the shell's span and a backend's traces show
/// the prefetch under the page open.
///
/// Parsing follows the spec's rules for a receiver: version `00` is exactly `00-<32 hex>-<16 hex>-<2 hex>`; a later
/// version (not `ff`) is read by the same first four fields and may carry more after a `-`; hex is lowercase; an
/// all-zero trace id or parent id is invalid. Anything else is no trace context at all (never an error: the
/// prefetch goes ahead without one).
public struct TraceParent: Sendable, Hashable, CustomStringConvertible {
    /// 32 lowercase hex digits.
    public let traceID: String
    /// 16 lowercase hex digits: the span the header's sender made.
    public let parentID: String
    /// 2 lowercase hex digits (bit 0: sampled).
    public let flags: String

    /// The trace context in a `traceparent` header value, or nil when it is not a valid one.
    public init?(header value: String) {
        let bytes = Array(value.utf8)
        guard bytes.count >= 55, bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-")
        else { return nil }
        let version = bytes[0..<2]
        guard Self.isLowerHex(version), version.elementsEqual("ff".utf8) == false else { return nil }
        if version.elementsEqual("00".utf8) {
            guard bytes.count == 55 else { return nil }
        } else if bytes.count > 55 {
            guard bytes[55] == UInt8(ascii: "-") else { return nil }
        }
        let trace = bytes[3..<35]
        let parent = bytes[36..<52]
        let flags = bytes[53..<55]
        guard Self.isLowerHex(trace), Self.isLowerHex(parent), Self.isLowerHex(flags),
            trace.contains(where: { $0 != UInt8(ascii: "0") }), parent.contains(where: { $0 != UInt8(ascii: "0") })
        else { return nil }
        self.traceID = String(decoding: trace, as: UTF8.self)
        self.parentID = String(decoding: parent, as: UTF8.self)
        self.flags = String(decoding: flags, as: UTF8.self)
    }

    private init(traceID: String, parentID: String, flags: String) {
        self.traceID = traceID
        self.parentID = parentID
        self.flags = flags
    }

    /// A child span of this one: the same trace and flags, a fresh random span id as the parent the receiver sees.
    public func child() -> TraceParent {
        TraceParent(traceID: traceID, parentID: Hex.encode(Self.nonZero(8)), flags: flags)
    }

    /// The header value this service sends: always version `00`.
    public var header: String { "00-\(traceID)-\(parentID)-\(flags)" }

    public var description: String { header }

    /// A trigger's trace context: its `traceparent`, and its `tracestate` already capped (``cappedState(_:)``).
    public typealias Context = (parent: TraceParent, state: String?)

    /// The longest `tracestate` passed on (the spec's limit is 512 characters; a longer one is dropped).
    public static let maximumStateLength = 512
    /// The most list members a `tracestate` passed on may have (the spec's limit is 32; more is dropped).
    public static let maximumStateMembers = 32

    /// `value` as a `tracestate` passed on: unchanged when it is at most ``maximumStateLength`` characters of at
    /// most ``maximumStateMembers`` list members, nil (dropped whole) otherwise. Every path that passes a
    /// `tracestate` on (with or without a tracer) goes through this.
    public static func cappedState(_ value: String) -> String? {
        guard value.utf8.count <= maximumStateLength else { return nil }
        let members = value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true)
            .filter { $0.contains { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") } }
        return members.count <= maximumStateMembers ? value : nil
    }

    /// The root span of a new trace of the service's own: random trace and span ids, not sampled by the caller.
    public static func newRoot() -> TraceParent {
        TraceParent(traceID: Hex.encode(nonZero(16)), parentID: Hex.encode(nonZero(8)), flags: "00")
    }

    /// `count` random bytes, not all zero (the spec's invalid id), from one read of ``SecureRandom``.
    private static func nonZero(_ count: Int) -> [UInt8] {
        var bytes: [UInt8]
        repeat { bytes = SecureRandom.bytes(count) } while bytes.allSatisfy { $0 == 0 }
        return bytes
    }

    private static func isLowerHex(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }
}
