import PropertyBased
import Testing

@testable import PrefetchCore

@Suite struct PageMatching {
    static let config: PrefetchConfig = {
        let pages = [
            "https://m.example.com/help/new",
            "https://m.example.com/",
            "http://m.example.com:8080/help/new",
            "https://m.example.com/item/{id}",
            "https://m.example.com/item/{id}.html",
            "https://m.example.com/item/special",
            "https://m.example.com/item/*/reviews",
            "https://m.example.com/*/{id}/reviews",
            "https://m.example.com/shop/{shop}/item/{id}",
        ].map { #"{"url":"\#($0)","interfaces":[]}"# }
        return try! makeConfig(pages: pages)
    }()

    func matched(_ page: String) -> String? {
        guard let url = try? HTTPURL(parsing: page) else { return nil }
        return Self.config.matcher.match(url)?.entry.url
    }

    @Test func queryAndFragmentAreIgnored() {
        #expect(matched("https://m.example.com/help/new?id=1#top") == "https://m.example.com/help/new")
    }

    @Test func schemeAndHostAreCaseInsensitiveAndTheDefaultPortIsNoPort() {
        #expect(matched("HTTPS://M.Example.COM:443/help/new") == "https://m.example.com/help/new")
        #expect(matched("https://m.example.com/HELP/new") == nil)
    }

    @Test func schemeAndPortDistinguishPages() {
        #expect(matched("http://m.example.com/help/new") == nil)
        #expect(matched("http://m.example.com:8080/help/new") == "http://m.example.com:8080/help/new")
    }

    @Test func oneTrailingSlashIsIgnored() {
        #expect(matched("https://m.example.com/help/new/") == "https://m.example.com/help/new")
        #expect(matched("https://m.example.com") == "https://m.example.com/")
        #expect(matched("https://m.example.com/?x=1") == "https://m.example.com/")
    }

    @Test func dotSegmentsResolveAsInABrowser() {
        #expect(matched("https://m.example.com/a/../help/./new") == "https://m.example.com/help/new")
    }

    @Test func exactEntriesWinOverPatterns() {
        #expect(matched("https://m.example.com/item/special") == "https://m.example.com/item/special")
    }

    @Test func affixedCapturesAreMoreSpecificThanBareOnes() {
        #expect(matched("https://m.example.com/item/12.html") == "https://m.example.com/item/{id}.html")
        #expect(matched("https://m.example.com/item/12") == "https://m.example.com/item/{id}")
    }

    @Test func aLiteralToTheLeftWins() {
        #expect(matched("https://m.example.com/item/12/reviews") == "https://m.example.com/item/*/reviews")
        #expect(matched("https://m.example.com/shop/12/reviews") == "https://m.example.com/*/{id}/reviews")
    }

    @Test func aSegmentPatternMatchesExactlyOneNonEmptySegment() {
        #expect(matched("https://m.example.com/item/a/b") == nil)
        #expect(matched("https://m.example.com/item/.html") == "https://m.example.com/item/{id}")
        #expect(matched("https://m.example.com/shop/s1/item/i2") == "https://m.example.com/shop/{shop}/item/{id}")
    }

    @Test func capturesAreReturnedInPathOrder() throws {
        let match = try #require(Self.config.matcher.match(try HTTPURL(parsing: "https://m.example.com/shop/s1/item/i2")))
        #expect(match.captures.map(\.name) == ["shop", "id"])
        #expect(match.captures.map(\.value) == ["s1", "i2"])
    }

    @Test func onATieTheFirstListedPatternWins() throws {
        let config = try makeConfig(pages: [
            #"{"url":"https://m.example.com/a/{x}","interfaces":[{"name":"first","api":"https://a.example.com/","method":"GET"}]}"#,
            #"{"url":"https://m.example.com/*/b","interfaces":[{"name":"second","api":"https://a.example.com/","method":"GET"}]}"#,
        ])
        #expect(config.matcher.match(try HTTPURL(parsing: "https://m.example.com/a/b"))?.entry.url == "https://m.example.com/a/{x}")
        let affixed = try makeConfig(pages: [
            #"{"url":"https://m.example.com/{x}b","interfaces":[]}"#,
            #"{"url":"https://m.example.com/a{x}","interfaces":[]}"#,
        ])
        #expect(affixed.matcher.match(try HTTPURL(parsing: "https://m.example.com/a1b"))?.entry.url == "https://m.example.com/{x}b")
    }

    @Test func malformedPatternsAreConfigErrors() {
        let text = { (url: String) in #"{"code":200,"data":{"name":"n","version":"1","config":[{"url":"\#(url)","interfaces":[]}]}}"# }
        #expect(
            problems(text("https://m.example.com/a{x}{y}")) == [
                #"data.config[0].url: "https://m.example.com/a{x}{y}" has a malformed pattern segment "a{x}{y}" (one {name} per segment)"#
            ])
        #expect(
            problems(text("https://m.example.com/{x}/{x}")) == [
                #"data.config[0].url: "https://m.example.com/{x}/{x}" uses the segment name {x} twice"#
            ])
        #expect(
            problems(text("https://m.example.com/a*")) == [
                #"data.config[0].url: "https://m.example.com/a*" has "*" inside the segment "a*"; "*" must be a whole segment"#
            ])
    }
}

@Suite struct PageURLParsing {
    @Test(arguments: [
        ("", "is empty"),
        ("m.example.com/a", "is not an absolute http(s) URL (no \"://\")"),
        ("javascript://x", "has scheme \"javascript\"; only http and https are supported"),
        ("https://user:pw@m.example.com/", "carries credentials (user@host), which are not accepted"),
        ("https://m.example.com:99999/", "has an invalid port \"99999\""),
        ("https:///a", "has no host"),
        ("https://m.exa mple.com/", "has an invalid character \" \" in its host"),
        ("https://m.example.com\\@evil.example/", "has a backslash after the host"),
    ])
    func refusedWithAReason(text: String, reason: String) {
        #expect(throws: URLProblem(reason)) { try HTTPURL(parsing: text) }
    }

    @Test func partsAreSplitRaw() throws {
        let url = try HTTPURL(parsing: "HTTP://[::1]:8080/a%20b?x=%E4&y#frag?z")
        #expect(url.scheme == "http")
        #expect(url.host == "[::1]")
        #expect(url.port == 8080)
        #expect(url.path == "/a%20b")
        #expect(url.query == "x=%E4&y")
        #expect(url.fragment == "frag?z")
    }
}

@Suite struct ComposedURLProperties {
    static let alphabet: [String] = [
        "a", "Z", "0", "=", "&", "%", "%2", "%41", "%0D%0A", "+", " ", "@", "/", "//", "?", "\\", ":", "中", "é", ";", "'", "\"", "<", "..",
        "%00", "#",
    ]

    @Test func forAnyPageQueryTheComposedURLKeepsTheAPITarget() async throws {
        let config = try makeConfig(pages: [
            #"""
            {"url":"https://m.example.com/p","interfaces":[
              {"name":"g","api":"http://api.example.com:8081/v1/data.json?fixed=1","method":"GET","urlParam":true,"bodyParam":true,"body":{"c":1}},
              {"name":"p","api":"https://api.example.com/v1/data.json","method":"POST","urlParam":true,"bodyParam":true}]}
            """#
        ])
        let pieces = Gen.int(in: 0...(Self.alphabet.count - 1)).array(of: 0...40)
        await propertyCheck(count: 300, input: pieces) { indexes in
            let query = indexes.map { Self.alphabet[$0] }.joined()
            let page = "https://m.example.com/p?" + query
            guard let plan = try? Plan.make(page: page, config: config) else {
                // Only a query containing a control character may be refused, and none of these has one.
                Issue.record("planning failed for \(page)")
                return
            }
            for request in plan.requests {
                guard let url = try? HTTPURL(parsing: request.url) else {
                    Issue.record("composed URL does not parse: \(request.url)")
                    continue
                }
                #expect(url.host == "api.example.com")
                #expect(url.port == request.interface.apiURL.port)
                #expect(url.scheme == request.interface.apiURL.scheme)
                #expect(url.path == "/v1/data.json")
                #expect(url.fragment == nil)
                if let body = request.body { #expect((try? JSONParser.parse(body)) != nil) }
            }
        }
    }
}
