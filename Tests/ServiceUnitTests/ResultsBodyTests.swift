import HTTPTypes
import Testing

@testable import PageAPI
@testable import PrefetchService

/// How the results view decides that a stored body is JSON it can splice in as is: its `Content-Type` says `json`,
/// in any letter case and with any parameters, read on the value's bytes.
@Suite struct ResultsBodyTests {
    @Test(arguments: [
        ("application/json", true), ("application/JSON; charset=utf-8", true), ("application/problem+json", true),
        ("text/Json", true), ("json", true), ("application/jso", false), ("text/plain", false), ("", false),
        ("application/x-jsonp", true), ("j-s-o-n", false),
    ])
    func aContentTypeNamesJSONWhateverItsCase(value: String, json: Bool) {
        #expect(ResultsAnswer.namesJSON(HTTPField(name: .contentType, value: value)) == json, "\(value)")
    }
}
