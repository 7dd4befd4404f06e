import Foundation
import HTTPTypes
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// A data read is answered on the event loop whatever its entry's state, on the memory and the Redis store: one
/// still in flight waits there (no task) for its flight to settle, within its `wait`; one that settled as a miss
/// gets the miss with its reason. The upstream's gate (`hold=NAME`) decides when the answer goes, so nothing here
/// waits on the clock.
extension FastHandoffTests {
    static let gatedPage = "https://m.example.com/gated"

    static func gatedConfig(_ port: Int) -> TestConfig {
        TestConfig([
            TestPage(
                gatedPage,
                [
                    TestInterface(name: "gated", api: "http://127.0.0.1:\(port)/gated?hold=gate&body=%7B%22g%22%3A1%7D", timeout: 60_000),
                    TestInterface(name: "broken", api: "http://127.0.0.1:\(port)/broken?status=500&body=no", timeout: 60_000),
                ])
        ])
    }

    func get(_ service: LiveService, _ target: String, headers: [String: String] = [:]) async throws -> String {
        let extra = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
        return try await rawExchange(
            port: service.port, "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(service.port)\r\n\(extra)Connection: close\r\n\r\n")
    }

    @Test(arguments: [false, true]) func aReadOfAFlightInProgressWaitsOnTheEventLoopUntilItSettles(onRedis: Bool) async throws {
        try await withUpstream { upstream in
            let redis = onRedis ? try await RedisServer.start() : nil
            var settings = testSettings()
            if let redis { settings.store.url = "redis://127.0.0.1:\(redis.port)" }
            do {
                try await withService(config: Self.gatedConfig(upstream.port), settings: settings) { service in
                    let triggered = try await service.trigger(Self.gatedPage).decoded(TriggerAnswer.self)
                    #expect(await eventually { upstream.held("gate") == 1 }, "the gated request never reached the upstream")
                    let before = try await fastCount(service)

                    // By ticket (the shell) and by read key (the page): both wait for the flight.
                    async let byTicket = get(service, "/v1/prefetch/\(triggered.ticket)/data?name=gated&wait=60000")
                    async let byKey = get(
                        service, "/v1/data?name=gated&wait=60000",
                        headers: ["X-Prefetch-Key": triggered.readKey, "Origin": "https://m.example.com"])
                    if !onRedis {
                        // The memory store counts its waiting readers: release only once both wait.
                        #expect(
                            await eventually {
                                (try? await service.admin(.get, "/metrics").text.contains("prefetch_store_waiting_readers 2")) ?? false
                            }, "the two reads did not wait")
                    }
                    #expect(upstream.release("gate") == 1)
                    let answers = try await [byTicket, byKey]
                    for answer in answers {
                        #expect(rawStatus(answer) == 200, "\(answer)")
                        #expect(answer.contains(#"{"g":1}"#), "\(answer)")
                        if !onRedis {
                            // The memory store hands a waiting reader the flight's own answer (Redis's reads it back).
                            #expect(answer.contains("X-Prefetch: joined"), "a read that waited for the flight joined it: \(answer)")
                        }
                    }
                    // A failed prefetch: the miss with its reason, from the event loop too.
                    let broken = try await get(service, "/v1/prefetch/\(triggered.ticket)/data?name=broken&wait=60000")
                    #expect(rawStatus(broken) == 404, "\(broken)")
                    #expect(broken.contains("X-Prefetch-Reason: "), "\(broken)")
                    #expect(broken.contains("Content-Type: application/json"), "\(broken)")
                    #expect(try await fastCount(service) == before + 3, "the reads were answered on the event loop")
                }
            } catch {
                await redis?.stop()
                throw error
            }
            await redis?.stop()
        }
    }
}
