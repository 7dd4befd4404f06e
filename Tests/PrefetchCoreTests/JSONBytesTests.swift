import Foundation
import Testing

@testable import PrefetchCore

/// The byte-level JSON validator and writer used to splice upstream bodies into the results view.
@Suite struct JSONBytesTests {
    @Test(arguments: [
        "{}", "[]", "0", "-0.5e+10", "\"\"", "true", "null", " \n{\"a\": [1, 2.50, {\"b\": null}], \"c\": \"\\u00e9\\n\"}\n",
        "\"中文 😀\"", "[[[[[]]]]]", "1E5", "{\"k\":\"\\\\\\\"\"}",
    ])
    func acceptsJSON(_ text: String) throws {
        #expect(JSONBytes.isValid(Array(text.utf8)), "\(text)")
        // The parser agrees.
        _ = try JSONParser.parse(text)
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "1.", ".5", "-", "1e", "+1", "tru", "nul",
        "\"abc", "\"\\x\"", "\"\\u12g4\"", "\"a\u{1}b\"", "[1] [2]", "NaN", "'a'", "\u{FEFF}{}",
    ])
    func refusesWhatIsNotOneJSONText(_ text: String) {
        #expect(!JSONBytes.isValid(Array(text.utf8)), "\(text.debugDescription)")
    }

    /// Found by the FuzzJSON fuzz target (Fuzz/Findings): the validator accepted a `\u` escape of a lone surrogate that
    /// the parser refuses, so the results view spliced a body a dependent called `dependency-not-json`. Both refuse it.
    @Test(arguments: [#""\ud83d/""#, #""\udc00""#, #""\ud83d\u0041""#, #""\ud83d\""#, #"["\ud83d"]"#])
    func refusesLoneSurrogatesAsTheParserDoes(_ text: String) {
        #expect(!JSONBytes.isValid(Array(text.utf8)), "\(text)")
        #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
    }

    @Test func acceptsSurrogatePairs() throws {
        let text = #""\ud83d\ude00 ok""#
        #expect(JSONBytes.isValid(Array(text.utf8)))
        #expect(try JSONParser.parse(text) == .string("😀 ok"))
    }

    @Test func refusesMalformedUTF8AndExcessiveNesting() {
        #expect(!JSONBytes.isValid([0x22, 0xC0, 0xAF, 0x22]), "overlong")
        #expect(!JSONBytes.isValid([0x22, 0xED, 0xA0, 0x80, 0x22]), "surrogate")
        #expect(!JSONBytes.isValid([0x22, 0xE4, 0xB8, 0x22]), "truncated")
        #expect(JSONBytes.isValid([0x22, 0xE4, 0xB8, 0xAD, 0x22]))
        let deep = String(repeating: "[", count: JSONBytes.maximumDepth + 1) + String(repeating: "]", count: JSONBytes.maximumDepth + 1)
        #expect(!JSONBytes.isValid(Array(deep.utf8)))
        let allowed = String(repeating: "[", count: JSONBytes.maximumDepth) + String(repeating: "]", count: JSONBytes.maximumDepth)
        #expect(JSONBytes.isValid(Array(allowed.utf8)))
    }

    @Test func theWriterEscapesRunsAndSplicesRawJSON() throws {
        var writer = JSONBytesWriter()
        writer.beginObject()
        writer.key("text")
        writer.string("plain \"quoted\" back\\slash\nline\u{1}ctl \u{2028} 中")
        writer.key("n")
        writer.integer(-42)
        writer.key("list")
        writer.beginArray()
        writer.bool(true)
        writer.null()
        writer.raw(Array(#"{"a": 1.50}"#.utf8))
        writer.beginArray()
        writer.endArray()
        writer.endArray()
        writer.key("empty")
        writer.beginObject()
        writer.endObject()
        writer.endObject()
        let text = String(decoding: writer.bytes, as: UTF8.self)
        #expect(
            text == #"{"text":"plain \"quoted\" back\\slash\nline\u0001ctl \u2028 中","n":-42,"list":[true,null,{"a": 1.50},[]],"empty":{}}"#
        )
        #expect(JSONBytes.isValid(writer.bytes))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(writer.bytes)) as? [String: Any])
        #expect(object["text"] as? String == "plain \"quoted\" back\\slash\nline\u{1}ctl \u{2028} 中")
    }
}
