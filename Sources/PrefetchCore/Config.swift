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
public struct PageEntry: Sendable {
    /// `url` as written in the config.
    public var url: String
    /// The parsed URL (pattern segments kept literally).
    public var parsedURL: HTTPURL
    /// The path pattern when `url` contains `*` or `{name}` segments, else `nil`.
    public var pattern: PathPattern?
    /// The interfaces in config order.
    public var interfaces: [Interface]
    /// The position of this entry in `data.config`.
    public var index: Int
    /// Origins other than the page's own that may trigger this page and read its data with the user's
    /// credentials (`partnerOrigins`, normalised `scheme://host[:port]`): an explicit grant, reviewed with the config.
    /// Empty by default: a page's data is answered cross-origin to the page's own origin only.
    public var partnerOrigins: [String] = []

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
public struct Interface: Sendable {
    /// Stable label for metrics and logs: the config's `name`, or one derived from the api path.
    public var name: String
    /// The api URL as written in the config.
    public var api: String
    /// The parsed api URL.
    public var apiURL: HTTPURL
    public var method: HTTPMethod
    /// Forward the page's query parameters in the request URL.
    public var urlParam: Bool
    /// Merge the page's query parameters into the request body (into the query for GET).
    public var bodyParam: Bool
    /// The configured body, an object (empty when absent).
    public var body: JSONObject
    /// Whether the config had a `body` at all.
    public var hasBody: Bool
    /// Seconds a stored response may be handed out. Default 30.
    public var ttlSeconds: Int
    /// Upstream timeout in milliseconds, including time queued. Default 3000.
    public var timeoutMilliseconds: Int
    /// Static request headers, in config order.
    public var headers: HTTPFields
    /// Allow-list of page parameter names to forward (compared decoded); `nil` forwards all.
    public var params: Set<String>?
    public var bodyType: BodyType
    public var credentials: CredentialsMode
    /// Send `Sec-Purpose: prefetch` with the request (as Chrome's prefetches do), so the upstream can tell a
    /// prefetch from the page's own request. Default true; `"secPurpose": false` opts the interface out.
    public var secPurpose: Bool = true
    /// Query parameters appended after everything else the URL gets, form-encoded, in config order (`query`);
    /// their values may hold references.
    public var query: [(name: String, value: String)] = []
    /// The values this interface takes from other interfaces' answers (in `body`, `headers` and `query`), in
    /// config order. Empty for an independent interface.
    public var references: [Reference] = []
    /// Where each reference was written (JSON paths, for messages), parallel to `references`.
    var referencePaths: [String] = []

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
