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
    /// method needs them, its compact JSON text and its value.
    init(
        api: String, apiURL: HTTPURL, method: HTTPMethod, headers: HTTPFields, params: Set<String>?, bodyType: BodyType,
        query: [(name: String, value: String)], bodyIsEmpty: Bool, bodyNames: ((String) -> Void) -> Void, bodyJSON: () -> String,
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
        if apiURL.query == nil {
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
        if let query = apiURL.query, !query.isEmpty {
            for pair in QueryPair.split(query) where !pair.skeleton.isEmpty { fixed.append(pair.skeleton) }
        }
        self.fixed = fixed
        bodyKeyWithoutSkeleton = keyWithoutSkeleton
        self.bodyIsEmpty = bodyIsEmpty
        self.params = params.map { Array($0) }

        if method.carriesBody && bodyType == .json {
            var json = bodyJSON()
            json.removeLast()
            jsonBodyHead = json
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
    /// page's parts to the pieces made at load.
    static func compose(interface: Interface, template: RequestTemplate, pairs: [QueryPair]) -> PlannedRequest {
        func forwarded(_ pair: QueryPair) -> Bool {
            if let params = template.params, !params.contains(pair.name) { return false }
            return template.fixed.isEmpty || !template.fixed.contains(pair.skeleton)
        }
        /// The forwarded pairs as the merged body has them: each name once, at its first position, with its last value.
        func forEachMerged(_ body: (String, JSONValue) -> Void) {
            for index in pairs.indices where forwarded(pairs[index]) {
                let name = pairs[index].name
                var repeated = false
                for earlier in 0..<index where pairs[earlier].name == name && forwarded(pairs[earlier]) {
                    repeated = true
                    break
                }
                if repeated { continue }
                var value = pairs[index].jsonValue
                for later in (index + 1)..<pairs.count where pairs[later].name == name && forwarded(pairs[later]) {
                    value = pairs[later].jsonValue
                }
                body(name, value)
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
                case .json:
                    var text = template.jsonBodyHead
                    if interface.bodyParam {
                        var empty = template.bodyIsEmpty
                        forEachMerged { name, value in
                            if !empty { text += "," }
                            empty = false
                            Self.appendJSON(string: name, to: &text)
                            text += ":"
                            if case .number(let literal) = value {
                                text += literal
                            } else if case .string(let string) = value {
                                Self.appendJSON(string: string, to: &text)
                            } else {
                                text += value.jsonText
                            }
                        }
                    }
                    text += "}"
                    body = text
                case .form:
                    body = formText(merging: interface.bodyParam)
                }
            }
        } else if interface.bodyParam && !interface.urlParam {
            // Page parameters already forwarded raw by urlParam are not repeated.
            let text = formText(merging: true)
            if !text.isEmpty { bodyQuery = text }
        } else if !template.bodyIsEmpty {
            bodyQuery = template.formBody
        }

        var url = template.urlPrefix
        var first = true
        func appendPart(_ part: String) {
            url += first ? template.separator : "&"
            first = false
            url += part
        }
        if interface.urlParam {
            var capacity = url.utf8.count + (bodyQuery?.utf8.count ?? 0) + 1
            for pair in pairs where forwarded(pair) { capacity += pair.urlText.utf8.count + 1 }
            if capacity > url.utf8.count + 1 { url.reserveCapacity(capacity) }
            for pair in pairs where forwarded(pair) { appendPart(pair.urlText) }
        }
        if let bodyQuery { appendPart(bodyQuery) }
        for part in template.queryParts { appendPart(part) }
        return PlannedRequest(interface: interface, url: url, headers: headers, body: body)
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
