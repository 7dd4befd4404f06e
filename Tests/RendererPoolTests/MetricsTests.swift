import Metrics
import MetricsTestKit
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import RendererPool

@Suite(.timeLimit(.minutes(1))) struct MetricsTests {
    @Test func acquiresLeasesAndDestructionsAreCountedPerProfile() async throws {
        let metrics = TestMetrics()
        let profile = modelledProfile(maxSize: 1, acquireTimeout: 50) { $0.leaseTimeout = 0.1 }
        let clock = ManualClock()
        let pool = RendererPool(
            name: "web", profile: profile, logger: testLogger, metricsFactory: metrics, clock: clock)
        let web = [("profile", "web")]
        func acquires(_ result: String) throws -> Int64 {
            try metrics.expectCounter("renderer_pool_acquires_total", [("profile", "web"), ("result", result)])
                .totalValue
        }

        let cold = try await pool.acquire(page: nil)
        #expect(try metrics.expectGauge("renderer_pool_leased", web).lastValue == 1)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await #expect(throws: PoolError.self) { try await pool.acquire(page: nil) } }
            do {
                let settled = await eventually { await pool.snapshot().pending == 1 }
                #expect(settled)
            }
            clock.advance(by: .milliseconds(50))
            try await group.waitForAll()
        }
        await pool.release(id: cold.id)
        #expect(try metrics.expectGauge("renderer_pool_idle", web).lastValue == 1)
        #expect(try metrics.expectGauge("renderer_pool_leased", web).lastValue == 0)
        let warm = try await pool.acquire(page: nil)
        clock.advance(by: .milliseconds(100))
        await pool.housekeeping()

        #expect(try acquires("cold") == 1)
        #expect(try acquires("warm") == 1)
        #expect(try acquires("timeout") == 1)
        #expect(try metrics.expectTimer("renderer_pool_acquire_wait", web).values.count == 2)
        #expect(try metrics.expectCounter("renderer_pool_created_total", web).totalValue == 1)
        #expect(try metrics.expectCounter("renderer_pool_destroyed_total", web).totalValue == 1)
        #expect(try metrics.expectCounter("renderer_pool_reclaimed_total", web).totalValue == 1)
        #expect(try metrics.expectGauge("renderer_pool_pending_acquires", web).lastValue == 0)
        #expect(await pool.release(id: warm.id) == false)
    }

    @Test func pendingAcquirersAreGauged() async throws {
        let metrics = TestMetrics()
        let pool = RendererPool(
            name: "web", profile: modelledProfile(maxSize: 1), logger: testLogger, metricsFactory: metrics,
            clock: ManualClock())
        let held = try await pool.acquire(page: nil)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { _ = try await pool.acquire(page: nil) }
            do {
                let settled = await eventually { await pool.snapshot().pending == 1 }
                #expect(settled)
            }
            #expect(try metrics.expectGauge("renderer_pool_pending_acquires", [("profile", "web")]).lastValue == 1)
            await pool.release(id: held.id)
            try await group.waitForAll()
        }
        #expect(try metrics.expectGauge("renderer_pool_pending_acquires", [("profile", "web")]).lastValue == 0)
    }
}
