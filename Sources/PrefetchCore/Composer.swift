import Foundation
public import HTTPTypes

/// Turns "this page URL is opening" into the exact upstream requests to make.
///
/// The rules (docs/configuration.md, "Parameter rules", has the examples; `ComposerTests` holds each one):
///
/// - **urlParam**: the page's raw query pairs are appended to the api URL in their original order and
///   encoding (`%E4%B8%AD` and `+` pass through unchanged); an api query is kept and extended with `&`;
///   the api's own `#fragment` is dropped; an empty page query adds nothing. Bytes that may not appear in
///   a query at all (space, `"`, `<`, non-ASCII, a `%` not followed by two hex digits, ...) are
///   percent-encoded, so the result is always a well-formed URL.
/// - **bodyParam**: the page's pairs are decoded as `application/x-www-form-urlencoded` (`+` is a space,
///   `%XX` is UTF-8; a value that does not decode to valid UTF-8 is kept as written) and merged into the
///   top level of the body. A canonical integer of at most 15 digits (`0`, `163`, `-4`; not `007`, `1e3`,
///   `+5`, `-0`) becomes a JSON number, anything else stays a string. A repeated key: the last value wins,
///   at the position of the first (as `Object.fromEntries(new URLSearchParams(search))`).
/// - A name the config fixed is never forwarded, by either rule, for any method or bodyType: a page pair
///   whose decoded name has the same skeleton (``nameSkeleton(_:)``: normalised, case-folded, letters and digits
///   only) as a top-level key of the config's `body` or a name in the api URL's own query is dropped, so the
///   config's value is the only one sent (`?role=admin`, `?ROLE=admin`, `?r%6Fle=admin`, `?%20role=admin`,
///   `?role[]=admin` and `?%C5%BFcope=admin` all lose to the config's `role` and `scope`; `?v=3` never follows an
///   api's `?v=2`). A `;` in a forwarded page pair is percent-encoded, so no parser splits a value into a pair.
/// - `params` filters which page parameters are forwarded, by decoded name, for both rules.
/// - `{name}` segments captured by a pattern entry are page parameters too, after the query's.
/// - GET and DELETE never carry a body: their config body and, with bodyParam, the page parameters go into
///   the query string (page parameters only once when urlParam is also set).
/// - `bodyType: form` sends the merged body form-encoded; JSON bodies are compact with
///   `Content-Type: application/json`.
/// - The composed URL is the api's scheme, host, port and path followed by a query: page input can never
///   change where the request goes, and no header is ever built from page input.
public enum Composer {
    /// The requests for `match` when the page was opened with `page`.
    public static func compose(page: HTTPURL, match: PageMatch) -> [PlannedRequest] {
        let interfaces = match.entry.interfaces
        // Every request from its template and the page's parameters as bytes, when each template can say it and none
        // depends on another (a dependent keeps the page's pairs, as `QueryPair`s).
        if !interfaces.contains(where: { !$0.references.isEmpty }) {
            let fromTemplates = page.withBytes { text in
                PageParameters.with(query: page.queryRange.map { UnsafeBufferPointer(rebasing: text.bytes[$0]) }, captures: match.captures)
                {
                    parameters -> [PlannedRequest]? in
                    var requests: [PlannedRequest] = []
                    requests.reserveCapacity(interfaces.count)
                    for interface in interfaces {
                        guard let template = interface.template, !(interface.bodyParam && template.bodyKeyWithoutSkeleton),
                            let request = compose(interface: interface, template: template, parameters: parameters)
                        else { return nil }
                        requests.append(request)
                    }
                    return requests
                }
            }
            if let fromTemplates { return fromTemplates }
        }
        var pairs = QueryPair.split(page.queryText)
        if !match.captures.isEmpty { pairs += match.captures.map { QueryPair(capturedName: $0.name, value: $0.value) } }
        var requests = interfaces.map { compose(interface: $0, pairs: pairs) }
        if requests.contains(where: { !$0.interface.references.isEmpty }) {
            // Dependent requests keep the page's pairs, to be composed again once what they need has arrived.
            let names = requests.map(\.name)
            for index in requests.indices where !requests[index].interface.references.isEmpty {
                requests[index].dependencies = requests[index].interface.dependsOn.compactMap { names.firstIndex(of: $0) }
                requests[index].pagePairs = pairs
            }
        }
        return requests
    }

    /// One interface's request: from its template when it has one that says it all, else by the rules.
    static func compose(interface: Interface, pairs: [QueryPair]) -> PlannedRequest {
        if let template = interface.template, !(interface.bodyParam && template.bodyKeyWithoutSkeleton),
            let request = PageParameters.with(pairs, { compose(interface: interface, template: template, parameters: $0) })
        {
            return request
        }
        return composeByRules(interface: interface, pairs: pairs)
    }

    /// One interface's request by the rules, with nothing worked out ahead. The forwarded pairs are those `params`
    /// allows whose skeleton the config does not fix; they are visited in place (no filtered copies), and the URL's
    /// query is appended as it is decided.
    static func composeByRules(interface: Interface, pairs allPairs: [QueryPair]) -> PlannedRequest {
        let allowedByParams = { (pair: QueryPair) in interface.params?.contains(pair.name) ?? true }
        let fixed = allPairs.contains(where: allowedByParams) ? fixedNames(of: interface) : []
        let forwarded = { (pair: QueryPair) in allowedByParams(pair) && (fixed.isEmpty || !fixed.contains(pair.skeleton)) }

        var merged = interface.body
        if interface.bodyParam {
            merged.reserveCapacity(merged.members.count + allPairs.count)
            for pair in allPairs where forwarded(pair) {
                merged[pair.name] = pair.jsonValue
            }
        }

        var headers = interface.headers
        var body: String?
        /// The form-encoded body that goes into the query of a request without a body.
        var bodyQuery: String?
        if interface.method.carriesBody {
            if interface.hasBody || interface.bodyParam {
                switch interface.bodyType {
                case .json:
                    body = JSONValue.object(merged).jsonText
                    headers.append(HTTPField(name: .contentType, value: "application/json"))
                case .form:
                    body = FormEncoding.encode(merged)
                    headers.append(HTTPField(name: .contentType, value: "application/x-www-form-urlencoded"))
                }
            }
        } else {
            // Page parameters already forwarded raw by urlParam are not repeated.
            let fromBody = interface.bodyParam && !interface.urlParam ? merged : interface.body
            if !fromBody.isEmpty { bodyQuery = FormEncoding.encode(fromBody) }
        }

        let (cut, asciiAPI) = withoutFragment(interface.api)
        var url = cut
        // The query parts in order (the forwarded pairs with urlParam, then the body of a bodiless request), each
        // appended with its separator: `?` or `&` before the first (as the api's own query needs), `&` between.
        var partCount = 0
        func appendPart(_ part: String) {
            if partCount == 0 {
                if interface.apiURL.queryRange == nil {
                    url += "?"
                } else if asciiAPI
                    ? !(url.utf8.last == UInt8(ascii: "?") || url.utf8.last == UInt8(ascii: "&"))
                    : !url.hasSuffix("?") && !url.hasSuffix("&")
                {
                    url += "&"
                }
            } else {
                url += "&"
            }
            url += part
            partCount += 1
        }
        if interface.urlParam {
            url.reserveCapacity(url.utf8.count + allPairs.reduce(1) { $0 + $1.urlText.utf8.count + 1 } + (bodyQuery?.utf8.count ?? 0))
            for pair in allPairs where forwarded(pair) { appendPart(pair.urlText) }
        }
        if let bodyQuery { appendPart(bodyQuery) }
        for pair in interface.query { appendPart(FormEncoding.encodeComponent(pair.name) + "=" + FormEncoding.encodeComponent(pair.value)) }
        return PlannedRequest(interface: interface, url: url, headers: headers, body: body)
    }

    /// `api` without its `#fragment`, and whether it is all ASCII. Bytes decide for an ASCII api (a `#`, `?` or `&`
    /// byte is then that `Character`); otherwise `Character`s do.
    static func withoutFragment(_ api: String) -> (text: String, isASCII: Bool) {
        var asciiAPI = false
        let cut = api.utf8.withContiguousStorageIfAvailable { bytes -> String? in
            var hash: Int?
            for offset in 0..<bytes.count {
                if bytes[offset] >= 0x80 { return nil }
                if hash == nil && bytes[offset] == UInt8(ascii: "#") { hash = offset }
            }
            asciiAPI = true
            return hash.map { String(decoding: UnsafeBufferPointer(rebasing: bytes[..<$0]), as: UTF8.self) }
        }
        if asciiAPI {
            if case .some(.some(let withoutFragment)) = cut { return (withoutFragment, true) }
            return (api, true)
        }
        if let hash = api.firstIndex(of: "#") { return (String(api[..<hash]), false) }
        return (api, false)
    }

    /// The lowercased names a page may not send: the config body's top-level keys and the decoded names
    /// of the api URL's own query.
    ///
    /// A short array rather than a `Set`: a config fixes a handful of names, and hashing them per request cost more
    /// than comparing.
    static func fixedNames(of interface: Interface) -> [String] {
        var names = interface.body.members.map { nameSkeleton($0.name) }
        if let query = interface.apiURL.queryText, !query.isEmpty {
            for pair in QueryPair.split(query) { names.append(pair.skeleton) }
        }
        names.removeAll { $0.isEmpty }
        return names
    }

    /// What a parameter name can mean to some upstream parser: compatibility-normalised (NFKC), case-folded both
    /// ways (as Java's `equalsIgnoreCase` does, so `ſ` is `s` and `ı` is `i`), and reduced to its letters and
    /// digits (PHP drops leading spaces, turns `.` and spaces into `_` and reads `name[]` as `name`; some
    /// binders ignore `_` and `-`). Two names with the same skeleton are the same name for the fixed-name rule.
    static func nameSkeleton(_ name: String) -> String {
        // ASCII (nearly every name): NFKC changes nothing and case folding is lowercasing. Written straight into
        // the result (a short one stays inline in the `String`, with no allocation); a non-ASCII byte takes the
        // Unicode rules.
        let ascii = name.utf8.withContiguousStorageIfAvailable { bytes -> String? in
            guard ByteText(bytes).isASCII(0..<bytes.count) else { return nil }
            return String(unsafeUninitializedCapacity: bytes.count) { out in
                var writer = ByteWriter(out)
                writeASCIISkeleton(bytes, into: &writer)
                return writer.count
            }
        }
        if case .some(.some(let skeleton)) = ascii { return skeleton }
        return unicodeSkeleton(name)
    }

    /// ``nameSkeleton(_:)`` of an ASCII name, written into `out`: its letters and digits, lowercased.
    @inline(__always)
    static func writeASCIISkeleton(_ name: UnsafeBufferPointer<UInt8>, into out: inout some ByteSink) {
        for byte in name {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): out.put(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): out.put(byte + 32)
            default: continue
            }
        }
    }

    /// ``nameSkeleton(_:)`` by the Unicode rules, for any name.
    static func unicodeSkeleton(_ name: String) -> String {
        let normalized = name.precomposedStringWithCompatibilityMapping.uppercased().lowercased()
        return String(
            String.UnicodeScalarView(normalized.unicodeScalars.filter { $0.properties.isAlphabetic || $0.properties.numericType != nil }))
    }
}

/// One upstream request, fully composed.
public struct PlannedRequest: Sendable {
    /// The interface it was composed from (name, api, method, ttl, timeout, credentials).
    public var interface: Interface
    /// The URL to request: always the api's origin and path.
    public var url: String
    /// The headers to send, in order (static config headers, then `Content-Type` when there is a body).
    /// Credentials are added by the service, never by the planner.
    public var headers: HTTPFields
    /// The exact body text, or `nil` for no body.
    public var body: String?
    /// The requests of the same plan this one needs answers from (positions in `Plan.requests`); empty for an
    /// independent request. Until they arrive, `url`, `headers` and `body` hold the references as written: that
    /// form is what the request is keyed by in the store.
    public var dependencies: [Int] = []
    /// The page's pairs, kept by a dependent request to be composed again.
    var pagePairs: [QueryPair] = []

    public var name: String { interface.name }
    public var method: HTTPMethod { interface.method }

    /// The request as it is sent once the answers it needs are in: every reference replaced by its value from
    /// `values`, then composed as any request is (page parameters, encoding, the api's host and path unchanged).
    public func resolved(with values: [Reference: JSONValue]) throws(DependencyError) -> PlannedRequest {
        var request = Composer.compose(interface: try interface.resolving(values), pairs: pagePairs)
        request.dependencies = dependencies
        return request
    }
}

/// One `name=value` pair of a page query.
struct QueryPair: Sendable {
    /// The pair as it goes into a URL: the original text, with bytes illegal in a query percent-encoded.
    var urlText: String
    /// The decoded name.
    var name: String
    /// The decoded name's ``Composer/nameSkeleton(_:)``, computed once per page rather than once per interface.
    var skeleton: String
    /// The decoded value, typed for JSON.
    var jsonValue: JSONValue

    /// The non-empty `&`-separated pairs of a raw query, in order.
    static func split<Text: StringProtocol>(_ query: Text?) -> [QueryPair] where Text.SubSequence == Substring {
        guard let query, !query.isEmpty else { return [] }
        // ASCII: an `&` or `=` byte is that `Character`, so the pairs are cut and decoded on the bytes.
        let onBytes = query.utf8.withContiguousStorageIfAvailable { bytes -> [QueryPair]? in
            let text = ByteText(bytes)
            guard text.isASCII(0..<bytes.count) else { return nil }
            var pairs: [QueryPair] = []
            pairs.reserveCapacity(bytes.count(where: { $0 == UInt8(ascii: "&") }) + 1)
            var start = 0
            while start < bytes.count {
                let end = text.firstIndex(of: UInt8(ascii: "&"), in: start..<bytes.count) ?? bytes.count
                if start < end { pairs.append(QueryPair(bytes: UnsafeBufferPointer(rebasing: bytes[start..<end]))) }
                start = end + 1
            }
            return pairs
        }
        if case .some(.some(let pairs)) = onBytes { return pairs }
        return query.split(separator: "&", omittingEmptySubsequences: true).map { QueryPair(raw: $0) }
    }

    init(urlText: String, name: String, skeleton: String, jsonValue: JSONValue) {
        self.urlText = urlText
        self.name = name
        self.skeleton = skeleton
        self.jsonValue = jsonValue
    }

    init(raw: Substring) {
        // `;` is encoded (by `sanitizeQueryText`): a parser that splits pairs on it would otherwise read a page value
        // as a new pair.
        urlText = FormEncoding.sanitizeQueryText(raw)
        let rawName: Substring
        let rawValue: Substring
        if let equals = raw.firstIndex(of: "=") {
            rawName = raw[..<equals]
            rawValue = raw[raw.index(after: equals)...]
        } else {
            rawName = raw
            rawValue = ""
        }
        name = FormEncoding.decode(rawName)
        skeleton = Composer.nameSkeleton(name)
        jsonValue = Self.typed(FormEncoding.decode(rawValue))
    }

    /// ``init(raw:)`` for the bytes of one ASCII pair.
    init(bytes raw: UnsafeBufferPointer<UInt8>) {
        urlText = FormEncoding.sanitizeQueryText(raw)
        let rawName: UnsafeBufferPointer<UInt8>
        let rawValue: UnsafeBufferPointer<UInt8>
        if let equals = raw.firstIndex(of: UInt8(ascii: "=")) {
            rawName = UnsafeBufferPointer(rebasing: raw[..<equals])
            rawValue = UnsafeBufferPointer(rebasing: raw[(equals + 1)...])
        } else {
            rawName = raw
            rawValue = UnsafeBufferPointer(rebasing: raw[raw.count...])
        }
        name = FormEncoding.decode(rawName, plusIsSpace: true)
        skeleton = Composer.nameSkeleton(name)
        jsonValue = Self.typed(FormEncoding.decode(rawValue, plusIsSpace: true))
    }

    /// A value captured from a `{name}` path segment (percent-decoded as a path, `+` kept).
    init(capturedName: String, value raw: String) {
        let value = FormEncoding.decode(Substring(raw), plusIsSpace: false)
        name = capturedName
        skeleton = Composer.nameSkeleton(capturedName)
        urlText = FormEncoding.encode(name: capturedName, value: value)
        jsonValue = Self.typed(value)
    }

    /// A canonical integer of at most 15 digits becomes a number; everything else stays a string.
    static func typed(_ value: String) -> JSONValue {
        isCanonicalInteger(value) ? .number(value) : .string(value)
    }

    /// On bytes: a value that passes is all ASCII digits (after an optional `-`), where bytes are `Character`s.
    static func isCanonicalInteger(_ value: String) -> Bool {
        if let answer = value.utf8.withContiguousStorageIfAvailable(isCanonicalInteger) { return answer }
        return Array(value.utf8).withUnsafeBufferPointer(isCanonicalInteger)
    }

    /// ``isCanonicalInteger(_:)-(String)`` of a value's UTF-8.
    static func isCanonicalInteger(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        var start = 0
        let negative = value.first == UInt8(ascii: "-")
        if negative { start = 1 }
        let count = value.count - start
        guard count > 0, count <= 15 else { return false }
        for offset in start..<value.count where value[offset] < UInt8(ascii: "0") || value[offset] > UInt8(ascii: "9") { return false }
        if value[start] == UInt8(ascii: "0") { return count == 1 && !negative }
        return true
    }
}

/// `application/x-www-form-urlencoded`, and the byte-level query rules.
enum FormEncoding {
    /// Bytes that pass through a query untouched (RFC 3986 `query` minus `#`; `%` handled separately).
    static func isQuerySafe(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"), UInt8(ascii: "$"),
            UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"),
            UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"),
            UInt8(ascii: "?"):
            true
        default: false
        }
    }

    static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// The text unchanged where it is legal in a query; any other byte, and `;`, percent-encoded.
    static func sanitizeQueryText(_ text: Substring) -> String {
        withBytes(text) { sanitizeQueryText($0) }
    }

    /// The UTF-8 of `text`, borrowed when it is contiguous (a native string), else copied.
    static func withBytes<Result>(_ text: Substring, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }

    /// ``sanitizeQueryText(_:)-(Substring)`` on bytes.
    static func sanitizeQueryText(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        // Nearly every pair is already clean: then it is returned as it is.
        if bytes.allSatisfy({ isQuerySafe($0) && $0 != UInt8(ascii: ";") }) { return String(decoding: bytes, as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        sanitizeQueryText(bytes, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// ``sanitizeQueryText(_:)-(Substring)`` written into `out`.
    static func sanitizeQueryText(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout some ByteSink) {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, Hex.value(of: bytes[index + 1]) != nil,
                Hex.value(of: bytes[index + 2]) != nil
            {
                out.put(UnsafeBufferPointer(rebasing: bytes[index...index + 2]))
                index += 3
                continue
            }
            if isQuerySafe(byte), byte != UInt8(ascii: ";") {
                out.put(byte)
            } else {
                out.put(UInt8(ascii: "%"))
                out.put(hexDigits[Int(byte >> 4)])
                out.put(hexDigits[Int(byte & 0xF)])
            }
            index += 1
        }
    }

    /// Form-decodes `text`: `+` is a space (unless `plusIsSpace` is false), `%XX` a byte. A malformed `%`
    /// stays literal; bytes that are not valid UTF-8 leave the text as written.
    static func decode(_ text: Substring, plusIsSpace: Bool = true) -> String {
        withBytes(text) { decode($0, plusIsSpace: plusIsSpace) }
    }

    /// ``decode(_:plusIsSpace:)-(Substring,_)`` on bytes (valid UTF-8, as cut from a `String` at ASCII bytes).
    static func decode(_ bytes: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool) -> String {
        guard bytes.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) else {
            return String(decoding: bytes, as: UTF8.self)
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        decode(bytes, plusIsSpace: plusIsSpace, into: &out)
        return String(validating: out, as: UTF8.self) ?? String(decoding: bytes, as: UTF8.self)
    }

    /// The bytes `bytes` form-decode to (`+` a space unless `plusIsSpace` is false, `%XX` a byte, a malformed `%`
    /// literal), written into `out`, whether or not they are UTF-8.
    static func decode(_ bytes: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool, into out: inout some ByteSink) {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, let high = Hex.value(of: bytes[index + 1]),
                let low = Hex.value(of: bytes[index + 2])
            {
                out.put(high << 4 | low)
                index += 3
                continue
            }
            out.put(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index += 1
        }
    }

    /// Form-encodes one component: unreserved bytes pass, space is `+`, everything else `%XX`.
    static func encodeComponent(_ text: String) -> String {
        var out: [UInt8] = []
        for byte in text.utf8 { encodeComponent(byte, into: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    /// ``encodeComponent(_:)-(String)`` of `bytes`, written into `out`.
    static func encodeComponent(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout some ByteSink) {
        for byte in bytes { encodeComponent(byte, into: &out) }
    }

    @inline(__always)
    static func encodeComponent(_ byte: UInt8, into out: inout some ByteSink) {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
            out.put(byte)
        case UInt8(ascii: " "):
            out.put(UInt8(ascii: "+"))
        default:
            out.put(UInt8(ascii: "%"))
            out.put(hexDigits[Int(byte >> 4)])
            out.put(hexDigits[Int(byte & 0xF)])
        }
    }

    static func encode(name: String, value: String) -> String {
        "\(encodeComponent(name))=\(encodeComponent(value))"
    }

    /// A flat object as `a=1&b=x`: strings as text, numbers as written, booleans `true`/`false`, null empty.
    /// Validation guarantees no nested values reach here; should one, it is sent as its JSON text.
    static func encode(_ object: JSONObject) -> String {
        object.members.map { member in
            let value: String
            switch member.value {
            case .string(let text): value = text
            case .number(let literal): value = literal
            case .bool(let flag): value = flag ? "true" : "false"
            case .null: value = ""
            case .array, .object: value = member.value.jsonText
            }
            return encode(name: member.name, value: value)
        }.joined(separator: "&")
    }
}
