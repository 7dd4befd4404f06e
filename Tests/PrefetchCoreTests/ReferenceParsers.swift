import HTTPTypes

// The JSON parser and writer as they were before they moved to bytes (commit 1702bee), kept verbatim as oracles:
// the byte parser in PrefetchCore must accept and reject exactly what this does, with the same values and error
// positions, and the byte writer must write the same text. (The
// URL, path and derived-name rules need no copy here: their `Character`-level originals are still in PrefetchCore,
// as the path for non-ASCII text, and the tests hold the byte paths to them.)
@testable import PrefetchCore

extension JSONObject {
    /// The old parser's `object[name] = value`.
    mutating func setForReference(_ name: String, _ value: JSONValue) { self[name] = value }
}

struct ReferenceJSONParser {
    /// The deepest nesting of arrays and objects accepted.
    static let maximumDepth = 64

    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    private init(bytes: [UInt8]) { self.bytes = bytes }

    /// Parses one JSON document; anything but whitespace after it is an error.
    static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = ReferenceJSONParser(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3 }
        parser.skipWhitespace()
        if parser.index >= bytes.count { throw parser.error("the document is empty") }
        let value = try parser.parseValue()
        parser.skipWhitespace()
        if parser.index < bytes.count { throw parser.error("unexpected data after the JSON document") }
        return value
    }

    /// Parses one JSON document from text.
    static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    private func error(_ message: String) -> JSONParseError {
        var line = 1
        var column = 1
        for byte in bytes[..<min(index, bytes.count)] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return JSONParseError(message: message, line: line, column: column)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input (the document is truncated)") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default:
            let byte = bytes[index]
            if byte >= 0x20 && byte < 0x7F {
                throw error("unexpected character '\(Character(Unicode.Scalar(byte)))'")
            }
            throw error("unexpected byte 0x\(String(byte, radix: 16, uppercase: true)) (not JSON text)")
        }
    }

    private mutating func expectLiteral(_ literal: String) throws(JSONParseError) {
        let expected = Array(literal.utf8)
        let count = expected.count
        guard index + count <= bytes.count, bytes[index..<index + count].elementsEqual(expected) else {
            throw error("invalid literal (expected \(literal))")
        }
        index += count
    }

    private mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > Self.maximumDepth { throw error("nesting deeper than \(Self.maximumDepth) levels") }
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        var object = JSONObject()
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an object") }
            guard bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name in double quotes") }
            let name = try parseString()
            if object[name] != nil { throw error("duplicate member name \"\(name)\"") }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after member name") }
            index += 1
            skipWhitespace()
            object.setForReference(name, try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                break
            }
            throw error("expected ',' or '}' in an object")
        }
        depth -= 1
        return .object(object)
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        var values: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(values)
        }
        while true {
            skipWhitespace()
            values.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                break
            }
            throw error("expected ',' or ']' in an array")
        }
        depth -= 1
        return .array(values)
    }

    private mutating func parseNumber() throws(JSONParseError) -> String {
        let start = index
        func digits(_ parser: inout ReferenceJSONParser) -> Int {
            let from = parser.index
            while parser.index < parser.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(parser.bytes[parser.index]) {
                parser.index += 1
            }
            return parser.index - from
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if digits(&self) == 0 {
            throw error("invalid number")
        }
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            index += 1
            if digits(&self) == 0 { throw error("invalid number: digits expected after '.'") }
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) { index += 1 }
            if digits(&self) == 0 { throw error("invalid number: digits expected in the exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flushRun(_ parser: ReferenceJSONParser, upTo end: Int, into scalars: inout String.UnicodeScalarView) throws(JSONParseError) {
            guard runStart < end else { return }
            guard let text = String(validating: parser.bytes[runStart..<end], as: UTF8.self) else {
                throw parser.error("invalid UTF-8 in a string")
            }
            scalars.append(contentsOf: text.unicodeScalars)
        }
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                try flushRun(self, upTo: index, into: &scalars)
                index += 1
                return String(scalars)
            }
            if byte < 0x20 { throw error("unescaped control character in a string") }
            if byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            try flushRun(self, upTo: index, into: &scalars)
            index += 1
            guard index < bytes.count else { throw error("unterminated escape") }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var code = try parseHex4()
                if (0xD800...0xDBFF).contains(code) {
                    guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("lone high surrogate in \\u escape")
                    }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid low surrogate in \\u escape") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(code) {
                    throw error("lone low surrogate in \\u escape")
                }
                guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
                scalars.append(scalar)
            default:
                throw error("invalid escape '\\\(Character(Unicode.Scalar(escape)))'")
            }
            runStart = index
        }
    }
}

/// The `String` writer as it was before it wrote bytes (commit 1702bee), verbatim: the oracle for `jsonText`.
enum ReferenceJSONWriter {
    /// Whether `text` has a character that must be escaped: the common case (none) is copied whole.
    static func needsEscaping(_ text: String) -> Bool {
        var utf8 = text.utf8.makeIterator()
        while let byte = utf8.next() {
            switch byte {
            case 0x00...0x1F, 0x22, 0x5C, 0x7F: return true
            case 0xE2:
                // U+2028 and U+2029 (E2 80 A8/A9) are escaped so the output is also valid JavaScript.
                if utf8.next() == 0x80, let third = utf8.next(), third == 0xA8 || third == 0xA9 { return true }
            default: continue
            }
        }
        return false
    }

    static func write(_ value: JSONValue, into out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .number(let literal): out += literal
        case .string(let text): writeString(text, into: &out)
        case .array(let values):
            out += "["
            for (offset, element) in values.enumerated() {
                if offset > 0 { out += "," }
                write(element, into: &out)
            }
            out += "]"
        case .object(let object):
            out += "{"
            for (offset, member) in object.members.enumerated() {
                if offset > 0 { out += "," }
                writeString(member.name, into: &out)
                out += ":"
                write(member.value, into: &out)
            }
            out += "}"
        }
    }

    static func writeString(_ text: String, into out: inout String) {
        out += "\""
        if !needsEscaping(text) {
            out += text
            out += "\""
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case "\u{2028}": out += "\\u2028"
            case "\u{2029}": out += "\\u2029"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += "\\u"
                    let hex = String(scalar.value, radix: 16, uppercase: false)
                    out += String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

/// The composer's per-interface step as it was before the byte work (commit 1702bee), verbatim but for the names it
/// calls: the oracle for `Composer.compose(interface:pairs:)`. Pairs come from the `Character` split.
enum ReferenceComposer {
    static func jsonText(_ value: JSONValue) -> String {
        var out = ""
        ReferenceJSONWriter.write(value, into: &out)
        return out
    }

    static func referenceFixedNames(of interface: Interface) -> Set<String> {
        var names = Set(interface.body.members.map { Composer.nameSkeleton($0.name) })
        for pair in splitByCharacters(interface.apiURL.query) { names.insert(Composer.nameSkeleton(pair.name)) }
        names.remove("")
        return names
    }

    static func splitByCharacters(_ query: String?) -> [QueryPair] {
        guard let query, !query.isEmpty else { return [] }
        return query.split(separator: "&", omittingEmptySubsequences: true).map { QueryPair(raw: $0) }
    }

    static func compose(interface: Interface, pairs allPairs: [QueryPair]) -> PlannedRequest {
        let allowed = interface.params.map { allowed in allPairs.filter { allowed.contains($0.name) } } ?? allPairs
        let fixed = allowed.isEmpty ? [] : referenceFixedNames(of: interface)
        let pairs = fixed.isEmpty ? allowed : allowed.filter { !fixed.contains($0.skeleton) }
        var queryParts: [String] = []
        if interface.urlParam {
            queryParts += pairs.map(\.urlText)
        }

        var merged = interface.body
        if interface.bodyParam {
            for pair in pairs {
                merged[pair.name] = pair.jsonValue
            }
        }

        var headers = interface.headers
        var body: String?
        if interface.method.carriesBody {
            if interface.hasBody || interface.bodyParam {
                switch interface.bodyType {
                case .json:
                    body = ReferenceComposer.jsonText(.object(merged))
                    headers.append(HTTPField(name: .contentType, value: "application/json"))
                case .form:
                    body = FormEncoding.encode(merged)
                    headers.append(HTTPField(name: .contentType, value: "application/x-www-form-urlencoded"))
                }
            }
        } else {
            // Page parameters already forwarded raw by urlParam are not repeated.
            let fromBody = interface.bodyParam && !interface.urlParam ? merged : interface.body
            if !fromBody.isEmpty { queryParts.append(FormEncoding.encode(fromBody)) }
        }

        var url = interface.api
        if let hash = url.firstIndex(of: "#") { url = String(url[..<hash]) }
        if !queryParts.isEmpty {
            if interface.apiURL.query == nil {
                url += "?"
            } else if !url.hasSuffix("?") && !url.hasSuffix("&") {
                url += "&"
            }
            url += queryParts.joined(separator: "&")
        }
        return PlannedRequest(interface: interface, url: url, headers: headers, body: body)
    }
}

/// The URL parser before the byte work: its byte-level prelude (length, control characters), then the `Character`
/// rules still in PrefetchCore. The byte parser is held to it (`ByteURLParserEquivalence`, the FuzzURL target).
func referenceURL(_ text: String) -> Result<HTTPURL, URLProblem> {
    let bytes = Array(text.utf8)
    if bytes.isEmpty { return .failure(URLProblem("is empty")) }
    if bytes.count > HTTPURL.maximumLength {
        return .failure(URLProblem("is \(bytes.count) bytes long; the limit is \(HTTPURL.maximumLength)"))
    }
    if let bad = bytes.firstIndex(where: { $0 < 0x20 || $0 == 0x7F }) {
        return .failure(URLProblem("contains a control character (byte \(bytes[bad])) at offset \(bad)"))
    }
    do { return .success(try HTTPURL(parsingCharacters: text)) } catch { return .failure(error) }
}

/// A URL's parts as `String`s, as `HTTPURL` stored them before it became offsets into its text.
struct ReferenceURLParts: Equatable, CustomStringConvertible {
    var scheme: String
    var host: String
    var port: Int?
    var path: String
    var query: String?
    var fragment: String?

    /// The parts `url` reads back.
    init(_ url: HTTPURL) {
        self.init(scheme: url.scheme, host: url.host, port: url.port, path: url.path, query: url.query, fragment: url.fragment)
    }

    init(scheme: String, host: String, port: Int?, path: String, query: String?, fragment: String?) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
        self.query = query
        self.fragment = fragment
    }

    var description: String {
        "\(scheme) \(host.debugDescription) \(port as Any) \(path.debugDescription) \(query as Any) \(fragment as Any)"
    }
}

/// The parts of `text` as the `Character` rules make them, `String`s (`HTTPURL.partsByCharacters`, the parser that
/// made every value's parts when they were stored as `String`s), for a text ``referenceURL(_:)`` accepts: what every
/// parse's parts, read back from its offsets, are held to (`URLPartsFromOffsets`, the FuzzURL target).
func referenceURLParts(_ text: String) -> ReferenceURLParts? {
    guard let parts = try? HTTPURL.partsByCharacters(text) else { return nil }
    return ReferenceURLParts(
        scheme: parts.https ? "https" : "http", host: parts.host, port: parts.port, path: parts.path, query: parts.query,
        fragment: parts.fragment)
}
