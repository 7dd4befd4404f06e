public import HTTPTypes
public import Logging
public import PrefetchCore
public import PrefetchFetcher

/// One interface's result in `prefetch fetch`.
public struct PageFetchResult: Sendable {
    /// The interface name.
    public var name: String
    /// The method and URL requested (for a dependent request not sent, its URL as written).
    public var method: String
    public var url: String
    /// The upstream status, or `nil` when the fetch failed or was not sent.
    public var status: Int?
    /// Body bytes received.
    public var bytes: Int
    /// Time from submission to completion.
    public var elapsed: Duration
    /// The failure code (`timeout`, `dns`, ...) and libcurl's message, when it failed.
    public var error: FetchError?
    /// Why a dependent request was not sent (`dependency-failed`, `dependency-not-json`, `dependency-value`), with
    /// what it needed.
    public var dependencyError: DependencyError?
    /// The body, kept only while a dependent request of the page needs it.
    var body: [UInt8]? = nil

    /// Whether the request failed or was not sent.
    public var failed: Bool { error != nil || dependencyError != nil }

    /// The line `prefetch fetch` prints for it.
    public var line: String {
        let outcome = status.map { "\($0)" } ?? "failed \(error?.code.rawValue ?? dependencyError?.code.rawValue ?? "")"
        let detail = error.map { "  (\($0.message))" } ?? dependencyError.map { "  (\($0.message))" } ?? ""
        // shown whole: `prefetch fetch` is the operator's dry run at their own terminal; the URL is what they check.
        return "\(name)  \(method) \(url)  \(outcome)  \(bytes) bytes  \(elapsed.milliseconds) ms\(detail)"
    }
}

/// Runs a page's plan for real, reporting each request as it completes: what `prefetch fetch` does from a
/// terminal to check a config against the real upstreams.
///
/// Independent requests go at once; a dependent request goes once every answer it needs is in, composed with the
/// values it takes from them, as the service does. Credentials among `headers` follow the same rule as the
/// service (`credentials` per interface, same-site by default).
public func fetchPage(
    _ plan: Plan,
    headers: HTTPFields,
    settings: EngineSettings,
    fetcher configuration: FetcherConfiguration = FetcherConfiguration(),
    logger: Logger,
    onResult: @escaping @Sendable (PageFetchResult) -> Void
) async throws -> [PageFetchResult] {
    let fetcher = Fetcher(configuration: configuration, logger: logger)
    let credentialNames = Set(settings.credentialHeaders.map { $0.lowercased() })
    let credentials = Credentials.headers(in: headers, named: credentialNames)

    /// Fetches `request` (an independent one, or a dependent one resolved) as request `index`.
    @Sendable func fetch(_ request: PlannedRequest, index: Int) async -> (Int, PageFetchResult) {
        var sent = request.headers
        if SiteRule.allowsCredentials(request.interface.credentials, page: plan.pageURL, api: request.interface.apiURL) {
            sent.append(contentsOf: Credentials.sentHeaders(credentials, for: request.interface.apiURL, page: plan.pageURL))
        }
        let fetch = FetchRequest(
            method: request.method.rawValue, url: request.url, headers: sent, body: request.body.map { Array($0.utf8) },
            timeout: .milliseconds(request.interface.timeoutMilliseconds), maxResponseBytes: settings.maximumResponseBytes
        )
        let start = ContinuousClock.now
        do throws(FetchError) {
            let response = try await fetcher.fetch(fetch)
            return (
                index,
                PageFetchResult(
                    name: request.name, method: fetch.method, url: fetch.url, status: response.status, bytes: response.body.count,
                    elapsed: response.elapsed, body: response.body)
            )
        } catch {
            return (
                index,
                PageFetchResult(name: request.name, method: fetch.method, url: fetch.url, bytes: 0, elapsed: .now - start, error: error)
            )
        }
    }

    return try await withThrowingTaskGroup(of: (Int, PageFetchResult)?.self) { group in
        group.addTask {
            try await fetcher.run()
            return nil
        }
        var done: [Int: PageFetchResult] = [:]
        var waiting = Set(plan.requests.indices)
        var results: [PageFetchResult] = []
        // Starts every request whose needs are all in: sent when they answered 2xx JSON with the values it takes,
        // reported as not sent otherwise.
        func startReady() {
            for index in waiting.sorted() where plan.requests[index].dependencies.allSatisfy({ done[$0] != nil }) {
                waiting.remove(index)
                let request = plan.requests[index]
                switch resolve(request, in: plan, answers: done) {
                case .success(let resolved):
                    group.addTask { await fetch(resolved, index: index) }
                case .failure(let problem):
                    let result = PageFetchResult(
                        name: request.name, method: request.method.rawValue, url: request.url, bytes: 0, elapsed: .zero,
                        dependencyError: problem)
                    group.addTask { (index, result) }
                }
            }
        }
        startReady()
        while results.count < plan.requests.count, let next = try await group.next() {
            guard let (index, result) = next else { continue }
            done[index] = result
            var reported = result
            reported.body = nil
            onResult(reported)
            results.append(reported)
            startReady()
        }
        group.cancelAll()
        return results
    }
}

/// `request` with the values it takes from `answers` (the page's requests done so far), or why it cannot be sent.
private func resolve(_ request: PlannedRequest, in plan: Plan, answers: [Int: PageFetchResult]) -> Result<PlannedRequest, DependencyError> {
    guard !request.dependencies.isEmpty else { return .success(request) }
    var values: [Reference: JSONValue] = [:]
    for dependency in request.dependencies {
        let needed = plan.requests[dependency].name
        guard let answer = answers[dependency], let status = answer.status, (200..<300).contains(status), let body = answer.body else {
            return .failure(
                DependencyError(code: .dependencyFailed, message: "\(request.name) needs \(needed), which did not answer 2xx"))
        }
        guard let document = try? JSONParser.parse(body) else {
            return .failure(
                DependencyError(
                    code: .dependencyNotJSON, message: "\(request.name) needs values from \(needed), whose answer is not JSON"))
        }
        for reference in request.interface.references where reference.interface == needed {
            if let value = reference.pointer.resolve(in: document) { values[reference] = value }
        }
    }
    do throws(DependencyError) {
        return .success(try request.resolved(with: values))
    } catch {
        return .failure(error)
    }
}
