import Foundation
import Logging
// A page open's requests submitted together (`Fetcher.submit(_:onCompletion:)`): every result reaches the batch
// handler exactly once, by index, in as many calls as loop iterations saw results, and an aborting shutdown or a
// stopped fetcher fails what is left with `.shutdown`.
import PrefetchCore
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import Synchronization
import Testing

/// What a batch handler was given, call by call.
final class BatchLog: Sendable {
    private let calls = Mutex<[[FetchCompletion]]>([])

    func record(_ completions: [FetchCompletion]) {
        calls.withLock { $0.append(completions) }
    }

    var completions: [FetchCompletion] { calls.withLock { $0.flatMap { $0 } } }
    var callCount: Int { calls.withLock { $0.count } }
}

@Suite("Fetcher batches", .timeLimit(.minutes(1)))
struct BatchTests {
    @Test func everyResultReachesTheHandlerOnceByIndex() async throws {
        let closed = try await TestUpstream.start()
        let refused = closed.port
        try await closed.shutdown()
        try await withUpstream { upstream in
            try await withFetcher { fetcher in
                var requests = (0..<8).map { FetchRequest(url: "http://127.0.0.1:\(upstream.port)/i\($0)?delay=\($0 * 20)") }
                requests.append(FetchRequest(url: "http://127.0.0.1:\(upstream.port)/bad?status=503"))
                requests.append(FetchRequest(url: "http://127.0.0.1:\(refused)/gone"))
                let log = BatchLog()
                fetcher.submit(requests) { log.record($0) }
                let settled = await eventually { log.completions.count >= requests.count }
                #expect(settled)
                let completions = log.completions
                #expect(completions.map(\.index).sorted() == Array(0..<requests.count), "each index exactly once")
                #expect(log.callCount <= requests.count)
                for completion in completions {
                    switch (completion.index, completion.result) {
                    case (0..<8, .success(let response)):
                        let echo = try Echo(response)
                        #expect(echo.path == "/i\(completion.index)")
                    case (8, .success(let response)):
                        #expect(response.status == 503)
                    case (9, .failure(let error)):
                        #expect(error.code == .connect)
                    default:
                        Issue.record("unexpected result for request \(completion.index): \(completion.result)")
                    }
                }
                #expect(fetcher.inFlight == 0)
            }
        }
    }

    @Test func abortingFailsTheRestOfABatchWithShutdown() async throws {
        try await withUpstream { upstream in
            let fetcher = Fetcher(logger: Logger(label: "prefetch.fetcher.test"))
            let log = BatchLog()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await fetcher.run() }
                fetcher.submit([
                    FetchRequest(url: "http://127.0.0.1:\(upstream.port)/quick"),
                    FetchRequest(url: "http://127.0.0.1:\(upstream.port)/hang?hang=1", timeout: .seconds(30)),
                ]) { log.record($0) }
                let started = await eventually { upstream.hits(path: "/hang") == 1 && log.completions.count == 1 }
                #expect(started)
                group.cancelAll()
                try await group.next()
            }
            let completions = log.completions.sorted { $0.index < $1.index }
            #expect(completions.map(\.index) == [0, 1])
            #expect((try? completions.first?.result.get().status) == 200)
            if case .failure(let error) = completions.last?.result {
                #expect(error.code == .shutdown)
            } else {
                Issue.record("the hanging request should have failed with shutdown")
            }
            #expect(fetcher.inFlight == 0)

            // A stopped fetcher answers a batch at once, on the caller's thread.
            let late = BatchLog()
            fetcher.submit([FetchRequest(url: "http://127.0.0.1:\(upstream.port)/late")]) { late.record($0) }
            #expect(late.completions.count == 1)
            if case .failure(let error) = late.completions.first?.result {
                #expect(error.code == .shutdown)
            } else {
                Issue.record("a batch after shutdown should fail with shutdown")
            }
            #expect(upstream.hits(path: "/late") == 0)
        }
    }
}

/// The loop thread is named in the kernel (`/proc/thread-self/comm`, read on the loop thread itself from a batch's
/// completion handler), so `top -H`, perf and the fan-out benchmark's split of context switches by thread can tell
/// it apart from the Dispatch workers it was started from.
@Suite("Fetcher thread", .timeLimit(.minutes(1)))
struct FetcherThreadTests {
    @Test func theLoopThreadIsNamedInTheKernel() async throws {
        #expect(try await loopThreadName(FetcherConfiguration()) == "prefetch-curl")
    }

    /// A second fetcher in the process (the OTLP exporter's) has a name of its own.
    @Test func aFetcherGivenAThreadNameUsesIt() async throws {
        #expect(try await loopThreadName(FetcherConfiguration(threadName: "prefetch-otlp")) == "prefetch-otlp")
    }

    /// The name of the loop thread of a fetcher of `configuration`, as the kernel has it.
    private func loopThreadName(_ configuration: FetcherConfiguration) async throws -> String? {
        try await withUpstream { upstream in
            try await withFetcher(configuration) { fetcher in
                let name = Mutex<String?>(nil)
                fetcher.submit([FetchRequest(url: "http://127.0.0.1:\(upstream.port)/named")]) { _ in
                    let comm = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
                    name.withLock { $0 = comm?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unreadable" }
                }
                let answered = await eventually { name.withLock { $0 } != nil }
                #expect(answered)
                return name.withLock { $0 }
            }
        }
    }
}
