import Synchronization
public import Tracing

/// A swift-distributed-tracing `Tracer` whose finished spans are queued for OTLP export (``SpanExporter`` sends
/// them), propagating W3C Trace Context (`traceparent`, `tracestate`).
///
/// A span started with a context that holds a span (``ServiceContext/spanContext``, put there by `extract` or by
/// another span) is its child, in its trace; one started without is the root of a new trace. The sampler decides
/// whether a span is recorded: one that is not still gets a context of its own, so the trace propagates unsampled.
/// `extract` reads `traceparent` by the service's own parser (`TraceParent`) and keeps a `tracestate` only within the
/// service's cap (`TraceParent.cappedState`: 512 characters, 32 members), so a long one is dropped before any span
/// carries it on.
public final class OTLPTracer: Tracer, Sendable {
    /// Events kept per span; later ones are counted as dropped.
    public static let maximumEvents = 128
    /// Links kept per span; later ones are counted as dropped.
    public static let maximumLinks = 128

    let queue: SpanQueue
    let sampler: OTLPConfiguration.Sampler

    /// A tracer queueing at most `maxQueueSize` finished spans, woken for export per `maxExportBatchSize`.
    public init(sampler: OTLPConfiguration.Sampler = .parentBased(root: .alwaysOn), maxQueueSize: Int = 2048, maxExportBatchSize: Int = 512)
    {
        self.sampler = sampler
        self.queue = SpanQueue(capacity: maxQueueSize, batchSize: maxExportBatchSize)
    }

    /// Finished spans waiting for export.
    public var queuedSpans: Int { queue.count }

    /// Spans dropped because the queue was full, since the tracer was made.
    public var droppedSpans: Int { queue.dropped }

    /// A span in the trace of `context`'s span (a root of a new trace when it holds none), recording when the
    /// sampler says so.
    public func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind, at instant: @autoclosure () -> Instant,
        function: String, file fileID: String, line: UInt
    ) -> OTLPSpan {
        var context = context()
        let parent = context.spanContext
        let traceID = parent?.traceID ?? TraceID.random()
        let sampled = Self.decide(sampler, traceID: traceID, parent: parent)
        let own = SpanContext(
            traceID: traceID, spanID: SpanID.random(), flags: (parent?.flags ?? 0) & ~1 | (sampled ? 1 : 0),
            traceState: parent?.traceState)
        context.spanContext = own
        guard sampled else { return OTLPSpan(context: context, recording: nil) }
        let recording = OTLPSpan.Recording(
            name: operationName, kind: kind, parent: parent, start: instant().nanosecondsSinceEpoch, queue: queue)
        return OTLPSpan(context: context, recording: recording)
    }

    /// Whether a span of `traceID` under `parent` is recorded and sampled.
    static func decide(_ sampler: OTLPConfiguration.Sampler, traceID: TraceID, parent: SpanContext?) -> Bool {
        switch sampler {
        case .alwaysOn: return true
        case .alwaysOff: return false
        case .traceIDRatio(let ratio):
            // The specification's rule: the trace id's low eight bytes against the ratio of their range.
            if ratio >= 1 { return true }
            if ratio <= 0 { return false }
            return traceID.low < UInt64(ratio * 0x1p64)
        case .parentBased(let root):
            guard let parent else { return decide(root, traceID: traceID, parent: nil) }
            return parent.isSampled
        }
    }

    /// Asks the exporter to send what is queued now.
    public func forceFlush() {
        queue.requestFlush()
    }

    /// Puts the remote span of `carrier`'s `traceparent` (and capped `tracestate`) into `context`; nothing for an
    /// invalid one.
    public func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {
        guard let traceparent = extractor.extract(key: "traceparent", from: carrier),
            let remote = SpanContext(traceparent: traceparent, tracestate: extractor.extract(key: "tracestate", from: carrier))
        else { return }
        context.spanContext = remote
    }

    /// Writes `context`'s span as `traceparent` (and its `tracestate`, if any) into `carrier`.
    public func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let span = context.spanContext else { return }
        injector.inject(span.traceparent, forKey: "traceparent", into: &carrier)
        if let state = span.traceState, !state.isEmpty { injector.inject(state, forKey: "tracestate", into: &carrier) }
    }
}

/// A span of ``OTLPTracer``: recording (sampled) or not. A recording span is queued for export when it ends, once;
/// changes after its end are ignored.
public final class OTLPSpan: Span, Sendable {
    /// The context the span is in: its own ``SpanContext`` (``ServiceContext/spanContext``) and its parent's rest.
    public let context: ServiceContext
    private let recording: Recording?

    init(context: ServiceContext, recording: Recording?) {
        self.context = context
        self.recording = recording
    }

    /// What a recording span holds until it ends.
    final class Recording: Sendable {
        struct State {
            var name: String
            var attributes: SpanAttributes = [:]
            var events: [SpanEvent] = []
            var links: [FinishedSpan.Link] = []
            var droppedEvents = 0
            var droppedLinks = 0
            var status: SpanStatus?
            var ended = false
        }

        let kind: SpanKind
        let parent: SpanContext?
        let start: UInt64
        let queue: SpanQueue
        let state: Mutex<State>

        init(name: String, kind: SpanKind, parent: SpanContext?, start: UInt64, queue: SpanQueue) {
            self.kind = kind
            self.parent = parent
            self.start = start
            self.queue = queue
            self.state = Mutex(State(name: name))
        }

        /// Applies `change` unless the span has ended.
        func update(_ change: (inout State) -> Void) {
            state.withLock { state in
                guard !state.ended else { return }
                change(&state)
            }
        }
    }

    /// The span's name ("" when it does not record).
    public var operationName: String {
        get { recording?.state.withLock { $0.name } ?? "" }
        set { recording?.update { $0.name = newValue } }
    }

    /// The span's attributes (none when it does not record).
    public var attributes: SpanAttributes {
        get { recording?.state.withLock { $0.attributes } ?? [:] }
        set { recording?.update { $0.attributes = newValue } }
    }

    /// Whether the span records and has not ended.
    public var isRecording: Bool {
        guard let recording else { return false }
        return recording.state.withLock { !$0.ended }
    }

    /// An `ok` status is final; `error` may later become `ok` (the specification's rule).
    public func setStatus(_ status: SpanStatus) {
        recording?.update { state in
            if state.status?.code == .ok { return }
            state.status = status
        }
    }

    /// Adds `event` (at most ``OTLPTracer/maximumEvents``; later ones are counted as dropped).
    public func addEvent(_ event: SpanEvent) {
        recording?.update { state in
            if state.events.count < OTLPTracer.maximumEvents {
                state.events.append(event)
            } else {
                state.droppedEvents += 1
            }
        }
    }

    /// An `exception` event with the error's type and description (the semantic conventions' attributes).
    public func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant)
    {
        guard let recording else { return }
        var attributes = attributes
        attributes["exception.type"] = String(reflecting: type(of: error))
        attributes["exception.message"] = String(describing: error)
        let event = SpanEvent(name: "exception", at: instant(), attributes: attributes)
        recording.update { state in
            if state.events.count < OTLPTracer.maximumEvents {
                state.events.append(event)
            } else {
                state.droppedEvents += 1
            }
        }
    }

    /// Links to the span of `link.context` (nothing when it holds no span).
    public func addLink(_ link: SpanLink) {
        guard let target = link.context.spanContext else { return }
        recording?.update { state in
            if state.links.count < OTLPTracer.maximumLinks {
                state.links.append(FinishedSpan.Link(context: target, attributes: link.attributes))
            } else {
                state.droppedLinks += 1
            }
        }
    }

    /// Ends the span at `instant` and queues it for export (the first end only).
    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        guard let recording, let own = context.spanContext else { return }
        let ended = recording.state.withLock { state -> Recording.State? in
            guard !state.ended else { return nil }
            state.ended = true
            return state
        }
        guard let ended else { return }
        let end = max(instant().nanosecondsSinceEpoch, recording.start)
        recording.queue.append(
            FinishedSpan(
                name: ended.name, kind: recording.kind, context: own, parentSpanID: recording.parent?.spanID,
                parentIsRemote: recording.parent?.isRemote ?? false, startNanoseconds: recording.start, endNanoseconds: end,
                attributes: ended.attributes, events: ended.events, links: ended.links, droppedEvents: ended.droppedEvents,
                droppedLinks: ended.droppedLinks, status: ended.status))
    }
}
