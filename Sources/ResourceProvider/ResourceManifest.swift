public import Foundation
import PrefetchCore

/// The operator's list of resources the provider publishes (`configs/resources.json`): which URLs, from which hosts,
/// and how many bytes they may take. Only this file adds a resource or a host: nothing a page or a shell sends does.
///
/// ```json
/// {"allowHosts": ["static.example.com", "cdn.example.com:8443"],
///  "maxResourceBytes": 2097152, "maxTotalBytes": 67108864,
///  "resources": ["https://static.example.com/app.js"],
///  "pages": {"https://m.example.com/home": ["https://static.example.com/home.css"],
///            "https://static.example.com/shop/": {"resources": [], "discover": true}}}
/// ```
///
/// `pages` groups resources for the operator's reading: the published map is the union of `resources` and every
/// page's list, once each. A page given as `{"resources": [...], "discover": true}` is also loaded at each refresh
/// and the same-host scripts, stylesheets and images its HTML names are added for that refresh
/// (`PageDiscovery`); such a page's URL must itself be on `allowHosts`.
public struct ResourceManifest: Sendable, Equatable {
    /// Hosts resources may come from: `host` (any port) or `host:port`, lowercased.
    public var allowHosts: [String]
    /// The largest body one resource may have; a larger answer is refused. Default 2 MiB.
    public var maxResourceBytes: Int
    /// The largest total of the published bodies; resources past it are refused. Default 64 MiB.
    public var maxTotalBytes: Int
    /// The resources, in order, each once (the union of `resources` and `pages`).
    public var urls: [String]
    /// The pages whose HTML is scanned at each refresh for more resources (`"discover": true`), sorted.
    public var discoverPages: [String]

    /// The default cap of one resource.
    public static let defaultMaxResourceBytes = 2 * 1024 * 1024
    /// The default cap of all resources together.
    public static let defaultMaxTotalBytes = 64 * 1024 * 1024
    /// The largest manifest file read.
    public static let maximumFileBytes = 4 * 1024 * 1024

    /// A manifest from its parts, validated.
    public init(
        allowHosts: [String], maxResourceBytes: Int? = nil, maxTotalBytes: Int? = nil, resources: [String], pages: [String: [String]] = [:],
        discover: [String] = []
    )
        throws(ManifestError)
    {
        var problems: [String] = []
        var hosts: [String] = []
        for (index, host) in allowHosts.enumerated() {
            let lowered = host.lowercased()
            if lowered.isEmpty || lowered.contains("/") || lowered.contains("@") || lowered.contains("*") {
                problems.append("allowHosts[\(index)]: \"\(host)\" is not a host or host:port")
            } else {
                hosts.append(lowered)
            }
        }
        let maxResource = maxResourceBytes ?? Self.defaultMaxResourceBytes
        let maxTotal = maxTotalBytes ?? Self.defaultMaxTotalBytes
        if maxResource < 1 { problems.append("maxResourceBytes: \(maxResource) must be at least 1") }
        if maxTotal < 1 { problems.append("maxTotalBytes: \(maxTotal) must be at least 1") }
        var urls: [String] = []
        var seen: Set<String> = []
        func check(_ url: String, field: String, list: inout Set<String>) {
            if let problem = Self.problem(with: url, allowHosts: hosts) {
                problems.append("\(field): \(problem)")
                return
            }
            guard list.insert(url).inserted else {
                problems.append("\(field): \"\(Redaction.url(url))\" is listed twice")
                return
            }
            if seen.insert(url).inserted { urls.append(url) }
        }
        var listed: Set<String> = []
        for (index, url) in resources.enumerated() { check(url, field: "resources[\(index)]", list: &listed) }
        for page in pages.keys.sorted() {
            var pageListed: Set<String> = []
            for (index, url) in (pages[page] ?? []).enumerated() {
                check(url, field: "pages[\"\(page)\"][\(index)]", list: &pageListed)
            }
        }
        var discoverPages: [String] = []
        for page in Set(discover).sorted() {
            if let problem = Self.problem(with: page, allowHosts: hosts) {
                problems.append("pages[\"\(page)\"].discover: \(problem)")
            } else {
                discoverPages.append(page)
            }
        }
        guard problems.isEmpty else { throw ManifestError(problems: problems) }
        self.allowHosts = hosts
        self.maxResourceBytes = maxResource
        self.maxTotalBytes = maxTotal
        self.urls = urls
        self.discoverPages = discoverPages
    }

    /// Why `url` may not be published, or nil: it must be an absolute http(s) URL without a fragment or user
    /// information, on an allowed host.
    static func problem(with url: String, allowHosts: [String]) -> String? {
        let parsed: HTTPURL
        do {
            parsed = try HTTPURL(parsing: url)
        } catch {
            return "\"\(Redaction.url(url))\" is not an http(s) URL (\(error.message))"
        }
        guard parsed.fragment == nil else { return "\"\(Redaction.url(url))\" has a #fragment (the map's keys have none)" }
        guard let authority = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false).dropFirst(2).first,
            !authority.contains("@")
        else { return "\"\(Redaction.url(url))\" carries user information (no credentials in a resource URL)" }
        let host = parsed.host.lowercased()
        let hostPort = "\(host):\(parsed.effectivePort)"
        guard allowHosts.contains(where: { $0 == host || $0 == hostPort }) else {
            return "\"\(Redaction.url(url))\": host \(hostPort) is not in allowHosts"
        }
        return nil
    }

    /// The manifest in `data` (its JSON form), validated.
    public static func decode(_ data: Data) throws(ManifestError) -> ResourceManifest {
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: data)
        } catch {
            throw ManifestError(problems: ["not a resource manifest: \(Self.describe(error))"])
        }
        let pages = file.pages ?? [:]
        return try ResourceManifest(
            allowHosts: file.allowHosts, maxResourceBytes: file.maxResourceBytes, maxTotalBytes: file.maxTotalBytes,
            resources: file.resources ?? [], pages: pages.mapValues(\.resources),
            discover: pages.filter(\.value.discover).map(\.key))
    }

    /// The manifest at `path`, validated; the error names the path.
    public static func load(path: String) throws(ManifestError) -> ResourceManifest {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ManifestError(problems: ["\(path): cannot be read"])
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maximumFileBytes + 1)) ?? Data()
        guard data.count <= maximumFileBytes else {
            throw ManifestError(problems: ["\(path): larger than \(maximumFileBytes) bytes"])
        }
        do {
            return try decode(data)
        } catch {
            throw ManifestError(problems: error.problems.map { "\(path): \($0)" })
        }
    }

    private struct File: Decodable {
        var allowHosts: [String]
        var maxResourceBytes: Int?
        var maxTotalBytes: Int?
        var resources: [String]?
        var pages: [String: Page]?
    }

    /// A page's entry: its list of resources, or `{"resources": [...], "discover": true}`.
    private struct Page: Decodable {
        var resources: [String]
        var discover: Bool

        enum CodingKeys: String, CodingKey { case resources, discover }

        init(from decoder: any Decoder) throws {
            if let list = try? decoder.singleValueContainer().decode([String].self) {
                resources = list
                discover = false
                return
            }
            let container = try decoder.container(keyedBy: CodingKeys.self)
            resources = try container.decodeIfPresent([String].self, forKey: .resources) ?? []
            discover = try container.decodeIfPresent(Bool.self, forKey: .discover) ?? false
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): "the member \"\(key.stringValue)\" is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            "\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)"
        case DecodingError.dataCorrupted(let context): context.debugDescription
        default: "\(error)"
        }
    }
}

/// A manifest that cannot be used: every problem, each naming its field (`resources[2]: ...`).
public struct ManifestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One line per problem.
    public var problems: [String]

    /// An error of `problems`.
    public init(problems: [String]) { self.problems = problems }

    /// "invalid resource manifest: ..." with every problem.
    public var description: String { "invalid resource manifest: " + problems.joined(separator: "; ") }
}
