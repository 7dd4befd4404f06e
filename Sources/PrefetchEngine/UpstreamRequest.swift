import HTTPTypes
import PrefetchCore
import PrefetchFetcher
import PrefetchStore
import Tracing

/// What goes upstream for one flight of a page open, made from the inputs its store key covers and nothing else.
///
/// A stored entry is keyed by everything that determined its bytes (``Orchestrator/keys(for:credentials:)``): the
/// interface's composed request (method, URL, the config's headers, body: ``Orchestrator/keyedParts(_:)``), the
/// keys of the answers a dependent took values from, and the identity whose credentials shaped it. This is the only
/// way the engine makes a ``FetchRequest`` for a flight, and its initialiser takes exactly those inputs:
/// - the request's keyed parts (for a dependent, its form with the values taken from the answers its key names);
/// - the caller's credentials, only when the key carries their identity (checked: a key of another identity, or
///   the anonymous one, refuses them); with a cookie jar, only the jar's cookies a browser would send to the URL;
/// - the trace context the key's readers allow (``UpstreamTrace``): a flight whose entry anyone may read
///   (anonymous key) carries the service's own new trace, never the caller's `traceparent`/`tracestate`, which an
///   upstream may reflect into the body that every later reader gets; a per-identity flight continues the
///   caller's trace, its `tracestate` capped (``TraceParent/cappedState(_:)``).
///
/// No other header of the trigger has a way in: there is no parameter for one.
struct UpstreamRequest: Sendable {
    /// The request as the fetcher sends it.
    private(set) var fetch: FetchRequest
    /// Whether the flight's entry may be read by other callers (its key is anonymous).
    let isShared: Bool
    /// Whether ``fetch`` carries the caller's credentials.
    let sendsCredentials: Bool

    /// The request for a flight keyed by `key`: `parts` as composed, `credentials` when the interface's rule sends
    /// them (nil otherwise), `callerTrace` the trigger's own trace context (used only for a per-identity key).
    init(
        parts: Orchestrator.KeyedParts, key: StoreKey, credentials: Credentials?, page: HTTPURL, callerTrace: TraceParent.Context?,
        timeout: Duration, maxResponseBytes: Int, pinning: (any AddressPinning)?, group: String?
    ) {
        precondition(
            credentials == nil || credentials?.identity == key.identity,
            "a flight sends only the credentials of the identity its key carries")
        isShared = key.identity == .anonymous
        sendsCredentials = credentials != nil
        var headers = parts.headers
        if let credentials { headers.append(contentsOf: credentials.sentHeaders(for: parts.url, page: page)) }
        switch UpstreamTrace(shared: isShared, caller: callerTrace) {
        case .own(let parent):
            headers[.traceparent] = parent.header
        case .caller(let context):
            headers[.traceparent] = context.parent.child().header
            if let state = context.state { headers[.tracestate] = state }
        case .none:
            break
        }
        fetch = FetchRequest(
            method: parts.method, url: parts.url, headers: headers, body: parts.body, timeout: timeout,
            maxResponseBytes: maxResponseBytes, pinning: pinning, group: group)
    }

    /// Writes the client span's context into the request as the tracer propagates it, then holds it to the same
    /// rules as without a tracer: the span of a shared flight is the root of a trace of the service's own (the page
    /// open's `PageOpen.send` starts it so) and carries no `tracestate`; a per-identity flight carries the caller's
    /// `tracestate` as capped when the request was made, whatever the tracer carried over from the trigger.
    mutating func inject<T: Tracer>(_ span: any Span, with tracer: T) {
        let capped = isShared ? nil : fetch.headers[.tracestate]
        tracer.inject(span.context, into: &fetch.headers, using: HTTPFieldsInjector())
        fetch.headers[.tracestate] = capped
    }
}

/// The trace context an upstream request carries, decided by who may read its answer.
enum UpstreamTrace: Sendable {
    /// The service's own new trace: the flight's entry may be read by others.
    case own(TraceParent)
    /// A child span of the caller's trace: the flight's entry is the caller's identity's alone.
    case caller(TraceParent.Context)
    /// No trace context (a per-identity flight whose trigger carried none).
    case none

    init(shared: Bool, caller: TraceParent.Context?) {
        if shared {
            self = .own(TraceParent.newRoot())
        } else if let caller {
            self = .caller(caller)
        } else {
            self = .none
        }
    }
}
