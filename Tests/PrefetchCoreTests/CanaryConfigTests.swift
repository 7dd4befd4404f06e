import Testing

@testable import PrefetchCore

/// The `canary` member of a config document: a candidate validated under the rules of `data`.
@Suite struct CanaryConfigTests {
    static let page = #"{"url":"https://m.example.com/a","interfaces":[{"api":"https://api.example.com/v1/feed","method":"GET"}]}"#
    static let candidatePage = #"{"url":"https://m.example.com/a","interfaces":[{"api":"https://api.example.com/v2/feed","method":"GET"}]}"#

    func document(
        percent: String = "10", version: String = "4", candidateVersion: String = "5", candidatePages: String = page
    )
        -> String
    {
        #"{"code":200,"data":{"name":"n","version":"\#(version)","config":[\#(Self.page)]},"#
            + #""canary":{"percent":\#(percent),"data":{"name":"n","version":"\#(candidateVersion)","config":[\#(candidatePages)]}}}"#
    }

    @Test func aDocumentWithACandidateLoadsBothVersions() throws {
        let loaded = try ConfigLoader.parse(Array(document(candidatePages: Self.candidatePage).utf8), source: "test")
        #expect(loaded.config.version == "4")
        let canary = try #require(loaded.canary)
        #expect(canary.config.version == "5")
        #expect(canary.basisPoints == 1000)
        #expect(canary.percent == 10)
        #expect(canary.config.pages[0].interfaces[0].api == "https://api.example.com/v2/feed")
        #expect(loaded.config.pages[0].interfaces[0].api == "https://api.example.com/v1/feed")
    }

    @Test func aDocumentWithoutACandidateHasNone() throws {
        let text = #"{"code":200,"data":{"name":"n","version":"4","config":[\#(Self.page)]}}"#
        #expect(try ConfigLoader.parse(Array(text.utf8), source: "test").canary == nil)
    }

    @Test func anInvalidCandidateRejectsTheDocumentNamingItsPaths() {
        let broken = #"{"url":"https://m.example.com/b","interfaces":[{"api":"/relative","method":"PUT "}]}"#
        let found = problems(document(candidatePages: Self.page + "," + Self.page + "," + Self.page + "," + broken))
        #expect(
            found == [
                #"canary.data.config[1].url: "https://m.example.com/a" duplicates canary.data.config[0].url ("https://m.example.com/a")"#,
                #"canary.data.config[2].url: "https://m.example.com/a" duplicates canary.data.config[0].url ("https://m.example.com/a")"#,
                #"canary.data.config[3].interfaces[0].api: "/relative" is not an absolute http(s) URL: is not an absolute http(s) URL (no "://")"#,
                #"canary.data.config[3].interfaces[0].method: "PUT " is not a supported method (GET, POST, PUT, PATCH, DELETE)"#,
            ], "\(found)")
    }

    @Test func bothVersionsAreValidatedAndReportedTogether() {
        let text =
            #"{"code":200,"data":{"name":"n","version":"4","config":[{"url":"nope"}]},"#
            + #""canary":{"percent":5,"data":{"name":"n","version":"5","config":{}}}}"#
        let found = problems(text)
        #expect(found.contains { $0.hasPrefix("data.config[0].url:") }, "\(found)")
        #expect(found.contains("canary.data.config: must be an array of pages, got an object"), "\(found)")
    }

    @Test(arguments: [("0", 0), ("100", 10_000), ("10", 1000), ("0.01", 1), ("12.5", 1250), ("99.99", 9999), ("7.50", 750)])
    func percentsFrom0To100WithTwoDecimalsAreAccepted(literal: String, basisPoints: Int) throws {
        let loaded = try ConfigLoader.parse(Array(document(percent: literal).utf8), source: "test")
        #expect(loaded.canary?.basisPoints == basisPoints)
    }

    @Test(arguments: ["100.01", "101", "-1", "0.001", "1e1", "1000"])
    func percentsOutOfBoundsOrTooPreciseAreRefused(literal: String) {
        #expect(
            problems(document(percent: literal)) == ["canary.percent: must be between 0 and 100 with at most two decimals, got \(literal)"])
    }

    @Test func aPercentThatIsNoNumberOrMissingIsRefused() {
        #expect(problems(document(percent: #""10""#)) == ["canary.percent: must be a number between 0 and 100, got a string"])
        let missing =
            #"{"code":200,"data":{"name":"n","version":"4","config":[]},"canary":{"data":{"name":"n","version":"5","config":[]}}}"#
        #expect(problems(missing) == ["canary.percent: is missing (the share of users, 0-100)"])
        let noData = #"{"code":200,"data":{"name":"n","version":"4","config":[]},"canary":{"percent":1}}"#
        #expect(problems(noData) == ["canary.data: is missing"])
    }

    @Test func theCandidateMustBeAnotherVersion() {
        #expect(
            problems(document(candidateVersion: "4"))
                == [#"canary.data.version: is "4", the same as data.version: a candidate must be another version"#])
    }

    @Test func unknownCanaryKeysAreWarningsUnderTheirPath() throws {
        let text =
            #"{"code":200,"data":{"name":"n","version":"4","config":[]},"#
            + #""canary":{"percent":1,"owner":"x","data":{"name":"n","version":"5","extra":1,"config":[]}}}"#
        let loaded = try ConfigLoader.parse(Array(text.utf8), source: "test")
        #expect(loaded.warnings.map(\.path).contains("canary.owner"))
        #expect(loaded.warnings.map(\.path).contains("canary.data.extra"))
    }

    @Test func percentTextRoundTrips() {
        for (points, text) in [(0, "0"), (1, "0.01"), (10, "0.1"), (1250, "12.5"), (1000, "10"), (9999, "99.99"), (10_000, "100")] {
            let canary = CanaryConfig(config: PrefetchConfig(name: "n", version: "1", pages: []), basisPoints: points)
            #expect(canary.percentText == text)
            #expect(CanaryConfig.basisPoints(fromLiteral: text) == points)
        }
    }
}
