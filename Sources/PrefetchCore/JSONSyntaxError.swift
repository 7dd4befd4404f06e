/// Why bytes are not one JSON text: every reason ``JSONScanner`` and the readers built on it give, each message
/// written once.
///
/// A plain value without a position, so the validator (``JSONBytes/isValid(_:)-([UInt8])``) refuses without
/// building a message; the parser and the tape turn it into a ``JSONParseError`` at the scanner's position
/// (``JSONScanner/parseError(_:)``).
enum JSONSyntaxError: Error, Sendable {
    case empty
    case truncated
    case trailingData
    /// A byte that starts no JSON value.
    case unexpectedByte(UInt8)
    case invalidLiteral(expected: StaticString)
    case tooDeep
    case endInside(JSONScanner.Container)
    case expectedMemberName
    case duplicateMemberName(String)
    case expectedColon
    case expectedCommaOrEnd(JSONScanner.Container)
    case invalidNumber
    case noFractionDigits
    case noExponentDigits
    case unterminatedString
    case controlCharacter
    case invalidUTF8
    case unterminatedEscape
    /// A backslash followed by this byte.
    case invalidEscape(UInt8)
    case truncatedUnicodeEscape
    case invalidHexDigit
    case loneHighSurrogate
    case invalidLowSurrogate
    case loneLowSurrogate

    /// The message a ``JSONParseError`` carries.
    var message: String {
        switch self {
        case .empty: "the document is empty"
        case .truncated: "unexpected end of input (the document is truncated)"
        case .trailingData: "unexpected data after the JSON document"
        case .unexpectedByte(let byte):
            byte >= 0x20 && byte < 0x7F
                ? "unexpected character '\(Character(Unicode.Scalar(byte)))'"
                : "unexpected byte 0x\(String(byte, radix: 16, uppercase: true)) (not JSON text)"
        case .invalidLiteral(let literal): "invalid literal (expected \(literal))"
        case .tooDeep: "nesting deeper than \(JSONScanner.maximumDepth) levels"
        case .endInside(let container): "unexpected end of input inside \(container.name)"
        case .expectedMemberName: "expected a member name in double quotes"
        case .duplicateMemberName(let name): "duplicate member name \"\(name)\""
        case .expectedColon: "expected ':' after member name"
        case .expectedCommaOrEnd(let container):
            "expected ',' or '\(Character(Unicode.Scalar(container.closing)))' in \(container.name)"
        case .invalidNumber: "invalid number"
        case .noFractionDigits: "invalid number: digits expected after '.'"
        case .noExponentDigits: "invalid number: digits expected in the exponent"
        case .unterminatedString: "unterminated string"
        case .controlCharacter: "unescaped control character in a string"
        case .invalidUTF8: "invalid UTF-8 in a string"
        case .unterminatedEscape: "unterminated escape"
        case .invalidEscape(let byte): "invalid escape '\\\(Character(Unicode.Scalar(byte)))'"
        case .truncatedUnicodeEscape: "truncated \\u escape"
        case .invalidHexDigit: "invalid hex digit in \\u escape"
        case .loneHighSurrogate: "lone high surrogate in \\u escape"
        case .invalidLowSurrogate: "invalid low surrogate in \\u escape"
        case .loneLowSurrogate: "lone low surrogate in \\u escape"
        }
    }
}
