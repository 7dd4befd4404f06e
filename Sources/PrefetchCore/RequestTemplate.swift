import HTTPTypes

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
    /// not already end in `?` or `&`, else nothing (0).
    let separator: UInt8
    /// Every text the template holds, in one buffer: one allocation per interface, none for an interface with no body,
    /// allow-list or `query`. In order: ``jsonBodyHead``, ``formBody``, then the lists ``fixed``, ``params`` and
    /// ``queryParts`` (``TextEntries``: each entry its length, then its bytes).
    let text: [UInt8]
    private let headEnd: UInt32
    private let formEnd: UInt32
    private let fixedEnd: UInt32
    private let paramsEnd: UInt32
    private let hasParams: Bool
    /// Whether every name in ``fixed`` and ``params`` is ASCII: then a page name is compared with them as bytes.
    let comparesAsBytes: Bool
    /// Whether a body key has an empty skeleton.
    let bodyKeyWithoutSkeleton: Bool
    /// Whether the configured body has no member.
    let bodyIsEmpty: Bool
    /// The headers of a request that carries a body: the config's, then its `Content-Type`.
    let bodyHeaders: HTTPFields

    /// The compact JSON of the configured body without its closing brace, for a method that carries a JSON body.
    var jsonBodyHead: Range<Int> { 0..<Int(headEnd) }
    /// The configured body form-encoded: a form body's start, or the query part of a request without a body.
    var formBody: Range<Int> { Int(headEnd)..<Int(formEnd) }
    /// The skeletons (``Composer/nameSkeleton(_:)``) of the names the config fixes, the body's top-level keys and the
    /// api query's names, empty ones left out.
    var fixed: Range<Int> { Int(formEnd)..<Int(fixedEnd) }
    /// The `params` allow-list (a few names: comparing them beats hashing).
    var params: Range<Int>? { hasParams ? Int(fixedEnd)..<Int(paramsEnd) : nil }
    /// The `query` member's pairs, each `name=value` form-encoded.
    var queryParts: Range<Int> { Int(paramsEnd)..<text.count }

    static let jsonContentType = HTTPFields([HTTPField(name: .contentType, value: "application/json")])
    static let formContentType = HTTPFields([HTTPField(name: .contentType, value: "application/x-www-form-urlencoded")])

    /// The template of an interface with these fields. The body is given by its member names (in order) and, when the
    /// method needs them, its compact JSON text without the closing brace (appended by `bodyJSONHead`) and its value.
    /// The texts are written into `scratch` (emptied first, its capacity kept for the next template), then copied into
    /// ``text`` at their size.
    init(
        api: String, apiURL: HTTPURL, method: HTTPMethod, headers: HTTPFields, params: Set<String>?, bodyType: BodyType,
        query: [(name: String, value: String)], bodyIsEmpty: Bool, bodyNames: ((NameText) -> Void) -> Void,
        bodyJSONHead: (inout [UInt8]) -> Void, bodyObject: () -> JSONObject, scratch text: inout [UInt8]
    ) {
        // The fragment cut and the separator exactly as `Composer.composeByRules` decides them: on bytes for an ASCII
        // api, by `Character`s otherwise.
        var prefix = api
        var asciiAPI = false
        if apiURL.textIsASCII && apiURL.text == api {
            // The api is the parsed text and all ASCII (the loader's case): its first `#` is where the parser put the
            // fragment, so there is nothing to scan.
            asciiAPI = true
            if let fragment = apiURL.fragmentRange {
                prefix = String(api[..<api.utf8.index(api.startIndex, offsetBy: fragment.lowerBound - 1)])
            }
        } else {
            (prefix, asciiAPI) = Composer.withoutFragment(api)
        }
        urlPrefix = prefix
        if apiURL.queryRange == nil {
            separator = UInt8(ascii: "?")
        } else if asciiAPI
            ? !(prefix.utf8.last == UInt8(ascii: "?") || prefix.utf8.last == UInt8(ascii: "&"))
            : !prefix.hasSuffix("?") && !prefix.hasSuffix("&")
        {
            separator = UInt8(ascii: "&")
        } else {
            separator = 0
        }

        text.removeAll(keepingCapacity: true)
        if method.carriesBody && bodyType == .json { bodyJSONHead(&text) }
        headEnd = UInt32(text.count)
        if (bodyType == .form || !method.carriesBody) && !bodyIsEmpty { text.put(FormEncoding.encode(bodyObject())) }
        formEnd = UInt32(text.count)
        var keyWithoutSkeleton = false
        var ascii = true
        bodyNames { name in
            let entry: Range<Int>
            switch name {
            case .ascii(let bytes):
                entry = TextEntries.append(to: &text, maximum: bytes.count) { Composer.writeASCIISkeleton(bytes, into: &$0) }
            case .text(let name): entry = TextEntries.append(Composer.nameSkeleton(name), to: &text)
            }
            if entry.isEmpty {
                keyWithoutSkeleton = true
                text.removeLast(4)
            } else {
                ascii = TextEntries.isASCII(entry, of: text) && ascii
            }
        }
        if let query = apiURL.queryText, !query.isEmpty {
            for pair in QueryPair.split(query) where !pair.skeleton.isEmpty {
                ascii = TextEntries.isASCII(TextEntries.append(pair.skeleton, to: &text), of: text) && ascii
            }
        }
        fixedEnd = UInt32(text.count)
        for name in params ?? [] { ascii = TextEntries.isASCII(TextEntries.append(name, to: &text), of: text) && ascii }
        hasParams = params != nil
        paramsEnd = UInt32(text.count)
        for pair in query {
            TextEntries.append(FormEncoding.encodeComponent(pair.name) + "=" + FormEncoding.encodeComponent(pair.value), to: &text)
        }
        self.text =
            text.isEmpty
            ? []
            : [UInt8](unsafeUninitializedCapacity: text.count) { copy, count in
                count = copy.initialize(fromContentsOf: text)
            }
        comparesAsBytes = ascii
        bodyKeyWithoutSkeleton = keyWithoutSkeleton
        self.bodyIsEmpty = bodyIsEmpty
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

/// The entries of a list in a template's ``RequestTemplate/text``: each its length (four bytes), then its bytes.
struct TextEntries: Sequence, IteratorProtocol {
    let text: UnsafeBufferPointer<UInt8>
    var offset: Int
    let end: Int

    init(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
        self.text = text
        offset = range.lowerBound
        end = range.upperBound
    }

    mutating func next() -> UnsafeBufferPointer<UInt8>? {
        guard offset < end else { return nil }
        let count = Int(UnsafeRawBufferPointer(text).loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        defer { offset += 4 + count }
        return UnsafeBufferPointer(rebasing: text[(offset + 4)..<(offset + 4 + count)])
    }

    /// Appends an entry of at most `maximum` bytes, written by `write`; its bytes' range.
    @discardableResult
    static func append(to text: inout [UInt8], maximum: Int, _ write: (inout ByteWriter) -> Void) -> Range<Int> {
        // Written on the stack, then appended in one copy.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4 + maximum) { entry in
            var writer = ByteWriter(UnsafeMutableBufferPointer(rebasing: entry[4...]))
            write(&writer)
            UnsafeMutableRawPointer(entry.baseAddress!).storeBytes(of: UInt32(writer.count), as: UInt32.self)
            let start = text.count + 4
            text.append(contentsOf: UnsafeBufferPointer(rebasing: entry[..<(4 + writer.count)]))
            return start..<text.count
        }
    }

    /// Appends `entry`; its bytes' range.
    @discardableResult
    static func append(_ entry: String, to text: inout [UInt8]) -> Range<Int> {
        append(to: &text, maximum: entry.utf8.count) { $0.put(entry) }
    }

    /// Whether the bytes of `range` of `text` are ASCII.
    static func isASCII(_ range: Range<Int>, of text: [UInt8]) -> Bool {
        text.withUnsafeBufferPointer { ByteText($0).isASCII(range) }
    }
}

/// A name as the loader hands it over: the bytes of a plain ASCII name (no `String` made), or the name.
enum NameText {
    case ascii(UnsafeBufferPointer<UInt8>)
    case text(String)
}

extension Composer {
    /// ``composeByRules(interface:pairs:)`` from the interface's template: the same request, made by appending the
    /// page's parts to the pieces made at load. `nil` where the template cannot say it: a page name or value a JSON body
    /// must escape, or an allow-list or fixed name that is not ASCII (the table compares names as bytes).
    static func compose(interface: Interface, template: RequestTemplate, parameters: PageParameters) -> PlannedRequest? {
        guard template.comparesAsBytes else { return nil }
        return template.text.withUnsafeBufferPointer { text in
            withUnsafeTemporaryAllocation(of: Bool.self, capacity: max(parameters.count, 1)) { flags in
                // Which pairs are forwarded is decided once per pair.
                for index in 0..<parameters.count {
                    let pair = parameters.pairs[index]
                    let name = parameters.bytes(pair.name)
                    let skeleton = parameters.bytes(pair.skeleton)
                    flags[index] =
                        (template.params.map { TextEntries(text, $0).contains { ByteText($0).equals(0..<$0.count, name) } } ?? true)
                        && !TextEntries(text, template.fixed).contains { ByteText($0).equals(0..<$0.count, skeleton) }
                }
                return TemplateComposition(
                    interface: interface, template: template, text: text, parameters: parameters,
                    forwarded: UnsafeBufferPointer(rebasing: flags[..<parameters.count])
                ).request()
            }
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

/// One request composed from a template and a page's parameters: what ``Composer/composeByRules(interface:pairs:)``
/// composes, each text written into one `String` of exactly its size (counted first by the same code).
struct TemplateComposition {
    let interface: Interface
    let template: RequestTemplate
    /// The template's ``RequestTemplate/text``.
    let text: UnsafeBufferPointer<UInt8>
    let parameters: PageParameters
    /// Whether each pair is forwarded (allowed by `params`, its skeleton not fixed by the config).
    let forwarded: UnsafeBufferPointer<Bool>

    /// What goes into the query of a request without a body, after the forwarded pairs.
    enum BodyQuery {
        case none
        /// The configured body and the merged pairs, form-encoded.
        case merged
        /// The configured body, form-encoded (the template's).
        case configured
    }

    func request() -> PlannedRequest? {
        var headers = interface.headers
        var body: String?
        var bodyQuery = BodyQuery.none
        if interface.method.carriesBody {
            if interface.hasBody || interface.bodyParam {
                headers = template.bodyHeaders
                switch interface.bodyType {
                case .json:
                    guard let json = jsonBody() else { return nil }
                    body = json
                case .form:
                    body = Self.string({ writeForm(into: &$0) }, { writeForm(into: &$0) })
                }
            }
        } else if interface.bodyParam && !interface.urlParam {
            // Page parameters already forwarded raw by urlParam are not repeated.
            var count = ByteCount()
            writeForm(into: &count)
            if count.count > 0 { bodyQuery = .merged }
        } else if !template.bodyIsEmpty {
            bodyQuery = .configured
        }
        let hasParts =
            (interface.urlParam && forwarded.contains(true)) || { if case .none = bodyQuery { false } else { true } }()
            || !template.queryParts.isEmpty
        let url = hasParts ? Self.string({ writeURL(bodyQuery, into: &$0) }, { writeURL(bodyQuery, into: &$0) }) : template.urlPrefix
        return PlannedRequest(interface: interface, url: url, headers: headers, body: body)
    }

    /// The forwarded pairs as the merged body has them: each name once, at its first position, with its last value.
    func forEachMerged(_ body: (_ name: Range<Int>, _ last: PageParameters.Pair) -> Void) {
        for index in 0..<parameters.count where forwarded[index] {
            var repeated = false
            for earlier in 0..<index where forwarded[earlier] && parameters.sameName(earlier, index) {
                repeated = true
                break
            }
            if repeated { continue }
            var last = index
            for later in (index + 1)..<parameters.count where forwarded[later] && parameters.sameName(later, index) { last = later }
            body(parameters.pairs[index].name, parameters.pairs[last])
        }
    }

    /// The merged pairs written by `member`, each after `separator` but a first one in an empty body.
    func writeMerged<Sink: ByteSink>(
        after separator: UInt8, into out: inout Sink, _ member: (inout Sink, Range<Int>, PageParameters.Pair) -> Void
    ) {
        var empty = template.bodyIsEmpty
        forEachMerged { name, pair in
            if !empty { out.put(separator) }
            empty = false
            member(&out, name, pair)
        }
    }

    /// The configured body form-encoded, then the merged pairs.
    func writeForm(into out: inout some ByteSink) {
        out.put(bytes(template.formBody))
        guard interface.bodyParam else { return }
        writeMerged(after: UInt8(ascii: "&"), into: &out) { out, name, pair in
            FormEncoding.encodeComponent(parameters.bytes(name), into: &out)
            out.put(UInt8(ascii: "="))
            FormEncoding.encodeComponent(parameters.bytes(pair.value), into: &out)
        }
    }

    /// The JSON body: the template's head, the merged pairs, `}`; `nil` when a name or value needs escaping.
    func jsonBody() -> String? {
        var plain = true
        if interface.bodyParam {
            forEachMerged { name, pair in
                if JSONWriter.needsEscaping(parameters.bytes(name))
                    || (!pair.isNumber && JSONWriter.needsEscaping(parameters.bytes(pair.value)))
                {
                    plain = false
                }
            }
        }
        guard plain else { return nil }
        return Self.string({ writeJSONBody(into: &$0) }, { writeJSONBody(into: &$0) })
    }

    /// The template's head, the merged pairs when the interface merges them, `}`.
    func writeJSONBody(into out: inout some ByteSink) {
        out.put(bytes(template.jsonBodyHead))
        if interface.bodyParam {
            writeMerged(after: UInt8(ascii: ","), into: &out) { out, name, pair in
                out.put(UInt8(ascii: "\""))
                out.put(parameters.bytes(name))
                out.put(UInt8(ascii: "\""))
                out.put(UInt8(ascii: ":"))
                if pair.isNumber {
                    out.put(parameters.bytes(pair.value))
                } else {
                    out.put(UInt8(ascii: "\""))
                    out.put(parameters.bytes(pair.value))
                    out.put(UInt8(ascii: "\""))
                }
            }
        }
        out.put(UInt8(ascii: "}"))
    }

    /// The bytes of `range` of the template's text.
    @inline(__always)
    func bytes(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: text[range]) }

    /// The URL: the prefix, then the query parts in order (the forwarded pairs with urlParam, the body of a bodiless
    /// request, the `query` member's pairs), the first after the template's separator and the others after `&`.
    func writeURL(_ bodyQuery: BodyQuery, into out: inout some ByteSink) {
        out.put(template.urlPrefix)
        var first = true
        func separate() {
            if !first {
                out.put(UInt8(ascii: "&"))
            } else if template.separator != 0 {
                out.put(template.separator)
            }
            first = false
        }
        if interface.urlParam {
            for index in 0..<parameters.count where forwarded[index] {
                separate()
                out.put(parameters.bytes(parameters.pairs[index].url))
            }
        }
        switch bodyQuery {
        case .none: break
        case .merged:
            separate()
            writeForm(into: &out)
        case .configured:
            separate()
            out.put(bytes(template.formBody))
        }
        for part in TextEntries(text, template.queryParts) {
            separate()
            out.put(part)
        }
    }

    /// What `write` writes, in one `String` of exactly its size (`count` sizes it, with the same code).
    static func string(_ count: (inout ByteCount) -> Void, _ write: (inout ByteWriter) -> Void) -> String {
        var counter = ByteCount()
        count(&counter)
        return String(unsafeUninitializedCapacity: counter.count) { out in
            var writer = ByteWriter(out)
            write(&writer)
            return writer.count
        }
    }
}

/// Copies bytes into a buffer sized ahead (by a count made of the same pieces).
struct ByteWriter: ByteSink {
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

    @inline(__always)
    mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        UnsafeMutableRawPointer(out.baseAddress! + count).copyMemory(from: base, byteCount: bytes.count)
        count += bytes.count
    }
}

extension String {
    /// Whether every UTF-8 byte is ASCII.
    var isPlainASCII: Bool {
        utf8.withContiguousStorageIfAvailable { ByteText($0).isASCII(0..<$0.count) } ?? utf8.allSatisfy { $0 < 0x80 }
    }
}
