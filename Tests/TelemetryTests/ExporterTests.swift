import HTTPTypes
import Logging
import Metrics
import PrefetchCore
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing
import Tracing

@testable import Telemetry

/// The exporters' schedule, driven by a manual clock (no sleep decides an outcome): a whole batch goes at once, a
/// partial one after the schedule delay, everything left on graceful shutdown; metrics every interval and once
/// more at shutdown; retries with backoff; and the libcurl sender's requests against a real upstream.
@Suite struct ExporterTests {
    let logs = CapturedLogs()
    var logger: Logger { logs.logger }

    /// Records what would have gone to a collector; fails the first `failures` sends with `failure`.
    final class Collector: OTLPSender {
        private let state: Mutex<(bodies: [[UInt8]], failures: Int)>
        let failure: OTLPSendFailure

        init(failures: Int = 0, failure: OTLPSendFailure = OTLPSendFailure(message: "busy", isRetryable: true)) {
            state = Mutex(([], failures))
            self.failure = failure
        }

        func send(_ body: [UInt8], signal: OTLPSignal) async throws(OTLPSendFailure) {
            let fail = state.withLock { state in
                state.bodies.append(body)
                if state.failures > 0 {
                    state.failures -= 1
                    return true
                }
                return false
            }
            if fail { throw failure }
        }

        var attempts: Int { state.withLock { $0.bodies.count } }

        /// The spans' names of every request received, one list per request.
        func spanNames() throws -> [[String]] {
            try state.withLock { $0.bodies }.map { body in
                try Message(body).message(1).message(2).messages(2).map { $0.string(5) ?? "" }
            }
        }

        /// The metrics' names of every request received.
        func metricNames() throws -> [[String]] {
            try state.withLock { $0.bodies }.map { body in
                try Message(body).message(1).message(2).messages(2).map { $0.string(1) ?? "" }
            }
        }
    }

    func end(_ names: [String], on tracer: OTLPTracer) {
        for name in names { tracer.startSpan(name, context: .topLevel, ofKind: .internal).end() }
    }

    @Test func aWholeBatchGoesAtOnceAPartialOneAfterTheDelayAndTheRestAtShutdown() async throws {
        let tracer = OTLPTracer(maxQueueSize: 10, maxExportBatchSize: 2)
        let collector = Collector()
        let clock = ManualClock()
        let exporter = SpanExporter(
            tracer: tracer, resource: [("service.name", "test")], scheduleDelay: .seconds(5), sender: collector, clock: clock,
            logger: logger)
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await exporter.run() }
                end(["a", "b"], on: tracer)
                #expect(await eventually { collector.attempts == 1 }, "a whole batch is sent without waiting for the delay")
                end(["c"], on: tracer)
                #expect(await eventually { clock.sleepers == 1 && tracer.queuedSpans == 1 })
                clock.advance(by: .seconds(5))
                #expect(await eventually { collector.attempts == 2 }, "a partial batch goes after the schedule delay")
                end(["d", "e", "f"], on: tracer)
                #expect(await eventually { collector.attempts == 3 && tracer.queuedSpans == 1 })
                trigger.triggerGracefulShutdown()
                try await group.next()
            }
        }
        #expect(try collector.spanNames() == [["a", "b"], ["c"], ["d", "e"], ["f"]])
        #expect(tracer.queuedSpans == 0)
    }

    /// Spans that found the queue full are counted and reported with the next export, not waited for.
    @Test func spansDroppedByAFullQueueAreReportedInTheLog() async throws {
        let tracer = OTLPTracer(maxQueueSize: 2, maxExportBatchSize: 2)
        end(["a", "b", "c", "d", "e"], on: tracer)
        let collector = Collector()
        let exporter = SpanExporter(
            tracer: tracer, resource: [], scheduleDelay: .seconds(5), sender: collector, clock: ManualClock(), logger: logger)
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await exporter.run() }
                #expect(await eventually { collector.attempts == 1 })
                trigger.triggerGracefulShutdown()
                try await group.next()
            }
        }
        #expect(try collector.spanNames() == [["a", "b"]])
        #expect(logs.all.filter { $0.hasPrefix("warning OTLP span queue full") }.map { $0.contains("dropped=3") } == [true])
    }

    @Test func metricsAreExportedEveryIntervalAndOnceMoreAtShutdown() async throws {
        let factory = OTLPMetricsFactory()
        let collector = Collector()
        let clock = ManualClock()
        let exporter = MetricExporter(
            factory: factory, resource: [("service.name", "test")], interval: .seconds(60), sender: collector, clock: clock, logger: logger)
        let triggers = Counter(label: "prefetch_triggers_total", factory: factory)
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await exporter.run() }
                triggers.increment()
                #expect(await eventually { clock.sleepers == 1 })
                #expect(collector.attempts == 0, "nothing before the first interval")
                clock.advance(by: .seconds(60))
                #expect(await eventually { collector.attempts == 1 })
                Gauge(label: "prefetch_in_flight", factory: factory).record(3)
                trigger.triggerGracefulShutdown()
                try await group.next()
            }
        }
        #expect(try collector.metricNames() == [["prefetch_triggers_total"], ["prefetch_in_flight", "prefetch_triggers_total"]])
    }

    @Test func aRetryableFailureIsTriedAgainAfterABackoffAndAFinalOneIsNot() async throws {
        let clock = ManualClock()
        let busy = Collector(failures: 2)
        let stop = StopSignal()
        let delivered = Task {
            var delivery = ExportDelivery(sender: busy, signal: .traces, clock: clock, logger: logger, stop: stop)
            return await delivery.deliver([1], items: 1)
        }
        #expect(await eventually { busy.attempts == 1 && clock.sleepers == 1 })
        clock.advance(by: .seconds(1))
        #expect(await eventually { busy.attempts == 2 && clock.sleepers == 1 })
        clock.advance(by: .seconds(1))
        #expect(clock.sleepers == 1, "the second backoff is 2 s")
        clock.advance(by: .seconds(1))
        #expect(await delivered.value)
        #expect(busy.attempts == 3)

        let refused = Collector(failures: 2, failure: OTLPSendFailure(message: "collector answered 400", isRetryable: false))
        var delivery = ExportDelivery(sender: refused, signal: .traces, clock: clock, logger: logger, stop: stop)
        #expect(await delivery.deliver([1], items: 1) == false)
        #expect(refused.attempts == 1 && delivery.failing)
        #expect(await delivery.deliver([1], items: 1) == false)
        #expect(await delivery.deliver([1], items: 1))
        let lines = logs.all.filter { $0.contains("OTLP export") }
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.first?.hasPrefix("warning OTLP export failed") == true && lines.first?.contains("collector answered 400") == true)
        #expect(lines.dropFirst().first?.hasPrefix("debug OTLP export failed again") == true, "one warning while it keeps failing")
        #expect(lines.last?.hasPrefix("info OTLP export works again") == true)

        let down = Collector(failures: 100)
        stop.trigger()
        var stopping = ExportDelivery(sender: down, signal: .metrics, clock: clock, logger: logger, stop: stop)
        #expect(await stopping.deliver([1], items: 1) == false)
        #expect(down.attempts == 1, "no retry once shutting down")
    }

    /// The libcurl sender: a POST of `application/x-protobuf` with the configured headers to the signal's URL, and
    /// the collector's status read as OTLP/HTTP says (2xx taken, 429/502/503/504 retryable, others final).
    @Test func theFetcherSenderPostsProtobufWithTheConfiguredHeaders() async throws {
        try await withUpstream { upstream in
            let base = "http://\(upstream.host):\(upstream.port)"
            try await withFetcher { fetcher in
                let configuration = try OTLPConfiguration(environment: [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_EXPORTER_OTLP_HEADERS": "api-key=secret1",
                    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "\(base)/ingest?status=503",
                ])
                let sender = FetcherSender(fetcher: fetcher, configuration: configuration)
                let request = sender.request(Array("body".utf8), signal: .traces)
                let echo = try Echo(try await fetcher.fetch(request))
                #expect(echo.method == "POST" && echo.path == "/v1/traces")
                #expect(echo.values("content-type") == ["application/x-protobuf"])
                #expect(echo.values("api-key") == ["secret1"])
                #expect(echo.body == "body")
                try await sender.send([1, 2, 3], signal: .traces)

                await #expect(throws: OTLPSendFailure.self) { try await sender.send([1], signal: .metrics) }
                do {
                    try await sender.send([1], signal: .metrics)
                } catch let error as OTLPSendFailure {
                    #expect(error.isRetryable && error.message.contains("503"))
                }
                let refusing = FetcherSender(
                    fetcher: fetcher,
                    configuration: try OTLPConfiguration(environment: ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "\(base)/x?status=400"]))
                do {
                    try await refusing.send([1], signal: .traces)
                    Issue.record("a 400 was taken as accepted")
                } catch let error as OTLPSendFailure {
                    #expect(!error.isRetryable)
                }
            }
        }
    }
}
