import Foundation
import Logging
import PrefetchFetcher
import PrefetchTestUpstream

/// Runs `body` with a running fetcher; the fetcher's `run()` is cancelled afterwards.
func withFetcher<T: Sendable>(
    _ configuration: FetcherConfiguration = .init(),
    _ body: @Sendable (Fetcher) async throws -> T
) async throws -> T {
    let fetcher = Fetcher(configuration: configuration, logger: Logger(label: "prefetch.fetcher.test"))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await fetcher.run() }
        do {
            let result = try await body(fetcher)
            group.cancelAll()
            return result
        } catch {
            group.cancelAll()
            throw error
        }
    }
}

/// Runs a fetch expected to fail and returns its error code (nil if it succeeded).
func failureCode(_ fetcher: Fetcher, _ request: FetchRequest) async -> FetchErrorCode? {
    do {
        _ = try await fetcher.fetch(request)
        return nil
    } catch {
        return error.code
    }
}

/// The upstream's JSON echo of a request.
struct Echo {
    var method: String
    var path: String
    var query: String?
    var headers: [[String]]
    var body: String?
    var hit: Int

    init(_ response: FetchResponse) throws {
        let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] ?? [:]
        method = object["method"] as? String ?? ""
        path = object["path"] as? String ?? ""
        query = object["query"] as? String
        headers = object["headers"] as? [[String]] ?? []
        body = object["body"] as? String
        hit = object["hit"] as? Int ?? 0
    }

    func values(_ name: String) -> [String] {
        headers.filter { $0.first?.lowercased() == name.lowercased() }.compactMap { $0.last }
    }
}

/// Threads of this process right now.
func processThreadCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
}
