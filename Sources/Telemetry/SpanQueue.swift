import Synchronization
public import Tracing

/// A span as it is exported: everything recorded by the time it ended.
public struct FinishedSpan: Sendable {
    /// A link to another span, with the attributes that describe it.
    public struct Link: Sendable {
        /// The linked span.
        public var context: SpanContext
        /// What describes the link.
        public var attributes: SpanAttributes
    }

    /// The operation's name.
    public var name: String
    /// Server, client, producer, consumer or internal.
    public var kind: SpanKind
    /// The span's own context.
    public var context: SpanContext
    /// The parent's span id, or nil for a root.
    public var parentSpanID: SpanID?
    /// Whether the parent came from another process.
    public var parentIsRemote: Bool
    /// Start, in nanoseconds since the Unix epoch.
    public var startNanoseconds: UInt64
    /// End, in nanoseconds since the Unix epoch.
    public var endNanoseconds: UInt64
    /// Its attributes.
    public var attributes: SpanAttributes
    /// Its events, oldest first (at most ``OTLPTracer/maximumEvents``).
    public var events: [SpanEvent]
    /// Its links (at most ``OTLPTracer/maximumLinks``).
    public var links: [Link]
    /// Events and links beyond the limits, not kept.
    public var droppedEvents: Int, droppedLinks: Int
    /// Its status; nil when never set (unset).
    public var status: SpanStatus?
}

/// Finished spans waiting for export, at most `capacity`: a span that finds the queue full is dropped and counted,
/// so a collector that is slow or gone costs a bounded amount of memory, never a blocked request. The exporter is
/// woken when a whole batch is waiting.
final class SpanQueue: Sendable {
    let capacity: Int
    let batchSize: Int
    let wakeup = Wakeup()

    private struct State {
        var spans: [FinishedSpan] = []
        var dropped = 0
        var droppedSinceTaken = 0
    }

    private let state = Mutex(State())
    private let flushRequested = Atomic(false)

    init(capacity: Int, batchSize: Int) {
        self.capacity = max(1, capacity)
        self.batchSize = max(1, min(batchSize, self.capacity))
    }

    /// Queues `span`, or drops it when the queue is full.
    func append(_ span: FinishedSpan) {
        let batchReady = state.withLock { state in
            guard state.spans.count < capacity else {
                state.dropped += 1
                state.droppedSinceTaken += 1
                return false
            }
            state.spans.append(span)
            return state.spans.count == batchSize
        }
        if batchReady { wakeup.signal() }
    }

    /// Asks the exporter to send what is queued without waiting for a whole batch or the delay.
    func requestFlush() {
        flushRequested.store(true, ordering: .releasing)
        wakeup.signal()
    }

    /// Whether a flush was asked for since the last call.
    func takeFlushRequest() -> Bool {
        flushRequested.exchange(false, ordering: .acquiringAndReleasing)
    }

    /// Takes the oldest spans, at most one batch.
    func takeBatch() -> [FinishedSpan] {
        state.withLock { state in
            let count = min(batchSize, state.spans.count)
            let batch = Array(state.spans.prefix(count))
            state.spans.removeFirst(count)
            return batch
        }
    }

    /// Spans waiting now.
    var count: Int { state.withLock { $0.spans.count } }

    /// Whether a whole batch is waiting.
    var hasFullBatch: Bool { count >= batchSize }

    /// Spans dropped since the queue was made.
    var dropped: Int { state.withLock { $0.dropped } }

    /// Spans dropped since the last call (for the exporter's warning).
    func takeDroppedCount() -> Int {
        state.withLock { state in
            defer { state.droppedSinceTaken = 0 }
            return state.droppedSinceTaken
        }
    }
}

/// Wakes one waiting task; a signal with no one waiting is kept for the next wait. A wakeup says only "look again":
/// the waiter decides from the state it guards.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    /// Wakes the waiter, or the next one to wait.
    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at the next signal (at once when one is pending) or when the task is cancelled.
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
