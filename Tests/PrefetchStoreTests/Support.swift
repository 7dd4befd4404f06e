import HTTPTypes
import Logging
import MetricsTestKit
import PrefetchCore
import Testing

@testable import PrefetchStore

let quietLogger = Logger(label: "prefetch.store.test") { _ in SwiftLogNoOpLogHandler() }

func makeStore(
    budget: Int = 1 << 20, lockAge: Duration = .seconds(10), metrics: TestMetrics = TestMetrics(),
    clock: any ServiceClock = ContinuousClock()
) -> MemoryStore {
    MemoryStore(budgetBytes: budget, lockAge: lockAge, logger: quietLogger, metricsFactory: metrics, clock: clock)
}

func key(_ path: String = "/a", identity: Identity = .anonymous, body: [UInt8]? = nil) -> StoreKey {
    StoreKey(identity: identity, method: "GET", url: "https://api.test\(path)", body: body)
}

/// One instant for every test response, so equal content means equal responses.
let fetchedAt = ContinuousClock.now

func response(_ text: String, noStore: Bool = false) -> StoredResponse {
    StoredResponse(
        status: 200, headers: [.contentType: "text/plain"],
        body: Array(text.utf8), fetchedAt: fetchedAt, noStore: noStore)
}

func response(bytes: Int) -> StoredResponse {
    StoredResponse(status: 200, body: [UInt8](repeating: 0x61, count: bytes), fetchedAt: fetchedAt)
}

func policy(_ label: String = "profile", ttl: Duration = .seconds(30), negativeTTL: Duration = .seconds(5)) -> StorePolicy {
    StorePolicy(ttl: ttl, negativeTTL: negativeTTL, label: label)
}

/// Claims the flight for `key`; fails the test (it throws) unless this caller leads.
func lead(_ store: MemoryStore, _ key: StoreKey, policy: StorePolicy = policy()) async throws -> FlightToken {
    let outcome = await store.begin(key, policy: policy)
    var token: FlightToken?
    if case .leader(let leading) = outcome { token = leading }
    return try #require(token, "expected to lead the flight for \(key), got \(outcome)")
}

/// Claims and completes a flight; returns the token used.
@discardableResult
func put(
    _ store: MemoryStore, _ key: StoreKey, _ result: Result<StoredResponse, StoreFailure>,
    policy: StorePolicy = policy()
) async -> FlightToken? {
    let outcome = await store.begin(key, policy: policy)
    guard case .leader(let token) = outcome else {
        Issue.record("expected to lead the flight for \(key), got \(outcome)")
        return nil
    }
    await store.complete(key, token: token, result: result)
    return token
}

extension ReadOutcome {
    var response: StoredResponse? {
        if case .ready(let response, _) = self { return response }
        return nil
    }

    var failure: StoreFailure? {
        if case .failed(let failure, _) = self { return failure }
        return nil
    }

    var isJoined: Bool {
        switch self {
        case .ready(_, let joined), .failed(_, let joined): joined
        default: false
        }
    }
}
