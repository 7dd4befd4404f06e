public import HTTPTypes

/// What composing an interface's request needs that does not depend on the page, worked out once at load: composing a
/// request at plan time is then appending the page's parts to these pieces (``Composer`` has the rules).
///
/// A template holds no page input, so it is shared by every plan of its interface (it lives in the interface's
/// storage). ``Composer`` falls back to the general rules where a template cannot say it all: an interface whose
/// fields were changed after load (a dependent request's resolved copy), or a body with a key that has no skeleton
/// (`_`), which a page parameter of that very name replaces in place.
struct RequestTemplate: Sendable {
    /// The api URL without its `#fragment`: every composed URL starts with it.
    let urlPrefix: String
    /// What goes between ``urlPrefix`` and the first query part: `?` when the api has no query, `&` when its query does
    /// not already end in `?` or `&`, else nothing.
    let separator: String
    /// The skeletons (``Composer/nameSkeleton(_:)``) of the names the config fixes, the body's top-level keys and the
    /// api query's names, empty ones left out.
    let fixed: [String]
    /// The `params` allow-list (a few names: comparing them beats hashing).
    let params: [String]?
    /// Whether a body key has an empty skeleton.
    let bodyKeyWithoutSkeleton: Bool
    /// Whether the configured body has no member.
    let bodyIsEmpty: Bool
    /// The compact JSON of the configured body without its closing brace, for a method that carries a JSON body.
    let jsonBodyHead: String
    /// The configured body form-encoded: a form body's start, or the query part of a request without a body.
    let formBody: String
    /// The `query` member's pairs, each `name=value` form-encoded.
    let queryParts: [String]
    /// The headers of a request that carries a body: the config's, then its `Content-Type`.
    let bodyHeaders: HTTPFields

    static let jsonContentType = HTTPFields([HTTPField(name: .contentType, value: "application/json")])
    static let formContentType = HTTPFields([HTTPField(name: .contentType, value: "application/x-www-form-urlencoded")])

    /// The template of an interface with these fields. The body is given by its member names (in order) and, when the
    /// method needs them, its compact JSON text without the closing brace and its value.
    init(
        api: String, apiURL: HTTPURL, method: HTTPMethod, headers: HTTPFields, params: Set<String>?, bodyType: BodyType,
        query: [(name: String, value: String)], bodyIsEmpty: Bool, bodyNames: ((String) -> Void) -> Void, bodyJSONHead: () -> String,
        bodyObject: () -> JSONObject
    ) {
        // The fragment cut and the separator exactly as `Composer.composeByRules` decides them: on bytes for an ASCII
        // api, by `Character`s otherwise.
        var prefix = api
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
            if case .some(.some(let withoutFragment)) = cut { prefix = withoutFragment }
        } else if let hash = prefix.firstIndex(of: "#") {
            prefix = String(prefix[..<hash])
        }
        urlPrefix = prefix
        if apiURL.queryRange == nil {
            separator = "?"
        } else if asciiAPI
            ? !(prefix.utf8.last == UInt8(ascii: "?") || prefix.utf8.last == UInt8(ascii: "&"))
            : !prefix.hasSuffix("?") && !prefix.hasSuffix("&")
        {
            separator = "&"
        } else {
            separator = ""
        }

        var fixed: [String] = []
        var keyWithoutSkeleton = false
        bodyNames { name in
            let skeleton = Composer.nameSkeleton(name)
            if skeleton.isEmpty { keyWithoutSkeleton = true } else { fixed.append(skeleton) }
        }
        if let query = apiURL.queryText, !query.isEmpty {
            for pair in QueryPair.split(query) where !pair.skeleton.isEmpty { fixed.append(pair.skeleton) }
        }
        self.fixed = fixed
        bodyKeyWithoutSkeleton = keyWithoutSkeleton
        self.bodyIsEmpty = bodyIsEmpty
        self.params = params.map { Array($0) }

        if method.carriesBody && bodyType == .json {
            jsonBodyHead = bodyJSONHead()
        } else {
            jsonBodyHead = ""
        }
        formBody = (bodyType == .form || !method.carriesBody) && !bodyIsEmpty ? FormEncoding.encode(bodyObject()) : ""
        queryParts = query.map { FormEncoding.encodeComponent($0.name) + "=" + FormEncoding.encodeComponent($0.value) }
        let contentType = bodyType == .json ? Self.jsonContentType : Self.formContentType
        if headers.isEmpty {
            bodyHeaders = contentType
        } else {
            var all = headers
            all.append(contentsOf: contentType)
            bodyHeaders = all
        }
    }
}

extension Composer {
    /// ``composeByRules(interface:pairs:)`` from the interface's template: the same request, made by appending the
    /// page's parts to the pieces made at load. Which pairs are forwarded is decided once per pair (in a stack buffer),
    /// and the URL and a JSON body are each written into one `String` of exactly their size.
    static func compose(interface: Interface, template: RequestTemplate, pairs: [QueryPair]) -> PlannedRequest {
        pairs.withUnsafeBufferPointer { pairs in
            withUnsafeTemporaryAllocation(of: Bool.self, capacity: pairs.count) { flags in
                for index in pairs.indices {
                    let pair = pairs[index]
                    flags[index] =
                        (template.params.map { $0.contains(pair.name) } ?? true)
                        && (template.fixed.isEmpty || !template.fixed.contains(pair.skeleton))
                }
                return compose(interface: interface, template: template, pairs: pairs, forwarded: UnsafeBufferPointer(flags))
            }
        }
    }

    private static func compose(
        interface: Interface, template: RequestTemplate, pairs: UnsafeBufferPointer<QueryPair>, forwarded: UnsafeBufferPointer<Bool>
    ) -> PlannedRequest {
        /// The forwarded pairs as the merged body has them: each name once, at its first position, with its last value.
        func forEachMerged(_ body: (String, JSONValue) -> Void) {
            for index in pairs.indices where forwarded[index] {
                var repeated = false
                for earlier in 0..<index where forwarded[earlier] && pairs[earlier].name == pairs[index].name {
                    repeated = true
                    break
                }
                if repeated { continue }
                var last = index
                for later in (index + 1)..<pairs.count where forwarded[later] && pairs[later].name == pairs[index].name { last = later }
                body(pairs[index].name, pairs[last].jsonValue)
            }
        }
        /// The configured body form-encoded, then the merged pairs.
        func formText(merging: Bool) -> String {
            var text = template.formBody
            guard merging else { return text }
            var empty = template.bodyIsEmpty
            forEachMerged { name, value in
                if !empty { text += "&" }
                empty = false
                text += FormEncoding.encode(name: name, value: Self.text(of: value))
            }
            return text
        }

        var headers = interface.headers
        var body: String?
        /// The form-encoded body that goes into the query of a request without a body.
        var bodyQuery: String?
        if interface.method.carriesBody {
            if interface.hasBody || interface.bodyParam {
                headers = template.bodyHeaders
                switch interface.bodyType {
                case .json: body = jsonBody(template, merging: interface.bodyParam, forEachMerged)
                case .form: body = formText(merging: interface.bodyParam)
                }
            }
        } else if interface.bodyParam && !interface.urlParam {
            // Page parameters already forwarded raw by urlParam are not repeated.
            let text = formText(merging: true)
            if !text.isEmpty { bodyQuery = text }
        } else if !template.bodyIsEmpty {
            bodyQuery = template.formBody
        }

        let url = joined(template.urlPrefix, first: template.separator) { part in
            if interface.urlParam {
                for index in pairs.indices where forwarded[index] { part(pairs[index].urlText) }
            }
            if let bodyQuery { part(bodyQuery) }
            for text in template.queryParts { part(text) }
        }
        return PlannedRequest(interface: interface, url: url, headers: headers, body: body)
    }

    /// The JSON body: the template's head, the merged pairs, `}`; in one `String` of its exact size when no name or value
    /// needs escaping (nearly always), else through ``JSONWriter``.
    private static func jsonBody(
        _ template: RequestTemplate, merging: Bool, _ forEachMerged: ((String, JSONValue) -> Void) -> Void
    ) -> String {
        guard merging else { return template.jsonBodyHead + "}" }
        var count = template.jsonBodyHead.utf8.count + 1
        var plain = true
        var members = 0
        forEachMerged { name, value in
            members += 1
            count += name.utf8.count + 4  // `,"name":` (the comma counted for every member, one too many at most)
            if JSONWriter.needsEscaping(name) { plain = false }
            switch value {
            case .number(let literal): count += literal.utf8.count
            case .string(let text):
                count += text.utf8.count + 2
                if JSONWriter.needsEscaping(text) { plain = false }
            default: plain = false
            }
        }
        guard plain else {
            var bytes = Array(template.jsonBodyHead.utf8)
            var empty = template.bodyIsEmpty
            forEachMerged { name, value in
                if !empty { bytes.append(UInt8(ascii: ",")) }
                empty = false
                JSONWriter.writeString(name, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                JSONWriter.write(value, into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
            return String(decoding: bytes, as: UTF8.self)
        }
        if members == 0 { return template.jsonBodyHead + "}" }
        return String(unsafeUninitializedCapacity: count) { out in
            var writer = ByteWriter(out)
            writer.put(template.jsonBodyHead)
            var empty = template.bodyIsEmpty
            forEachMerged { name, value in
                if !empty { writer.put(UInt8(ascii: ",")) }
                empty = false
                writer.put(UInt8(ascii: "\""))
                writer.put(name)
                writer.put(UInt8(ascii: "\""))
                writer.put(UInt8(ascii: ":"))
                switch value {
                case .number(let literal): writer.put(literal)
                case .string(let text):
                    writer.put(UInt8(ascii: "\""))
                    writer.put(text)
                    writer.put(UInt8(ascii: "\""))
                default: break
                }
            }
            writer.put(UInt8(ascii: "}"))
            return writer.count
        }
    }

    /// `prefix`, then each part `parts` yields, the first after `first` and the others after `&`, in one `String` of
    /// exactly that size (`prefix` itself when there is no part).
    static func joined(_ prefix: String, first: String, _ parts: ((String) -> Void) -> Void) -> String {
        var count = prefix.utf8.count
        var partCount = 0
        parts { part in
            count += part.utf8.count + (partCount == 0 ? first.utf8.count : 1)
            partCount += 1
        }
        if partCount == 0 { return prefix }
        return String(unsafeUninitializedCapacity: count) { out in
            var writer = ByteWriter(out)
            writer.put(prefix)
            var isFirst = true
            parts { part in
                if isFirst { writer.put(first) } else { writer.put(UInt8(ascii: "&")) }
                isFirst = false
                writer.put(part)
            }
            return writer.count
        }
    }

    /// A page value's text in a form: a string as it is, a number as written.
    static func text(of value: JSONValue) -> String {
        switch value {
        case .string(let text): text
        case .number(let literal): literal
        case .bool(let flag): flag ? "true" : "false"
        case .null: ""
        case .array, .object: value.jsonText
        }
    }

    /// Appends `string` as a JSON string, as ``JSONWriter`` writes it.
    static func appendJSON(string: String, to text: inout String) {
        if !JSONWriter.needsEscaping(string) {
            text += "\""
            text += string
            text += "\""
            return
        }
        var bytes: [UInt8] = []
        JSONWriter.writeString(string, into: &bytes)
        text += String(decoding: bytes, as: UTF8.self)
    }
}

/// Copies bytes into a buffer sized ahead (by a count made of the same pieces).
struct ByteWriter {
    let out: UnsafeMutableBufferPointer<UInt8>
    var count = 0

    init(_ out: UnsafeMutableBufferPointer<UInt8>) {
        self.out = out
    }

    @inline(__always)
    mutating func put(_ byte: UInt8) {
        out[count] = byte
        count += 1
    }

    mutating func put(_ text: String) {
        let copied = text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return true }
            UnsafeMutableRawPointer(out.baseAddress! + count).copyMemory(from: base, byteCount: bytes.count)
            count += bytes.count
            return true
        }
        if copied == nil { for byte in text.utf8 { put(byte) } }
    }
}
