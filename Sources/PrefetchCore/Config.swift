public import HTTPTypes

/// The prefetch config: which pages exist and which API interfaces each page calls.
///
/// The wire format is the envelope the mobile clients already use:
/// `{"code":200,"data":{"name","version","config":[{"url","interfaces":[...]}]}}`.
/// ``ConfigLoader`` turns that text into a ``PrefetchConfig`` after validating all of it; a value of this
/// type is always valid and immutable, so a loaded config can be shared by every request without locks.
public struct PrefetchConfig: Sendable {
    /// `data.name`.
    public var name: String
    /// `data.version`, compared as text: a config is only replaced by one whose version differs.
    public var version: String
    /// The page entries in config order.
    public var pages: [PageEntry]
    /// The page index built from ``pages``.
    public let matcher: PageMatcher

    init(name: String, version: String, pages: [PageEntry], exactKeys: [PageKey?]? = nil) {
        self.name = name
        self.version = version
        self.pages = pages
        self.matcher = PageMatcher(pages: pages, exactKeys: exactKeys)
    }

    /// A config whose exact pages are already indexed by key (their positions in `pages`).
    init(name: String, version: String, pages: [PageEntry], exact: [PageKey: Int]) {
        self.name = name
        self.version = version
        self.pages = pages
        self.matcher = PageMatcher(pages: pages, exact: exact)
    }

    /// Every interface name in the config (bounded: used as a metric label).
    public var interfaceNames: Set<String> {
        Set(pages.flatMap { $0.interfaces.map(\.name) })
    }

    /// The host of every api, for resolving them ahead of time.
    public var apiHosts: Set<String> {
        Set(pages.flatMap { $0.interfaces.map(\.apiURL.host) })
    }

    /// The number of interfaces across all pages.
    public var interfaceCount: Int { pages.reduce(0) { $0 + $1.interfaces.count } }
}

/// One page of the config: an exact page URL or a URL pattern, and the interfaces it calls.
///
/// A value type whose fields live in one shared, copy-on-write storage: copying an entry (into a ``PageMatch``, a
/// plan) is one reference count, not one per field.
public struct PageEntry: Sendable {
    final class Storage: @unchecked Sendable {
        // Mutated only while uniquely referenced (copy on write), so sharing it across tasks is safe.
        var url: String
        var parsedURL: HTTPURL
        var pattern: PathPattern?
        var interfaces: [Interface]
        var index: Int
        var partnerOrigins: [String]

        init(url: String, parsedURL: HTTPURL, pattern: PathPattern?, interfaces: [Interface], index: Int, partnerOrigins: [String]) {
            self.url = url
            self.parsedURL = parsedURL
            self.pattern = pattern
            self.interfaces = interfaces
            self.index = index
            self.partnerOrigins = partnerOrigins
        }

        func copy() -> Storage {
            Storage(url: url, parsedURL: parsedURL, pattern: pattern, interfaces: interfaces, index: index, partnerOrigins: partnerOrigins)
        }
    }

    private var storage: Storage

    init(url: String, parsedURL: HTTPURL, pattern: PathPattern?, interfaces: [Interface], index: Int, partnerOrigins: [String] = []) {
        storage = Storage(
            url: url, parsedURL: parsedURL, pattern: pattern, interfaces: interfaces, index: index, partnerOrigins: partnerOrigins)
    }

    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return storage
    }

    /// `url` as written in the config.
    public var url: String {
        get { storage.url }
        set { unique().url = newValue }
    }
    /// The parsed URL (pattern segments kept literally).
    public var parsedURL: HTTPURL {
        get { storage.parsedURL }
        set { unique().parsedURL = newValue }
    }
    /// The path pattern when `url` contains `*` or `{name}` segments, else `nil`.
    public var pattern: PathPattern? {
        get { storage.pattern }
        set { unique().pattern = newValue }
    }
    /// The interfaces in config order.
    public var interfaces: [Interface] {
        get { storage.interfaces }
        set { unique().interfaces = newValue }
    }
    /// The position of this entry in `data.config`.
    public var index: Int {
        get { storage.index }
        set { unique().index = newValue }
    }
    /// Origins other than the page's own that may trigger this page and read its data with the user's
    /// credentials (`partnerOrigins`, normalised `scheme://host[:port]`): an explicit grant, reviewed with the config.
    /// Empty by default: a page's data is answered cross-origin to the page's own origin only.
    public var partnerOrigins: [String] {
        get { storage.partnerOrigins }
        set { unique().partnerOrigins = newValue }
    }

    /// The origins that may act on this page's data from a browser: its own, then its partners.
    public var origins: PageOrigins { PageOrigins(own: parsedURL.origin, partners: partnerOrigins) }
}

/// The browser origins entitled to one page's data: the page's own origin, and the partners its config entry names.
public struct PageOrigins: Sendable, Hashable {
    /// The page's own origin (`scheme://host[:port]`, lowercase).
    public var own: String
    /// `partnerOrigins` of the page's config entry.
    public var partners: [String]

    /// The page's own origin and its partners.
    public init(own: String, partners: [String] = []) {
        self.own = own
        self.partners = partners
    }

    /// Whether `origin` (as normalised by ``HTTPURL/origin``) is the page's own or one of its partners.
    public func contains(_ origin: String) -> Bool {
        origin == own || partners.contains(origin)
    }
}

/// The HTTP methods an interface may use.
public enum HTTPMethod: String, Sendable, CaseIterable {
    case GET, POST, PUT, PATCH, DELETE

    /// Whether a request of this method carries a body.
    public var carriesBody: Bool { self != .GET && self != .DELETE }
}

/// How a composed body is encoded.
public enum BodyType: String, Sendable, CaseIterable {
    /// Compact JSON, `Content-Type: application/json` (the default).
    case json
    /// `application/x-www-form-urlencoded`; only flat bodies (no objects or arrays as values).
    case form
}

/// Where the caller's credential headers (`Cookie`, `Authorization`) may be sent.
public enum CredentialsMode: String, Sendable, CaseIterable {
    /// Only to api hosts on the page's site (the default; see ``SiteRule``).
    case sameSite = "same-site"
    /// Never.
    case omit
    /// Always, whatever the api host (for a config author who knows the host is trusted).
    case include
}

/// One API request a page makes, as configured.
///
/// A value type whose fields live in one shared, copy-on-write storage: a planned request holds its interface by
/// reference (one reference count), not as a copy of every field. The storage also holds the interface's
/// ``RequestTemplate``, made at load; changing a field the template depends on drops it (the request is then composed
/// by the general rules).
public struct Interface: Sendable {
    /// Where the configured body is: a value, or a range of the loaded document's bytes (parsed when read).
    enum BodySource: Sendable {
        case value(JSONObject)
        case source([UInt8], Range<Int>)

        static let empty = BodySource.value(JSONObject())

        var object: JSONObject {
            switch self {
            case .value(let object): return object
            case .source(let bytes, let range):
                let parsed = bytes.withUnsafeBufferPointer { JSONParser.parse(buffer: UnsafeBufferPointer(rebasing: $0[range])) }
                guard case .success(.object(let object)) = parsed else { preconditionFailure("a validated body no longer parses") }
                return object
            }
        }
    }

    final class Storage: @unchecked Sendable {
        // Mutated only while uniquely referenced (copy on write), so sharing it across tasks is safe.
        var name: String
        var api: String
        var apiURL: HTTPURL
        var method: HTTPMethod
        var urlParam: Bool
        var bodyParam: Bool
        var body: BodySource
        var hasBody: Bool
        var ttlSeconds: Int
        var timeoutMilliseconds: Int
        var headers: HTTPFields
        var params: Set<String>?
        var bodyType: BodyType
        var credentials: CredentialsMode
        var secPurpose: Bool
        var query: [(name: String, value: String)]
        var references: [Reference]
        var referencePaths: [String]
        var template: RequestTemplate?

        init(
            name: String, api: String, apiURL: HTTPURL, method: HTTPMethod, urlParam: Bool, bodyParam: Bool, body: BodySource,
            hasBody: Bool, ttlSeconds: Int, timeoutMilliseconds: Int, headers: HTTPFields, params: Set<String>?, bodyType: BodyType,
            credentials: CredentialsMode, secPurpose: Bool, query: [(name: String, value: String)], references: [Reference],
            referencePaths: [String], template: RequestTemplate?
        ) {
            self.name = name
            self.api = api
            self.apiURL = apiURL
            self.method = method
            self.urlParam = urlParam
            self.bodyParam = bodyParam
            self.body = body
            self.hasBody = hasBody
            self.ttlSeconds = ttlSeconds
            self.timeoutMilliseconds = timeoutMilliseconds
            self.headers = headers
            self.params = params
            self.bodyType = bodyType
            self.credentials = credentials
            self.secPurpose = secPurpose
            self.query = query
            self.references = references
            self.referencePaths = referencePaths
            self.template = template
        }

        func copy() -> Storage {
            Storage(
                name: name, api: api, apiURL: apiURL, method: method, urlParam: urlParam, bodyParam: bodyParam, body: body,
                hasBody: hasBody, ttlSeconds: ttlSeconds, timeoutMilliseconds: timeoutMilliseconds, headers: headers, params: params,
                bodyType: bodyType, credentials: credentials, secPurpose: secPurpose, query: query, references: references,
                referencePaths: referencePaths, template: template)
        }
    }

    private(set) var storage: Storage

    /// An interface from its fields, its template made from them.
    init(
        name: String, api: String, apiURL: HTTPURL, method: HTTPMethod, urlParam: Bool, bodyParam: Bool, body: JSONObject,
        hasBody: Bool, ttlSeconds: Int, timeoutMilliseconds: Int, headers: HTTPFields, params: Set<String>?, bodyType: BodyType,
        credentials: CredentialsMode, secPurpose: Bool = true, query: [(name: String, value: String)] = [], references: [Reference] = [],
        referencePaths: [String] = []
    ) {
        var scratch: [UInt8] = []
        let template = RequestTemplate(
            api: api, apiURL: apiURL, method: method, headers: headers, params: params, bodyType: bodyType, query: query,
            bodyIsEmpty: body.isEmpty, bodyNames: { name in for member in body.members { name(.text(member.name)) } },
            bodyJSONHead: { $0.append(contentsOf: JSONValue.object(body).jsonText.utf8.dropLast()) }, bodyObject: { body },
            scratch: &scratch)
        self.init(
            name: name, api: api, apiURL: apiURL, method: method, urlParam: urlParam, bodyParam: bodyParam, body: .value(body),
            hasBody: hasBody, ttlSeconds: ttlSeconds, timeoutMilliseconds: timeoutMilliseconds, headers: headers, params: params,
            bodyType: bodyType, credentials: credentials, secPurpose: secPurpose, query: query, references: references,
            referencePaths: referencePaths, template: template)
    }

    /// An interface as the loader makes it: the body possibly a range of the document, the template already made.
    init(
        name: String, api: String, apiURL: HTTPURL, method: HTTPMethod, urlParam: Bool, bodyParam: Bool, body: BodySource,
        hasBody: Bool, ttlSeconds: Int, timeoutMilliseconds: Int, headers: HTTPFields, params: Set<String>?, bodyType: BodyType,
        credentials: CredentialsMode, secPurpose: Bool, query: [(name: String, value: String)], references: [Reference],
        referencePaths: [String], template: RequestTemplate?
    ) {
        storage = Storage(
            name: name, api: api, apiURL: apiURL, method: method, urlParam: urlParam, bodyParam: bodyParam, body: body,
            hasBody: hasBody, ttlSeconds: ttlSeconds, timeoutMilliseconds: timeoutMilliseconds, headers: headers, params: params,
            bodyType: bodyType, credentials: credentials, secPurpose: secPurpose, query: query, references: references,
            referencePaths: referencePaths, template: template)
    }

    /// The storage, copied first when shared; `dropsTemplate` for a field the request template is made from.
    private mutating func unique(dropsTemplate: Bool) -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        if dropsTemplate { storage.template = nil }
        return storage
    }

    /// The request template made at load, while the fields it was made from are unchanged.
    var template: RequestTemplate? { storage.template }

    /// Stable label for metrics and logs: the config's `name`, or one derived from the api path.
    public var name: String {
        get { storage.name }
        set { unique(dropsTemplate: false).name = newValue }
    }
    /// The api URL as written in the config.
    public var api: String {
        get { storage.api }
        set { unique(dropsTemplate: true).api = newValue }
    }
    /// The parsed api URL.
    public var apiURL: HTTPURL {
        get { storage.apiURL }
        set { unique(dropsTemplate: true).apiURL = newValue }
    }
    public var method: HTTPMethod {
        get { storage.method }
        set { unique(dropsTemplate: true).method = newValue }
    }
    /// Forward the page's query parameters in the request URL.
    public var urlParam: Bool {
        get { storage.urlParam }
        set { unique(dropsTemplate: false).urlParam = newValue }
    }
    /// Merge the page's query parameters into the request body (into the query for GET).
    public var bodyParam: Bool {
        get { storage.bodyParam }
        set { unique(dropsTemplate: false).bodyParam = newValue }
    }
    /// The configured body, an object (empty when absent). Made from the config's bytes when read.
    public var body: JSONObject {
        get { storage.body.object }
        set { unique(dropsTemplate: true).body = .value(newValue) }
    }
    /// Whether the config had a `body` at all.
    public var hasBody: Bool {
        get { storage.hasBody }
        set { unique(dropsTemplate: false).hasBody = newValue }
    }
    /// Seconds a stored response may be handed out. Default 30.
    public var ttlSeconds: Int {
        get { storage.ttlSeconds }
        set { unique(dropsTemplate: false).ttlSeconds = newValue }
    }
    /// Upstream timeout in milliseconds, including time queued. Default 3000.
    public var timeoutMilliseconds: Int {
        get { storage.timeoutMilliseconds }
        set { unique(dropsTemplate: false).timeoutMilliseconds = newValue }
    }
    /// Static request headers, in config order.
    public var headers: HTTPFields {
        get { storage.headers }
        set { unique(dropsTemplate: true).headers = newValue }
    }
    /// Allow-list of page parameter names to forward (compared decoded); `nil` forwards all.
    public var params: Set<String>? {
        get { storage.params }
        set { unique(dropsTemplate: true).params = newValue }
    }
    public var bodyType: BodyType {
        get { storage.bodyType }
        set { unique(dropsTemplate: true).bodyType = newValue }
    }
    public var credentials: CredentialsMode {
        get { storage.credentials }
        set { unique(dropsTemplate: false).credentials = newValue }
    }
    /// Send `Sec-Purpose: prefetch` with the request (as Chrome's prefetches do), so the upstream can tell a
    /// prefetch from the page's own request. Default true; `"secPurpose": false` opts the interface out.
    public var secPurpose: Bool {
        get { storage.secPurpose }
        set { unique(dropsTemplate: false).secPurpose = newValue }
    }
    /// Query parameters appended after everything else the URL gets, form-encoded, in config order (`query`);
    /// their values may hold references.
    public var query: [(name: String, value: String)] {
        get { storage.query }
        set { unique(dropsTemplate: true).query = newValue }
    }
    /// The values this interface takes from other interfaces' answers (in `body`, `headers` and `query`), in
    /// config order. Empty for an independent interface.
    public var references: [Reference] {
        get { storage.references }
        set { unique(dropsTemplate: false).references = newValue }
    }
    /// Where each reference was written (JSON paths, for messages), parallel to `references`.
    var referencePaths: [String] {
        get { storage.referencePaths }
        set { unique(dropsTemplate: false).referencePaths = newValue }
    }

    /// The interfaces this one needs, each once, in the order first referenced.
    public var dependsOn: [String] {
        var names: [String] = []
        for reference in references where !names.contains(reference.interface) { names.append(reference.interface) }
        return names
    }

    /// Defaults of the optional extension fields.
    public enum Defaults {
        public static let ttlSeconds = 30
        public static let timeoutMilliseconds = 3000
    }
}

extension Interface: Equatable {
    public static func == (lhs: Interface, rhs: Interface) -> Bool {
        lhs.name == rhs.name && lhs.api == rhs.api && lhs.method == rhs.method && lhs.urlParam == rhs.urlParam
            && lhs.bodyParam == rhs.bodyParam && lhs.body == rhs.body && lhs.ttlSeconds == rhs.ttlSeconds
            && lhs.timeoutMilliseconds == rhs.timeoutMilliseconds
            && lhs.headers.map(\.name) == rhs.headers.map(\.name) && lhs.headers.map(\.value) == rhs.headers.map(\.value)
            && lhs.params == rhs.params && lhs.bodyType == rhs.bodyType && lhs.credentials == rhs.credentials
            && lhs.secPurpose == rhs.secPurpose && lhs.query.map(\.name) == rhs.query.map(\.name)
            && lhs.query.map(\.value) == rhs.query.map(\.value) && lhs.references == rhs.references
    }
}
