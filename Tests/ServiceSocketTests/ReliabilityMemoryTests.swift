import Foundation
import HTTPTypes
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The store's byte budget in a real `prefetch serve` process, in the style of Redis's maxmemory test: fill the
/// store through real triggers, write as much again, and watch both the store's own accounting and the process.
@Suite("reliability: memory budget", .timeLimit(.minutes(3)))
struct ReliabilityMemoryTests {
    /// The store budget given to `serve` (`--store-bytes`).
    static let budget = 16 * 1024 * 1024
    /// Each response body; one entry costs this plus its key, headers and 256 bytes.
    static let bodyBytes = 64 * 1024
    /// What the process may hold beyond its idle baseline and the budget: transient copies of responses in
    /// flight (libcurl's buffer, the fetch result, the HTTP answer), allocator slack and metrics. Documented in
    /// RELIABILITY.md.
    static let overhead = 32 * 1024 * 1024

    @Test func storeBytesNeverExceedTheBudgetAndRSSStaysBounded() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/mem"
            let config = try TempConfig(
                TestConfig([
                    TestPage(
                        page,
                        [
                            TestInterface(name: "blob", api: "\(base)/mem/blob?bytes=\(Self.bodyBytes)", urlParam: true, ttl: 3600)
                        ])
                ])
            )
            defer { config.remove() }
            let server = try await ServeProcess.start(
                configPath: config.path, arguments: ["--store-bytes", "\(Self.budget)", "--trigger-rate", "0"], logLevel: "warning",
                untilReady: true)
            do {
                try await fillTwice(server: server, page: page, upstream: upstream)
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }

    private func fillTwice(server: ServeProcess, page: String, upstream: TestUpstream) async throws {
        #expect(try await server.get("/readyz").status == 200)
        // The idle baseline, once one page open has gone the whole way the fill goes (trigger, fetch, store, read)
        // and the operator surface has answered: taken when that has happened, not after a pause.
        let warmUp = try await oneRequest(port: server.port, .post, "/v1/prefetch", body: #"{"url": "\#(page)?i=warm-up"}"#)
        let warmTicket = try #require(try? warmUp.decoded(TriggerAnswer.self).ticket, "\(warmUp.text.prefix(300))")
        let warmResults = try await server.get("/v1/prefetch/\(warmTicket)?wait=5000")
        #expect(try warmResults.decoded(ResultsAnswer.Body.self).results.first?.state == .ready, "\(warmResults.text.prefix(300))")
        _ = try await server.admin(.get, "/metrics")
        let baseline = try #require(residentBytes(pid: server.pid))

        let perEntry = Self.bodyBytes + 256
        let writes = 2 * (Self.budget / perEntry) + 8
        var maxStoreBytes = 0.0
        var maxRSS = baseline
        var samples = 0
        let batch = 8
        for start in stride(from: 0, to: writes, by: batch) {
            let tickets = try await withThrowingTaskGroup(of: String?.self) { group in
                for index in start..<min(start + batch, writes) {
                    group.addTask {
                        let reply = try await oneRequest(
                            port: server.port, .post, "/v1/prefetch", body: #"{"url": "\#(page)?i=\#(index)"}"#)
                        return (try? reply.decoded(TriggerAnswer.self))?.ticket
                    }
                }
                var tickets: [String] = []
                for try await ticket in group { if let ticket { tickets.append(ticket) } }
                return tickets
            }
            #expect(tickets.count == min(batch, writes - start))
            // Wait for this batch to land in the store.
            for ticket in tickets {
                let results = try await server.get("/v1/prefetch/\(ticket)?wait=5000")
                let state = try results.decoded(ResultsAnswer.Body.self).results.first?.state
                #expect(state == .ready || state == .missing, "\(results.text.prefix(300))")
            }
            let metrics = try await server.admin(.get, "/metrics").text
            let bytes = try #require(metricValue(metrics, "prefetch_store_bytes"), "no prefetch_store_bytes in /metrics")
            maxStoreBytes = max(maxStoreBytes, bytes)
            #expect(bytes <= Double(Self.budget), "store bytes \(bytes) over the budget \(Self.budget) after \(start + batch) writes")
            #expect(metricValue(metrics, "prefetch_store_budget_bytes") == Double(Self.budget), "the exported budget is --store-bytes")
            if let rss = residentBytes(pid: server.pid) { maxRSS = max(maxRSS, rss) }
            samples += 1
        }
        let metrics = try await server.admin(.get, "/metrics").text
        let evictions = metricValue(metrics, "prefetch_store_evictions_total") ?? 0
        let entries = metricValue(metrics, "prefetch_store_entries") ?? 0
        // The store really was full and really did evict.
        #expect(maxStoreBytes > Double(Self.budget) * 0.9, "the store never filled: max \(maxStoreBytes)")
        #expect(evictions >= Double(writes / 3), "evictions \(evictions) after \(writes) writes")
        #expect(entries * Double(perEntry) <= Double(Self.budget))
        #expect(upstream.hits(path: "/mem/blob") == writes + 1, "the fill's writes and the warm-up's")
        let allowed = baseline + Self.budget + Self.overhead
        #expect(maxRSS <= allowed, "RSS \(maxRSS / 1_048_576) MiB over baseline \(baseline / 1_048_576) MiB + budget + overhead")
        print(
            "memory budget: \(samples) samples, \(writes) writes, max store bytes \(Int(maxStoreBytes)) of \(Self.budget), evictions \(Int(evictions)), RSS baseline \(baseline / 1024) KiB, max \(maxRSS / 1024) KiB, allowed \(allowed / 1024) KiB"
        )
        #expect(try await server.get("/healthz").status == 200)
    }
}
