import HTTPTypes

@testable import PrefetchCore

// The config loader as it was before the tape (commit fe55b4c): the strict parser builds a `JSONValue` tree of the
// whole document and this validator walks it. Verbatim but for the names (`ReferenceValidator`,
// `ReferenceInterfaceFields`). The tape-based `ConfigLoader` is held to it (`TapeLoaderEquivalence`, the FuzzTape
// target): the same accept or reject, the same problems and warnings with the same paths and messages, in the same
// order, and the same config.

enum ReferenceConfigLoader {
    /// `ConfigLoader.parse` as it was.
    static func parse(_ bytes: [UInt8], source: String) throws(ConfigError) -> LoadedConfig {
        if bytes.count > ConfigLoader.maximumBytes {
            throw ConfigError(
                source: source,
                problems: [
                    ConfigProblem(path: "", message: "the config is \(bytes.count) bytes; the limit is \(ConfigLoader.maximumBytes) bytes")
                ],
                warnings: []
            )
        }
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes)
        } catch {
            throw ConfigError(source: source, problems: [ConfigProblem(path: "", message: "not valid JSON: \(error)")], warnings: [])
        }
        var validator = ReferenceValidator()
        let config = validator.validateEnvelope(root)
        if let config, validator.problems.isEmpty {
            return LoadedConfig(config: config, warnings: validator.warnings, canary: validator.canary)
        }
        throw ConfigError(source: source, problems: validator.problems, warnings: validator.warnings)
    }
}

/// Walks the JSON tree collecting problems and warnings.
struct ReferenceValidator {
    var problems: [ConfigProblem] = []
    var warnings: [ConfigProblem] = []
    /// The document's candidate, once `validateEnvelope` found a valid one.
    var canary: CanaryConfig?

    // The known keys are short arrays: membership by comparing short strings (a word or two each) is cheaper than
    // hashing every member name of every object.
    static let envelopeKeys: [String] = ["code", "data", "msg", "message", "canary"]
    static let dataKeys: [String] = ["name", "version", "config"]
    // A page's keys (`url`, `interfaces`) and an interface's are dispatched by `switch` in one pass: see
    // `validatePage` and ``ReferenceInterfaceFields``.
    /// Headers a config may not set: the transport owns them, or they carry the page's credentials.
    static let forbiddenHeaders: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
        "proxy-authorization", "proxy-connection", "cookie", "content-type", "expect", "sec-purpose", "traceparent",
        "tracestate",
    ]

    mutating func problem(_ path: String, _ message: String) { problems.append(ConfigProblem(path: path, message: message)) }
    mutating func warning(_ path: String, _ message: String) { warnings.append(ConfigProblem(path: path, message: message)) }

    // The helpers below take the JSON path as an autoclosure: it is only rendered when a problem names it, so a
    // valid config builds none of the tens of thousands of path strings it would otherwise throw away.

    mutating func object(_ value: JSONValue?, _ path: @autoclosure () -> String, required: Bool = true) -> JSONObject? {
        switch value {
        case .object(let object): return object
        case nil:
            if required { problem(path(), "is missing") }
            return nil
        case .some(let other):
            problem(path(), "must be an object, got \(other.kindName)")
            return nil
        }
    }

    mutating func string(_ value: JSONValue?, _ path: @autoclosure () -> String, required: Bool = true) -> String? {
        switch value {
        case .string(let text): return text
        case nil:
            if required { problem(path(), "is missing") }
            return nil
        case .some(let other):
            problem(path(), "must be a string, got \(other.kindName)")
            return nil
        }
    }

    mutating func bool(_ value: JSONValue?, _ path: @autoclosure () -> String) -> Bool {
        switch value {
        case .bool(let flag): return flag
        case nil: return false
        case .some(let other):
            problem(path(), "must be true or false, got \(other.kindName)")
            return false
        }
    }

    mutating func integer(
        _ value: JSONValue?, _ path: @autoclosure () -> String, default fallback: Int, range: ClosedRange<Int>, unit: String
    ) -> Int {
        switch value {
        case nil: return fallback
        case .number(let literal):
            guard let number = Int(literal) else {
                problem(path(), "must be a whole number of \(unit), got \(literal)")
                return fallback
            }
            guard range.contains(number) else {
                problem(path(), "must be between \(range.lowerBound) and \(range.upperBound) \(unit), got \(number)")
                return fallback
            }
            return number
        case .some(let other):
            problem(path(), "must be a number of \(unit), got \(other.kindName)")
            return fallback
        }
    }

    mutating func unknownKeys(_ object: JSONObject, known: [String], _ path: @autoclosure () -> String) {
        for member in object.members where !known.contains(member.name) {
            let name = member.name
            let path = path()
            warning(path.isEmpty ? name : "\(path).\(name)", "unknown key, ignored")
        }
    }

    mutating func validateEnvelope(_ root: JSONValue) -> PrefetchConfig? {
        guard case .object(let envelope) = root else {
            problem("", "the config must be a JSON object with \"code\" and \"data\", got \(root.kindName)")
            return nil
        }
        unknownKeys(envelope, known: Self.envelopeKeys, "")
        switch envelope["code"] {
        case .number("200"): break
        case nil: problem("code", "is missing (expected 200)")
        case .number(let code): problem("code", "is \(code), not 200: the config server reported an error")
        case .some(let other): problem("code", "must be the number 200, got \(other.kindName)")
        }
        guard let data = object(envelope["data"], "data") else { return nil }
        let config = validateData(data)
        if let candidate = envelope["canary"] {
            canary = validateCanary(candidate, active: config)
        }
        guard problems.isEmpty else { return nil }
        return config
    }

    /// Validates a `data` object (`name`, `version`, `config`); problems are located under `data`.
    mutating func validateData(_ data: JSONObject) -> PrefetchConfig? {
        unknownKeys(data, known: Self.dataKeys, "data")
        let name = string(data["name"], "data.name") ?? ""
        var version = ""
        switch data["version"] {
        case .string(let text) where !text.isEmpty: version = text
        case .number(let literal): version = literal
        case nil: problem("data.version", "is missing")
        case .some(let other):
            problem("data.version", "must be a non-empty string, got \(other.kindName == "a string" ? "an empty string" : other.kindName)")
        }
        var pages: [PageEntry] = []
        // The exact pages' keys, computed once here for the duplicate check and handed to the matcher.
        var exactKeys: [PageKey?] = []
        switch data["config"] {
        case .array(let entries):
            if entries.isEmpty { warning("data.config", "is empty: no page will be prefetched") }
            var seen: [PageKey: Int] = [:]
            seen.reserveCapacity(entries.count)
            pages.reserveCapacity(entries.count)
            exactKeys.reserveCapacity(entries.count)
            for (index, entry) in entries.enumerated() {
                let path = ConfigPath(page: index)
                guard let page = validatePage(entry, index: index, path: path) else { continue }
                let key = page.pattern.map { Self.patternKey(page.parsedURL, $0) } ?? PageMatcher.exactKey(page.parsedURL)
                if let first = seen[key] {
                    problem(
                        "\(path).url",
                        "\"\(page.url)\" duplicates data.config[\(first)].url (\"\(pages.first { $0.index == first }!.url)\")")
                    continue
                }
                seen[key] = index
                pages.append(page)
                exactKeys.append(page.pattern == nil ? key : nil)
            }
        case nil: problem("data.config", "is missing")
        case .some(let other): problem("data.config", "must be an array of pages, got \(other.kindName)")
        }
        guard problems.isEmpty else { return nil }
        return PrefetchConfig(name: name, version: version, pages: pages, exactKeys: exactKeys)
    }

    /// Patterns that differ only in capture names are the same page shape.
    /// (No exact path contains `{` or `}`: such a segment is a pattern or an error, so the keys never collide.)
    static func patternKey(_ url: HTTPURL, _ pattern: PathPattern) -> PageKey {
        PageKey(
            url,
            "/"
                + pattern.segments.map { segment -> String in
                    switch segment {
                    case .literal(let text): text
                    case .wildcard: "{}"
                    case .capture(_, let prefix, let suffix): "\(prefix){}\(suffix)"
                    }
                }.joined(separator: "/"))
    }

    mutating func validatePage(_ value: JSONValue, index: Int, path: ConfigPath) -> PageEntry? {
        guard let page = object(value, "\(path)") else { return nil }
        var urlValue: JSONValue?
        var interfacesValue: JSONValue?
        var partnersValue: JSONValue?
        // One pass over the members (`unknownKeys` order: unknown keys are reported as they come).
        for member in page.members {
            switch member.name {
            case "url": urlValue = member.value
            case "interfaces": interfacesValue = member.value
            case "partnerOrigins": partnersValue = member.value
            default: warning("\(path).\(member.name)", "unknown key, ignored")
            }
        }
        var parsed: HTTPURL?
        var pattern: PathPattern?
        let url = string(urlValue, "\(path).url")
        if let url {
            do {
                let candidate = try HTTPURL(parsing: url)
                if candidate.query != nil {
                    problem("\(path).url", "\"\(Redaction.url(url))\" must not have a query: the page's query feeds the requests")
                } else if candidate.fragment != nil {
                    problem("\(path).url", "\"\(Redaction.url(url))\" must not have a #fragment")
                } else {
                    parsed = candidate
                    pattern = try PathPattern.parseByCharacters(candidate.path)
                }
            } catch {
                problem("\(path).url", "\"\(Redaction.url(url))\" \(error.message)")
                parsed = nil
            }
        }
        var interfaces: [Interface] = []
        switch interfacesValue {
        case .array(let items):
            if items.isEmpty { warning("\(path).interfaces", "is empty: nothing will be prefetched for this page") }
            var usedNames = SmallSet<String>()
            // Built in place (an `Interface` is large: moving it beats copying it through tuples).
            interfaces.reserveCapacity(items.count)
            var explicit: [Bool] = []
            var paths: [ConfigPath] = []
            for (position, item) in items.enumerated() {
                let itemPath = ConfigPath(page: index, interface: position)
                if let (interface, isExplicit) = validateInterface(item, path: itemPath) {
                    interfaces.append(interface)
                    explicit.append(isExplicit)
                    paths.append(itemPath)
                }
            }
            // Explicit names first, so a derived name never takes one the author chose.
            for position in interfaces.indices where explicit[position] {
                if !usedNames.insert(interfaces[position].name) {
                    problem("\(paths[position]).name", "\"\(interfaces[position].name)\" is used by another interface of this page")
                }
            }
            var apiMethods = SmallSet<MethodAndAPI>()
            for position in interfaces.indices {
                if !explicit[position] {
                    let derived = interfaces[position].name
                    var candidate = derived
                    var suffix = 2
                    while usedNames.contains(candidate) {
                        candidate = "\(derived)-\(suffix)"
                        suffix += 1
                    }
                    _ = usedNames.insert(candidate)
                    interfaces[position].name = candidate
                }
                if !apiMethods.insert(MethodAndAPI(method: interfaces[position].method, api: interfaces[position].api)) {
                    warning(
                        "\(paths[position])",
                        "another interface of this page has the same method and api; select it by name in data requests")
                }
            }
            validateReferences(of: interfaces)
        case nil: problem("\(path).interfaces", "is missing")
        case .some(let other): problem("\(path).interfaces", "must be an array, got \(other.kindName)")
        }
        let partners = partnersValue.map { validatePartnerOrigins($0, own: parsed?.origin, path: "\(path).partnerOrigins") } ?? []
        guard let url, let parsed else { return nil }
        return PageEntry(
            url: url, parsedURL: parsed, pattern: pattern, interfaces: interfaces, index: index, partnerOrigins: partners)
    }

    /// `partnerOrigins`: an array of origins (`scheme://host[:port]`, http or https), each granted the page's data
    /// from a browser with the user's credentials. `*`, `null`, paths, queries and credentials in the URL are
    /// problems: a grant names each partner.
    mutating func validatePartnerOrigins(_ value: JSONValue, own: String?, path: String) -> [String] {
        guard case .array(let items) = value else {
            problem(path, "must be an array of origins like \"https://partner.example.com\", got \(value.kindName)")
            return []
        }
        var origins: [String] = []
        for (position, item) in items.enumerated() {
            let itemPath = "\(path)[\(position)]"
            guard case .string(let text) = item else {
                problem(itemPath, "must be a string, got \(item.kindName)")
                continue
            }
            guard let parsed = try? HTTPURL(parsing: text), parsed.query == nil, parsed.fragment == nil,
                parsed.path == "/" || parsed.path.isEmpty, !text.contains("@"),
                text.lowercased() == parsed.origin || text.lowercased() == parsed.origin + "/"
            else {
                problem(itemPath, "\"\(text)\" must be an origin like https://partner.example.com (scheme, host, optional port)")
                continue
            }
            if parsed.origin == own {
                warning(itemPath, "is the page's own origin, which needs no grant")
            } else if origins.contains(parsed.origin) {
                warning(itemPath, "is listed twice")
            } else {
                origins.append(parsed.origin)
            }
        }
        return origins
    }

    /// A `${` in a body or query member name: names are the config's, an answer fills values only.
    mutating func referenceInName(_ path: String) {
        problem(path, "a name may not hold a reference: an answer fills values only, never the names the config fixes")
    }

    /// The references in the strings of `value` (recursively), each with the JSON path it was found at; a
    /// malformed one is a problem at its path.
    mutating func collectReferences(in value: JSONValue, at path: String, into references: inout [Reference], paths: inout [String]) {
        switch value {
        case .string(let text) where Template.mayHold(text):
            switch Template.parse(text) {
            case .success(let template):
                for reference in template.references {
                    references.append(reference)
                    paths.append(path)
                }
            case .failure(let reason):
                problem(path, reason.message)
            }
        case .object(let object):
            for member in object.members {
                if Template.mayHold(member.name) { referenceInName("\(path).\(member.name)") }
                collectReferences(in: member.value, at: "\(path).\(member.name)", into: &references, paths: &paths)
            }
        case .array(let items):
            for (position, item) in items.enumerated() {
                collectReferences(in: item, at: "\(path)[\(position)]", into: &references, paths: &paths)
            }
        default:
            break
        }
    }

    /// A page's references name interfaces of the page and form no cycle: a problem at each offending reference.
    mutating func validateReferences(of interfaces: [Interface]) {
        guard interfaces.contains(where: { !$0.references.isEmpty }) else { return }
        var position: [String: Int] = [:]
        for (index, interface) in interfaces.enumerated() { position[interface.name] = index }
        for interface in interfaces {
            for (reference, path) in zip(interface.references, interface.referencePaths) where position[reference.interface] == nil {
                problem(path, "references \"\(reference.interface)\", which is not an interface of this page")
            }
        }
        // Depth-first search for cycles: 0 unvisited, 1 on the current path, 2 done.
        var mark = [Int](repeating: 0, count: interfaces.count)
        var stack: [Int] = []
        var reported = Set<Int>()
        func visit(_ index: Int, _ loader: inout ReferenceValidator) {
            mark[index] = 1
            stack.append(index)
            let interface = interfaces[index]
            for (reference, path) in zip(interface.references, interface.referencePaths) {
                guard let next = position[reference.interface] else { continue }
                if mark[next] == 1 {
                    if reported.insert(index).inserted {
                        let cycle = stack[stack.lastIndex(of: next)!...].map { interfaces[$0].name } + [interfaces[next].name]
                        loader.problem(
                            path,
                            "references \"\(reference.interface)\", which needs this interface: a cycle (\(cycle.joined(separator: " → ")))"
                        )
                    }
                } else if mark[next] == 0 {
                    visit(next, &loader)
                }
            }
            stack.removeLast()
            mark[index] = 2
        }
        for index in interfaces.indices where mark[index] == 0 { visit(index, &self) }
    }

    mutating func validateInterface(_ value: JSONValue, path: ConfigPath) -> (Interface, explicit: Bool)? {
        guard let item = object(value, "\(path)") else { return nil }
        let fields = ReferenceInterfaceFields(item) { name in warning("\(path).\(name)", "unknown key, ignored") }
        let problemCount = problems.count

        let api = string(fields.api, "\(path).api")
        var apiURL: HTTPURL?
        if let api {
            do { apiURL = try HTTPURL(parsing: api) } catch {
                problem("\(path).api", "\"\(Redaction.url(api))\" is not an absolute http(s) URL: \(error.message)")
            }
        }
        var method: HTTPMethod?
        if let text = string(fields.method, "\(path).method") {
            method = HTTPMethod(rawValue: text) ?? HTTPMethod(rawValue: text.uppercased())
            if method == nil {
                let supported = HTTPMethod.allCases.map(\.rawValue).joined(separator: ", ")
                problem("\(path).method", "\(JSONValue.string(text).jsonText) is not a supported method (\(supported))")
            }
        }
        let urlParam = bool(fields.urlParam, "\(path).urlParam")
        let secPurpose = fields.secPurpose == nil ? true : bool(fields.secPurpose, "\(path).secPurpose")
        let bodyParam = bool(fields.bodyParam, "\(path).bodyParam")
        let body = object(fields.body, "\(path).body", required: false) ?? JSONObject()

        var bodyType = BodyType.json
        if let text = string(fields.bodyType, "\(path).bodyType", required: false) {
            if let type = BodyType(rawValue: text) {
                bodyType = type
            } else {
                problem("\(path).bodyType", "\"\(text)\" is not json or form")
            }
        }
        if bodyType == .form || method == .GET || method == .DELETE {
            let why = bodyType == .form ? "a form body" : "a \(method!.rawValue) request (its body goes into the query string)"
            for member in body.members {
                switch member.value {
                case .object, .array:
                    problem(
                        "\(path).body.\(member.name)", "must be a string, number, boolean or null in \(why), got \(member.value.kindName)")
                default: break
                }
            }
        }
        if bodyType == .form && method.map({ !$0.carriesBody }) == true {
            warning("\(path).bodyType", "has no effect on a \(method!.rawValue) request")
        }

        var credentials = CredentialsMode.sameSite
        if let text = string(fields.credentials, "\(path).credentials", required: false) {
            if let mode = CredentialsMode(rawValue: text) {
                credentials = mode
            } else {
                problem("\(path).credentials", "\"\(text)\" is not same-site, omit or include")
            }
        }
        let ttl = integer(fields.ttl, "\(path).ttl", default: Interface.Defaults.ttlSeconds, range: 1...86_400, unit: "seconds")
        let timeout = integer(
            fields.timeout, "\(path).timeout", default: Interface.Defaults.timeoutMilliseconds, range: 1...60_000, unit: "milliseconds")

        var headers = HTTPFields()
        if let object = object(fields.headers, "\(path).headers", required: false) {
            for member in object.members {
                let headerPath = "\(path).headers.\(member.name)"
                guard case .string(let value) = member.value else {
                    problem(headerPath, "must be a string, got \(member.value.kindName)")
                    continue
                }
                let name = member.name.utf8.allSatisfy(Self.isTokenByte) ? HTTPField.Name(member.name) : nil
                if name == nil {
                    problem(headerPath, "is not a valid header name")
                } else if Self.forbiddenHeaders.contains(member.name.lowercased()) {
                    problem(headerPath, "may not be set by the config (the service or the page owns it)")
                }
                if value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) {
                    problem(headerPath, "has a control character in its value")
                }
                if let name { headers.append(HTTPField(name: name, value: value)) }
            }
        }

        var params: Set<String>?
        switch fields.params {
        case nil: break
        case .array(let names):
            var set: Set<String> = []
            for (position, name) in names.enumerated() {
                if case .string(let text) = name {
                    set.insert(text)
                } else {
                    problem("\(path).params[\(position)]", "must be a string, got \(name.kindName)")
                }
            }
            params = set
        case .some(let other): problem("\(path).params", "must be an array of parameter names, got \(other.kindName)")
        }

        var query: [(name: String, value: String)] = []
        if let object = object(fields.query, "\(path).query", required: false) {
            for member in object.members {
                switch member.value {
                case _ where member.name.isEmpty: problem("\(path).query", "has a parameter without a name")
                case .string(let text): query.append((member.name, text))
                case .number(let text): query.append((member.name, text))
                case .bool(let flag): query.append((member.name, flag ? "true" : "false"))
                default: problem("\(path).query.\(member.name)", "must be a string, number or boolean, got \(member.value.kindName)")
                }
            }
        }

        // References to other interfaces' answers: in the body, header values and query values; never in the api.
        var references: [Reference] = []
        var referencePaths: [String] = []
        if let api, Template.mayHold(api) {
            problem("\(path).api", "may not hold a reference: an answer never chooses where a request goes")
        }
        for member in body.members {
            if Template.mayHold(member.name) { referenceInName("\(path).body.\(member.name)") }
            collectReferences(in: member.value, at: "\(path).body.\(member.name)", into: &references, paths: &referencePaths)
        }
        for header in headers where Template.mayHold(header.value) {
            let headerPath = "\(path).headers.\(header.name.rawName)"
            if header.name == .authorization || header.name == .proxyAuthorization {
                problem(headerPath, "may not take a value from another answer: credentials come from the caller only")
            } else {
                collectReferences(in: .string(header.value), at: headerPath, into: &references, paths: &referencePaths)
            }
        }
        for pair in query {
            if Template.mayHold(pair.name) { referenceInName("\(path).query.\(pair.name)") }
            collectReferences(in: .string(pair.value), at: "\(path).query.\(pair.name)", into: &references, paths: &referencePaths)
        }

        var name: String
        var explicit = false
        if let given = string(fields.name, "\(path).name", required: false) {
            name = given
            explicit = true
            if !Self.isValidName(given) {
                problem(
                    "\(path).name",
                    "\"\(given)\" must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit")
            }
        } else {
            name = apiURL.map { Self.derivedName(from: $0) } ?? "interface"
        }

        guard problems.count == problemCount, let api, let apiURL, let method else { return nil }
        let interface = Interface(
            name: name, api: api, apiURL: apiURL, method: method, urlParam: urlParam, bodyParam: bodyParam, body: body,
            hasBody: fields.body != nil, ttlSeconds: ttl, timeoutMilliseconds: timeout, headers: headers, params: params,
            bodyType: bodyType, credentials: credentials, secPurpose: secPurpose, query: query, references: references,
            referencePaths: referencePaths
        )
        return (interface, explicit)
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// 1-64 bytes of ASCII letters, digits, `.`, `_`, `-`, the first a letter or digit.
    static func isValidName(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard let first = utf8.first, utf8.count <= 64, ByteText.isASCIILetter(first) || ByteText.isDigit(first) else { return false }
        return utf8.allSatisfy(isNameByte)
    }

    /// A byte of a derived name: itself when allowed in a name, else `_`.
    @inline(__always)
    static func mapped(_ byte: UInt8) -> UInt8 { isNameByte(byte) ? byte : UInt8(ascii: "_") }

    @inline(__always)
    static func isNameByte(_ byte: UInt8) -> Bool {
        ByteText.isASCIILetter(byte) || ByteText.isDigit(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "-")
    }

    /// The last two path segments of the api, the extension dropped: `/topic/v1/ding/sinkList.json` is
    /// `ding.sinkList`. Characters outside the name alphabet become `_`.
    ///
    /// An ASCII path is read backwards on bytes (two segment ranges, one output buffer); a non-ASCII one takes
    /// ``derivedNameFromCharacters(_:)``, where a non-ASCII scalar becomes one `_`.
    static func derivedName(from api: HTTPURL) -> String {
        var path = api.path
        let onBytes = path.withUTF8 { bytes -> String? in
            let text = ByteText(bytes)
            guard text.isASCII(0..<bytes.count) else { return nil }
            var last: Range<Int>?
            var previous: Range<Int>?
            var segmentEnd = bytes.count
            var offset = bytes.count
            while offset > 0 && previous == nil {
                offset -= 1
                guard bytes[offset] == UInt8(ascii: "/") else { continue }
                if segmentEnd > offset + 1 {
                    if last == nil { last = (offset + 1)..<segmentEnd } else { previous = (offset + 1)..<segmentEnd }
                }
                segmentEnd = offset
            }
            if previous == nil && offset == 0 && segmentEnd > 0 && bytes[0] != UInt8(ascii: "/") {
                if last == nil { last = 0..<segmentEnd } else { previous = 0..<segmentEnd }
            }
            if let range = last, let dot = text.lastIndex(of: UInt8(ascii: "."), in: range), dot != range.lowerBound {
                last = range.lowerBound..<dot
            }
            // Leading `.`, `-` and `_` are dropped (after the mapping, which keeps them), then at most 64 bytes are kept,
            // written straight into the `String`.
            var skip = 0
            let total = (previous.map { $0.count + 1 } ?? 0) + (last?.count ?? 0)
            func byte(at position: Int) -> UInt8 {
                // The name's bytes as if joined: `previous`, `.`, `last`, each mapped.
                var position = position
                if let previous {
                    if position < previous.count { return mapped(bytes[previous.lowerBound + position]) }
                    if position == previous.count { return UInt8(ascii: ".") }
                    position -= previous.count + 1
                }
                return mapped(bytes[last!.lowerBound + position])
            }
            while skip < total {
                let leading = byte(at: skip)
                guard leading == UInt8(ascii: ".") || leading == UInt8(ascii: "-") || leading == UInt8(ascii: "_") else { break }
                skip += 1
            }
            if skip == total { return "root" }
            let count = min(total - skip, 64)
            return String(unsafeUninitializedCapacity: count) { out in
                for offset in 0..<count { out[offset] = byte(at: skip + offset) }
                return count
            }
        }
        return onBytes ?? derivedNameFromCharacters(api.path)
    }

    /// ``derivedName(from:)`` by `Character`s and scalars, for a path with a non-ASCII byte.
    static func derivedNameFromCharacters(_ path: String) -> String {
        var segments = path.split(separator: "/").map(String.init)
        if let last = segments.last, let dot = last.lastIndex(of: "."), dot != last.startIndex {
            segments[segments.count - 1] = String(last[..<dot])
        }
        let joined = segments.suffix(2).joined(separator: ".")
        var name = String(
            String.UnicodeScalarView(
                joined.unicodeScalars.map { scalar in
                    scalar.isASCII
                        && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "." || scalar == "_"
                            || scalar == "-")
                        ? scalar : "_"
                }))
        while let first = name.first, first == "." || first == "-" || first == "_" { name.removeFirst() }
        if name.isEmpty { name = "root" }
        return String(name.prefix(64))
    }
}

/// An interface object's members by key, gathered in one pass instead of one search per key; unknown keys go to
/// `unknown` in member order, as ``ReferenceValidator/unknownKeys(_:known:_:)`` reports them.
struct ReferenceInterfaceFields {
    var api, method, urlParam, bodyParam, body, name, ttl, timeout, headers, params, bodyType, credentials, secPurpose, query: JSONValue?

    init(_ object: JSONObject, unknown: (String) -> Void) {
        for member in object.members {
            switch member.name {
            case "api": api = member.value
            case "method": method = member.value
            case "urlParam": urlParam = member.value
            case "bodyParam": bodyParam = member.value
            case "body": body = member.value
            case "name": name = member.value
            case "ttl": ttl = member.value
            case "timeout": timeout = member.value
            case "headers": headers = member.value
            case "params": params = member.value
            case "bodyType": bodyType = member.value
            case "credentials": credentials = member.value
            case "secPurpose": secPurpose = member.value
            case "query": query = member.value
            default: unknown(member.name)
            }
        }
    }
}

extension ReferenceValidator {
    /// The envelope keys of a `canary` object.
    static let canaryKeys: [String] = ["percent", "data"]

    /// Validates the envelope's `canary` member against the active config (`nil` when `data` was invalid).
    mutating func validateCanary(_ value: JSONValue, active: PrefetchConfig?) -> CanaryConfig? {
        guard let canary = object(value, "canary") else { return nil }
        unknownKeys(canary, known: Self.canaryKeys, "canary")
        var basisPoints: Int?
        switch canary["percent"] {
        case .number(let literal):
            basisPoints = CanaryConfig.basisPoints(fromLiteral: literal)
            if basisPoints == nil {
                problem("canary.percent", "must be between 0 and 100 with at most two decimals, got \(literal)")
            }
        case nil: problem("canary.percent", "is missing (the share of users, 0-100)")
        case .some(let other): problem("canary.percent", "must be a number between 0 and 100, got \(other.kindName)")
        }
        guard let data = object(canary["data"], "canary.data") else { return nil }
        // The candidate goes through the very rules `data` does, on a validator of its own, so its paths can be
        // moved under `canary.` without touching the active config's.
        var inner = ReferenceValidator()
        let config = inner.validateData(data)
        // A duplicate page names the entry it duplicates: that one is the candidate's too.
        problems += inner.problems.map {
            ConfigProblem(
                path: "canary." + $0.path,
                message: $0.message.replacing("duplicates data.config[", with: "duplicates canary.data.config["))
        }
        warnings += inner.warnings.map { ConfigProblem(path: "canary." + $0.path, message: $0.message) }
        if let config, let active, config.version == active.version {
            problem(
                "canary.data.version",
                "is \(JSONValue.string(config.version).jsonText), the same as data.version: a candidate must be another version")
            return nil
        }
        guard let config, let basisPoints else { return nil }
        return CanaryConfig(config: config, basisPoints: basisPoints)
    }
}
