import Testing

@testable import PrefetchCore

@Suite struct ConfigValidation {
    func envelope(_ pages: String, code: String = "200", version: String = #""1""#) -> String {
        #"{"code":\#(code),"data":{"name":"n","version":\#(version),"config":[\#(pages)]}}"#
    }

    @Test func theSampleConfigIsValid() throws {
        let loaded = try ConfigLoader.load(path: repositoryRoot + "/configs/prefetch.json")
        #expect(loaded.config.version == "4")
        #expect(loaded.config.pages.count >= 3)
    }

    @Test func aNonOKCodeIsRejected() {
        #expect(problems(envelope("", code: "500")) == ["code: is 500, not 200: the config server reported an error"])
        #expect(problems(#"{"data":{"name":"n","version":"1","config":[]}}"#) == ["code: is missing (expected 200)"])
        #expect(problems(envelope("", code: #""200""#)) == ["code: must be the number 200, got a string"])
    }

    /// `partnerOrigins` grants named origins a page's data: each must be an origin; the page's own needs no grant.
    @Test func partnerOriginsAreOriginsEachNamed() throws {
        let text = envelope(
            #"""
            {"url":"https://a.example.com/p","interfaces":[],
             "partnerOrigins":["*","https://b.example.com/path","null",7,"HTTPS://C.example.com","https://a.example.com"]},
            {"url":"https://a.example.com/q","interfaces":[],"partnerOrigins":"https://b.example.com"}
            """#)
        #expect(
            problems(text) == [
                #"data.config[0].partnerOrigins[0]: "*" must be an origin like https://partner.example.com (scheme, host, optional port)"#,
                #"data.config[0].partnerOrigins[1]: "https://b.example.com/path" must be an origin like https://partner.example.com (scheme, host, optional port)"#,
                #"data.config[0].partnerOrigins[2]: "null" must be an origin like https://partner.example.com (scheme, host, optional port)"#,
                "data.config[0].partnerOrigins[3]: must be a string, got a number",
                #"data.config[1].partnerOrigins: must be an array of origins like "https://partner.example.com", got a string"#,
            ])
        let valid = try ConfigLoader.parse(
            Array(envelope(#"{"url":"https://a.example.com/p","interfaces":[],"partnerOrigins":["https://c.example.com:8443"]}"#).utf8),
            source: "test")
        #expect(valid.config.pages[0].origins == PageOrigins(own: "https://a.example.com", partners: ["https://c.example.com:8443"]))
        #expect(valid.config.pages[0].origins.contains("https://c.example.com:8443"))
        #expect(!valid.config.pages[0].origins.contains("https://c.example.com"))
    }

    @Test func everyProblemIsReportedAtOnceWithItsPath() {
        let text = envelope(
            #"""
            {"url":"https://m.example.com/a","interfaces":[{"api":"https://m.example.com/x","method":"GET"}]},
            {"url":"https://m.example.com/b","interfaces":[
               {"api":"https://m.example.com/x","method":"PUT "},
               {"api":"/relative","method":"GET","body":[1]},
               {"api":"ftp://m.example.com/x","method":"GET","urlParam":"yes"}]}
            """#)
        #expect(
            problems(text) == [
                #"data.config[1].interfaces[0].method: "PUT " is not a supported method (GET, POST, PUT, PATCH, DELETE)"#,
                #"data.config[1].interfaces[1].api: "/relative" is not an absolute http(s) URL: is not an absolute http(s) URL (no "://")"#,
                "data.config[1].interfaces[1].body: must be an object, got an array",
                #"data.config[1].interfaces[2].api: "ftp://m.example.com/x" is not an absolute http(s) URL: has scheme "ftp"; only http and https are supported"#,
                "data.config[1].interfaces[2].urlParam: must be true or false, got a string",
            ])
    }

    @Test func duplicatePagesAreRejectedIncludingEquivalentSpellings() {
        let text = envelope(
            #"""
            {"url":"https://m.example.com/a","interfaces":[]},
            {"url":"HTTPS://M.EXAMPLE.COM:443/a/","interfaces":[]},
            {"url":"https://m.example.com/i/{id}","interfaces":[]},
            {"url":"https://m.example.com/i/{other}","interfaces":[]}
            """#)
        #expect(
            problems(text) == [
                #"data.config[1].url: "HTTPS://M.EXAMPLE.COM:443/a/" duplicates data.config[0].url ("https://m.example.com/a")"#,
                #"data.config[3].url: "https://m.example.com/i/{other}" duplicates data.config[2].url ("https://m.example.com/i/{id}")"#,
            ])
    }

    @Test func pageURLsMayNotCarryAQueryOrFragment() {
        let text = envelope(#"{"url":"https://m.example.com/a?x=1","interfaces":[]},{"url":"https://m.example.com/b#f","interfaces":[]}"#)
        #expect(
            problems(text) == [
                #"data.config[0].url: "https://m.example.com/a?x=…" must not have a query: the page's query feeds the requests"#,
                #"data.config[1].url: "https://m.example.com/b" must not have a #fragment"#,
            ])
    }

    @Test func extensionFieldsAreChecked() {
        let text = envelope(
            #"""
            {"url":"https://m.example.com/a","interfaces":[
              {"api":"https://m.example.com/x","method":"POST","name":"bad name!","ttl":0,"timeout":"fast",
               "headers":{"Host":"evil","X-Ok":"1","X-Bad":"a\r\nb","X-Num":1,"Sec-Purpose":"none"},"params":["a",2],"bodyType":"xml",
               "credentials":"always","secPurpose":"no"}]}
            """#)
        #expect(
            problems(text) == [
                "data.config[0].interfaces[0].secPurpose: must be true or false, got a string",
                #"data.config[0].interfaces[0].bodyType: "xml" is not json or form"#,
                #"data.config[0].interfaces[0].credentials: "always" is not same-site, omit or include"#,
                "data.config[0].interfaces[0].ttl: must be between 1 and 86400 seconds, got 0",
                "data.config[0].interfaces[0].timeout: must be a number of milliseconds, got a string",
                "data.config[0].interfaces[0].headers.Host: may not be set by the config (the service or the page owns it)",
                "data.config[0].interfaces[0].headers.X-Bad: has a control character in its value",
                "data.config[0].interfaces[0].headers.X-Num: must be a string, got a number",
                "data.config[0].interfaces[0].headers.Sec-Purpose: may not be set by the config (the service or the page owns it)",
                "data.config[0].interfaces[0].params[1]: must be a string, got a number",
                #"data.config[0].interfaces[0].name: "bad name!" must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"#,
            ])
    }

    @Test func nestedValuesAreRefusedInFormAndGETBodies() {
        let text = envelope(
            #"""
            {"url":"https://m.example.com/a","interfaces":[
              {"api":"https://m.example.com/x","method":"POST","bodyType":"form","body":{"a":{"b":1}}},
              {"api":"https://m.example.com/y","method":"GET","body":{"list":[1]}}]}
            """#)
        #expect(
            problems(text) == [
                "data.config[0].interfaces[0].body.a: must be a string, number, boolean or null in a form body, got an object",
                "data.config[0].interfaces[1].body.list: must be a string, number, boolean or null in a GET request (its body goes into the query string), got an array",
            ])
    }

    @Test func unknownKeysAreWarningsNotFailures() throws {
        let text =
            #"{"code":200,"msg":"ok","extra":1,"data":{"name":"n","version":"1","future":true,"config":[{"url":"https://m.example.com/a","weight":3,"interfaces":[{"api":"https://m.example.com/x","method":"GET","retry":2}]}]}}"#
        let loaded = try ConfigLoader.parse(Array(text.utf8), source: "test")
        #expect(
            loaded.warnings.map(\.description) == [
                "extra: unknown key, ignored",
                "data.future: unknown key, ignored",
                "data.config[0].weight: unknown key, ignored",
                "data.config[0].interfaces[0].retry: unknown key, ignored",
            ])
    }

    @Test func defaultsApplyToAbsentExtensionFields() throws {
        let config = try singleInterfaceConfig(#"{"api":"https://m.example.com/topic/v1/ding/sinkList.json","method":"POST"}"#)
        let interface = config.pages[0].interfaces[0]
        #expect(interface.name == "ding.sinkList")
        #expect(interface.ttlSeconds == 30)
        #expect(interface.timeoutMilliseconds == 3000)
        #expect(interface.bodyType == .json)
        #expect(interface.credentials == .sameSite)
        #expect(interface.params == nil)
        #expect(interface.urlParam == false && interface.bodyParam == false)
    }

    @Test func derivedNamesAreUniqueWithinAPageAndNeverTakeAnExplicitOne() throws {
        let config = try makeConfig(pages: [
            #"""
            {"url":"https://m.example.com/a","interfaces":[
              {"api":"https://m.example.com/v1/user/info","method":"GET"},
              {"api":"https://m.example.com/v2/user/info.json","method":"POST"},
              {"api":"https://m.example.com/","method":"GET"},
              {"api":"https://m.example.com/x","method":"GET","name":"user.info-3"}]}
            """#
        ])
        #expect(config.pages[0].interfaces.map(\.name) == ["user.info", "user.info-2", "root", "user.info-3"])
    }

    @Test func explicitNamesMustBeUniqueWithinAPage() {
        let text = envelope(
            #"{"url":"https://m.example.com/a","interfaces":[{"api":"https://m.example.com/x","method":"GET","name":"a"},{"api":"https://m.example.com/y","method":"GET","name":"a"}]}"#
        )
        #expect(problems(text) == [#"data.config[0].interfaces[1].name: "a" is used by another interface of this page"#])
    }

    @Test func brokenFilesGetAClearError() throws {
        #expect(problems("") == ["not valid JSON: line 1, column 1: the document is empty"])
        #expect(problems(#"{"code":200,"data":{"na"#) == ["not valid JSON: line 1, column 24: unterminated string"])
        #expect(problems("\u{01}\u{02}") == ["not valid JSON: line 1, column 1: unexpected byte 0x1 (not JSON text)"])
        #expect(problems("[1]") == ["the config must be a JSON object with \"code\" and \"data\", got an array"])
        #expect(problems(#"{"code":200,"code":200}"#) == [#"not valid JSON: line 1, column 19: duplicate member name "code""#])
    }

    @Test func aMissingFileNamesItsPath() {
        #expect(throws: ConfigError.self) { try ConfigLoader.load(path: "/nonexistent/prefetch.json") }
        do {
            _ = try ConfigLoader.load(path: "/nonexistent/prefetch.json")
        } catch {
            #expect(
                error.problems.map(\.description) == [
                    "cannot read the config file /nonexistent/prefetch.json: no such file or not readable"
                ])
        }
    }

    @Test func oversizedConfigsAreRefusedBeforeParsing() {
        let big = [UInt8](repeating: UInt8(ascii: " "), count: ConfigLoader.maximumBytes + 1)
        #expect(throws: ConfigError.self) { try ConfigLoader.parse(big, source: "big") }
    }

    @Test func versionMayBeANumber() throws {
        let loaded = try ConfigLoader.parse(Array(envelope("", version: "5").utf8), source: "t")
        #expect(loaded.config.version == "5")
        #expect(problems(envelope("", version: #""""#)) == ["data.version: must be a non-empty string, got an empty string"])
    }
}

@Suite struct JSONRoundTrip {
    @Test func membersKeepTheirOrderAndNumbersTheirLiterals() throws {
        let text = #"{"b":1,"a":1.50,"c":-0.0e+5,"d":[true,false,null,"\u00e9\ud83d\ude00"],"e":{}}"#
        let value = try JSONParser.parse(text)
        #expect(value.jsonText == #"{"b":1,"a":1.50,"c":-0.0e+5,"d":[true,false,null,"é😀"],"e":{}}"#)
    }

    @Test func deepNestingIsRefused() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
    }

    @Test(arguments: ["01", "1.", ".5", "-", "1e", "+1", "[1,]", "{\"a\":1,}", "'a'", "\"\\x\"", "\"\\ud800\"", "tru", "nul"])
    func invalidJSONIsRefused(text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
    }

    @Test func invalidUTF8IsRefused() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse([UInt8(ascii: "\""), 0xFF, UInt8(ascii: "\"")]) }
    }
}
