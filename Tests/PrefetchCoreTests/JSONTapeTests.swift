import HTTPTypes
import PropertyBased
import Testing

@testable import PrefetchCore

// The tape and the loader that validates from it, held to the safe references they replace: `JSONParser` (itself held
// to ReferenceJSONParser) for the tape, and the tree-based loader as it was (ReferenceConfigLoader.swift) for
// `ConfigLoader`. Same accept or reject, same message at the same line and column, same value; same problems and
// warnings in the same order, same config, same requests.

/// The tape's outcome as the parser's: the value the tape holds, or its error.
func tapeOutcome(_ bytes: [UInt8]) -> Result<JSONValue, JSONParseError> {
    do {
        let tape = try JSONTape.build(bytes)
        return .success(tape.read { $0.value(0) })
    } catch {
        return .failure(error)
    }
}

func parserOutcome(_ bytes: [UInt8]) -> Result<JSONValue, JSONParseError> {
    do { return .success(try JSONParser.parse(bytes)) } catch { return .failure(error) }
}

@Suite struct JSONTapeEquivalence {
    @Test func randomTextsReadAsTheParserReadsThem() async {
        let pieces = ByteJSONParserEquivalence.pieces + ["\"K\"", "\"\\u212a\"", "\"\u{212A}\"", "\"k\\u0041\"", "\"e\u{301}\"", "\"é\""]
        let generator = Gen.int(in: 0...(pieces.count - 1)).array(of: 0...20)
        await propertyCheck(count: 4000, input: generator) { indexes in
            let text = indexes.map { pieces[$0] }.joined()
            for candidate in [text, "{" + text + "}", "[" + text + "]", "{\"k\":\"" + text + "\"}", "{\"a\":1," + text + ":2}"] {
                let bytes = Array(candidate.utf8)
                #expect(tapeOutcome(bytes) == parserOutcome(bytes), "\(candidate.debugDescription)")
            }
        }
    }

    @Test func edgeCasesReadAsTheParserReadsThem() {
        var cases: [[UInt8]] = [
            [], [0x20], [0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0xC3, 0x5C, 0x6E, 0xA9, 0x22], [0x22, 0xE2, 0x82, 0x5C, 0x6E, 0x22],
            [0x22, 0xED, 0xA0, 0x80, 0x22], [0xEF, 0xBB, 0xBF, 0x31], [0xEF, 0xBB, 0x31], [0x22, 0xF0, 0x9F, 0x98, 0x80, 0x01, 0x22],
            [0x22, 0x5C, 0xE9, 0x22], [0x22, 0x5C], [0x22, 0x5C, 0x75, 0x30], Array(#""\ud83d\u0041""#.utf8), Array(#""\ud83dx""#.utf8),
        ]
        // Duplicate names, also spelled differently (escapes, canonically equivalent text), below and above 16 members.
        for count in [3, 16, 17, 40] {
            let members = (0..<count).map { "\"k\($0)\":\($0)" }
            cases.append(Array(("{" + members.joined(separator: ",") + "}").utf8))
            cases.append(Array(("{" + members.joined(separator: ",") + ",\"k1\":0}").utf8))
            cases.append(Array(("{" + members.joined(separator: ",") + ",\"\\u006b1\":0}").utf8))
            cases.append(Array(("{\"K\":1," + members.joined(separator: ",") + ",\"\u{212A}\":0}").utf8))
            cases.append(Array(("{\"e\u{301}\":1," + members.joined(separator: ",") + ",\"é\":0}").utf8))
        }
        cases.append(Array((String(repeating: "[", count: 64) + String(repeating: "]", count: 64)).utf8))
        cases.append(Array((String(repeating: "[", count: 65) + String(repeating: "]", count: 65)).utf8))
        cases.append(Array((String(repeating: "{\"a\":", count: 65) + "1" + String(repeating: "}", count: 65)).utf8))
        for bytes in cases {
            #expect(tapeOutcome(bytes) == parserOutcome(bytes), "\(bytes)")
        }
    }

    /// A string is scanned eight bytes at a time: every special byte at every offset of the first three words (and the
    /// document ending there) reads as the parser reads it.
    @Test func specialBytesAtEveryOffsetReadAsTheParserReadsThem() {
        let specials: [[UInt8]] = [
            [0x22], [0x5C, 0x6E], [0x5C, 0x75, 0x30, 0x30, 0x65, 0x39], [0x01], [0x1F], [0x20], [0x7F], [0xC3, 0xA9], [0xFF], [0xC3],
        ]
        for offset in 0..<24 {
            for special in specials {
                let plain = [UInt8](repeating: UInt8(ascii: "a"), count: offset)
                let body = plain + special + Array("tail of the string".utf8)
                for bytes in [[0x22] + body + [0x22], [0x5B, 0x22] + body + [0x22, 0x5D], [0x22] + plain + special] {
                    #expect(tapeOutcome(bytes) == parserOutcome(bytes), "\(bytes)")
                }
            }
        }
    }

    @Test func theConfigsInTheRepositoryReadAsTheParserReadsThem() throws {
        for name in ["configs/demo.json", "configs/prefetch.json", "Tests/PrefetchCoreTests/Fixtures/seed-config.json"] {
            let bytes = try ConfigLoader.readFile(repositoryRoot + "/" + name)
            #expect(tapeOutcome(bytes) == parserOutcome(bytes), "\(name)")
        }
    }

    @Test func compactTextIsTheWritersAndSourceRangesParseToTheValue() async {
        let generator = Gen.int(in: 0...(ByteJSONWriterEquivalence.texts.count - 1)).array(of: 0...6)
        await propertyCheck(count: 1000, input: generator) { indexes in
            let text = indexes.map { ByteJSONWriterEquivalence.texts[$0] }.joined()
            let literal = JSONValue.string(text).jsonText
            // Escapes as a person writes them, whitespace, numbers kept as written.
            let source =
                #" { "a" : [ 1.50 , -0 , 2e3 , true , null , \#(literal) , { } ] , "\u0062" : { "\#(text.isEmpty ? "c" : "c\\n")" : \#(literal) } , "d" : "\u00e9\/" } "#
            let bytes = Array(source.utf8)
            guard case .success(let value) = parserOutcome(bytes), let tape = try? JSONTape.build(bytes) else {
                Issue.record("not JSON: \(source.debugDescription)")
                return
            }
            tape.read { reader in
                var out: [UInt8] = []
                reader.writeCompact(0, into: &out)
                #expect(String(decoding: out, as: UTF8.self) == value.jsonText, "\(source.debugDescription)")
                for (key, member) in reader.members(0) {
                    let range = reader.sourceRange(member)
                    let parsed = parserOutcome(Array(bytes[range]))
                    #expect(parsed == .success(reader.value(member)), "\(reader.string(key))")
                }
            }
        }
    }
}

// MARK: - The loader against the tree-based one

/// What a load concluded, as comparable text: the config field by field (requests for each page included), or the
/// problems and warnings in order.
func loadSummary(_ parse: () throws(ConfigError) -> LoadedConfig) -> [String] {
    do {
        let loaded = try parse()
        var lines = describeConfig(loaded.config)
        lines += loaded.warnings.map { "warning \($0)" }
        if let canary = loaded.canary { lines += ["canary \(canary.basisPoints)"] + describeConfig(canary.config) }
        return lines
    } catch {
        return error.problems.map { "problem \($0)" } + error.warnings.map { "warning \($0)" }
    }
}

func describeConfig(_ config: PrefetchConfig) -> [String] {
    var lines = ["config \(config.name) \(config.version)"]
    for entry in config.pages {
        lines.append("page \(entry.index) \(entry.url) \(entry.parsedURL) \(String(describing: entry.pattern)) \(entry.partnerOrigins)")
        for interface in entry.interfaces {
            lines.append(
                "  \(interface.name) \(interface.method) \(interface.api) \(interface.apiURL) url=\(interface.urlParam) "
                    + "body=\(interface.bodyParam) \(JSONValue.object(interface.body).jsonText) \(interface.hasBody) "
                    + "ttl=\(interface.ttlSeconds) timeout=\(interface.timeoutMilliseconds) \(interface.headers) "
                    + "\(interface.params?.sorted() ?? []) \(interface.bodyType) \(interface.credentials) \(interface.secPurpose) "
                    + "\(interface.query) \(interface.references) \(interface.referencePaths)")
        }
        // The requests each entry plans for a page of its own, with parameters that hit the composition rules.
        let page = entry.url.replacing("{", with: "x").replacing("}", with: "y").replacing("*", with: "z")
        for query in ["", "?a=1&_=2&a=3&v=007&role=x&cityId=9", "?id=5&%5F=%22&b=-4&c=+1%20&d=%E4%B8%AD"] {
            guard let plan = try? Plan.make(page: page + query, config: config) else { continue }
            lines.append("  plan \(query) \(plan.matched)")
            for request in plan.requests {
                lines.append("    \(request.method) \(request.url) \(request.headers) \(request.body ?? "-") \(request.dependencies)")
            }
        }
    }
    return lines
}

/// Random config documents from pieces chosen to reach every rule, valid and not.
enum ConfigDocuments {
    /// Page URLs for the page at `index`: distinct across pages but for the deliberate duplicates.
    static func urls(_ index: Int) -> (valid: [JSONValue], invalid: [JSONValue]) {
        (
            [
                .string("https://m.example.com/a\(index)"), .string("https://m.example.com/a\(index)/"),
                .string("https://m.example.com/p\(index)/{id}"), .string("https://m.example.com/p\(index)/{id}.html"),
                .string("https://m.example.com/*/x\(index)"), .string("https://m.example.com/é\(index)/{x}"),
            ],
            [
                .string("https://M.example.com:443/a0"), .string("https://m.example.com/p0/{pid}"), .string("https://m.example.com/a?x=1"),
                .string("https://m.example.com/a#f"), .string("ftp://m.example.com/a"), .string("https://m.example.com/{a}{b}"),
                .string(""),
                .number("1"), .null,
            ]
        )
    }
    static let apis: [JSONValue] = [
        .string("https://api.example.com/v1/data.json"), .string("https://api.example.com/v1/data.json?v=2"),
        .string("https://api.example.com/x?"), .string("http://api.example.com:8081/a/b#frag"), .string("https://api.example.com/é/ü?q=1"),
    ]
    static let badAPIs: [JSONValue] = [.string("https://api.example.com/${u:/x}"), .string("api.example.com/x"), .string(""), .bool(true)]
    static let methods: [JSONValue] = [.string("GET"), .string("post"), .string("PUT"), .string("PATCH"), .string("DELETE")]
    static let badMethods: [JSONValue] = [.string("PUT "), .number("1")]
    static let bodies: [JSONValue] = [
        .object(JSONObject()),
        .object(JSONObject([.init(name: "cityId", value: .number("123456")), .init(name: "visitRecord", value: .object(JSONObject()))])),
        .object(JSONObject([.init(name: "_", value: .number("2")), .init(name: "c", value: .number("1.50"))])),
        .object(
            JSONObject([
                .init(name: "role", value: .string("u\"ser\u{2028}")), .init(name: "n", value: .null),
                .init(name: "t", value: .bool(false)),
            ])),
        .object(JSONObject([.init(name: "uid", value: .string("${a:/data/uid}")), .init(name: "k", value: .string("${b:/0}"))])),
    ]
    static let badBodies: [JSONValue] = [
        .object(JSONObject([.init(name: "${a:/k}", value: .number("1"))])),
        .object(JSONObject([.init(name: "x", value: .array([.string("${b:/0}")]))])),
        .object(JSONObject([.init(name: "u", value: .string("${nobody:/x}"))])),
        .object(JSONObject([.init(name: "v", value: .string("${a:x}"))])),
        .array([]), .string("{}"),
    ]
    static let flags: [JSONValue] = [.bool(true), .bool(false)]
    static let badFlags: [JSONValue] = [.string("true"), .null]
    static let numbers: [JSONValue] = [.number("1"), .number("86400"), .number("500")]
    static let badNumbers: [JSONValue] = [.number("0"), .number("1.5"), .number("60001"), .string("5")]
    static let headers: [JSONValue] = [
        .object(JSONObject([.init(name: "X-Client", value: .string("h5"))])),
        .object(JSONObject([.init(name: "X-Uid", value: .string("${a:/uid}"))])),
    ]
    static let badHeaders: [JSONValue] = [
        .object(JSONObject([.init(name: "Cookie", value: .string("a"))])), .object(JSONObject([.init(name: "X Bad", value: .string("a"))])),
        .object(JSONObject([.init(name: "X-A", value: .string("a\u{1}"))])),
        .object(JSONObject([.init(name: "Authorization", value: .string("${a:/t}"))])),
        .object(JSONObject([.init(name: "X-N", value: .number("1"))])),
        .array([]),
    ]
    static let params: [JSONValue] = [.array([.string("id"), .string("a")]), .array([])]
    static let badParams: [JSONValue] = [.array([.number("1")]), .string("id")]
    static let queries: [JSONValue] = [
        .object(JSONObject([.init(name: "v", value: .number("2")), .init(name: "f", value: .bool(true))])),
        .object(JSONObject([.init(name: "u", value: .string("${a:/uid}"))])),
    ]
    static let badQueries: [JSONValue] = [
        .object(JSONObject([.init(name: "", value: .string("x"))])), .object(JSONObject([.init(name: "o", value: .object(JSONObject()))])),
        .object(JSONObject([.init(name: "${a:/n}", value: .string("x"))])),
    ]
    static let names: [JSONValue] = [.string("a"), .string("b"), .string("data.feed")]
    static let badNames: [JSONValue] = [.string("-bad"), .string(String(repeating: "n", count: 65)), .number("3")]
    static let bodyTypes: [JSONValue] = [.string("form"), .string("json")]
    static let credentials: [JSONValue] = [.string("omit"), .string("include"), .string("same-site")]
    static let badStrings: [JSONValue] = [.string("xml"), .string("none"), .bool(true)]
    static let partners: [JSONValue] = [.array([.string("https://partner.example.com")]), .array([.string("https://m.example.com")])]
    static let badPartners: [JSONValue] = [
        .array([.string("*")]), .array([.string("https://p.example.com"), .string("https://P.example.com/")]),
        .string("https://p.example.com"),
    ]

    /// Reads choices off a list of random numbers, cycling.
    struct Picker {
        let numbers: [Int]
        var position = 0
        mutating func number() -> Int {
            defer { position += 1 }
            return numbers.isEmpty ? 0 : numbers[position % numbers.count]
        }
        mutating func pick<T>(_ options: [T]) -> T { options[number() % options.count] }
        mutating func chance(_ percent: Int) -> Bool { number() % 100 < percent }
        /// Mostly a valid option: an invalid one one time in twenty-five.
        mutating func pick(_ valid: [JSONValue], else invalid: [JSONValue]) -> JSONValue { chance(4) ? pick(invalid) : pick(valid) }
    }

    static func interface(_ picker: inout Picker) -> JSONValue {
        var members: [JSONObject.Member] = []
        func maybe(_ name: String, _ percent: Int, _ options: [JSONValue], _ invalid: [JSONValue], _ picker: inout Picker) {
            if picker.chance(percent) { members.append(.init(name: name, value: picker.pick(options, else: invalid))) }
        }
        maybe("name", 40, names, badNames, &picker)
        maybe("api", 99, apis, badAPIs, &picker)
        maybe("method", 99, methods, badMethods, &picker)
        maybe("urlParam", 60, flags, badFlags, &picker)
        maybe("bodyParam", 50, flags, badFlags, &picker)
        maybe("body", 50, bodies, badBodies, &picker)
        maybe("ttl", 15, numbers, badNumbers, &picker)
        maybe("timeout", 15, numbers, badNumbers, &picker)
        maybe("headers", 15, headers, badHeaders, &picker)
        maybe("params", 15, params, badParams, &picker)
        maybe("bodyType", 20, bodyTypes, badStrings, &picker)
        maybe("credentials", 10, credentials, badStrings, &picker)
        maybe("secPurpose", 10, flags, badFlags, &picker)
        maybe("query", 15, queries, badQueries, &picker)
        maybe("extra", 5, flags, flags, &picker)
        if picker.chance(2) { return .array([]) }
        // Members in a random order: order decides which problem comes first.
        let shift = members.isEmpty ? 0 : picker.number() % members.count
        return .object(JSONObject(Array(members[shift...] + members[..<shift])))
    }

    static func page(_ picker: inout Picker, index: Int) -> JSONValue {
        var members: [JSONObject.Member] = []
        let (valid, invalid) = urls(index)
        if picker.chance(98) { members.append(.init(name: "url", value: picker.pick(valid, else: invalid))) }
        if picker.chance(98) {
            let count = picker.number() % 4
            members.append(.init(name: "interfaces", value: .array((0..<count).map { _ in interface(&picker) })))
        }
        if picker.chance(10) { members.append(.init(name: "partnerOrigins", value: picker.pick(partners, else: badPartners))) }
        if picker.chance(5) { members.append(.init(name: "comment", value: .string("x"))) }
        if picker.chance(1) { return .string("page") }
        return .object(JSONObject(picker.chance(50) ? members : members.reversed()))
    }

    static func data(_ picker: inout Picker, version: String) -> JSONValue {
        var members: [JSONObject.Member] = []
        if picker.chance(97) { members.append(.init(name: "name", value: picker.chance(97) ? .string("test") : .number("1"))) }
        if picker.chance(98) {
            members.append(
                .init(name: "version", value: picker.pick([.string(version), .number(version)], else: [.string(""), .bool(true)])))
        }
        if picker.chance(98) {
            let count = picker.number() % 5
            members.append(
                .init(
                    name: "config",
                    value: picker.chance(98) ? .array((0..<count).map { page(&picker, index: $0) }) : .object(JSONObject())))
        }
        if picker.chance(5) { members.append(.init(name: "owner", value: .string("x"))) }
        return .object(JSONObject(members))
    }

    /// One document, as text: compact, then respelled in ways JSON allows (escaped keys and values, whitespace).
    static func document(_ numbers: [Int]) -> String {
        var picker = Picker(numbers: numbers)
        var members: [JSONObject.Member] = [
            .init(name: "code", value: picker.pick([.number("200")], else: [.number("500"), .string("200")])),
            .init(name: "data", value: data(&picker, version: "1")),
        ]
        if picker.chance(15) {
            let canary = JSONObject([
                .init(name: "percent", value: picker.pick([.number("10"), .number("0.5")], else: [.number("100.001"), .string("5")])),
                .init(name: "data", value: data(&picker, version: picker.pick(["1", "2"]))),
            ])
            members.append(.init(name: "canary", value: .object(canary)))
        }
        if picker.chance(5) { members.append(.init(name: "msg", value: .string("ok"))) }
        if picker.chance(1) { members.removeFirst() }
        var text = JSONValue.object(JSONObject(members)).jsonText
        let respellings: [(String, String)] = [
            ("\"api\"", "\"\\u0061pi\""), ("\"url\":", "\"url\" :\n "), ("\"GET\"", "\"G\\u0045T\""), ("\"method\"", "\"m\\u0065thod\""),
            ("https://", "https:\\/\\/"), ("\"cityId\"", "\"c\\u0069tyId\""), ("\"body\":{", "\"body\" : {\t"), (",", " ,\r\n"),
            ("\"interfaces\"", "\"\\u0069nterfaces\""), ("\"test\"", "\"t\\u00e9st\""), ("\"name\"", "\"nam\\u0065\""),
        ]
        for (from, to) in respellings where picker.chance(20) { text = text.replacing(from, with: to) }
        return text
    }
}

@Suite struct TapeLoaderEquivalence {
    @Test func randomDocumentsLoadAsTheTreeBasedLoaderLoadsThem() async {
        let generator = Gen.int(in: 0...999).array(of: 1...80)
        await propertyCheck(count: 1500, input: generator) { numbers in
            let text = ConfigDocuments.document(numbers)
            let bytes = Array(text.utf8)
            let new = loadSummary { () throws(ConfigError) in try ConfigLoader.parse(bytes, source: "t") }
            let old = loadSummary { () throws(ConfigError) in try ReferenceConfigLoader.parse(bytes, source: "t") }
            #expect(new == old, "\(text)")
        }
    }

    @Test func theRepositoryConfigsLoadAsBefore() throws {
        for name in ["configs/demo.json", "configs/prefetch.json", "Tests/PrefetchCoreTests/Fixtures/seed-config.json"] {
            let bytes = try ConfigLoader.readFile(repositoryRoot + "/" + name)
            let new = loadSummary { () throws(ConfigError) in try ConfigLoader.parse(bytes, source: name) }
            let old = loadSummary { () throws(ConfigError) in try ReferenceConfigLoader.parse(bytes, source: name) }
            #expect(new == old, "\(name)")
        }
    }

    @Test func invalidJSONIsReportedAsBefore() {
        for text in ["", "{", "{\"code\":200,}", "[1,2", "{\"a\":1,\"a\":2}", "\"\\ud800\"", "{\"code\":2OO}"] {
            let bytes = Array(text.utf8)
            let new = loadSummary { () throws(ConfigError) in try ConfigLoader.parse(bytes, source: "t") }
            let old = loadSummary { () throws(ConfigError) in try ReferenceConfigLoader.parse(bytes, source: "t") }
            #expect(new == old, "\(text.debugDescription)")
        }
    }
}

@Suite struct RequestTemplateEquivalence {
    /// Every interface of random documents composes from its template as by the rules, for random page queries.
    @Test func templatesComposeAsTheRules() async {
        let pairs = ByteComposerEquivalence.pieces
        let generator = Gen.int(in: 0...999).array(of: 1...80)
        await propertyCheck(count: 800, input: generator) { numbers in
            guard let loaded = try? ConfigLoader.parse(Array(ConfigDocuments.document(numbers).utf8), source: "t") else { return }
            let query = numbers.prefix(12).map { pairs[$0 % pairs.count] }.joined()
            let page = QueryPair.split(query) + [QueryPair(capturedName: "id", value: "12")]
            for entry in loaded.config.pages {
                for interface in entry.interfaces {
                    #expect(interface.template != nil)
                    let fast = Composer.compose(interface: interface, pairs: page)
                    let rules = Composer.composeByRules(interface: interface, pairs: page)
                    #expect(fast.url == rules.url && fast.body == rules.body && fast.headers == rules.headers, "\(interface.name) \(query)")
                }
            }
        }
    }

    @Test func aChangedFieldDropsTheTemplate() throws {
        let config = try singleInterfaceConfig(
            #"{"api":"https://api.example.com/x","method":"POST","urlParam":true,"bodyParam":true,"body":{"a":1}}"#)
        var interface = config.pages[0].interfaces[0]
        #expect(interface.template != nil)
        interface.ttlSeconds = 5
        #expect(interface.template != nil)
        interface.body = JSONObject([.init(name: "b", value: .number("2"))])
        #expect(interface.template == nil)
        let request = Composer.compose(interface: interface, pairs: QueryPair.split("c=3"))
        #expect(request.body == #"{"b":2,"c":3}"#)
        // The loaded config's interface is untouched (copy on write).
        #expect(config.pages[0].interfaces[0].template != nil)
        #expect(try firstRequest("https://m.example.com/help/new?c=3", config).body == #"{"a":1,"c":3}"#)
    }

    /// The template's texts are one buffer: the JSON head, the form body and the lists of fixed skeletons, allowed names
    /// and query parts; an interface with none of them has an empty one (no allocation).
    @Test func aTemplateKeepsItsTextsInOneBuffer() throws {
        let config = try singleInterfaceConfig(
            #"{"api":"https://api.example.com/x?Role=1&v=2","method":"POST","bodyParam":true,"body":{"a b":1,"Cé":"x"},"params":["id","é"],"query":{"k":"v w"}}"#
        )
        let template = try #require(config.pages[0].interfaces[0].template)
        template.text.withUnsafeBufferPointer { text in
            let string = { (bytes: UnsafeBufferPointer<UInt8>) in String(decoding: bytes, as: UTF8.self) }
            #expect(string(UnsafeBufferPointer(rebasing: text[template.jsonBodyHead])) == #"{"a b":1,"Cé":"x""#)
            #expect(template.formBody.isEmpty)
            #expect(TextEntries(text, template.fixed).map(string) == ["ab", "cé", "role", "v"])
            #expect(Set(TextEntries(text, template.params ?? 0..<0).map(string)) == ["id", "é"] && template.params != nil)
            #expect(TextEntries(text, template.queryParts).map(string) == ["k=v+w"])
        }
        #expect(!template.comparesAsBytes)
        let form = try singleInterfaceConfig(#"{"api":"https://api.example.com/x","method":"GET","body":{"q":"a&b"},"params":[]}"#)
        let formTemplate = try #require(form.pages[0].interfaces[0].template)
        formTemplate.text.withUnsafeBufferPointer { text in
            #expect(String(decoding: UnsafeBufferPointer(rebasing: text[formTemplate.formBody]), as: UTF8.self) == "q=a%26b")
            #expect(formTemplate.jsonBodyHead.isEmpty && formTemplate.params?.isEmpty == true)
        }
        let plain = try singleInterfaceConfig(#"{"api":"https://api.example.com/x","method":"GET","urlParam":true}"#)
        #expect(try #require(plain.pages[0].interfaces[0].template).text.isEmpty)
    }

    @Test func aPlannedRequestSharesItsInterface() throws {
        let config = try singleInterfaceConfig(#"{"api":"https://api.example.com/x","method":"GET"}"#)
        let request = try firstRequest("https://m.example.com/help/new", config)
        #expect(request.interface.storage === config.pages[0].interfaces[0].storage)
    }
}
