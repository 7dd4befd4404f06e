import MetricsTestKit
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import PrefetchStore

@Suite struct MetricsTests {
    @Test func readsAreCountedByInterfaceAndMissesByReason() async throws {
        let metrics = TestMetrics()
        let store = makeStore(metrics: metrics)
        await put(store, key("/a"), .success(response("a")), policy: policy("profile"))
        _ = await store.read(key("/a"), wait: .zero)
        _ = await store.read(key("/a"), wait: .zero)
        _ = await store.read(key("/missing"), wait: .zero)

        let token = try await lead(store, key("/b"), policy: policy("feed"))
        async let waiter = store.read(key("/b"), wait: .seconds(10))
        do {
            let settled = await eventually { store.waitingReaders == 1 }
            #expect(settled)
        }
        await store.complete(key("/b"), token: token, result: .success(response("b")))
        _ = await waiter

        #expect(try metrics.expectCounter("prefetch_store_hits_total", [("interface", "profile")]).totalValue == 2)
        #expect(try metrics.expectCounter("prefetch_store_joins_total", [("interface", "feed")]).totalValue == 1)
        #expect(try metrics.expectCounter("prefetch_store_misses_total", [("reason", "not-triggered")]).totalValue == 1)
        #expect(try metrics.expectGauge("prefetch_store_entries").lastValue == 2)
        let snapshot = await store.snapshot()
        #expect(try metrics.expectGauge("prefetch_store_bytes").lastValue == Double(snapshot.bytes))
        #expect(try metrics.expectGauge("prefetch_store_budget_bytes").lastValue == Double(snapshot.budget))
        #expect(snapshot.hits == 2)
        #expect(snapshot.joins == 1)
        #expect(snapshot.misses == 1)
    }

    @Test func evictionsAndWasteAreCounted() async throws {
        let metrics = TestMetrics()
        let entry = MemoryStore.perEntryOverhead + key("/0").accountedBytes + 1_000
        let store = makeStore(budget: 2 * entry, metrics: metrics)
        for n in 0..<3 {
            await put(store, key("/\(n)"), .success(response(bytes: 1_000)), policy: policy("feed"))
        }
        #expect(try metrics.expectCounter("prefetch_store_evictions_total").totalValue == 1)
        #expect(try metrics.expectCounter("prefetch_store_expired_unused_total", [("interface", "feed")]).totalValue == 1)
        #expect(metrics.counters(label: "prefetch_store_hits_total").isEmpty, "no metric per call without a hit")
    }
}
