import Foundation
public import PrefetchCore

/// A prefetch config as a test writes it: typed pages and interfaces, written as the envelope the service loads
/// (`{"code": 200, "data": {"name", "version", "config": [...]}}`, docs/configuration.md, "The envelope"). Fields left nil are left
/// out, so the service's defaults apply as they do to a config file that omits them. A ``TestCanary`` adds the
/// document's `canary` member (docs/configuration.md, "Canary configs").
public struct TestConfig: Encodable, Sendable {
    public var name: String
    public var version: String
    public var pages: [TestPage]
    public var canary: TestCanary?

    public init(name: String = "prefetchConfig", version: String = "7", canary: TestCanary? = nil, _ pages: [TestPage]) {
        self.name = name
        self.version = version
        self.canary = canary
        self.pages = pages
    }

    /// The envelope as JSON text: object members in sorted order, slashes not escaped.
    public var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(self), as: UTF8.self)
        } catch {
            // Only a non-finite number can fail to encode, and `TestJSON` literals are finite.
            preconditionFailure("a test config did not encode: \(error)")
        }
    }

    /// The config as the service loads it (validated; throws the loader's error when it is not valid).
    public func loaded() throws -> PrefetchConfig {
        try ConfigLoader.parse(Array(text.utf8), source: "test config").config
    }

    private enum EnvelopeKeys: String, CodingKey { case code, data, canary }

    public func encode(to encoder: any Encoder) throws {
        var envelope = encoder.container(keyedBy: EnvelopeKeys.self)
        try envelope.encode(200, forKey: .code)
        try envelope.encode(ConfigData(name: name, version: version, config: pages), forKey: .data)
        try envelope.encodeIfPresent(canary, forKey: .canary)
    }
}

/// A document's `data` (or `canary.data`): the config's name, version and pages.
private struct ConfigData: Encodable {
    var name: String
    var version: String
    var config: [TestPage]
}

/// The candidate of a ``TestConfig``'s canary: `percent` of identified callers are served these pages as
/// `version` (which must differ from the active version).
public struct TestCanary: Encodable, Sendable {
    public var percent: Double
    public var name: String
    public var version: String
    public var pages: [TestPage]

    public init(percent: Double, name: String = "prefetchConfig", version: String, _ pages: [TestPage]) {
        self.percent = percent
        self.name = name
        self.version = version
        self.pages = pages
    }

    private enum Keys: String, CodingKey { case percent, data }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(percent, forKey: .percent)
        try container.encode(ConfigData(name: name, version: version, config: pages), forKey: .data)
    }
}

/// One page entry of a ``TestConfig``: the page URL (or pattern) and the API requests it makes.
public struct TestPage: Encodable, Sendable {
    public var url: String
    public var interfaces: [TestInterface]
    public var partnerOrigins: [String]?

    public init(_ url: String, partnerOrigins: [String]? = nil, _ interfaces: [TestInterface]) {
        self.url = url
        self.partnerOrigins = partnerOrigins
        self.interfaces = interfaces
    }
}

/// One interface of a ``TestPage``, with the fields of docs/configuration.md, "Interface fields".
public struct TestInterface: Encodable, Sendable {
    public var name: String?
    public var api: String
    public var method: HTTPMethod
    public var urlParam: Bool?
    public var bodyParam: Bool?
    public var body: TestJSON?
    /// Seconds a stored response may be handed out.
    public var ttl: Int?
    /// Upstream timeout in milliseconds.
    public var timeout: Int?
    public var headers: [String: String]?
    public var params: [String]?
    public var bodyType: BodyType?
    public var credentials: CredentialsMode?
    public var secPurpose: Bool?
    public var query: TestJSON?

    public init(
        name: String? = nil, api: String, method: HTTPMethod = .GET, urlParam: Bool? = nil, bodyParam: Bool? = nil,
        body: TestJSON? = nil, ttl: Int? = nil, timeout: Int? = nil, headers: [String: String]? = nil, params: [String]? = nil,
        bodyType: BodyType? = nil, credentials: CredentialsMode? = nil, secPurpose: Bool? = nil, query: TestJSON? = nil
    ) {
        self.name = name
        self.api = api
        self.method = method
        self.urlParam = urlParam
        self.bodyParam = bodyParam
        self.body = body
        self.ttl = ttl
        self.timeout = timeout
        self.headers = headers
        self.params = params
        self.bodyType = bodyType
        self.credentials = credentials
        self.secPurpose = secPurpose
        self.query = query
    }

    private enum Keys: String, CodingKey {
        case name, api, method, urlParam, bodyParam, body, ttl, timeout, headers, params, bodyType, credentials, secPurpose, query
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encodeIfPresent(name, forKey: .name)
        try container.encode(api, forKey: .api)
        try container.encode(method.rawValue, forKey: .method)
        try container.encodeIfPresent(urlParam, forKey: .urlParam)
        try container.encodeIfPresent(bodyParam, forKey: .bodyParam)
        try container.encodeIfPresent(body, forKey: .body)
        try container.encodeIfPresent(ttl, forKey: .ttl)
        try container.encodeIfPresent(timeout, forKey: .timeout)
        try container.encodeIfPresent(headers, forKey: .headers)
        try container.encodeIfPresent(params, forKey: .params)
        try container.encodeIfPresent(bodyType?.rawValue, forKey: .bodyType)
        try container.encodeIfPresent(credentials?.rawValue, forKey: .credentials)
        try container.encodeIfPresent(secPurpose, forKey: .secPurpose)
        try container.encodeIfPresent(query, forKey: .query)
    }
}

/// A JSON value written as a Swift literal (`["uid": "${user.info:/data/uid}", "page": 1]`), for an interface's
/// `body` and `query`.
public enum TestJSON: Encodable, Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([TestJSON])
    case object([String: TestJSON])

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let values): try container.encode(values)
        case .object(let members): try container.encode(members)
        }
    }
}

extension TestJSON: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: TestJSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, TestJSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
