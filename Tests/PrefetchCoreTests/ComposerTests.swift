import HTTPTypes
import Testing

@testable import PrefetchCore

/// The seed's table (SEEDS.md §3), row by row, and every composition rule around it.
@Suite struct SeedRows {
    static let page = "https://m.example.com/help/new?id=163&itemId=126"

    @Test func getWithURLParamAppendsThePageQuery() throws {
        let config = try singleInterfaceConfig(#"{"api":"https://m.example.com/xx.json","method":"GET","urlParam":true}"#)
        let request = try firstRequest(Self.page, config)
        #expect(request.method == .GET)
        #expect(request.url == "https://m.example.com/xx.json?id=163&itemId=126")
        #expect(request.body == nil)
        #expect(request.headers.isEmpty)
    }

    @Test func postWithURLParamKeepsTheConfigBody() throws {
        let config = try singleInterfaceConfig(
            #"{"api":"https://m.example.com/xx.json","method":"POST","urlParam":true,"body":{"cityId":123456}}"#)
        let request = try firstRequest(Self.page, config)
        #expect(request.url == "https://m.example.com/xx.json?id=163&itemId=126")
        #expect(request.body == #"{"cityId":123456}"#)
        #expect(request.headers.map(\.name.rawName) == ["Content-Type"])
        #expect(request.headers.map(\.value) == ["application/json"])
    }

    @Test func postWithBodyParamMergesIntoTheBody() throws {
        let config = try singleInterfaceConfig(
            #"{"api":"https://m.example.com/xx.json","method":"POST","bodyParam":true,"body":{"cityId":123456}}"#)
        let request = try firstRequest(Self.page, config)
        #expect(request.url == "https://m.example.com/xx.json")
        #expect(request.body == #"{"cityId":123456,"id":163,"itemId":126}"#)
    }

    @Test func postWithBothDoesBoth() throws {
        let config = try singleInterfaceConfig(
            #"{"api":"https://m.example.com/xx.json","method":"POST","urlParam":true,"bodyParam":true,"body":{"cityId":123456}}"#)
        let request = try firstRequest(Self.page, config)
        #expect(request.url == "https://m.example.com/xx.json?id=163&itemId=126")
        #expect(request.body == #"{"cityId":123456,"id":163,"itemId":126}"#)
    }

    @Test func theSampleConfigPlansTheSeedRowsExactly() throws {
        let config = try ConfigLoader.load(path: repositoryRoot + "/configs/prefetch.json").config
        let plan = try Plan.make(page: Self.page, config: config)
        #expect(plan.matched == "https://m.example.com/help/new")
        let rows = plan.requests.map { "\($0.method.rawValue) \($0.url) \($0.body ?? "-")" }
        #expect(
            rows == [
                "GET https://m.example.com/xx.json?id=163&itemId=126 -",
                #"POST https://m.example.com/xx.json?id=163&itemId=126 {"cityId":123456}"#,
                #"POST https://m.example.com/xx.json {"cityId":123456,"id":163,"itemId":126}"#,
                #"POST https://m.example.com/xx.json?id=163&itemId=126 {"cityId":123456,"id":163,"itemId":126}"#,
            ])
    }

    @Test func theSeedConfigVerbatimLoadsAndPlans() throws {
        let config = try ConfigLoader.load(path: repositoryRoot + "/Tests/PrefetchCoreTests/Fixtures/seed-config.json").config
        let plan = try Plan.make(page: "https://test.example.com/act/pre/ApRflg5XnZqP.html?id=9&name=a+b", config: config)
        #expect(
            plan.requests.map(\.url) == [
                "https://test.example.com/act/napi/distribution/info?id=9&name=a+b",
                "https://test.example.com/topic/v1/ding/sinkList.json?id=9&name=a+b",
            ])
        #expect(plan.requests[1].body == #"{"visitRecord":{},"id":9,"name":"a b"}"#)
        #expect(plan.requests.map(\.name) == ["distribution.info", "ding.sinkList"])
    }
}

@Suite struct URLParamRules {
    func url(api: String = "https://m.example.com/xx.json", page: String, extra: String = "") throws -> String {
        let config = try singleInterfaceConfig(#"{"api":"\#(api)","method":"GET","urlParam":true\#(extra)}"#)
        return try firstRequest(page, config).url
    }

    @Test func originalEncodingPassesThroughUnchanged() throws {
        #expect(
            try url(page: "https://m.example.com/help/new?q=%E4%B8%AD&s=a+b&t=%2B")
                == "https://m.example.com/xx.json?q=%E4%B8%AD&s=a+b&t=%2B")
    }

    @Test func originalOrderIsKeptIncludingRepeats() throws {
        #expect(try url(page: "https://m.example.com/help/new?b=2&a=1&b=3") == "https://m.example.com/xx.json?b=2&a=1&b=3")
    }

    @Test func anExistingAPIQueryIsExtendedWithAmpersand() throws {
        #expect(
            try url(api: "https://m.example.com/xx.json?v=2", page: "https://m.example.com/help/new?id=1")
                == "https://m.example.com/xx.json?v=2&id=1")
    }

    @Test func theAPIFragmentIsDropped() throws {
        #expect(
            try url(api: "https://m.example.com/xx.json#top", page: "https://m.example.com/help/new?id=1")
                == "https://m.example.com/xx.json?id=1")
        #expect(
            try url(api: "https://m.example.com/xx.json?v=2#top", page: "https://m.example.com/help/new")
                == "https://m.example.com/xx.json?v=2")
    }

    @Test func anEmptyPageQueryAddsNothing() throws {
        #expect(try url(page: "https://m.example.com/help/new") == "https://m.example.com/xx.json")
        #expect(try url(page: "https://m.example.com/help/new?") == "https://m.example.com/xx.json")
        #expect(try url(page: "https://m.example.com/help/new?&&") == "https://m.example.com/xx.json")
    }

    @Test func thePageFragmentIsNotForwarded() throws {
        #expect(try url(page: "https://m.example.com/help/new?id=1#frag&x=2") == "https://m.example.com/xx.json?id=1")
    }

    @Test func bytesIllegalInAQueryArePercentEncoded() throws {
        #expect(
            try url(page: "https://m.example.com/help/new?q=a b\"<>中&p=100%")
                == "https://m.example.com/xx.json?q=a%20b%22%3C%3E%E4%B8%AD&p=100%25")
    }

    @Test func theAllowListFiltersByDecodedName() throws {
        let result = try url(page: "https://m.example.com/help/new?id=1&sec%72et=2&x=3&secret=4", extra: #","params":["id","x"]"#)
        #expect(result == "https://m.example.com/xx.json?id=1&x=3")
        let decoded = try url(page: "https://m.example.com/help/new?i%64=7&other=1", extra: #","params":["id"]"#)
        #expect(decoded == "https://m.example.com/xx.json?i%64=7")
    }
}

@Suite struct BodyParamRules {
    func body(_ page: String, body: String = #"{"cityId":123456}"#, extra: String = "") throws -> String? {
        let config = try singleInterfaceConfig(
            #"{"api":"https://m.example.com/xx.json","method":"POST","bodyParam":true,"body":\#(body)\#(extra)}"#)
        return try firstRequest(page, config).body
    }

    @Test func canonicalIntegersBecomeNumbersEverythingElseStrings() throws {
        let page =
            "https://m.example.com/help/new?a=0&b=163&c=-4&d=007&e=1e3&f=%2B5&g=-0&h=1.5&i=123456789012345&j=1234567890123456&k=&l=true"
        #expect(
            try body(page, body: "{}")
                == #"{"a":0,"b":163,"c":-4,"d":"007","e":"1e3","f":"+5","g":"-0","h":"1.5","i":123456789012345,"j":"1234567890123456","k":"","l":"true"}"#
        )
    }

    @Test func formDecodingAppliesPlusAndPercent() throws {
        #expect(try body("https://m.example.com/help/new?q=a+b%20c&z=%E4%B8%AD%2B", body: "{}") == #"{"q":"a b c","z":"中+"}"#)
    }

    @Test func malformedOrNonUTF8EncodingIsKeptAsWritten() throws {
        #expect(try body("https://m.example.com/help/new?a=%zz&b=%FF%FE", body: "{}") == #"{"a":"%zz","b":"%FF%FE"}"#)
    }

    @Test func aRepeatedKeyTakesTheLastValueAtTheFirstPosition() throws {
        #expect(try body("https://m.example.com/help/new?a=1&b=2&a=3", body: "{}") == #"{"a":3,"b":2}"#)
    }

    @Test func theConfigBodyWinsOverThePage() throws {
        #expect(try body("https://m.example.com/help/new?cityId=1&id=2") == #"{"cityId":123456,"id":2}"#)
    }

    @Test func aKeyWithoutValueIsAnEmptyString() throws {
        #expect(try body("https://m.example.com/help/new?flag", body: "{}") == #"{"flag":""}"#)
    }

    @Test func theAllowListFiltersTheBodyToo() throws {
        #expect(try body("https://m.example.com/help/new?id=1&token=x", extra: #","params":["id"]"#) == #"{"cityId":123456,"id":1}"#)
    }

    @Test func jsonSpecialCharactersAreEscaped() throws {
        #expect(try body("https://m.example.com/help/new?q=%22%5C%0A%01", body: "{}") == #"{"q":"\"\\\n\u0001"}"#)
    }

    @Test func configBodyLiteralsSurviveUnchanged() throws {
        #expect(
            try body("https://m.example.com/help/new", body: #"{"price":1.50,"big":12345678901234567890,"nested":{"b":[1,true,null]}}"#)
                == #"{"price":1.50,"big":12345678901234567890,"nested":{"b":[1,true,null]}}"#)
    }

    @Test func withoutBodyOrBodyParamAPostSendsNoBody() throws {
        let config = try singleInterfaceConfig(#"{"api":"https://m.example.com/xx.json","method":"POST","urlParam":true}"#)
        let request = try firstRequest("https://m.example.com/help/new?id=1", config)
        #expect(request.body == nil)
        #expect(request.headers.isEmpty)
    }
}

@Suite struct MethodAndBodyTypeRules {
    @Test func getNeverCarriesABodyBodyParamGoesToTheQuery() throws {
        let config = try singleInterfaceConfig(
            #"{"api":"https://m.example.com/xx.json?v=1","method":"GET","bodyParam":true,"body":{"cityId":123456}}"#)
        let request = try firstRequest("https://m.example.com/help/new?id=163&q=a+b&cityId=9", config)
        #expect(request.body == nil)
        #expect(request.url == "https://m.example.com/xx.json?v=1&cityId=123456&id=163&q=a+b")
    }

    @Test func getWithBothForwardsPageParametersOnce() throws {
        let config = try singleInterfaceConfig(
            #"{"api":"https://m.example.com/xx.json","method":"GET","urlParam":true,"bodyParam":true,"body":{"cityId":1}}"#)
        let request = try firstRequest("https://m.example.com/help/new?id=163", config)
        #expect(request.url == "https://m.example.com/xx.json?id=163&cityId=1")
    }

    @Test func formBodiesAreFormEncoded() throws {
        let config = try singleInterfaceConfig(
            #"{"api":"https://m.example.com/xx.json","method":"POST","bodyParam":true,"bodyType":"form","body":{"cityId":123456,"name":"a b&c","on":true,"none":null}}"#
        )
        let request = try firstRequest("https://m.example.com/help/new?id=163&q=%E4%B8%AD", config)
        #expect(request.body == "cityId=123456&name=a+b%26c&on=true&none=&id=163&q=%E4%B8%AD")
        #expect(request.headers.first { $0.name == .contentType }?.value == "application/x-www-form-urlencoded")
    }

    @Test func staticHeadersAreSentInOrderBeforeContentType() throws {
        let config = try singleInterfaceConfig(
            #"{"api":"https://m.example.com/xx.json","method":"POST","body":{},"headers":{"X-B":"2","X-A":"1"}}"#)
        let request = try firstRequest("https://m.example.com/help/new", config)
        #expect(request.headers.map(\.name.rawName) == ["X-B", "X-A", "Content-Type"])
    }

    @Test func methodsAreCaseInsensitiveButNotTrimmed() throws {
        let config = try singleInterfaceConfig(#"{"api":"https://m.example.com/xx.json","method":"post","body":{}}"#)
        #expect(try firstRequest("https://m.example.com/help/new", config).method == .POST)
    }
}

@Suite struct PageInputCannotMoveTheRequest {
    static let hostile = [
        "https://m.example.com/help/new?x=%0D%0AHost:%20evil.example&y=1",
        "https://m.example.com/help/new?x=@evil.example/&y=//evil.example",
        "https://m.example.com/help/new?x=%00&y=%2F%2Fevil.example%23",
        "https://m.example.com/help/new?a=http://evil.example:80/x?y#z",
        "https://m.example.com/help/new?\u{4E2D}=\u{6587}&%=%&=&==",
        "https://m.example.com/help/new?" + String(repeating: "a=b&", count: 15_000),
    ]

    @Test(arguments: hostile)
    func composedRequestsKeepTheAPIOriginAndPath(page: String) throws {
        let config = try makeConfig(pages: [
            #"""
            {"url":"https://m.example.com/help/new","interfaces":[
              {"name":"get","api":"https://api.example.com:8443/v1/x.json?k=v","method":"GET","urlParam":true,"bodyParam":true},
              {"name":"post","api":"https://api.example.com:8443/v1/x.json","method":"POST","urlParam":true,"bodyParam":true,"body":{}},
              {"name":"form","api":"https://api.example.com:8443/v1/x.json","method":"POST","bodyParam":true,"bodyType":"form"}]}
            """#
        ])
        let plan = try Plan.make(page: page, config: config)
        for request in plan.requests {
            let url = try HTTPURL(parsing: request.url)
            #expect(url.origin == "https://api.example.com:8443")
            #expect(url.path == "/v1/x.json")
            #expect(url.fragment == nil)
            #expect(!request.url.utf8.contains { $0 < 0x21 || $0 >= 0x7F })
            for header in request.headers {
                #expect(header.name == .contentType)
            }
        }
    }

    @Test func controlCharactersInThePageURLAreRefused() {
        #expect(throws: PlanError.self) {
            try Plan.make(
                page: "https://m.example.com/help/new?x=\r\nHost: evil",
                config: try singleInterfaceConfig(#"{"api":"https://a.example.com/","method":"GET"}"#))
        }
    }
}

@Suite struct NamedSegments {
    @Test func capturedSegmentsAreForwardedLikeQueryParameters() throws {
        let config = try makeConfig(pages: [
            #"""
            {"url":"https://m.example.com/item/{itemId}/detail-{tab}.html","interfaces":[
              {"name":"u","api":"https://api.example.com/item","method":"GET","urlParam":true},
              {"name":"b","api":"https://api.example.com/item","method":"POST","bodyParam":true}]}
            """#
        ])
        let plan = try Plan.make(page: "https://m.example.com/item/0042/detail-a%20b+c.html?from=home", config: config)
        #expect(plan.requests[0].url == "https://api.example.com/item?from=home&itemId=0042&tab=a+b%2Bc")
        #expect(plan.requests[1].body == #"{"from":"home","itemId":"0042","tab":"a b+c"}"#)
    }
}

@Suite struct CanonicalIntegers {
    @Test(arguments: ["0", "7", "163", "-4", "999999999999999", "-999999999999999"])
    func accepted(value: String) { #expect(QueryPair.isCanonicalInteger(value)) }

    @Test(arguments: ["", "-", "007", "00", "-0", "+5", "1e3", "1.0", " 1", "1 ", "0x10", "1000000000000000", "١٢"])
    func refused(value: String) { #expect(!QueryPair.isCanonicalInteger(value)) }
}

/// A name the config fixed (a top-level body key or an api query name) is never forwarded from the page.
@Suite struct FixedNamesAreNotForwarded {
    static let shadows = ["role=admin", "ROLE=admin", "r%6Fle=admin", "Role=admin&role=root"]

    func request(_ interface: String, page query: String) throws -> PlannedRequest {
        try firstRequest("https://m.example.com/help/new?\(query)&id=163&x=a+b", try singleInterfaceConfig(interface))
    }

    @Test(arguments: shadows)
    func getSendsOnlyTheConfigValue(query: String) throws {
        for rules in [#""urlParam":true"#, #""bodyParam":true"#, #""urlParam":true,"bodyParam":true"#] {
            let interface = #"{"api":"https://m.example.com/xx.json","method":"GET",\#(rules),"body":{"role":"user"}}"#
            let request = try request(interface, page: query)
            #expect(!request.url.lowercased().contains("admin"), "\(rules): \(request.url)")
            #expect(!request.url.contains("root"), "\(rules): \(request.url)")
            let query = try #require(try HTTPURL(parsing: request.url).query)
            let roles = QueryPair.split(query).filter { $0.name.lowercased() == "role" }.map(\.urlText)
            #expect(roles == ["role=user"], "\(rules): \(request.url)")
            #expect(request.url.contains("id=163&x=a+b"), "\(rules): \(request.url)")
        }
    }

    @Test(arguments: shadows)
    func postJSONSendsOnlyTheConfigValue(query: String) throws {
        let interface = #"{"api":"https://m.example.com/xx.json","method":"POST","urlParam":true,"bodyParam":true,"body":{"role":"user"}}"#
        let request = try request(interface, page: query)
        #expect(request.url == "https://m.example.com/xx.json?id=163&x=a+b")
        #expect(request.body == #"{"role":"user","id":163,"x":"a b"}"#)
    }

    @Test(arguments: shadows)
    func postFormSendsOnlyTheConfigValue(query: String) throws {
        let interface =
            #"{"api":"https://m.example.com/xx.json","method":"POST","urlParam":true,"bodyParam":true,"bodyType":"form","body":{"role":"user"}}"#
        let request = try request(interface, page: query)
        #expect(request.url == "https://m.example.com/xx.json?id=163&x=a+b")
        #expect(request.body == "role=user&id=163&x=a+b")
    }

    @Test func aCaseVariantOfABodyKeyIsDroppedForEveryMethod() throws {
        for method in ["GET", "DELETE", "POST", "PUT", "PATCH"] {
            let interface =
                #"{"api":"https://m.example.com/xx.json","method":"\#(method)","urlParam":true,"bodyParam":true,"body":{"Role":"user"}}"#
            let request = try request(interface, page: "rOlE=admin")
            #expect(
                !request.url.contains("admin") && !(request.body ?? "").contains("admin"),
                "\(method): \(request.url) \(request.body ?? "-")")
        }
    }

    @Test func anAPIQueryNameIsNotRepeatedByThePage() throws {
        let api = "https://m.example.com/xx.json?v=2&Sign=abc"
        let get = try request(#"{"api":"\#(api)","method":"GET","urlParam":true}"#, page: "v=3&%73ign=forged&V=4")
        #expect(get.url == "https://m.example.com/xx.json?v=2&Sign=abc&id=163&x=a+b")
        let getBody = try request(#"{"api":"\#(api)","method":"GET","bodyParam":true}"#, page: "v=3")
        #expect(getBody.url == "https://m.example.com/xx.json?v=2&Sign=abc&id=163&x=a+b")
        let post = try request(#"{"api":"\#(api)","method":"POST","urlParam":true,"bodyParam":true}"#, page: "v=3&sign=forged")
        #expect(post.url == "https://m.example.com/xx.json?v=2&Sign=abc&id=163&x=a+b")
        #expect(post.body == #"{"id":163,"x":"a b"}"#)
    }

    @Test func otherParametersKeepTheirOrderAndEncoding() throws {
        let interface = #"{"api":"https://m.example.com/xx.json?v=2","method":"GET","urlParam":true,"body":{"role":"user"}}"#
        let config = try singleInterfaceConfig(interface)
        let request = try firstRequest("https://m.example.com/help/new?b=%E4%B8%AD&role=admin&a=1&v=9&b=2&roles=x", config)
        #expect(request.url == "https://m.example.com/xx.json?v=2&b=%E4%B8%AD&a=1&b=2&roles=x&role=user")
    }

    @Test func aCapturedSegmentNamedLikeABodyKeyIsNotForwarded() throws {
        let config = try makeConfig(pages: [
            #"""
            {"url":"https://m.example.com/item/{role}/x.html","interfaces":[
              {"api":"https://api.example.com/item","method":"POST","urlParam":true,"bodyParam":true,"body":{"role":"user"}}]}
            """#
        ])
        let request = try firstRequest("https://m.example.com/item/admin/x.html?id=1", config)
        #expect(request.url == "https://api.example.com/item?id=1")
        #expect(request.body == #"{"role":"user","id":1}"#)
    }

    /// The ASCII fast path of the fixed-name rule agrees with the Unicode rules on every ASCII name: every single
    /// byte, and names mixing case, digits and the separators parsers drop.
    @Test func asciiSkeletonsAgreeWithTheUnicodeRules() {
        var names = (0..<128).map { String(UnicodeScalar(UInt8($0))) }
        names += ["role", "ROLE", "Ro_Le", " role", "role[]", "r.o-l e", "sCoPe9", "a%6F", "__", "", "v2~!*"]
        for name in names {
            #expect(Composer.nameSkeleton(name) == Composer.unicodeSkeleton(name), "name \(name.debugDescription)")
        }
        #expect(Composer.nameSkeleton("\u{17F}cope") == "scope")
    }
}
