import Testing

@testable import PrefetchCore

// The one lexical layer (`JSONScanner`) as its three readers use it: the parser, the tape and the validator refuse the
// same texts and accept the same texts; the parser's refusal is the old parser's (ReferenceJSONParser), message, line
// and column, and the tape's is the parser's.

/// Texts that are no JSON, one per lexical rule, with the message the parser gives.
private let refused: [(bytes: [UInt8], message: String)] = [
    // Escapes and `\u` units.
    (Array(#""\x""#.utf8), "invalid escape '\\x'"),
    (Array(#""\u12g4""#.utf8), "invalid hex digit in \\u escape"),
    (Array(#""\u12""#.utf8), "truncated \\u escape"),
    (Array(#""\"#.utf8), "unterminated escape"),
    (Array(#""\ud83d""#.utf8), "lone high surrogate in \\u escape"),
    (Array(#""\ud83dx""#.utf8), "lone high surrogate in \\u escape"),
    (Array(#""\ud83d\u0041""#.utf8), "invalid low surrogate in \\u escape"),
    (Array(#""\ud83d\uZZZZ""#.utf8), "invalid hex digit in \\u escape"),
    (Array(#""\udc00""#.utf8), "lone low surrogate in \\u escape"),
    // UTF-8: overlong, encoded surrogate, past U+10FFFF, truncated, stray continuation, never a lead byte; the first
    // and a later run of a string with an escape.
    ([0x22, 0xC0, 0xAF, 0x22], "invalid UTF-8 in a string"),
    ([0x22, 0xE0, 0x80, 0xAF, 0x22], "invalid UTF-8 in a string"),
    ([0x22, 0xF0, 0x80, 0x80, 0xAF, 0x22], "invalid UTF-8 in a string"),
    ([0x22, 0xED, 0xA0, 0x80, 0x22], "invalid UTF-8 in a string"),
    ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], "invalid UTF-8 in a string"),
    ([0x22, 0xE4, 0xB8, 0x22], "invalid UTF-8 in a string"),
    ([0x22, 0x80, 0x22], "invalid UTF-8 in a string"),
    ([0x22, 0xFF, 0x22], "invalid UTF-8 in a string"),
    ([0x22, 0xC3, 0x5C, 0x6E, 0xA9, 0x22], "invalid UTF-8 in a string"),
    ([0x22, 0x5C, 0x6E, 0xC3, 0x22], "invalid UTF-8 in a string"),
    // Strings: a control byte, no closing quote (also after eight plain bytes).
    ([0x22, 0x01, 0x22], "unescaped control character in a string"),
    (Array("\"tab\there\"".utf8), "unescaped control character in a string"),
    (Array(#""abc"#.utf8), "unterminated string"),
    (Array(#""abcdefghijklmnop"#.utf8), "unterminated string"),
    // Numbers: leading zeros, missing digits, signs.
    (Array("01".utf8), "unexpected data after the JSON document"),
    (Array("-01".utf8), "unexpected data after the JSON document"),
    (Array("[00]".utf8), "expected ',' or ']' in an array"),
    (Array("-".utf8), "invalid number"),
    (Array("-a".utf8), "invalid number"),
    (Array("1.".utf8), "invalid number: digits expected after '.'"),
    (Array("1.e5".utf8), "invalid number: digits expected after '.'"),
    (Array("1e".utf8), "invalid number: digits expected in the exponent"),
    (Array("1e+".utf8), "invalid number: digits expected in the exponent"),
    (Array(".5".utf8), "unexpected character '.'"),
    (Array("+1".utf8), "unexpected character '+'"),
    // Literals.
    (Array("tru".utf8), "invalid literal (expected true)"),
    (Array("nul".utf8), "invalid literal (expected null)"),
    (Array("falsy".utf8), "invalid literal (expected false)"),
    (Array("nullx".utf8), "unexpected data after the JSON document"),
    // Structure and punctuation.
    (Array("".utf8), "the document is empty"),
    (Array(" \n".utf8), "the document is empty"),
    (Array("[".utf8), "unexpected end of input (the document is truncated)"),
    (Array("{".utf8), "unexpected end of input inside an object"),
    (Array("[1".utf8), "unexpected end of input inside an array"),
    (Array("[1,]".utf8), "unexpected character ']'"),
    (Array(#"{"a":1,}"#.utf8), "expected a member name in double quotes"),
    (Array(#"{"a" 1}"#.utf8), "expected ':' after member name"),
    (Array(#"{"a":"#.utf8), "unexpected end of input (the document is truncated)"),
    (Array(#"{"a":1 "b":2}"#.utf8), "expected ',' or '}' in an object"),
    (Array("{a:1}".utf8), "expected a member name in double quotes"),
    (Array("'a'".utf8), "unexpected character '''"),
    ([0x7F], "unexpected byte 0x7F (not JSON text)"),
    ([0xC3, 0xA9], "unexpected byte 0xC3 (not JSON text)"),
    // Trailing garbage.
    (Array("[1] [2]".utf8), "unexpected data after the JSON document"),
    (Array("{}}".utf8), "unexpected data after the JSON document"),
    (Array("1 x".utf8), "unexpected data after the JSON document"),
    // Nesting one level past the limit.
    (Array((String(repeating: "[", count: 65) + String(repeating: "]", count: 65)).utf8), "nesting deeper than 64 levels"),
    (Array((String(repeating: "{\"a\":", count: 65) + "1" + String(repeating: "}", count: 65)).utf8), "nesting deeper than 64 levels"),
    (
        Array(("[" + String(repeating: "{\"a\":[", count: 32) + String(repeating: "]}", count: 32) + "]").utf8),
        "nesting deeper than 64 levels"
    ),
]

/// Texts that are JSON at the edges of the same rules.
private let accepted: [String] = [
    "0", "-0", "-0.5e+10", "1E5", "1e-0", "10", "[0,-1,2.50]", "true", "false", "null", " [ ] ", "{}", "\"\"", #""\ud83d\ude00 ok""#,
    #""\u0000\u001f\u00e9\uFFFF""#, #""\"\\\/\b\f\n\r\t""#, "\"中文 😀\"", "\"\u{7F}\"", "\"1234567\"", "\"12345678\"", "\"123456789\"",
    "\"abcdefgh\\nijklmnop\"", "{\"a\":{\"b\":[1,{\"c\":null}]}}",
    String(repeating: "[", count: 64) + String(repeating: "]", count: 64),
    String(repeating: "{\"a\":", count: 64) + "1" + String(repeating: "}", count: 64),
]

@Suite struct JSONScannerReaders {
    @Test(arguments: refused.indices)
    func allThreeRefuseTheSameTexts(_ index: Int) {
        let (bytes, message) = refused[index]
        #expect(!JSONBytes.isValid(bytes), "\(bytes)")
        let parsed = parserOutcome(bytes)
        guard case .failure(let error) = parsed else {
            Issue.record("the parser accepts \(bytes)")
            return
        }
        #expect(error.message == message, "\(bytes)")
        let reference: Result<JSONValue, JSONParseError>
        do { reference = .success(try ReferenceJSONParser.parse(bytes)) } catch { reference = .failure(error) }
        #expect(parsed == reference, "\(bytes)")
        #expect(tapeOutcome(bytes) == parsed, "\(bytes)")
    }

    @Test(arguments: accepted)
    func allThreeAcceptTheSameTexts(_ text: String) throws {
        let bytes = Array(text.utf8)
        #expect(JSONBytes.isValid(bytes), "\(text)")
        let value = try JSONParser.parse(bytes)
        #expect(value == (try ReferenceJSONParser.parse(bytes)), "\(text)")
        #expect(tapeOutcome(bytes) == .success(value), "\(text)")
    }

    /// The validator's two documented differences, and only those: it does not skip a byte-order mark (a spliced body
    /// must be JSON as it is) and does not look for duplicate member names.
    @Test func theValidatorDiffersOnlyOnAByteOrderMarkAndDuplicateNames() throws {
        let marked: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("[1]".utf8)
        #expect(!JSONBytes.isValid(marked))
        #expect(try JSONParser.parse(marked) == .array([.number("1")]))
        #expect(tapeOutcome(marked) == parserOutcome(marked))

        let duplicated = Array(#"{"a":1,"a":2}"#.utf8)
        #expect(JSONBytes.isValid(duplicated))
        #expect(throws: JSONParseError(message: "duplicate member name \"a\"", line: 1, column: 11)) { try JSONParser.parse(duplicated) }
        #expect(tapeOutcome(duplicated) == parserOutcome(duplicated))
    }
}
