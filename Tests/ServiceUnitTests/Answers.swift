import PrefetchCore
import ServiceTestSupport

@testable import PageAPI
@testable import PrefetchService

// ServiceTestSupport's helpers that show a type internal to PrefetchService (a package declaration cannot), kept
// in each target that uses them.

extension Reply {
    /// The error answer `{"error", "message"}`, decoded, with its code read as a ``FailureCode``.
    func failure() throws -> (code: FailureCode?, message: String) {
        let body = try decoded(APIError.Body.self)
        return (FailureCode(rawValue: body.error), body.message)
    }
}
