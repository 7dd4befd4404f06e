import HTTPTypes
import PropertyBased
import Testing

@testable import PrefetchCore

// The byte parsers held to the `Character`-level ones they replaced: on random strings built from pieces chosen to
// hit every rule (delimiters, case, ports, IPv6, dot segments, combining marks, non-ASCII letters, control bytes),
// both must give the same value or the same message. The URL, path and derived-name originals stay in PrefetchCore
// (`HTTPURL(parsingCharacters:)`, `PathRules.segments(of:)`, `Validator.derivedNameFromCharacters`) for non-ASCII
// text; the old JSON parser is kept in ReferenceParsers.swift.

/// Pieces of URLs: each rule's delimiters and edge cases, ASCII and not.
private let urlPieces: [String] = [
    "http", "HTTPS", "hTtP", "ftp", "://", ":", "/", "//", "?", "#", "\\", "@", "[", "]", "::1", "[::1]", "[fe80::1%25en0]",
    "a", "B", "z9", ".", "..", "-", "_", "example.com", "M.Example.COM", "80", "443", "+80", "-1", "0", "8080", "65535",
    "65536", "123456", "%2e", "%2E", ".%2e", "%2e%2e", "%2E%2E", "%2e%2E", "%", "%41", "x=1&y=2", "=", "&", ";", " ", "+",
    "\t", "\u{7F}", "é", "e\u{301}", "\u{301}", "中", "Ä", "\u{212A}", "ſ", "\u{0600}", "😀", "\u{200D}", "{id}", "*",
]

/// The outcome of a parse as comparable values.
private func newURL(_ text: String) -> Result<HTTPURL, URLProblem> {
    do { return .success(try HTTPURL(parsing: text)) } catch { return .failure(error) }
}

@Suite struct ByteURLParserEquivalence {
    /// Inputs each rule has an opinion on, ASCII and not.
    static let corpus: [String] = [
        "", "http://", "http:/a", "http:a//b", "https://a", "HTTPS://A.B/C?D#E", "http://a:80/", "https://a:443", "http://a:+80",
        "http://a:-0", "http://a:0", "http://a:65535", "http://a:65536", "http://a:", "http://a:8a", "http://a:1:2", "http://:80",
        "http://[::1]", "http://[::1]:8080/x", "http://[::1]x", "http://[::1", "http://[]", "http://[g::1]", "http://[::1]:",
        "http://a@b", "http://a\\b", "http://a/\\b", "http://.a", "http://a..b", "http://a.", "http://a b", "http://a_b-c.d",
        "http://é.com/", "http://e\u{301}.com/", "http://中.cn", "http://a/b\u{301}", "http:/\u{301}/a", "http:\u{301}//a",
        "http://a/\u{301}b/c", "http://a?\u{301}b", "http://a#\u{301}b", "http://\u{0600}:80", "http://a/%2e/../b/./c/",
        "http://a//", "http://a/b//", "http://a?#", "http://a#?", "http://a/b?c#d?e", "ftp://a", "http://a\u{7F}",
        "http://a\t", "ht\u{212A}p://a", "http://\u{212A}", "http://a/\u{212A}", String(repeating: "a", count: HTTPURL.maximumLength + 1),
    ]

    @Test func theCorpusParsesAsBefore() {
        for text in Self.corpus {
            #expect(newURL(text) == referenceURL(text), "\(text.debugDescription)")
        }
    }

    @Test func randomURLsParseAsBefore() async {
        let pieces = Gen.int(in: 0...(urlPieces.count - 1)).array(of: 0...24)
        await propertyCheck(count: 3000, input: pieces) { indexes in
            let text = indexes.map { urlPieces[$0] }.joined()
            #expect(newURL(text) == referenceURL(text), "\(text.debugDescription)")
            // The same with a well-formed start, so the later rules are reached too.
            for prefix in ["http://", "https://m.example.com", "http://a/"] {
                let url = prefix + text
                #expect(newURL(url) == referenceURL(url), "\(url.debugDescription)")
            }
        }
    }
}

/// Each part `HTTPURL` reads back from its offsets is the `String` the parser stored before (``referenceURLParts(_:)``),
/// and values parsed from different spellings of the same parts are equal and hash alike.
@Suite struct URLPartsFromOffsets {
    static func check(_ text: String) {
        guard case .success(let url) = newURL(text) else { return }
        let parts = ReferenceURLParts(url)
        #expect(parts == referenceURLParts(text), "\(text.debugDescription)")
        #expect(url.origin == (parts.port.map { "\(parts.scheme)://\(parts.host):\($0)" } ?? "\(parts.scheme)://\(parts.host)"))
        #expect(url.effectivePort == parts.port ?? (parts.scheme == "https" ? 443 : 80))
        // The same parts, spelled in lowercase with the default port written out: an equal value.
        let defaultPort = parts.scheme == "https" ? 443 : 80
        let respelled =
            "\(parts.scheme)://\(parts.host):\(parts.port ?? defaultPort)\(parts.path)" + (parts.query.map { "?" + $0 } ?? "")
            + (parts.fragment.map { "#" + $0 } ?? "")
        if case .success(let other) = newURL(respelled), ReferenceURLParts(other) == parts {
            #expect(other == url, "\(text.debugDescription) and \(respelled.debugDescription)")
            #expect(other.hashValue == url.hashValue, "\(text.debugDescription) and \(respelled.debugDescription)")
        }
    }

    @Test func theCorpusReadsBackItsParts() {
        for text in ByteURLParserEquivalence.corpus { Self.check(text) }
        Self.check("HTTP://[::1]:8080/a%20b?x=%E4&y#frag?z")
        Self.check("https://API.Example.COM:443?q#f")
    }

    @Test func randomURLsReadBackTheirParts() async {
        let pieces = Gen.int(in: 0...(urlPieces.count - 1)).array(of: 0...24)
        await propertyCheck(count: 3000, input: pieces) { indexes in
            let text = indexes.map { urlPieces[$0] }.joined()
            for prefix in ["http://", "https://m.example.com", "HTTP://A/", "https://[::1]:8443/"] { Self.check(prefix + text) }
        }
    }

    @Test func differentPartsAreDifferentValues() throws {
        let texts = [
            "http://a/", "https://a/", "http://a:81/", "http://b/", "http://a/b", "http://a/?", "http://a/?x", "http://a/#", "http://a/#x",
            "http://a/?#",
        ]
        let urls = try texts.map { try HTTPURL(parsing: $0) }
        for (i, lhs) in urls.enumerated() {
            for (j, rhs) in urls.enumerated() { #expect((lhs == rhs) == (i == j), "\(texts[i]) and \(texts[j])") }
        }
        // An implicit root path and an explicit one are the same path.
        #expect(try HTTPURL(parsing: "http://a") == HTTPURL(parsing: "http://a/"))
        #expect(
            try HTTPURL(parsing: "HTTP://A:80/p?q#f").debugDescription
                == #"HTTPURL(scheme: "http", host: "a", port: nil, path: "/p", query: Optional("q"), fragment: Optional("f"))"#)
    }
}

@Suite struct BytePathRulesEquivalence {
    @Test func randomPathsCanonicaliseAsBefore() async {
        let pieces = Gen.int(in: 0...(urlPieces.count - 1)).array(of: 0...16)
        await propertyCheck(count: 2000, input: pieces) { indexes in
            let path = "/" + indexes.map { urlPieces[$0] }.joined()
            #expect(PathRules.canonical(path) == "/" + PathRules.segments(of: path).joined(separator: "/"), "\(path.debugDescription)")
        }
    }

    @Test func canonicalPathsAreKnownWithoutTheirSegments() async {
        let pieces = Gen.int(in: 0...(urlPieces.count - 1)).array(of: 0...16)
        await propertyCheck(count: 2000, input: pieces) { indexes in
            let path = "/" + indexes.map { urlPieces[$0] }.joined()
            var copy = path
            copy.withUTF8 { bytes in
                let text = ByteText(bytes)
                guard text.isASCII(0..<bytes.count) else { return }
                var ranges: [Range<Int>] = []
                PathRules.segmentRanges(text, into: &ranges)
                #expect(PathRules.isCanonical(text) == (PathRules.canonical(text, ranges) == nil), "\(path.debugDescription)")
            }
        }
        for path in ["", "/", "//", "/a", "/a/", "/a//b", "/.", "/a/..", "a/b", "/a/%2e", "/a/.b", "/..a"] {
            var copy = path
            copy.withUTF8 { bytes in
                var ranges: [Range<Int>] = []
                PathRules.segmentRanges(ByteText(bytes), into: &ranges)
                #expect(PathRules.isCanonical(ByteText(bytes)) == (PathRules.canonical(ByteText(bytes), ranges) == nil), "\(path)")
            }
        }
    }

    /// Path patterns read on bytes are the patterns (or the messages) of the `Character` rules.
    @Test func randomPatternsParseAsBefore() async {
        let patternPieces = [
            "/", "/", "a", "B", "9", "_", "-", ".", "..", "*", "{", "}", "{id}", "{x}", "{id}", "{a_1}", "{ }", "{é}", "p{", "}s", "**",
            "%2e", "é", "e\u{301}", "\u{212A}", String(repeating: "n", count: 70),
        ]
        let pieces = Gen.int(in: 0...(patternPieces.count - 1)).array(of: 0...12)
        func outcome(_ parse: () throws(URLProblem) -> PathPattern?) -> Result<PathPattern?, URLProblem> {
            do { return .success(try parse()) } catch { return .failure(error) }
        }
        await propertyCheck(count: 4000, input: pieces) { indexes in
            let path = "/" + indexes.map { patternPieces[$0] }.joined()
            #expect(
                outcome { () throws(URLProblem) in try PathPattern.parse(path) }
                    == outcome { () throws(URLProblem) in try PathPattern.parseByCharacters(path) }, "\(path.debugDescription)")
        }
    }

    @Test func derivedNamesAreAsBefore() async throws {
        let pieces = Gen.int(in: 0...(urlPieces.count - 1)).array(of: 0...16)
        await propertyCheck(count: 2000, input: pieces) { indexes in
            let text = "https://api.example.com/" + indexes.map { urlPieces[$0] }.joined()
            guard let url = try? HTTPURL(parsing: text) else { return }
            #expect(Validator.derivedName(from: url) == Validator.derivedNameFromCharacters(url.path), "\(text.debugDescription)")
        }
        for path in ["/", "/a", "/.json", "/a/.b", "/v1/x.y.z", "/-a/_b.c", "/a//b/", String(repeating: "/abc", count: 40)] {
            let url = try HTTPURL(parsing: "https://api.example.com" + path)
            #expect(Validator.derivedName(from: url) == Validator.derivedNameFromCharacters(url.path), "\(path)")
        }
    }
}

@Suite struct BytePageMatcherEquivalence {
    /// Overlapping exact entries and patterns on one origin, ASCII and not.
    static let entries = [
        "/a", "/a/b", "/a/{x}", "/a/{x}.html", "/a/v{x}", "/*/b", "/{x}/{y}", "/a/b/c", "/*/*/c", "/a/{x}/c", "/e\u{301}/{x}",
        "/é", "/\u{212A}/{x}", "/p{x}s/q", "/p{x}/q", "/{x}s/q",
    ]
    static let config: PrefetchConfig = {
        let pages = entries.map { #"{"url":"https://m.example.com\#($0)","interfaces":[]}"# }
        return try! makeConfig(pages: pages)
    }()
    static let pathPieces = [
        "a", "b", "c", "/", "/", "/", ".html", "v1", "x", ".", "..", "%2e", "p", "s", "q", "é", "e\u{301}", "K", "\u{212A}", "//",
    ]

    /// The old matcher: exact by canonical path, then every pattern of the bucket in precedence order.
    static func referenceMatch(_ url: HTTPURL) -> (String, [String])? {
        let pages = config.pages
        let canonical = { (path: String) in "/" + PathRules.segments(of: path).joined(separator: "/") }
        if let exact = pages.first(where: { $0.pattern == nil && canonical($0.parsedURL.path) == canonical(url.path) }) {
            return (exact.url, [])
        }
        let segments = PathRules.segments(of: url.path)
        let candidates = pages.filter { $0.pattern?.segments.count == segments.count }.sorted { lhs, rhs in
            let order = lhs.pattern!.specificity(comparedTo: rhs.pattern!)
            return order == .orderedSame ? lhs.index < rhs.index : order == .orderedDescending
        }
        for page in candidates {
            if let captures = page.pattern!.match(segments) { return (page.url, captures.map { "\($0.name)=\($0.value)" }) }
        }
        return nil
    }

    /// Keys are hashed as bytes when ASCII and as `String`s otherwise: the two agree wherever the texts are equal.
    @Test func sliceKeysHashAndCompareAsSubstrings() throws {
        let texts = ["", "/", "/a/b", "m.example.com", "/K", "/\u{212A}", "/é", "/e\u{301}", "/a/b/c/d/e/f/g/h/i/j"]
        for lhs in texts {
            for rhs in texts {
                let (left, right) = (TextSlice(lhs), TextSlice(rhs))
                #expect((left == right) == (Substring(lhs) == Substring(rhs)), "\(lhs.debugDescription) \(rhs.debugDescription)")
                if left == right { #expect(left.hashValue == right.hashValue, "\(lhs.debugDescription) \(rhs.debugDescription)") }
            }
            let sliced = TextSlice("xx" + lhs + "yy", 2..<(2 + lhs.utf8.count), isASCII: lhs.utf8.allSatisfy { $0 < 0x80 })
            #expect(sliced == TextSlice(lhs) && sliced.hashValue == TextSlice(lhs).hashValue, "\(lhs.debugDescription)")
        }
        // An exact page written with `K` is the page opened with U+212A KELVIN SIGN, as `String`s compare them.
        let config = try makeConfig(pages: [#"{"url":"https://m.example.com/K/a","interfaces":[]}"#])
        #expect(config.matcher.match(try HTTPURL(parsing: "https://m.example.com/\u{212A}/a"))?.entry.url == "https://m.example.com/K/a")
        #expect(config.matcher.match(try HTTPURL(parsing: "https://M.example.com:443/K/./a/"))?.entry.url == "https://m.example.com/K/a")
    }

    @Test func randomPagesMatchAsBefore() async throws {
        let pieces = Gen.int(in: 0...(Self.pathPieces.count - 1)).array(of: 0...10)
        await propertyCheck(count: 3000, input: pieces) { indexes in
            let text = "https://M.example.com:443/" + indexes.map { Self.pathPieces[$0] }.joined() + "?q=1"
            guard let url = try? HTTPURL(parsing: text) else { return }
            let found = Self.config.matcher.match(url).map { ($0.entry.url, $0.captures.map { "\($0.name)=\($0.value)" }) }
            let expected = Self.referenceMatch(url)
            #expect(found?.0 == expected?.0 && found?.1 == expected?.1, "\(text.debugDescription)")
        }
    }
}

@Suite struct ByteJSONParserEquivalence {
    static let pieces = [
        "{", "}", "[", "]", ",", ":", "\"", "\"a\"", "\"b\"", "\"a\":1", "1", "-0", "0.5", "1e3", "01", "-", ".", "e", "true",
        "false", "null", "nul", " ", "\n", "\t", "\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "\\ud83d", "\\udc00", "\\x", "é",
        "\u{1}", "\u{7F}", "\u{FEFF}",
    ]

    static func outcome(_ parse: () throws(JSONParseError) -> JSONValue) -> Result<JSONValue, JSONParseError> {
        do { return .success(try parse()) } catch { return .failure(error) }
    }

    @Test func randomTextsParseAsBefore() async {
        let pieces = Gen.int(in: 0...(Self.pieces.count - 1)).array(of: 0...20)
        await propertyCheck(count: 4000, input: pieces) { indexes in
            let text = indexes.map { Self.pieces[$0] }.joined()
            for candidate in [text, "{" + text + "}", "[" + text + "]", "{\"k\":\"" + text + "\"}"] {
                let bytes = Array(candidate.utf8)
                #expect(
                    Self.outcome { () throws(JSONParseError) in try JSONParser.parse(bytes) }
                        == Self.outcome { () throws(JSONParseError) in try ReferenceJSONParser.parse(bytes) },
                    "\(candidate.debugDescription)")
            }
        }
    }

    @Test func invalidUTF8AndLargeObjectsParseAsBefore() {
        var cases: [[UInt8]] = [
            [0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0xC3, 0x5C, 0x6E, 0xA9, 0x22], [0x22, 0xE2, 0x82, 0x5C, 0x6E, 0x22],
            [0x22, 0xED, 0xA0, 0x80, 0x22], [0xEF, 0xBB, 0xBF, 0x31], [0xEF, 0xBB, 0x31], [0x22, 0xF0, 0x9F, 0x98, 0x80, 0x01, 0x22],
        ]
        let members = (0..<40).map { "\"k\($0)\":\($0)" }
        cases.append(Array(("{" + members.joined(separator: ",") + "}").utf8))
        cases.append(Array(("{" + members.joined(separator: ",") + ",\"k3\":0}").utf8))
        cases.append(Array(("{" + members.joined(separator: ",") + ",\"k39\":0}").utf8))
        cases.append(Array((String(repeating: "[", count: 64) + String(repeating: "]", count: 64)).utf8))
        cases.append(Array((String(repeating: "[", count: 65) + String(repeating: "]", count: 65)).utf8))
        for bytes in cases {
            #expect(
                Self.outcome { () throws(JSONParseError) in try JSONParser.parse(bytes) }
                    == Self.outcome { () throws(JSONParseError) in try ReferenceJSONParser.parse(bytes) }, "\(bytes)")
        }
    }
}

@Suite struct ByteQuerySplitEquivalence {
    static let pieces = [
        "a", "Z", "0", "=", "&", "&&", "%", "%2", "%41", "%3D", "+", " ", ";", "é", "e\u{301}", "&\u{301}", "=\u{301}", "中", "-7", "007",
        "role", "ROLE",
    ]

    /// The pairs as the `Character` split makes them (what `QueryPair.split` did for every query before).
    static func characterSplit(_ query: String) -> [QueryPair] {
        query.split(separator: "&", omittingEmptySubsequences: true).map { QueryPair(raw: $0) }
    }

    @Test func randomQueriesSplitAsBefore() async {
        let generator = Gen.int(in: 0...(Self.pieces.count - 1)).array(of: 0...16)
        await propertyCheck(count: 2000, input: generator) { indexes in
            let query = indexes.map { Self.pieces[$0] }.joined()
            let new = QueryPair.split(query)
            let old = Self.characterSplit(query)
            #expect(new.map(\.urlText) == old.map(\.urlText), "\(query.debugDescription)")
            #expect(new.map(\.name) == old.map(\.name))
            #expect(new.map(\.skeleton) == old.map(\.skeleton))
            #expect(new.map(\.jsonValue) == old.map(\.jsonValue))
        }
    }
}

/// The page's parameters as one byte table (what a plan composes from) held to the `QueryPair`s the rules read.
@Suite struct PageParameterTableEquivalence {
    static let pieces = ByteQuerySplitEquivalence.pieces + ["%C3%A9", "%FF", "%E2%80%A8", "%22", "%5C", "\u{7F}", "12", "-0", "x%3Dy"]
    static let captures: [[(name: String, value: String)]] = [
        [], [("id", "12")], [("id", "a%20b+c")], [("k", "%E4%B8%AD"), ("id", "%FF")], [("Role", "007")], [("é", "1")], [("n", "中")],
    ]

    /// The table's pairs as `QueryPair`s, or `nil` when there is no table.
    static func tablePairs(query: String, captures: [(name: String, value: String)]) -> [QueryPair]? {
        var query = query
        return query.withUTF8 { bytes in
            PageParameters.with(query: bytes, captures: captures) { table in
                table.pairs.map { pair in
                    let text = { (range: Range<Int>) in String(decoding: table.bytes(range), as: UTF8.self) }
                    let value = text(pair.value)
                    return QueryPair(
                        urlText: text(pair.url), name: text(pair.name), skeleton: text(pair.skeleton),
                        jsonValue: pair.isNumber ? .number(value) : .string(value))
                }
            }
        }
    }

    @Test func randomQueriesMakeTheTableOfTheirPairs() async {
        let generator = Gen.int(in: 0...999).array(of: 0...16)
        await propertyCheck(count: 3000, input: generator) { numbers in
            let query = numbers.dropFirst().map { Self.pieces[$0 % Self.pieces.count] }.joined()
            let captures = Self.captures[(numbers.first ?? 0) % Self.captures.count]
            let pairs = QueryPair.split(query) + captures.map { QueryPair(capturedName: $0.name, value: $0.value) }
            guard let table = Self.tablePairs(query: query, captures: captures) else {
                // No table only for a query with a non-ASCII byte or a name that is not ASCII.
                #expect(!query.isPlainASCII || !pairs.allSatisfy(\.name.isPlainASCII), "\(query.debugDescription)")
                return
            }
            #expect(table.map(\.urlText) == pairs.map(\.urlText), "\(query.debugDescription)")
            #expect(table.map(\.name) == pairs.map(\.name), "\(query.debugDescription)")
            #expect(table.map(\.skeleton) == pairs.map(\.skeleton), "\(query.debugDescription)")
            #expect(table.map(\.jsonValue) == pairs.map(\.jsonValue), "\(query.debugDescription)")
        }
    }

    /// A plan's requests (composed from templates and the table where they can be) are the rules' requests.
    @Test func plansComposeAsTheRules() async throws {
        let generator = Gen.int(in: 0...(ByteComposerEquivalence.pieces.count - 1)).array(of: 0...16)
        await propertyCheck(count: 1500, input: generator) { indexes in
            let query = indexes.map { ByteComposerEquivalence.pieces[$0] }.joined()
            for path in ["/p/12", "/p/%E4%B8%AD", "/p/a+b%20c"] {
                guard let page = try? HTTPURL(parsing: "https://m.example.com" + path + "?" + query),
                    let match = ByteComposerEquivalence.config.matcher.match(page)
                else { continue }
                let pairs =
                    ReferenceComposer.splitByCharacters(page.query)
                    + match.captures.map { QueryPair(capturedName: $0.name, value: $0.value) }
                let requests = Composer.compose(page: page, match: match)
                for (request, interface) in zip(requests, match.entry.interfaces) {
                    let old = ReferenceComposer.compose(interface: interface, pairs: pairs)
                    #expect(request.url == old.url && request.body == old.body, "\(interface.name) \(path) \(query.debugDescription)")
                    #expect(request.headers == old.headers)
                }
            }
        }
    }
}

@Suite struct ReferenceScanEquivalence {
    /// `Template.mayHold` (eight bytes at a time to the first `$`) finds a `${` exactly where a scan of every byte pair does.
    @Test func mayHoldFindsEveryOpening() async {
        let pieces = ["$", "{", "${", "a", "}", "é", "$$", "12345678", "\u{301}"]
        let generator = Gen.int(in: 0...(pieces.count - 1)).array(of: 0...24)
        await propertyCheck(count: 3000, input: generator) { indexes in
            let text = indexes.map { pieces[$0] }.joined()
            let bytes = Array(text.utf8)
            let expected = bytes.indices.dropLast().contains { bytes[$0] == UInt8(ascii: "$") && bytes[$0 + 1] == UInt8(ascii: "{") }
            #expect(Template.mayHold(text) == expected, "\(text.debugDescription)")
        }
    }
}

@Suite struct ByteJSONWriterEquivalence {
    static let texts = [
        "", "a", "\"", "\\", "\n", "\r\t", "\u{08}\u{0C}", "\u{1}", "\u{1F}", "\u{7F}", "é", "中", "😀", "\u{2028}", "\u{2029}", "\u{2027}",
        "/", "e\u{301}",
    ]

    static func referenceText(_ value: JSONValue) -> String {
        var out = ""
        ReferenceJSONWriter.write(value, into: &out)
        return out
    }

    @Test func randomValuesAreWrittenAsBefore() async {
        let generator = Gen.int(in: 0...(Self.texts.count - 1)).array(of: 0...8)
        await propertyCheck(count: 2000, input: generator) { indexes in
            let text = indexes.map { Self.texts[$0] }.joined()
            let value = JSONValue.object(
                JSONObject([
                    .init(name: text, value: .string(text)),
                    .init(name: "n", value: .array([.number("-1.5e3"), .bool(true), .bool(false), .null, .string(text)])),
                    .init(name: "o", value: .object(JSONObject([.init(name: "k" + text, value: .object(JSONObject()))]))),
                ]))
            #expect(value.jsonText == Self.referenceText(value), "\(text.debugDescription)")
        }
    }
}

@Suite struct ByteComposerEquivalence {
    static let pieces = [
        "a", "Z", "0", "=", "&", "%", "%2", "%41", "+", " ", "@", "/", "?", ":", "中", "é", ";", "\"", "<", "#", "role", "ROLE", "_", "id",
        "7", "007", "-3", "x", "X", "c", "k", "n", "%78",
    ]
    static let config: PrefetchConfig = try! makeConfig(pages: [
        #"""
        {"url":"https://m.example.com/p/{id}","interfaces":[
          {"name":"g","api":"http://api.example.com:8081/v1/data.json?role=x&#frag","method":"GET","urlParam":true,"bodyParam":true,"body":{"c":1,"_":2}},
          {"name":"p","api":"https://api.example.com/v1/data.json?","method":"POST","urlParam":true,"bodyParam":true,"body":{"role":"u","n":null}},
          {"name":"f","api":"https://api.example.com/v1/form","method":"PUT","bodyParam":true,"bodyType":"form","params":["id","a","Z"]},
          {"name":"d","api":"https://api.example.com/v1/d?x=1","method":"DELETE","bodyParam":true,"body":{"k":true}},
          {"name":"q","api":"https://api.example.com/v1/q","method":"GET","urlParam":true,"params":["role","a"]},
          {"name":"u","api":"https://api.example.com/v1/\u00e9?#","method":"PATCH","urlParam":true,"body":{"x":[1]}}]}
        """#
    ])

    @Test func randomQueriesComposeAsBefore() async throws {
        let match = try #require(Self.config.matcher.match(try HTTPURL(parsing: "https://m.example.com/p/12")))
        let generator = Gen.int(in: 0...(Self.pieces.count - 1)).array(of: 0...16)
        await propertyCheck(count: 1500, input: generator) { indexes in
            let query = indexes.map { Self.pieces[$0] }.joined()
            guard let page = try? HTTPURL(parsing: "https://m.example.com/p/12?" + query) else { return }
            let pairs = QueryPair.split(page.query) + match.captures.map { QueryPair(capturedName: $0.name, value: $0.value) }
            let oldPairs =
                ReferenceComposer.splitByCharacters(page.query) + match.captures.map { QueryPair(capturedName: $0.name, value: $0.value) }
            for interface in match.entry.interfaces {
                let new = Composer.compose(interface: interface, pairs: pairs)
                let old = ReferenceComposer.compose(interface: interface, pairs: oldPairs)
                #expect(new.url == old.url, "\(interface.name) \(query.debugDescription)")
                #expect(new.body == old.body, "\(interface.name) \(query.debugDescription)")
                #expect(
                    new.headers.map(\.name.rawName) == old.headers.map(\.name.rawName)
                        && new.headers.map(\.value) == old.headers.map(\.value))
            }
        }
    }
}
