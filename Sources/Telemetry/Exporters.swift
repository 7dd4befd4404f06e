public import Logging
public import PrefetchCore
public import ServiceLifecycle
import Synchronization

/// Exports the finished spans of an ``OTLPTracer`` in batches: when a whole batch (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`)
/// is waiting, or `OTEL_BSP_SCHEDULE_DELAY` after the last export, whichever comes first. On graceful shutdown it
/// sends everything still queued (one try per batch) and returns; cancelled, it returns at once.
///
/// Run it before the services whose spans it exports and stop it after them (a `ServiceGroup` stops its services
/// in reverse order), with the sender's fetcher running longer still.
public final class SpanExporter: Service, Sendable {
    let queue: SpanQueue
    let resource: [(key: String, value: String)]
    let scheduleDelay: Duration
    let sender: any OTLPSender
    let clock: any ServiceClock
    let logger: Logger
    let stop = StopSignal()

    /// An exporter of `tracer`'s spans with `resource`, every `scheduleDelay` at the latest, through `sender`.
    public init(
        tracer: OTLPTracer, resource: [(key: String, value: String)], scheduleDelay: Duration, sender: any OTLPSender,
        clock: any ServiceClock = ContinuousClock(), logger: Logger
    ) {
        self.queue = tracer.queue
        self.resource = resource
        self.scheduleDelay = scheduleDelay
        self.sender = sender
        self.clock = clock
        self.logger = logger
    }

    /// Exports until graceful shutdown, then flushes.
    public func run() async {
        var delivery = ExportDelivery(sender: sender, signal: .traces, clock: clock, logger: logger, stop: stop)
        await withGracefulShutdownHandler {
            while !stop.isStopped && !Task.isCancelled {
                // A partial batch waits out the delay (a wakeup may be left from a batch already sent: look again).
                let deadline = clock.now.advanced(by: scheduleDelay)
                while !queue.hasFullBatch && !queue.takeFlushRequest() && !stop.isStopped && !Task.isCancelled && clock.now < deadline {
                    await queue.wakeup.wait(until: deadline, clock: clock)
                }
                if stop.isStopped || Task.isCancelled { break }
                await export(queue.takeBatch(), with: &delivery)
            }
        } onGracefulShutdown: {
            self.stop.trigger()
            self.queue.wakeup.signal()
        }
        // Flush: what the last requests left, one try per batch.
        while !Task.isCancelled && queue.count > 0 {
            await export(queue.takeBatch(), with: &delivery)
        }
        reportDrops()
    }

    private func export(_ batch: [FinishedSpan], with delivery: inout ExportDelivery) async {
        reportDrops()
        guard !batch.isEmpty else { return }
        await delivery.deliver(OTLPEncoding.traces(batch, resource: resource), items: batch.count)
    }

    private func reportDrops() {
        let dropped = queue.takeDroppedCount()
        if dropped > 0 {
            logger.warning(
                "OTLP span queue full: spans dropped", metadata: ["dropped": "\(dropped)", "queue_size": "\(queue.capacity)"])
        }
    }
}

/// Exports the series of an ``OTLPMetricsFactory``, cumulative, every `OTEL_METRIC_EXPORT_INTERVAL`, and once more on
/// graceful shutdown; cancelled, it returns at once.
public final class MetricExporter: Service, Sendable {
    let factory: OTLPMetricsFactory
    let resource: [(key: String, value: String)]
    let interval: Duration
    let sender: any OTLPSender
    let clock: any ServiceClock
    let logger: Logger
    let stop = StopSignal()

    /// An exporter of `factory`'s series with `resource`, every `interval`, through `sender`.
    public init(
        factory: OTLPMetricsFactory, resource: [(key: String, value: String)], interval: Duration, sender: any OTLPSender,
        clock: any ServiceClock = ContinuousClock(), logger: Logger
    ) {
        self.factory = factory
        self.resource = resource
        self.interval = interval
        self.sender = sender
        self.clock = clock
        self.logger = logger
    }

    /// Exports every interval until graceful shutdown, then once more.
    public func run() async {
        var delivery = ExportDelivery(sender: sender, signal: .metrics, clock: clock, logger: logger, stop: stop)
        await withGracefulShutdownHandler {
            while !stop.isStopped && !Task.isCancelled {
                await stop.pause(for: interval, clock: clock)
                if stop.isStopped || Task.isCancelled { break }
                await export(with: &delivery)
            }
        } onGracefulShutdown: {
            self.stop.trigger()
        }
        if !Task.isCancelled { await export(with: &delivery) }
    }

    private func export(with delivery: inout ExportDelivery) async {
        let metrics = factory.collect()
        guard !metrics.isEmpty else { return }
        await delivery.deliver(OTLPEncoding.metrics(metrics, resource: resource), items: metrics.count)
    }
}

/// Graceful shutdown as an event an exporter can wait for.
final class StopSignal: Sendable {
    private let stopped = Atomic(false)
    private let wakeup = Wakeup()

    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    func trigger() {
        stopped.store(true, ordering: .releasing)
        wakeup.signal()
    }

    /// Returns after `delay`, or at once when stopped (or when stopped meanwhile).
    func pause(for delay: Duration, clock: any ServiceClock) async {
        let deadline = clock.now.advanced(by: delay)
        while !isStopped && !Task.isCancelled && clock.now < deadline {
            await wakeup.wait(until: deadline, clock: clock)
        }
    }
}

extension Wakeup {
    /// Returns at the next signal or at `deadline` on `clock`, whichever comes first.
    func wait(until deadline: ContinuousClock.Instant, clock: any ServiceClock) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(until: deadline, tolerance: nil) }
            group.addTask { await self.wait() }
            _ = await group.next()
            group.cancelAll()
        }
    }
}

/// Sends one export request, trying again with backoff (1, 2, 4, 8 s, or the collector's `Retry-After`, at most
/// 60 s) while the failure is retryable, at most ``maximumAttempts`` tries and none once shutting down. Logs the
/// first failure after a success as a warning, the next ones at debug level, and the recovery.
struct ExportDelivery {
    static let maximumAttempts = 5

    let sender: any OTLPSender
    let signal: OTLPSignal
    let clock: any ServiceClock
    let logger: Logger
    let stop: StopSignal
    var failing = false

    /// Whether the collector took `body` (of `items` spans or metrics).
    @discardableResult
    mutating func deliver(_ body: [UInt8], items: Int) async -> Bool {
        var attempt = 1
        while true {
            do {
                try await sender.send(body, signal: signal)
                if failing {
                    failing = false
                    logger.info("OTLP export works again", metadata: ["signal": "\(signal.rawValue)"])
                }
                return true
            } catch {
                guard error.isRetryable, attempt < Self.maximumAttempts, !stop.isStopped, !Task.isCancelled else {
                    let metadata: Logger.Metadata = [
                        "signal": "\(signal.rawValue)", "error": "\(error)", "dropped": "\(items)", "attempts": "\(attempt)",
                    ]
                    if failing {
                        logger.debug("OTLP export failed again", metadata: metadata)
                    } else {
                        failing = true
                        logger.warning("OTLP export failed", metadata: metadata)
                    }
                    return false
                }
                let backoff = Duration.seconds(1 << (attempt - 1))
                await stop.pause(for: min(error.retryAfter ?? backoff, .seconds(60)), clock: clock)
                attempt += 1
            }
        }
    }
}
