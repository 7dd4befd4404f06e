import ServiceTestSupport

@testable import PageAPI
@testable import PrefetchService

/// ServeReplicaTests calls a `prefetch serve` process `CommandTests.Server`, the name CommandTests
/// (ServiceSocketTests) gives it.
enum CommandTests {
    typealias Server = ServeProcess
}

// ServiceTestSupport's helpers that show a type internal to PrefetchService (a package declaration cannot), kept
// in each target that uses them.

extension Reply {
    /// The body as the error answer every refusal writes (`{"error", "message"}`), nil when it is not one.
    var apiError: APIError.Body? { try? decoded(APIError.Body.self) }

    /// The `error` code of a JSON error body.
    var errorCode: String? { apiError?.error }
}
