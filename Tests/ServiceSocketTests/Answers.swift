import Foundation
import PrefetchTestSupport
import ServiceTestSupport

@testable import PageAPI
@testable import PrefetchService

// ServiceTestSupport's helpers that show a type internal to PrefetchService (a package declaration cannot), kept
// in each target that uses them.

extension Reply {
    /// The body as the error answer every refusal writes (`{"error", "message"}`), nil when it is not one.
    var apiError: APIError.Body? { try? decoded(APIError.Body.self) }

    /// The `error` code of a JSON error body.
    var errorCode: String? { apiError?.error }
}

extension Echo {
    /// The echo a ready result of the results view carries as its body.
    init(_ body: ResultsAnswer.Value?) throws {
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(body ?? .null)) as? [String: Any]
        self.init(json: object ?? [:])
    }
}
