import HTTPTypes

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One thing wrong (or worth a warning) in a config, located by its JSON path.
public struct ConfigProblem: Sendable, Hashable, CustomStringConvertible {
    /// Where, e.g. `data.config[1].interfaces[0].method`.
    public var path: String
    /// What is wrong, naming the offending value.
    public var message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// A config that could not be loaded: every problem found, not just the first.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    /// What was being loaded (a file path or a URL).
    public var source: String
    /// Every problem, in document order. Never empty.
    public var problems: [ConfigProblem]
    /// Warnings found along the way.
    public var warnings: [ConfigProblem]

    public var description: String {
        "invalid config \(source): " + problems.map(\.description).joined(separator: "; ")
    }
}

/// A validated config together with the warnings it produced.
public struct LoadedConfig: Sendable {
    public var config: PrefetchConfig
    /// Unknown keys and other things that do not stop the config from loading.
    public var warnings: [ConfigProblem]
    /// The candidate the document carries beside ``config`` (its `canary` member), validated under the same rules.
    public var canary: CanaryConfig? = nil
}

/// Reads and validates prefetch configs.
///
/// Validation reports every problem at once, each with its JSON path. Unknown keys are warnings, never
/// failures, so configs written for newer builds still load in older ones.
public enum ConfigLoader {
    /// The largest config accepted, in bytes (16 MiB). A 10,000-page config is well under 8 MiB.
    public static let maximumBytes = 16 * 1024 * 1024

    /// Reads `path` and validates it.
    public static func load(path: String) throws(ConfigError) -> LoadedConfig {
        let bytes: [UInt8]
        do {
            bytes = try readFile(path)
        } catch {
            throw ConfigError(source: path, problems: [ConfigProblem(path: "", message: error.message)], warnings: [])
        }
        return try parse(bytes, source: path)
    }

    /// Validates config text already in memory.
    public static func parse(_ bytes: [UInt8], source: String) throws(ConfigError) -> LoadedConfig {
        if bytes.count > maximumBytes {
            throw ConfigError(
                source: source,
                problems: [ConfigProblem(path: "", message: "the config is \(bytes.count) bytes; the limit is \(maximumBytes) bytes")],
                warnings: []
            )
        }
        let tape: JSONTape
        do {
            tape = try JSONTape.build(bytes)
        } catch {
            throw ConfigError(source: source, problems: [ConfigProblem(path: "", message: "not valid JSON: \(error)")], warnings: [])
        }
        let outcome = tape.read { reader in
            var validator = Validator(reader: reader, document: bytes)
            let config = validator.validateEnvelope(0)
            return (config, validator)
        }
        let validator = outcome.1
        if let config = outcome.0, validator.problems.isEmpty {
            return LoadedConfig(config: config, warnings: validator.warnings, canary: validator.canary)
        }
        throw ConfigError(source: source, problems: validator.problems, warnings: validator.warnings)
    }

    struct ReadError: Error { var message: String }

    /// The file at `path`, checked by `fstat` on the descriptor it is read from (no `FileManager`: its attributes look
    /// the owner's user and group names up, which reads `/etc/passwd` and `/etc/group` on every load).
    static func readFile(_ path: String) throws(ReadError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        var info = stat()
        guard descriptor >= 0 else {
            // An existing file that cannot be opened (permissions) is "cannot read"; a missing one is "no such file".
            if stat(path, &info) == 0 { throw ReadError(message: "cannot read the config file \(path)") }
            throw ReadError(message: "cannot read the config file \(path): no such file or not readable")
        }
        defer { close(descriptor) }
        guard fstat(descriptor, &info) == 0 else {
            throw ReadError(message: "cannot read the config file \(path): no such file or not readable")
        }
        if (info.st_mode & S_IFMT) == S_IFDIR { throw ReadError(message: "the config path \(path) is a directory") }
        let size = Int(info.st_size)
        if size > maximumBytes {
            throw ReadError(message: "the config file \(path) is \(size) bytes; the limit is \(maximumBytes) bytes")
        }
        guard let bytes = readContents(descriptor, expectedSize: size) else {
            throw ReadError(message: "cannot read the config file \(path)")
        }
        return bytes
    }

    /// The whole file, read straight into the array the config keeps (no `Data` and no second copy); `expectedSize`
    /// sizes it, and a file that grew meanwhile is read to its end (at most one byte past ``maximumBytes``).
    static func readContents(_ descriptor: Int32, expectedSize: Int) -> [UInt8]? {
        var failed = false
        func readSome(_ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
            while true {
                let got = read(descriptor, buffer, count)
                if got >= 0 { return got }
                if errno != EINTR {
                    failed = true
                    return 0
                }
            }
        }
        var bytes = [UInt8](unsafeUninitializedCapacity: expectedSize) { buffer, count in
            while count < expectedSize {
                let got = readSome(buffer.baseAddress! + count, expectedSize - count)
                if got == 0 { break }
                count += got
            }
        }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while !failed && bytes.count <= maximumBytes {
            let got = chunk.withUnsafeMutableBytes { readSome($0.baseAddress!, $0.count) }
            if got == 0 { break }
            bytes += chunk[..<got]
        }
        return failed ? nil : bytes
    }
}

/// Walks the tape of a config document collecting problems and warnings, and builds the config.
///
/// No `JSONValue` tree is made: values are tape indices, strings are made from the bytes when a rule reads them, and
/// an interface's `body` stays a range of the document (its request template is written from the tape at load).
struct Validator {
    /// The document's tape.
    let reader: TapeReader
    /// The document's bytes, retained by the interfaces whose bodies are ranges of it.
    let document: [UInt8]
    var problems: [ConfigProblem] = []
    var warnings: [ConfigProblem] = []
    /// The document's candidate, once `validateEnvelope` found a valid one.
    var canary: CanaryConfig?
    /// What `validatePage` needs per page, kept empty between pages.
    var pageScratch = PageScratch()
    /// The buffer an interface's template texts are written into before they are copied at their size.
    var compactScratch: [UInt8] = []

    init(reader: TapeReader, document: [UInt8]) {
        self.reader = reader
        self.document = document
    }

    // The known keys are short arrays: membership by comparing a few bytes is cheaper than hashing every member name.
    static let envelopeKeys: [StaticString] = ["code", "data", "msg", "message", "canary"]
    static let dataKeys: [StaticString] = ["name", "version", "config"]
    // A page's keys (`url`, `interfaces`) and an interface's are dispatched in one pass: see `validatePage` and
    // ``InterfaceFields``.
    /// Each method by its name, to match a config's `method` on its bytes.
    static let methodNames: [(text: StaticString, method: HTTPMethod)] = [
        ("GET", .GET), ("POST", .POST), ("PUT", .PUT), ("PATCH", .PATCH), ("DELETE", .DELETE),
    ]
    /// Headers a config may not set: the transport owns them, or they carry the page's credentials.
    static let forbiddenHeaders: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
        "proxy-authorization", "proxy-connection", "cookie", "content-type", "expect", "sec-purpose", "traceparent",
        "tracestate",
    ]

    /// One empty header list every interface without headers shares (an `HTTPFields` allocates its storage).
    static let noHeaders = HTTPFields()

    mutating func problem(_ path: String, _ message: String) { problems.append(ConfigProblem(path: path, message: message)) }
    mutating func warning(_ path: String, _ message: String) { warnings.append(ConfigProblem(path: path, message: message)) }

    // The helpers below take the JSON path as an autoclosure: it is only rendered when a problem names it, so a
    // valid config builds none of the tens of thousands of path strings it would otherwise throw away.

    mutating func object(_ value: Int?, _ path: @autoclosure () -> String, required: Bool = true) -> Int? {
        guard let value else {
            if required { problem(path(), "is missing") }
            return nil
        }
        guard reader.kind(value) == .object else {
            problem(path(), "must be an object, got \(reader.kindName(value))")
            return nil
        }
        return value
    }

    mutating func string(_ value: Int?, _ path: @autoclosure () -> String, required: Bool = true) -> String? {
        guard let value else {
            if required { problem(path(), "is missing") }
            return nil
        }
        guard reader.kind(value) == .string else {
            problem(path(), "must be a string, got \(reader.kindName(value))")
            return nil
        }
        return reader.string(value)
    }

    mutating func bool(_ value: Int?, _ path: @autoclosure () -> String) -> Bool {
        guard let value else { return false }
        switch reader.kind(value) {
        case .trueValue: return true
        case .falseValue: return false
        default:
            problem(path(), "must be true or false, got \(reader.kindName(value))")
            return false
        }
    }

    mutating func integer(
        _ value: Int?, _ path: @autoclosure () -> String, default fallback: Int, range: ClosedRange<Int>, unit: String
    ) -> Int {
        guard let value else { return fallback }
        guard reader.kind(value) == .number else {
            problem(path(), "must be a number of \(unit), got \(reader.kindName(value))")
            return fallback
        }
        let literal = reader.number(value)
        guard let number = Int(literal) else {
            problem(path(), "must be a whole number of \(unit), got \(literal)")
            return fallback
        }
        guard range.contains(number) else {
            problem(path(), "must be between \(range.lowerBound) and \(range.upperBound) \(unit), got \(number)")
            return fallback
        }
        return number
    }

    /// Whether the key at `key` is one of `known`, as `String`s compare.
    func isKnown(_ key: Int, _ known: [StaticString]) -> Bool {
        known.contains { reader.string(key, is: $0) }
    }

    mutating func unknownKeys(_ object: Int, known: [StaticString], _ path: @autoclosure () -> String) {
        for (key, _) in reader.members(object) where !isKnown(key, known) {
            let name = reader.string(key)
            let path = path()
            warning(path.isEmpty ? name : "\(path).\(name)", "unknown key, ignored")
        }
    }

    mutating func validateEnvelope(_ root: Int) -> PrefetchConfig? {
        guard reader.kind(root) == .object else {
            problem("", "the config must be a JSON object with \"code\" and \"data\", got \(reader.kindName(root))")
            return nil
        }
        unknownKeys(root, known: Self.envelopeKeys, "")
        if let code = reader.member(root, "code") {
            if reader.kind(code) == .number {
                if !reader.number(code, is: "200") {
                    problem("code", "is \(reader.number(code)), not 200: the config server reported an error")
                }
            } else {
                problem("code", "must be the number 200, got \(reader.kindName(code))")
            }
        } else {
            problem("code", "is missing (expected 200)")
        }
        guard let data = object(reader.member(root, "data"), "data") else { return nil }
        let config = validateData(data)
        if let candidate = reader.member(root, "canary") {
            canary = validateCanary(candidate, active: config)
        }
        guard problems.isEmpty else { return nil }
        return config
    }

    /// Validates a `data` object (`name`, `version`, `config`); problems are located under `data`.
    mutating func validateData(_ data: Int) -> PrefetchConfig? {
        unknownKeys(data, known: Self.dataKeys, "data")
        let name = string(reader.member(data, "name"), "data.name") ?? ""
        var version = ""
        if let value = reader.member(data, "version") {
            switch reader.kind(value) {
            case .string where reader.rawRange(value).count > 0: version = reader.string(value)
            case .number: version = reader.number(value)
            case .string: problem("data.version", "must be a non-empty string, got an empty string")
            default: problem("data.version", "must be a non-empty string, got \(reader.kindName(value))")
            }
        } else {
            problem("data.version", "is missing")
        }
        var pages: [PageEntry] = []
        // The exact pages by key, built here for the duplicate check and handed to the matcher as its index (a config
        // is only made when every page validated, so a page's index is then its position in `pages`). Pattern keys
        // have a `{}` where exact keys never have a brace, so the two never collide and are kept apart.
        var exact: [PageKey: Int] = [:]
        if let entries = reader.member(data, "config") {
            if reader.kind(entries) == .array {
                if reader.isEmptyContainer(entries) { warning("data.config", "is empty: no page will be prefetched") }
                let count = reader.elements(entries).reduce(0) { count, _ in count + 1 }
                var patterns: [PageKey: Int] = [:]
                exact.reserveCapacity(count)
                pages.reserveCapacity(count)
                for (index, entry) in reader.elements(entries).enumerated() {
                    let path = ConfigPath(page: index)
                    guard let page = validatePage(entry, index: index, path: path) else { continue }
                    let key = page.pattern.map { Self.patternKey(page.parsedURL, $0) } ?? PageMatcher.exactKey(page.parsedURL)
                    let first = page.pattern == nil ? exact.updateValue(index, forKey: key) : patterns.updateValue(index, forKey: key)
                    if let first {
                        if page.pattern == nil { exact[key] = first } else { patterns[key] = first }
                        problem(
                            "\(path).url",
                            "\"\(page.url)\" duplicates data.config[\(first)].url (\"\(pages.first { $0.index == first }!.url)\")")
                        continue
                    }
                    pages.append(page)
                }
            } else {
                problem("data.config", "must be an array of pages, got \(reader.kindName(entries))")
            }
        } else {
            problem("data.config", "is missing")
        }
        guard problems.isEmpty else { return nil }
        return PrefetchConfig(name: name, version: version, pages: pages, exact: exact)
    }

    /// Patterns that differ only in capture names are the same page shape.
    /// (No exact path contains `{` or `}`: such a segment is a pattern or an error, so the keys never collide.)
    static func patternKey(_ url: HTTPURL, _ pattern: PathPattern) -> PageKey {
        // `"/" + segments.joined(separator: "/")`, appended into one `String`.
        var key = pattern.segments.isEmpty ? "/" : ""
        for segment in pattern.segments {
            key += "/"
            switch segment {
            case .literal(let text): key += text
            case .wildcard: key += "{}"
            case .capture(_, let prefix, let suffix):
                key += prefix
                key += "{}"
                key += suffix
            }
        }
        return PageKey(url, key)
    }

    mutating func validatePage(_ value: Int, index: Int, path: ConfigPath) -> PageEntry? {
        guard let page = object(value, "\(path)") else { return nil }
        var urlValue: Int?
        var interfacesValue: Int?
        var partnersValue: Int?
        // One pass over the members (`unknownKeys` order: unknown keys are reported as they come).
        for (key, member) in reader.members(page) {
            if reader.string(key, is: "url") {
                urlValue = member
            } else if reader.string(key, is: "interfaces") {
                interfacesValue = member
            } else if reader.string(key, is: "partnerOrigins") {
                partnersValue = member
            } else {
                warning("\(path).\(reader.string(key))", "unknown key, ignored")
            }
        }
        var parsed: HTTPURL?
        var pattern: PathPattern?
        let url = string(urlValue, "\(path).url")
        if let url {
            do {
                let candidate = try HTTPURL(parsing: url)
                if candidate.queryRange != nil {
                    problem("\(path).url", "\"\(Redaction.url(url))\" must not have a query: the page's query feeds the requests")
                } else if candidate.fragmentRange != nil {
                    problem("\(path).url", "\"\(Redaction.url(url))\" must not have a #fragment")
                } else {
                    parsed = candidate
                    pattern = try PathPattern.parse(pathOf: candidate)
                }
            } catch {
                problem("\(path).url", "\"\(Redaction.url(url))\" \(error.message)")
                parsed = nil
            }
        }
        var interfaces: [Interface] = []
        if let items = interfacesValue {
            if reader.kind(items) == .array {
                if reader.isEmptyContainer(items) { warning("\(path).interfaces", "is empty: nothing will be prefetched for this page") }
                let count = reader.elements(items).reduce(0) { count, _ in count + 1 }
                interfaces.reserveCapacity(count)
                // The validator's scratch space, taken for this page and handed back emptied: no page allocates its own.
                var scratch = PageScratch()
                swap(&scratch, &pageScratch)
                for (position, item) in reader.elements(items).enumerated() {
                    let itemPath = ConfigPath(page: index, interface: position)
                    if let (interface, isExplicit) = validateInterface(item, path: itemPath) {
                        interfaces.append(interface)
                        scratch.explicit.append(isExplicit)
                        scratch.paths.append(itemPath)
                    }
                }
                // Explicit names first, so a derived name never takes one the author chose.
                for position in interfaces.indices where scratch.explicit[position] {
                    if !scratch.usedNames.insert(interfaces[position].name) {
                        problem(
                            "\(scratch.paths[position]).name", "\"\(interfaces[position].name)\" is used by another interface of this page")
                    }
                }
                for position in interfaces.indices {
                    if !scratch.explicit[position] {
                        let derived = interfaces[position].name
                        var candidate = derived
                        var suffix = 2
                        while scratch.usedNames.contains(candidate) {
                            candidate = "\(derived)-\(suffix)"
                            suffix += 1
                        }
                        _ = scratch.usedNames.insert(candidate)
                        if candidate != derived { interfaces[position].name = candidate }
                    }
                    if !scratch.apiMethods.insert(MethodAndAPI(method: interfaces[position].method, api: interfaces[position].api)) {
                        warning(
                            "\(scratch.paths[position])",
                            "another interface of this page has the same method and api; select it by name in data requests")
                    }
                }
                scratch.removeAll()
                swap(&scratch, &pageScratch)
                validateReferences(of: interfaces)
            } else {
                problem("\(path).interfaces", "must be an array, got \(reader.kindName(items))")
            }
        } else {
            problem("\(path).interfaces", "is missing")
        }
        let partners = partnersValue.map { validatePartnerOrigins($0, own: parsed?.origin, path: "\(path).partnerOrigins") } ?? []
        guard let url, let parsed else { return nil }
        return PageEntry(
            url: url, parsedURL: parsed, pattern: pattern, interfaces: interfaces, index: index, partnerOrigins: partners)
    }

    /// `partnerOrigins`: an array of origins (`scheme://host[:port]`, http or https), each granted the page's data
    /// from a browser with the user's credentials. `*`, `null`, paths, queries and credentials in the URL are
    /// problems: a grant names each partner.
    mutating func validatePartnerOrigins(_ value: Int, own: String?, path: String) -> [String] {
        guard reader.kind(value) == .array else {
            problem(path, "must be an array of origins like \"https://partner.example.com\", got \(reader.kindName(value))")
            return []
        }
        var origins: [String] = []
        for (position, item) in reader.elements(value).enumerated() {
            let itemPath = "\(path)[\(position)]"
            guard reader.kind(item) == .string else {
                problem(itemPath, "must be a string, got \(reader.kindName(item))")
                continue
            }
            let text = reader.string(item)
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
    mutating func collectReferences(
        in value: Int, at path: () -> String, into references: inout [Reference], paths: inout [String]
    ) {
        let reader = self.reader
        switch reader.kind(value) {
        case .string where reader.mayHoldReference(value):
            switch Template.parse(reader.string(value)) {
            case .success(let template):
                for reference in template.references {
                    references.append(reference)
                    paths.append(path())
                }
            case .failure(let reason):
                problem(path(), reason.message)
            }
        case .object:
            for (key, member) in reader.members(value) {
                if reader.mayHoldReference(key) { referenceInName("\(path()).\(reader.string(key))") }
                collectReferences(in: member, at: { "\(path()).\(reader.string(key))" }, into: &references, paths: &paths)
            }
        case .array:
            for (position, item) in reader.elements(value).enumerated() {
                collectReferences(in: item, at: { "\(path())[\(position)]" }, into: &references, paths: &paths)
            }
        default:
            break
        }
    }

    /// A string value's references (headers and query values), with the path they were written at.
    mutating func collectReferences(in text: String, at path: String, into references: inout [Reference], paths: inout [String]) {
        switch Template.parse(text) {
        case .success(let template):
            for reference in template.references {
                references.append(reference)
                paths.append(path)
            }
        case .failure(let reason):
            problem(path, reason.message)
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
        func visit(_ index: Int, _ loader: inout Validator) {
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

    mutating func validateInterface(_ value: Int, path: ConfigPath) -> (Interface, explicit: Bool)? {
        guard let item = object(value, "\(path)") else { return nil }
        let fields = InterfaceFields(item, reader) { name in warning("\(path).\(name)", "unknown key, ignored") }
        let problemCount = problems.count

        let api = string(fields.api, "\(path).api")
        var apiURL: HTTPURL?
        if let api {
            do { apiURL = try HTTPURL(parsing: api) } catch {
                problem("\(path).api", "\"\(Redaction.url(api))\" is not an absolute http(s) URL: \(error.message)")
            }
        }
        var method: HTTPMethod?
        if let value = fields.method, reader.kind(value) == .string,
            let exact = Self.methodNames.first(where: { reader.string(value, is: $0.text) })
        {
            // A method spelled as its name (nearly every config): no `String` made.
            method = exact.method
        } else if let text = string(fields.method, "\(path).method") {
            method = HTTPMethod(rawValue: text) ?? HTTPMethod(rawValue: text.uppercased())
            if method == nil {
                let supported = HTTPMethod.allCases.map(\.rawValue).joined(separator: ", ")
                problem("\(path).method", "\(JSONValue.string(text).jsonText) is not a supported method (\(supported))")
            }
        }
        let urlParam = bool(fields.urlParam, "\(path).urlParam")
        let secPurpose = fields.secPurpose == nil ? true : bool(fields.secPurpose, "\(path).secPurpose")
        let bodyParam = bool(fields.bodyParam, "\(path).bodyParam")
        let body = object(fields.body, "\(path).body", required: false)

        var bodyType = BodyType.json
        if let text = string(fields.bodyType, "\(path).bodyType", required: false) {
            if let type = BodyType(rawValue: text) {
                bodyType = type
            } else {
                problem("\(path).bodyType", "\"\(text)\" is not json or form")
            }
        }
        if let body, bodyType == .form || method == .GET || method == .DELETE {
            let why = bodyType == .form ? "a form body" : "a \(method!.rawValue) request (its body goes into the query string)"
            for (key, member) in reader.members(body) {
                switch reader.kind(member) {
                case .object, .array:
                    problem(
                        "\(path).body.\(reader.string(key))",
                        "must be a string, number, boolean or null in \(why), got \(reader.kindName(member))")
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

        let headers = validateHeaders(fields.headers, path: path)

        let params = validateParams(fields.params, path: path)

        let query = validateQuery(fields.query, path: path)

        let (references, referencePaths) = interfaceReferences(api: api, body: body, headers: headers, query: query, path: path)

        let (name, explicit) = interfaceName(fields.name, apiURL: apiURL, path: path)

        guard problems.count == problemCount, let api, let apiURL, let method else { return nil }
        // The template's texts are written into the validator's buffer, taken for this interface and handed back.
        var scratch: [UInt8] = []
        swap(&scratch, &compactScratch)
        defer { swap(&scratch, &compactScratch) }
        let template = RequestTemplate(
            api: api, apiURL: apiURL, method: method, headers: headers, params: params, bodyType: bodyType,
            query: query, bodyIsEmpty: body.map { reader.isEmptyContainer($0) } ?? true,
            bodyNames: { name in
                guard let body else { return }
                for (key, _) in reader.members(body) {
                    name(
                        reader.isPlainASCII(key)
                            ? .ascii(UnsafeBufferPointer(rebasing: reader.bytes[reader.rawRange(key)])) : .text(reader.string(key)))
                }
            },
            bodyJSONHead: { text in
                guard let body else { return text.append(UInt8(ascii: "{")) }
                reader.writeCompact(body, into: &text)
                text.removeLast()
            },
            bodyObject: { body.map { reader.object($0) } ?? JSONObject() },
            scratch: &scratch)
        let interface = Interface(
            name: name, api: api, apiURL: apiURL, method: method, urlParam: urlParam, bodyParam: bodyParam,
            body: body.map { .source(document, reader.sourceRange($0)) } ?? .empty, hasBody: body != nil, ttlSeconds: ttl,
            timeoutMilliseconds: timeout, headers: headers, params: params, bodyType: bodyType, credentials: credentials,
            secPurpose: secPurpose, query: query, references: references, referencePaths: referencePaths, template: template
        )
        return (interface, explicit)
    }

    /// An interface's fixed `headers`: token names (`HeaderRules`), none the service or the page owns, values
    /// without control characters.
    mutating func validateHeaders(_ value: Int?, path: ConfigPath) -> HTTPFields {
        var headers = Self.noHeaders
        if let object = object(value, "\(path).headers", required: false) {
            for (key, member) in reader.members(object) {
                let memberName = reader.string(key)
                let headerPath = "\(path).headers.\(memberName)"
                guard reader.kind(member) == .string else {
                    problem(headerPath, "must be a string, got \(reader.kindName(member))")
                    continue
                }
                let value = reader.string(member)
                let name = HeaderRules.name(memberName)
                if name == nil {
                    problem(headerPath, "is not a valid header name")
                } else if Self.forbiddenHeaders.contains(memberName.lowercased()) {
                    problem(headerPath, "may not be set by the config (the service or the page owns it)")
                }
                if HeaderRules.hasControlCharacter(value) {
                    problem(headerPath, "has a control character in its value")
                }
                if let name { headers.append(HTTPField(name: name, value: value)) }
            }
        }
        return headers
    }

    /// An interface's `params`: the page parameters it takes (an array of names), nil when it takes them all.
    mutating func validateParams(_ value: Int?, path: ConfigPath) -> Set<String>? {
        var params: Set<String>?
        if let names = value {
            if reader.kind(names) == .array {
                var set: Set<String> = []
                for (position, name) in reader.elements(names).enumerated() {
                    if reader.kind(name) == .string {
                        set.insert(reader.string(name))
                    } else {
                        problem("\(path).params[\(position)]", "must be a string, got \(reader.kindName(name))")
                    }
                }
                params = set
            } else {
                problem("\(path).params", "must be an array of parameter names, got \(reader.kindName(names))")
            }
        }
        return params
    }

    /// An interface's fixed `query` parameters: named, with string, number or boolean values.
    mutating func validateQuery(_ value: Int?, path: ConfigPath) -> [(name: String, value: String)] {
        var query: [(name: String, value: String)] = []
        if let object = object(value, "\(path).query", required: false) {
            for (key, member) in reader.members(object) {
                let name = reader.string(key)
                switch reader.kind(member) {
                case _ where name.isEmpty: problem("\(path).query", "has a parameter without a name")
                case .string: query.append((name, reader.string(member)))
                case .number: query.append((name, reader.number(member)))
                case .trueValue: query.append((name, "true"))
                case .falseValue: query.append((name, "false"))
                default: problem("\(path).query.\(name)", "must be a string, number or boolean, got \(reader.kindName(member))")
                }
            }
        }
        return query
    }

    /// References to other interfaces' answers: in the body, header values and query values; never in the api,
    /// never in a credential header.
    mutating func interfaceReferences(
        api: String?, body: Int?, headers: HTTPFields, query: [(name: String, value: String)], path: ConfigPath
    ) -> (references: [Reference], paths: [String]) {
        var references: [Reference] = []
        var referencePaths: [String] = []
        if let api, Template.mayHold(api) {
            problem("\(path).api", "may not hold a reference: an answer never chooses where a request goes")
        }
        if let body {
            let reader = self.reader
            for (key, member) in reader.members(body) {
                if reader.mayHoldReference(key) { referenceInName("\(path).body.\(reader.string(key))") }
                collectReferences(
                    in: member, at: { "\(path).body.\(reader.string(key))" }, into: &references, paths: &referencePaths)
            }
        }
        for header in headers where Template.mayHold(header.value) {
            let headerPath = "\(path).headers.\(header.name.rawName)"
            if header.name == .authorization || header.name == .proxyAuthorization {
                problem(headerPath, "may not take a value from another answer: credentials come from the caller only")
            } else {
                collectReferences(in: header.value, at: headerPath, into: &references, paths: &referencePaths)
            }
        }
        for pair in query {
            if Template.mayHold(pair.name) { referenceInName("\(path).query.\(pair.name)") }
            if Template.mayHold(pair.value) {
                collectReferences(in: pair.value, at: "\(path).query.\(pair.name)", into: &references, paths: &referencePaths)
            }
        }
        return (references, referencePaths)
    }

    /// An interface's `name` as given (checked), or derived from its api; and whether it was given.
    mutating func interfaceName(_ value: Int?, apiURL: HTTPURL?, path: ConfigPath) -> (name: String, explicit: Bool) {
        var name: String
        var explicit = false
        if let given = string(value, "\(path).name", required: false) {
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
        return (name, explicit)
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
        let onBytes = api.withPathBytes { text -> String? in
            let bytes = text.bytes
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
            // The name's bytes as if joined (`previous`, `.`, `last`, each mapped), written into a buffer of their count;
            // leading `.`, `-` and `_` (after the mapping, which keeps them) are dropped, then at most 64 bytes kept.
            let total = (previous.map { $0.count + 1 } ?? 0) + (last?.count ?? 0)
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(total, 1)) { joined -> String in
                var count = 0
                if let previous {
                    for offset in previous {
                        joined[count] = mapped(bytes[offset])
                        count += 1
                    }
                    joined[count] = UInt8(ascii: ".")
                    count += 1
                }
                if let last {
                    for offset in last {
                        joined[count] = mapped(bytes[offset])
                        count += 1
                    }
                }
                var skip = 0
                while skip < count {
                    let leading = joined[skip]
                    guard leading == UInt8(ascii: ".") || leading == UInt8(ascii: "-") || leading == UInt8(ascii: "_") else { break }
                    skip += 1
                }
                if skip == count { return "root" }
                return String(decoding: UnsafeBufferPointer(rebasing: joined[skip..<min(count, skip + 64)]), as: UTF8.self)
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

/// Where in `data.config` a page or interface is, rendered as `data.config[1].interfaces[0]` only when a problem or
/// warning names it.
struct ConfigPath: CustomStringConvertible {
    var page: Int
    var interface: Int?

    var description: String {
        if let interface { return "data.config[\(page)].interfaces[\(interface)]" }
        return "data.config[\(page)]"
    }
}

/// An interface object's members by key (tape indices), gathered in one pass instead of one search per key; unknown
/// keys go to `unknown` in member order, as ``Validator/unknownKeys(_:known:_:)`` reports them.
struct InterfaceFields {
    var api, method, urlParam, bodyParam, body, name, ttl, timeout, headers, params, bodyType, credentials, secPurpose, query: Int?

    init(_ object: Int, _ reader: TapeReader, unknown: (String) -> Void) {
        for (key, value) in reader.members(object) {
            if reader.string(key, is: "api") {
                api = value
            } else if reader.string(key, is: "method") {
                method = value
            } else if reader.string(key, is: "urlParam") {
                urlParam = value
            } else if reader.string(key, is: "bodyParam") {
                bodyParam = value
            } else if reader.string(key, is: "body") {
                body = value
            } else if reader.string(key, is: "name") {
                name = value
            } else if reader.string(key, is: "ttl") {
                ttl = value
            } else if reader.string(key, is: "timeout") {
                timeout = value
            } else if reader.string(key, is: "headers") {
                headers = value
            } else if reader.string(key, is: "params") {
                params = value
            } else if reader.string(key, is: "bodyType") {
                bodyType = value
            } else if reader.string(key, is: "credentials") {
                credentials = value
            } else if reader.string(key, is: "secPurpose") {
                secPurpose = value
            } else if reader.string(key, is: "query") {
                query = value
            } else {
                unknown(reader.string(key))
            }
        }
    }
}

/// A set that stays a plain array while small: a page has a few interfaces, and allocating and hashing a `Set` per
/// page cost more than comparing a few strings. Past 16 elements it becomes a `Set`.
struct SmallSet<Element: Hashable> {
    private var few: [Element] = []
    private var many: Set<Element>?

    init(capacity: Int = 0) {
        few.reserveCapacity(min(capacity, 17))
    }

    func contains(_ element: Element) -> Bool {
        if let many { return many.contains(element) }
        return few.contains(element)
    }

    /// Removes every element, keeping the array's capacity.
    mutating func removeAll() {
        few.removeAll(keepingCapacity: true)
        many = nil
    }

    /// Inserts `element`; `false` when it was already there.
    mutating func insert(_ element: Element) -> Bool {
        if many != nil { return many!.insert(element).inserted }
        if few.contains(element) { return false }
        few.append(element)
        if few.count > 16 {
            many = Set(few)
            few = []
        }
        return true
    }
}

/// The per-page working space of ``Validator/validatePage(_:index:path:)``: which interfaces named themselves, their
/// paths, the names taken and the method-and-api pairs seen.
struct PageScratch {
    var explicit: [Bool] = []
    var paths: [ConfigPath] = []
    var usedNames = SmallSet<String>()
    var apiMethods = SmallSet<MethodAndAPI>()

    /// Empties every part, keeping its capacity.
    mutating func removeAll() {
        explicit.removeAll(keepingCapacity: true)
        paths.removeAll(keepingCapacity: true)
        usedNames.removeAll()
        apiMethods.removeAll()
    }
}

/// A page's interface identified by method and api, for the same-request warning.
struct MethodAndAPI: Hashable {
    var method: HTTPMethod
    var api: String
}
