/// Finds the config entry for a page URL.
///
/// Rules (documented in the README, tested in `PageMatcherTests`):
/// - The page URL's query and `#fragment` are ignored; scheme and host compare case-insensitively; an
///   explicit default port equals no port; dot segments are resolved as a browser would.
/// - Trailing slash: one trailing slash is ignored, so `/help/new/` and `/help/new` are the same page
///   (the root `/` stays `/`). Paths are otherwise compared byte for byte (case-sensitive, no decoding).
/// - An entry whose path has a `*` segment or a `{name}` segment (optionally with a literal prefix and
///   suffix inside the segment, `{id}.html`) is a pattern. Each such segment matches exactly one
///   non-empty path segment; `{name}` also captures it, and the page's captured values are forwarded like
///   query parameters.
/// - Exact entries win over patterns. Among patterns for the same origin and segment count the most
///   specific wins: segments compare from the left, a literal segment beats an affixed capture
///   (`{id}.html`), which beats a bare `{id}` or `*`; on a tie, longer literal affixes win; then the entry
///   listed first.
///
/// Exact lookups are one hash lookup; patterns are bucketed by origin and segment count and kept sorted
/// by specificity, so the first pattern that matches is the answer.
public struct PageMatcher: Sendable {
    private var exact: [String: Int] = [:]
    private var patterns: [String: [Int]] = [:]
    private let pages: [PageEntry]

    init(pages: [PageEntry]) {
        self.pages = pages
        for (position, page) in pages.enumerated() {
            if let pattern = page.pattern {
                patterns[Self.bucketKey(origin: page.parsedURL.origin, segmentCount: pattern.segments.count), default: []].append(position)
            } else {
                exact[Self.exactKey(page.parsedURL)] = position
            }
        }
        for key in patterns.keys {
            patterns[key]!.sort { lhs, rhs in
                let order = pages[lhs].pattern!.specificity(comparedTo: pages[rhs].pattern!)
                return order == .orderedSame ? lhs < rhs : order == .orderedDescending
            }
        }
    }

    /// The key under which an exact entry or page URL is looked up.
    static func exactKey(_ url: HTTPURL) -> String {
        url.origin + PathRules.canonical(url.path)
    }

    static func bucketKey(origin: String, segmentCount: Int) -> String {
        "\(origin)#\(segmentCount)"
    }

    /// The entry for `page`, with the values its `{name}` segments captured, or `nil`.
    public func match(_ page: HTTPURL) -> PageMatch? {
        if let position = exact[Self.exactKey(page)] {
            return PageMatch(entry: pages[position], captures: [])
        }
        let segments = PathRules.segments(of: page.path)
        guard let candidates = patterns[Self.bucketKey(origin: page.origin, segmentCount: segments.count)] else { return nil }
        for position in candidates {
            if let captures = pages[position].pattern!.match(segments) {
                return PageMatch(entry: pages[position], captures: captures)
            }
        }
        return nil
    }
}

/// A matched page: its config entry and the values captured by `{name}` segments, in path order.
public struct PageMatch: Sendable {
    public var entry: PageEntry
    /// `(name, raw segment text)` pairs.
    public var captures: [(name: String, value: String)]
}

/// A page path with `*` and `{name}` segments.
public struct PathPattern: Sendable, Hashable {
    /// One path segment of a pattern.
    public enum Segment: Sendable, Hashable {
        case literal(String)
        /// `*`: any one non-empty segment.
        case wildcard
        /// `prefix{name}suffix`: a segment that starts and ends with the affixes, capturing what is between.
        case capture(name: String, prefix: String, suffix: String)

        var rank: Int {
            switch self {
            case .literal: 3
            case .capture(_, let prefix, let suffix): prefix.isEmpty && suffix.isEmpty ? 1 : 2
            case .wildcard: 1
            }
        }

        var affixLength: Int {
            if case .capture(_, let prefix, let suffix) = self { return prefix.utf8.count + suffix.utf8.count }
            return 0
        }
    }

    public var segments: [Segment]

    /// Parses a config path; `nil` when it has no pattern segment. Throws a message for a malformed one.
    static func parse(_ path: String) throws(URLProblem) -> PathPattern? {
        let raw = PathRules.segments(of: path)
        var segments: [Segment] = []
        var sawPattern = false
        var names: Set<String> = []
        for part in raw {
            if part == "*" {
                segments.append(.wildcard)
                sawPattern = true
                continue
            }
            let opens = part.filter { $0 == "{" }.count
            let closes = part.filter { $0 == "}" }.count
            if opens == 0 && closes == 0 {
                if part.contains("*") { throw URLProblem("has \"*\" inside the segment \"\(part)\"; \"*\" must be a whole segment") }
                segments.append(.literal(String(part)))
                continue
            }
            guard opens == 1, closes == 1, let open = part.firstIndex(of: "{"), let close = part.firstIndex(of: "}"), open < close else {
                throw URLProblem("has a malformed pattern segment \"\(part)\" (one {name} per segment)")
            }
            let name = String(part[part.index(after: open)..<close])
            guard !name.isEmpty, name.utf8.count <= 64, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
                throw URLProblem("has an invalid segment name \"{\(name)}\" (letters, digits and _ only)")
            }
            guard names.insert(name).inserted else { throw URLProblem("uses the segment name {\(name)} twice") }
            let prefix = String(part[..<open])
            let suffix = String(part[part.index(after: close)...])
            if prefix.contains("*") || suffix.contains("*") { throw URLProblem("mixes \"*\" and {\(name)} in one segment") }
            segments.append(.capture(name: name, prefix: prefix, suffix: suffix))
            sawPattern = true
        }
        return sawPattern ? PathPattern(segments: segments) : nil
    }

    /// The captures when `path` (already split) matches, else `nil`.
    func match(_ path: [Substring]) -> [(name: String, value: String)]? {
        guard path.count == segments.count else { return nil }
        var captures: [(name: String, value: String)] = []
        for (segment, part) in zip(segments, path) {
            switch segment {
            case .literal(let text):
                if part != text { return nil }
            case .wildcard:
                if part.isEmpty { return nil }
            case .capture(let name, let prefix, let suffix):
                guard part.count > prefix.count + suffix.count, part.hasPrefix(prefix), part.hasSuffix(suffix) else { return nil }
                let value = part.dropFirst(prefix.count).dropLast(suffix.count)
                captures.append((name, String(value)))
            }
        }
        return captures
    }

    /// `.orderedDescending` when `self` is more specific than `other`.
    func specificity(comparedTo other: PathPattern) -> ComparisonOutcome {
        for (lhs, rhs) in zip(segments, other.segments) where lhs.rank != rhs.rank {
            return lhs.rank > rhs.rank ? .orderedDescending : .orderedAscending
        }
        let lhsAffix = segments.reduce(0) { $0 + $1.affixLength }
        let rhsAffix = other.segments.reduce(0) { $0 + $1.affixLength }
        if lhsAffix != rhsAffix { return lhsAffix > rhsAffix ? .orderedDescending : .orderedAscending }
        return .orderedSame
    }

    /// A three-way comparison result (Foundation-free).
    enum ComparisonOutcome { case orderedAscending, orderedSame, orderedDescending }
}
