import Foundation

/// One resource of a map: where its stored copy is, what its bytes hash to, and the type to answer it with.
public struct ResourceEntry: Sendable, Hashable, Codable {
    /// The resource's own version, as the provider writes it (text).
    public var version: String
    /// The MD5 of the body, lowercase hex (seed 001's field); checked when present, never enough alone.
    public var md5: String?
    /// The SHA-256 of the body, lowercase hex: what makes a body trusted.
    public var sha256: String?
    /// The URL of the stored copy, absolute or relative to the provider; the cache key of the body.
    public var download: String
    /// The `Content-Type` the body is answered with.
    public var ctype: String

    /// An entry with its fields as a provider publishes them.
    public init(version: String, md5: String? = nil, sha256: String? = nil, download: String, ctype: String) {
        self.version = version
        self.md5 = md5
        self.sha256 = sha256
        self.download = download
        self.ctype = ctype
    }

    /// Whether a body of this entry must be downloaded again when `other` replaces it: the bytes (version or a hash)
    /// or where they come from changed. A changed `ctype` alone needs no download: the type is read from the map.
    func needsDownload(replacedBy other: ResourceEntry) -> Bool {
        version != other.version || md5 != other.md5 || sha256 != other.sha256 || download != other.download
    }

    private enum CodingKeys: String, CodingKey {
        case version, md5, sha256, download, ctype
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decodeIfPresent(LenientText.self, forKey: .version)?.text ?? ""
        md5 = try container.decodeIfPresent(String.self, forKey: .md5)?.lowercased()
        sha256 = try container.decodeIfPresent(String.self, forKey: .sha256)?.lowercased()
        download = try container.decode(String.self, forKey: .download)
        ctype = try container.decodeIfPresent(String.self, forKey: .ctype) ?? "application/octet-stream"
    }
}

/// A version of the resource map: resource URLs (without fragment) to their entries.
public struct ResourceMap: Sendable, Hashable, Codable {
    /// The map's version, compared as text: any difference is a new map, none is ordered before another.
    public var version: String
    /// The entries by resource URL, fragments removed.
    public var entries: [String: ResourceEntry]

    /// A map whose keys are stored without their fragment (two keys that differ only by it keep the last one).
    public init(version: String, entries: [String: ResourceEntry]) {
        self.version = version
        var keyed: [String: ResourceEntry] = [:]
        for (url, entry) in entries.sorted(by: { $0.key < $1.key }) { keyed[ResourceKey.of(url)] = entry }
        self.entries = keyed
    }

    /// The entry a request for `url` is answered from: the map's key equal to `url` with its fragment removed.
    func entry(for url: URL) -> ResourceEntry? { entries[ResourceKey.of(url)] }
}

/// The seed's matching rule, in one place: a request URL matches a map key when both are equal once their
/// `#fragment` is removed. Nothing else is normalized (query, case, trailing slash all count).
enum ResourceKey {
    static func of(_ url: URL) -> String { of(url.absoluteString) }

    static func of(_ text: String) -> String {
        guard let hash = text.firstIndex(of: "#") else { return text }
        return String(text[..<hash])
    }
}

/// A JSON value read as text: a string as is, a number in its decimal form (a provider that writes `"version": 553`
/// still compares as text).
struct LenientText: Decodable {
    var text: String

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            self.text = text
        } else if let number = try? container.decode(Int.self) {
            self.text = String(number)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "neither a string nor an integer")
        }
    }
}
