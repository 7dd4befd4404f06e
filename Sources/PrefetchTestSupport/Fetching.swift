import Foundation
import Logging
public import PrefetchFetcher

/// Runs `body` with a running fetcher; the fetcher's `run()` is cancelled afterwards, also when `body` throws.
public func withFetcher<T: Sendable>(
    _ configuration: FetcherConfiguration = .init(),
    _ body: @Sendable (Fetcher) async throws -> T
) async throws -> T {
    let fetcher = Fetcher(configuration: configuration, logger: Logger(label: "prefetch.test.fetcher"))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await fetcher.run() }
        defer { group.cancelAll() }
        return try await body(fetcher)
    }
}

/// Runs a fetch expected to fail and returns its error code (nil if it succeeded).
public func failureCode(_ fetcher: Fetcher, _ request: FetchRequest) async -> FetchErrorCode? {
    do {
        _ = try await fetcher.fetch(request)
        return nil
    } catch {
        return error.code
    }
}

/// The test upstream's JSON echo of the request it received (`TestUpstream`'s default answer).
public struct Echo: Sendable {
    public var method: String
    public var path: String
    public var query: String?
    /// Every header as received, in order: `[name, value]`.
    public var headers: [[String]]
    public var body: String?
    /// How many requests the upstream has answered on this path, this one included.
    public var hit: Int

    /// The echo in a JSON object (missing members read as empty).
    public init(json object: [String: Any]) {
        method = object["method"] as? String ?? ""
        path = object["path"] as? String ?? ""
        query = object["query"] as? String
        headers = object["headers"] as? [[String]] ?? []
        body = object["body"] as? String
        hit = object["hit"] as? Int ?? 0
    }

    /// The echo a fetch received. Throws when the body is not JSON.
    public init(_ response: FetchResponse) throws {
        self.init(json: try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] ?? [:])
    }

    /// Every value of the header `name` (case-insensitive) as the upstream received it.
    public func values(_ name: String) -> [String] {
        headers.filter { $0.first?.lowercased() == name.lowercased() }.compactMap { $0.last }
    }
}
