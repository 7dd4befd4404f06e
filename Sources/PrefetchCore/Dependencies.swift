/// Dependent requests: an interface may take values from an earlier interface's JSON answer on the same page.
/// Design notes: docs/design/dependent-requests.md

import HTTPTypes

/// A JSON Pointer (RFC 6901): `""` is the whole document, `/data/uid` a member of a member, `/items/0` an array
/// element. `~1` stands for `/` and `~0` for `~` inside a token.
public struct JSONPointer: Sendable, Hashable, CustomStringConvertible {
    /// The pointer as written.
    public let text: String
    /// The unescaped tokens.
    public let tokens: [String]

    /// The pointer `text`, or nil when it is not one (it must be empty or start with `/`; `~` must be followed by
    /// `0` or `1`).
    public init?(_ text: String) {
        if text.isEmpty {
            self.text = text
            self.tokens = []
            return
        }
        guard text.hasPrefix("/") else { return nil }
        var tokens: [String] = []
        for raw in text.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            var token = ""
            var iterator = raw.makeIterator()
            while let character = iterator.next() {
                if character == "~" {
                    switch iterator.next() {
                    case "0": token.append("~")
                    case "1": token.append("/")
                    default: return nil
                    }
                } else {
                    token.append(character)
                }
            }
            tokens.append(token)
        }
        self.text = text
        self.tokens = tokens
    }

    /// The value the pointer names in `document`, or nil when there is none.
    public func resolve(in document: JSONValue) -> JSONValue? {
        var current = document
        for token in tokens {
            switch current {
            case .object(let object):
                guard let next = object[token] else { return nil }
                current = next
            case .array(let items):
                // An array index: digits without a leading zero (RFC 6901 §4).
                guard !token.isEmpty, token.allSatisfy(\.isASCII), token.allSatisfy(\.isNumber),
                    token == "0" || !token.hasPrefix("0"), let index = Int(token), index < items.count
                else { return nil }
                current = items[index]
            default:
                return nil
            }
        }
        return current
    }

    public var description: String { text }
}

/// A value one interface takes from another's answer: `${name:pointer}`.
public struct Reference: Sendable, Hashable, CustomStringConvertible {
    /// The interface of the same page whose JSON answer holds the value.
    public var interface: String
    /// Where in that answer.
    public var pointer: JSONPointer

    public var description: String { "${\(interface):\(pointer.text)}" }
}

/// Why a dependent request was not sent. `code` is one of a small fixed set, safe as a metric label.
public struct DependencyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `dependency-failed`: what it needs did not produce a response (failed, expired, not ready in time).
    /// `dependency-not-json`: the needed answer is not JSON.
    /// `dependency-value`: the pointer names nothing, or a value that cannot go where the reference is.
    public var code: FailureCode
    /// Names the interface, the reference and what was wrong; never the value itself.
    public var message: String

    public static let codes: [FailureCode] = [.dependencyFailed, .dependencyNotJSON, .dependencyValue]

    public init(code: FailureCode, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

/// A config string that may hold references: literal text and `${name:pointer}` parts.
struct Template: Sendable, Hashable {
    enum Part: Sendable, Hashable {
        case literal(String)
        case reference(Reference)
    }

    let parts: [Part]

    /// The references, in order.
    var references: [Reference] {
        parts.compactMap {
            if case .reference(let reference) = $0 { return reference }
            return nil
        }
    }

    /// The whole string is one reference: its value replaces the string, type and all (in a JSON body).
    var wholeReference: Reference? {
        if parts.count == 1, case .reference(let reference) = parts[0] { return reference }
        return nil
    }

    /// Whether `text` holds a reference at all (`${`); a string without one is a plain literal.
    static func mayHold(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes in
            guard bytes.count >= 2 else { return false }
            // Eight bytes at a time to the first word with a `$`.
            var index = 0
            while index + 8 <= bytes.count && ByteText.hasByte(ByteText.word(bytes, at: index), UInt8(ascii: "$")) == 0 { index += 8 }
            while index < bytes.count - 1 {
                if bytes[index] == UInt8(ascii: "$") && bytes[index + 1] == UInt8(ascii: "{") { return true }
                index += 1
            }
            return false
        } ?? (firstOpening(in: Substring(text)) != nil)
    }

    /// The template in `text`. Every `${` must open a reference `${name:pointer}` closed by `}`; the message says
    /// what is wrong otherwise.
    static func parse(_ text: String) -> Result<Template, TemplateProblem> {
        var parts: [Part] = []
        var literal = ""
        var rest = Substring(text)
        while let open = Self.firstOpening(in: rest) {
            literal += rest[..<open]
            let inside = rest[rest.index(open, offsetBy: 2)...]
            guard let close = inside.firstIndex(of: "}") else {
                return .failure(TemplateProblem("has \"${\" without a closing \"}\""))
            }
            let body = inside[..<close]
            guard let colon = body.firstIndex(of: ":") else {
                return .failure(TemplateProblem("has \"${\(body)}\", which is not a reference ${name:/json/pointer}"))
            }
            let name = String(body[..<colon])
            let pointerText = String(body[body.index(after: colon)...])
            guard !name.isEmpty else { return .failure(TemplateProblem("has a reference without an interface name")) }
            guard let pointer = JSONPointer(pointerText) else {
                return .failure(
                    TemplateProblem("has \"\(pointerText)\", which is not a JSON pointer (empty, or starting with \"/\")"))
            }
            if !literal.isEmpty {
                parts.append(.literal(literal))
                literal = ""
            }
            parts.append(.reference(Reference(interface: name, pointer: pointer)))
            rest = inside[inside.index(after: close)...]
        }
        literal += rest
        if !literal.isEmpty { parts.append(.literal(literal)) }
        return .success(Template(parts: parts))
    }

    /// Where the first `${` in `text` starts.
    private static func firstOpening(in text: Substring) -> Substring.Index? {
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(after: index)
            if text[index] == "$", next < text.endIndex, text[next] == "{" { return index }
            index = next
        }
        return nil
    }

    /// The text with each reference replaced by its value's text: a string as it is, a number or boolean as JSON
    /// writes it. A missing value, `null`, an object or an array cannot be text.
    func render(_ values: [Reference: JSONValue], for interface: String) throws(DependencyError) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .literal(let text): out += text
            case .reference(let reference):
                out += try Self.text(of: values[reference], reference, for: interface)
            }
        }
        return out
    }

    static func text(of value: JSONValue?, _ reference: Reference, for interface: String) throws(DependencyError) -> String {
        switch value {
        case .string(let text): return text
        case .number(let text): return text
        case .bool(let flag): return flag ? "true" : "false"
        case nil:
            throw DependencyError(
                code: .dependencyValue, message: "\(interface) needs \(reference), and \(reference.interface)'s answer has nothing there")
        case .some(let other):
            throw DependencyError(
                code: .dependencyValue,
                message: "\(interface) needs \(reference) as text, and \(reference.interface)'s answer has \(other.kindName) there")
        }
    }
}

/// What is wrong with a template, for a config problem at its path.
struct TemplateProblem: Error, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
}

extension Interface {
    /// This interface with every reference replaced by its value from `values` (the needed answers' values by
    /// reference): in the body a whole-string reference takes the value itself (a number stays a number), a
    /// reference inside a string its text; headers and `query` values take text, which may hold no control
    /// character. Throws when a value is missing or cannot go where its reference is.
    public func resolving(_ values: [Reference: JSONValue]) throws(DependencyError) -> Interface {
        var resolved = self
        let asQuery = bodyType == .form || !method.carriesBody
        resolved.body = try Self.resolve(body, values, interface: name, scalarOnly: asQuery)
        var headers = self.headers
        for index in headers.indices where Template.mayHold(headers[index].value) {
            guard case .success(let template) = Template.parse(headers[index].value) else { continue }
            let text = try template.render(values, for: name)
            if text.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) {
                throw DependencyError(
                    code: .dependencyValue, message: "\(name) needs a header value with a control character from \(template.references)")
            }
            headers[index].value = text
        }
        resolved.headers = headers
        resolved.query = try query.map { pair throws(DependencyError) in
            guard Template.mayHold(pair.value), case .success(let template) = Template.parse(pair.value) else { return pair }
            return (pair.name, try template.render(values, for: name))
        }
        resolved.references = []
        return resolved
    }

    private static func resolve(
        _ object: JSONObject, _ values: [Reference: JSONValue], interface: String, scalarOnly: Bool
    ) throws(DependencyError) -> JSONObject {
        var members: [JSONObject.Member] = []
        members.reserveCapacity(object.members.count)
        for member in object.members {
            members.append(.init(name: member.name, value: try resolve(member.value, values, interface: interface, scalarOnly: scalarOnly)))
        }
        return JSONObject(members)
    }

    private static func resolve(
        _ value: JSONValue, _ values: [Reference: JSONValue], interface: String, scalarOnly: Bool
    ) throws(DependencyError) -> JSONValue {
        switch value {
        case .string(let text) where Template.mayHold(text):
            guard case .success(let template) = Template.parse(text) else { return value }
            if let whole = template.wholeReference {
                guard let found = values[whole] else {
                    throw DependencyError(
                        code: .dependencyValue, message: "\(interface) needs \(whole), and \(whole.interface)'s answer has nothing there")
                }
                switch found {
                case .object, .array:
                    if scalarOnly {
                        throw DependencyError(
                            code: .dependencyValue,
                            message:
                                "\(interface) needs \(whole) in a query or form body, and \(whole.interface)'s answer has \(found.kindName) there"
                        )
                    }
                default: break
                }
                return found
            }
            return .string(try template.render(values, for: interface))
        case .object(let object):
            return .object(try resolve(object, values, interface: interface, scalarOnly: scalarOnly))
        case .array(let items):
            var out: [JSONValue] = []
            for item in items { out.append(try resolve(item, values, interface: interface, scalarOnly: scalarOnly)) }
            return .array(out)
        default:
            return value
        }
    }
}
