import Foundation
import HTTPTypes
import Logging
import NIOCore
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import Prometheus
import ServiceLifecycle
import ServiceTestSupport
import Synchronization
import Testing

@testable import PageAPI
@testable import PrefetchService

/// A live service (the application `prefetch serve` runs, in this process) started and stopped, round after round,
/// with connections in every state as it stops: idle, a results view waiting on an upstream that answers only once
/// the stop has begun (a gate the round releases), and connections
/// still arriving (some sending a request, some not) while the listener closes. Odd rounds stop it gracefully;
/// even rounds cancel its run, as `prefetch serve` does once its shutdown grace (`ServiceSettings.shutdownGrace`)
/// has passed.
///
/// A connection accepted as the server stops may never reach the server's serving task; before it was closed on
/// the way (``AcceptedConnection``), dropping it stopped the whole process (`Deinited NIOAsyncWriter without
/// calling finish()`): the first cancelled round did, every time. Each round also holds the drain: in a graceful stop the waiting view is answered before its
/// connection closes; in every stop each connection is closed by the server, and the service returns.
@Suite("graceful shutdown: a live service stopped with connections in flight", .serialized, .timeLimit(.minutes(10)))
struct ShutdownDrainTests {
    static let rounds = 50

    @Test func aServiceStoppedWithConnectionsInFlightAnswersOrClosesEveryOne() async throws {
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/shutdown-drain"
            var stormed = 0
            for round in 1...Self.rounds {
                // The slow interface answers when the round releases its gate: once the stop has begun.
                let gate = "shutdown-drain-\(round)"
                let config = TestConfig([
                    TestPage(page, [TestInterface(name: "slow", api: "\(upstream.base)/shutdown-drain/slow?hold=\(gate)", timeout: 60_000)])
                ])
                stormed += try await Self.stop(
                    round: round, cancelling: round % 2 == 0, config: config, page: page,
                    releaseUpstream: { upstream.release(gate) })
            }
            // Connections did arrive around the shutdowns (each round starts its shutdown once some have).
            #expect(stormed >= 8 * Self.rounds)
        }
    }

    /// One round: starts the service, opens the connections, stops it (gracefully, or `cancelling` its run) while
    /// more arrive, and checks what each connection got. The number of connections opened as it stopped.
    static func stop(
        round: Int, cancelling: Bool, config: TestConfig, page: String, releaseUpstream: @Sendable () -> Void
    ) async throws -> Int {
        let loaded = try ConfigLoader.parse(Array(config.text.utf8), source: "test config")
        var logger = Logger(label: "prefetch.service.test")
        // A cancelled run logs its cancellation as errors (the serving loop, the renderers); what each connection
        // got is what this checks.
        logger.logLevel = .critical
        let registry = PrometheusCollectorRegistry()
        let ports = PortBox()
        let app = try buildApplication(
            settings: testSettings(), config: ConfigHolder(loaded.config), registry: registry, logger: logger,
            onServerRunning: { ports.set($0) })
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        let outcome = RunOutcome()
        let gauge = { (name: String, labels: String?) -> Double in
            metricValue(String(decoding: registry.emitToBuffer(), as: UTF8.self), name, labels: labels) ?? 0
        }
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                do {
                    try await group.run()
                    outcome.set(nil)
                } catch {
                    outcome.set(error)
                }
            }
            var held: [RawConnection] = []
            let storm = ConnectionStorm()
            defer {
                for connection in held + storm.connections { connection.close() }
            }
            do {
                let port = try #require(await ports.value(), "round \(round): the page surface did not start")

                // Idle connections, counted in by the page listener (each is set up).
                let idle = try await (0..<6).asyncMap { _ in try await RawConnection.open(port: port) }
                held += idle
                #expect(
                    await eventually { gauge("prefetch_connections", #"listener="page""#) >= 6 },
                    "round \(round): the idle connections were not accepted")

                // A results view waiting on the slow interface: in flight as the shutdown begins.
                let trigger = try await oneRequest(port: port, .post, "/v1/prefetch", body: #"{"url": "\#(page)"}"#)
                let ticket = try trigger.decoded(TriggerAnswer.self).ticket
                let view = try await RawConnection.open(port: port)
                held.append(view)
                view.send("GET /v1/prefetch/\(ticket)?wait=5000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                #expect(
                    await eventually { gauge("prefetch_store_waiting_readers", nil) == 1 },
                    "round \(round): the results view is not waiting")

                // Connections arriving while the listener closes: the shutdown begins once some have arrived, and
                // they keep coming until the listener refuses them.
                async let arrived: Void = storm.run(port: port)
                #expect(await eventually { storm.count >= 8 }, "round \(round): no connection arrived")
                if cancelling {
                    tasks.cancelAll()
                } else {
                    await group.triggerGracefulShutdown()
                }
                // The slow interface answers only now, so the view is still waiting as the stop begins.
                releaseUpstream()
                await arrived

                #expect(await eventually(within: 30) { outcome.isSet }, "round \(round): the service did not return")
                if let error = outcome.error, !(cancelling && error is CancellationError) {
                    Issue.record(error, "round \(round): the service failed")
                }

                #expect(await view.closes(within: 10), "round \(round): the results view's connection stayed open")
                if !cancelling {
                    // Stopped gracefully: the waiting view was answered before its connection closed.
                    #expect(rawStatus(view.text) == 200, "round \(round): \(view.text.prefix(300))")
                    #expect(view.text.contains(#""state":"ready""#), "round \(round): \(view.text.prefix(600))")
                }
                // Idle connections are closed without an answer.
                for connection in idle {
                    #expect(await connection.closes(within: 10), "round \(round): an idle connection stayed open")
                    #expect(connection.text.isEmpty, "round \(round): an idle connection got \(connection.text.prefix(200))")
                }
                // Every arriving connection was answered and closed, or closed.
                for connection in storm.connections {
                    #expect(await connection.closes(within: 10), "round \(round): an arriving connection stayed open")
                    let text = connection.text
                    #expect(text.isEmpty || rawStatus(text) == 200, "round \(round): \(text.prefix(300))")
                }
                // A service that did not return is stopped (its failure is recorded above).
                if !outcome.isSet { tasks.cancelAll() }
                return storm.count
            } catch {
                releaseUpstream()
                await group.triggerGracefulShutdown()
                throw error
            }
        }
    }
}

/// How the service's run ended, once it has.
private final class RunOutcome: Sendable {
    private let state = Mutex<(ended: Bool, error: (any Error)?)>((false, nil))

    func set(_ error: (any Error)?) { state.withLock { $0 = (true, error) } }
    var isSet: Bool { state.withLock { $0.ended } }
    var error: (any Error)? { state.withLock { $0.error } }
}

/// Connections opened as fast as three clients can, half of them sending `GET /healthz` at once, until the listener
/// refuses them (at most 150 per client).
private final class ConnectionStorm: Sendable {
    private let opened = Mutex<[RawConnection]>([])

    var count: Int { opened.withLock { $0.count } }
    var connections: [RawConnection] { opened.withLock { $0 } }

    func run(port: Int) async {
        await withTaskGroup(of: Void.self) { clients in
            for client in 0..<3 {
                clients.addTask {
                    var index = 0
                    while index < 150, let connection = try? await RawConnection.open(port: port) {
                        if (client + index) % 2 == 0 { connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") }
                        self.opened.withLock { $0.append(connection) }
                        index += 1
                    }
                }
            }
        }
    }
}

extension Sequence {
    /// `map` with an asynchronous transform, one element after the other.
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
