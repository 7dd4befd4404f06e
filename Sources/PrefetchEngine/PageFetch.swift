public import HTTPTypes
public import Logging
public import PrefetchCore
public import PrefetchFetcher

/// One interface's result in `prefetch fetch`.
public struct PageFetchResult: Sendable {
    /// The interface name.
    public var name: String
    /// The method and URL requested.
    public var method: String
    public var url: String
    /// The upstream status, or `nil` when the fetch failed.
    public var status: Int?
    /// Body bytes received.
    public var bytes: Int
    /// Time from submission to completion.
    public var elapsed: Duration
    /// The failure code (`timeout`, `dns`, ...) and libcurl's message, when it failed.
    public var error: FetchError?

    /// The line `prefetch fetch` prints for it.
    public var line: String {
        let outcome = status.map { "\($0)" } ?? "failed \(error?.code.rawValue ?? "")"
        let detail = error.map { "  (\($0.message))" } ?? ""
        return "\(name)  \(method) \(url)  \(outcome)  \(bytes) bytes  \(elapsed.milliseconds) ms\(detail)"
    }
}

/// Runs a page's plan for real, all requests at once, reporting each as it completes: what `prefetch fetch`
/// does from a terminal to check a config against the real upstreams.
///
/// Credentials among `headers` follow the same rule as the service (`credentials` per interface, same-site
/// by default).
public func fetchPage(
    _ plan: Plan,
    headers: HTTPFields,
    settings: ServiceSettings,
    logger: Logger,
    onResult: @escaping @Sendable (PageFetchResult) -> Void
) async throws -> [PageFetchResult] {
    let fetcher = Fetcher(configuration: settings.fetcher, logger: logger)
    let credentialNames = Set(settings.credentialHeaders.map { $0.lowercased() })
    let credentials = headers.filter { credentialNames.contains($0.name.canonicalName) }
    return try await withThrowingTaskGroup(of: PageFetchResult?.self) { group in
        group.addTask {
            try await fetcher.run()
            return nil
        }
        for request in plan.requests {
            var sent = request.headers
            if SiteRule.allowsCredentials(request.interface.credentials, page: plan.pageURL, api: request.interface.apiURL) {
                sent.append(contentsOf: credentials)
            }
            let fetch = FetchRequest(
                method: request.method.rawValue, url: request.url, headers: sent, body: request.body.map { Array($0.utf8) },
                timeout: .milliseconds(request.interface.timeoutMilliseconds), maxResponseBytes: settings.maximumResponseBytes
            )
            group.addTask {
                let start = ContinuousClock.now
                let result: PageFetchResult
                do throws(FetchError) {
                    let response = try await fetcher.fetch(fetch)
                    result = PageFetchResult(
                        name: request.name, method: fetch.method, url: fetch.url, status: response.status, bytes: response.body.count,
                        elapsed: response.elapsed)
                } catch {
                    result = PageFetchResult(
                        name: request.name, method: fetch.method, url: fetch.url, bytes: 0, elapsed: .now - start, error: error)
                }
                onResult(result)
                return result
            }
        }
        var results: [PageFetchResult] = []
        while results.count < plan.requests.count, let next = try await group.next() {
            if let result = next { results.append(result) }
        }
        group.cancelAll()
        return results
    }
}

/// Asks a running service's `/healthz` (the container health check): `true` on a 200 answer.
public func checkHealth(url: String, timeout: Duration = .seconds(2), logger: Logger) async -> Bool {
    let fetcher = Fetcher(logger: logger)
    return await withTaskGroup(of: Bool?.self) { group in
        group.addTask {
            try? await fetcher.run()
            return nil
        }
        group.addTask {
            let response = try? await fetcher.fetch(FetchRequest(method: "GET", url: url, body: nil, timeout: timeout))
            return response?.status == 200
        }
        var healthy = false
        while let next = await group.next() {
            if let result = next {
                healthy = result
                break
            }
        }
        group.cancelAll()
        return healthy
    }
}
