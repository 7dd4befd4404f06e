/// Finds the config entry for a page URL: exact entries by one hash lookup, then patterns of the page's origin and
/// segment count, most specific first. The rules are in docs/configuration.md ("Page matching"), tested in `PageMatcherTests`.
///
/// Design notes: `docs/design/page-matching.md`.
public struct PageMatcher: Sendable {
    private var exact: [PageKey: Int] = [:]
    private var patterns: [BucketKey: Bucket] = [:]
    private let pages: [PageEntry]

    /// Patterns of one origin and segment count, in precedence order.
    struct Bucket: Sendable {
        /// Page positions, most specific first.
        var sorted: [Int] = []
        /// Offsets into `sorted` of the patterns whose first segment is this literal.
        var byFirstLiteral: [String: [Int]] = [:]
        /// Offsets into `sorted` of the patterns whose first segment is `*` or a capture.
        var openFirst: [Int] = []
    }

    /// - Parameter exactKeys: when given, the key of each exact page (`nil` for a pattern), as the validator already
    ///   computed them for its duplicate check.
    init(pages: [PageEntry], exactKeys: [PageKey?]? = nil) {
        var exact: [PageKey: Int] = [:]
        exact.reserveCapacity(pages.count)
        for (position, page) in pages.enumerated() where page.pattern == nil {
            exact[exactKeys?[position] ?? Self.exactKey(page.parsedURL)] = position
        }
        self.init(pages: pages, exact: exact)
    }

    /// - Parameter exact: the exact pages' positions in `pages` by key, as the validator built them for its duplicate
    ///   check.
    init(pages: [PageEntry], exact: [PageKey: Int]) {
        self.pages = pages
        self.exact = exact
        var unsorted: [BucketKey: [Int]] = [:]
        for (position, page) in pages.enumerated() {
            if let pattern = page.pattern {
                unsorted[BucketKey(page.parsedURL, pattern.segments.count), default: []].append(position)
            }
        }
        for (key, var members) in unsorted {
            members.sort { lhs, rhs in
                let order = pages[lhs].pattern!.specificity(comparedTo: pages[rhs].pattern!)
                return order == .orderedSame ? lhs < rhs : order == .orderedDescending
            }
            var bucket = Bucket(sorted: members)
            for (offset, position) in members.enumerated() {
                if case .literal(let text)? = pages[position].pattern!.segments.first {
                    bucket.byFirstLiteral[text, default: []].append(offset)
                } else {
                    bucket.openFirst.append(offset)
                }
            }
            patterns[key] = bucket
        }
    }

    /// The key under which an exact entry or page URL is looked up.
    ///
    /// Its parts are slices of the URL's text (a copy only for a path that is not canonical).
    static func exactKey(_ url: HTTPURL) -> PageKey {
        let canonical = url.withPathBytes { text -> String?? in
            guard url.textIsASCII || text.isASCII(0..<text.bytes.count) else { return .none }
            if PathRules.isCanonical(text) { return .some(nil) }
            var ranges: [Range<Int>] = []
            PathRules.segmentRanges(text, into: &ranges)
            return .some(PathRules.canonical(text, ranges))
        }
        switch canonical {
        case .some(.some(let built)): return PageKey(url, built)
        case .some(.none): return PageKey(url, url.pathSlice)
        case .none: return PageKey(url, PathRules.canonical(url.path))
        }
    }

    /// The entry for `page`, with the values its `{name}` segments captured, or `nil`.
    public func match(_ page: HTTPURL) -> PageMatch? {
        let onBytes = page.withPathBytes { text -> PageMatch?? in
            guard page.textIsASCII || text.isASCII(0..<text.bytes.count) else { return .none }
            // A canonical path (nearly every page) is its own key: no segment ranges are needed to look it up.
            let isCanonical = PathRules.isCanonical(text)
            if isCanonical, let position = exact[PageKey(page, page.pathSlice)] {
                return PageMatch(entry: pages[position], captures: [])
            }
            var ranges: [Range<Int>] = []
            ranges.reserveCapacity(8)
            PathRules.segmentRanges(text, into: &ranges)
            if !isCanonical, let built = PathRules.canonical(text, ranges), let position = exact[PageKey(page, built)] {
                return PageMatch(entry: pages[position], captures: [])
            }
            guard let bucket = patterns[BucketKey(page, ranges.count)] else { return .some(nil) }
            let firstLiteral = ranges.isEmpty ? nil : bucket.byFirstLiteral[text.string(ranges[0])]
            return .some(
                Self.firstMatch(in: bucket, literal: firstLiteral ?? []) { position in
                    pages[position].pattern!.match(text, ranges)
                }.map { PageMatch(entry: pages[$0.position], captures: $0.captures) })
        }
        if let onBytes { return onBytes }
        return matchCharacters(page)
    }

    /// Walks the candidates of `bucket` that can match, in precedence order: the patterns whose first literal is
    /// the page's first segment merged with those whose first segment is open.
    private static func firstMatch(
        in bucket: Bucket, literal: [Int], _ attempt: (Int) -> [(name: String, value: String)]?
    ) -> (position: Int, captures: [(name: String, value: String)])? {
        var literalNext = 0
        var openNext = 0
        while literalNext < literal.count || openNext < bucket.openFirst.count {
            let offset: Int
            if openNext == bucket.openFirst.count || (literalNext < literal.count && literal[literalNext] < bucket.openFirst[openNext]) {
                offset = literal[literalNext]
                literalNext += 1
            } else {
                offset = bucket.openFirst[openNext]
                openNext += 1
            }
            let position = bucket.sorted[offset]
            if let captures = attempt(position) { return (position, captures) }
        }
        return nil
    }

    /// The original `Substring` matching, for a path with a non-ASCII byte.
    private func matchCharacters(_ page: HTTPURL) -> PageMatch? {
        if let position = exact[Self.exactKey(page)] {
            return PageMatch(entry: pages[position], captures: [])
        }
        let segments = PathRules.segments(of: page.path)
        guard let bucket = patterns[BucketKey(page, segments.count)] else { return nil }
        for position in bucket.sorted {
            if let captures = pages[position].pattern!.match(segments) {
                return PageMatch(entry: pages[position], captures: captures)
            }
        }
        return nil
    }
}

/// Scheme, host and port: hashing the parts avoids building `origin` strings per lookup, and the host is a slice of
/// the URL's text (no copy, hashed as bytes when ASCII).
struct OriginKey: Hashable, Sendable {
    var https: Bool
    var host: TextSlice
    var port: Int?

    init(_ url: HTTPURL) {
        https = url.isHTTPS
        host = url.hostSlice
        port = url.port
    }
}

/// An origin and one more part: the canonical path of an exact page (``PageKey``), or the segment count of a
/// pattern bucket (``BucketKey``).
struct OriginKeyed<Detail: Hashable & Sendable>: Hashable, Sendable {
    var origin: OriginKey
    var detail: Detail

    init(_ url: HTTPURL, _ detail: Detail) {
        origin = OriginKey(url)
        self.detail = detail
    }
}

extension OriginKeyed where Detail == TextSlice {
    init(_ url: HTTPURL, _ detail: String) {
        self.init(url, TextSlice(detail))
    }
}

typealias PageKey = OriginKeyed<TextSlice>
typealias BucketKey = OriginKeyed<Int>

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

    public var segments: [Segment] {
        didSet { isASCII = Self.isASCII(segments) }
    }

    /// Whether every literal and affix is ASCII: then matching an ASCII page path is byte comparison, which is
    /// what `Character` comparison amounts to there. Otherwise the `Substring` matcher decides (a non-ASCII
    /// literal compares by canonical equivalence, as `String` does).
    private(set) var isASCII: Bool

    init(segments: [Segment]) {
        self.segments = segments
        self.isASCII = Self.isASCII(segments)
    }

    private static func isASCII(_ segments: [Segment]) -> Bool {
        segments.allSatisfy { segment in
            switch segment {
            case .literal(let text): text.utf8.allSatisfy { $0 < 0x80 }
            case .wildcard: true
            case .capture(_, let prefix, let suffix): prefix.utf8.allSatisfy { $0 < 0x80 } && suffix.utf8.allSatisfy { $0 < 0x80 }
            }
        }
    }

    /// Parses a config path; `nil` when it has no pattern segment. Throws a message for a malformed one.
    ///
    /// An ASCII path is checked on bytes first: a path with no `*`, `{` or `}` byte has no pattern segment and
    /// cannot be malformed, so most config entries (the exact pages) are settled by one scan; the others are cut
    /// into segments by ``PathRules/segmentRanges(_:into:)``, each checked by the same rules as below.
    static func parse(_ path: String) throws(URLProblem) -> PathPattern? {
        var path = path
        let onBytes = path.withUTF8 { parseBytes(ByteText($0)) }
        if let onBytes { return try onBytes.get() }
        return try parseSegments(PathRules.segments(of: path)).get()
    }

    /// ``parse(_:)`` of a URL's path, read from the URL's text (no path `String` is made for an ASCII path).
    static func parse(pathOf url: HTTPURL) throws(URLProblem) -> PathPattern? {
        if let onBytes = url.withPathBytes({ parseBytes($0) }) { return try onBytes.get() }
        return try parseSegments(PathRules.segments(of: url.path)).get()
    }

    /// The byte rules of ``parse(_:)``, or `nil` for a path with a non-ASCII byte.
    private static func parseBytes(_ text: ByteText) -> Result<PathPattern?, URLProblem>? {
        let bytes = text.bytes
        var special = false
        for byte in bytes {
            if byte >= 0x80 { return nil }
            if byte == UInt8(ascii: "*") || byte == UInt8(ascii: "{") || byte == UInt8(ascii: "}") { special = true }
        }
        if !special { return .success(nil) }
        var ranges: [Range<Int>] = []
        PathRules.segmentRanges(text, into: &ranges)
        do throws(URLProblem) {
            return .success(try parseSegmentBytes(text, ranges))
        } catch {
            return .failure(error)
        }
    }

    /// ``parseSegmentsThrowing(_:)`` over the segments of an ASCII path (offset ranges into `text`), in the same order
    /// with the same messages: each byte is one `Character` there, and `Character.isLetter` / `isNumber` of an ASCII
    /// byte are its letters and digits. Strings are made for the segments kept and the texts a message names only.
    private static func parseSegmentBytes(_ text: ByteText, _ ranges: [Range<Int>]) throws(URLProblem) -> PathPattern? {
        let bytes = text.bytes
        var segments: [Segment] = []
        segments.reserveCapacity(ranges.count)
        var sawPattern = false
        for part in ranges {
            if text.equals(part, "*") {
                segments.append(.wildcard)
                sawPattern = true
                continue
            }
            var open: Int?
            var close: Int?
            var opens = 0
            var closes = 0
            var star = false
            for offset in part {
                switch bytes[offset] {
                case UInt8(ascii: "{"):
                    opens += 1
                    if open == nil { open = offset }
                case UInt8(ascii: "}"):
                    closes += 1
                    if close == nil { close = offset }
                case UInt8(ascii: "*"): star = true
                default: break
                }
            }
            if opens == 0 && closes == 0 {
                if star { throw URLProblem("has \"*\" inside the segment \"\(text.string(part))\"; \"*\" must be a whole segment") }
                segments.append(.literal(text.string(part)))
                continue
            }
            guard opens == 1, closes == 1, let open, let close, open < close else {
                throw URLProblem("has a malformed pattern segment \"\(text.string(part))\" (one {name} per segment)")
            }
            let nameRange = (open + 1)..<close
            guard !nameRange.isEmpty, nameRange.count <= 64,
                nameRange.allSatisfy({ ByteText.isASCIILetter(bytes[$0]) || ByteText.isDigit(bytes[$0]) || bytes[$0] == UInt8(ascii: "_") })
            else {
                throw URLProblem("has an invalid segment name \"{\(text.string(nameRange))}\" (letters, digits and _ only)")
            }
            let name = text.string(nameRange)
            let taken = segments.contains { segment in
                if case .capture(let other, _, _) = segment { return other == name }
                return false
            }
            guard !taken else { throw URLProblem("uses the segment name {\(name)} twice") }
            if star { throw URLProblem("mixes \"*\" and {\(name)} in one segment") }
            segments.append(
                .capture(name: name, prefix: text.string(part.lowerBound..<open), suffix: text.string((close + 1)..<part.upperBound)))
            sawPattern = true
        }
        return sawPattern ? PathPattern(segments: segments) : nil
    }

    /// ``parse(_:)`` by `Character`s, whatever the path's bytes: the reference the byte rules are held to.
    static func parseByCharacters(_ path: String) throws(URLProblem) -> PathPattern? {
        try parseSegments(PathRules.segments(of: path)).get()
    }

    /// The pattern rules over a path's segments.
    private static func parseSegments(_ raw: [Substring]) -> Result<PathPattern?, URLProblem> {
        do throws(URLProblem) {
            return .success(try parseSegmentsThrowing(raw))
        } catch {
            return .failure(error)
        }
    }

    private static func parseSegmentsThrowing(_ raw: [Substring]) throws(URLProblem) -> PathPattern? {
        var segments: [Segment] = []
        var sawPattern = false
        for part in raw {
            if part == "*" {
                segments.append(.wildcard)
                sawPattern = true
                continue
            }
            // Counted on bytes when the segment is ASCII (each byte is then one `Character`).
            let ascii = part.utf8.allSatisfy { $0 < 0x80 }
            let opens = ascii ? part.utf8.count(where: { $0 == UInt8(ascii: "{") }) : part.filter { $0 == "{" }.count
            let closes = ascii ? part.utf8.count(where: { $0 == UInt8(ascii: "}") }) : part.filter { $0 == "}" }.count
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
            // The names so far are those of the captures already made (a pattern has a few: no set is built).
            let taken = segments.contains { segment in
                if case .capture(let other, _, _) = segment { return other == name }
                return false
            }
            guard !taken else { throw URLProblem("uses the segment name {\(name)} twice") }
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

    /// The captures when the ASCII path in `text`, already cut into `path` segment ranges, matches, else `nil`.
    func match(_ text: ByteText, _ path: [Range<Int>]) -> [(name: String, value: String)]? {
        guard path.count == segments.count else { return nil }
        guard isASCII else { return match(path.map { Substring(text.string($0)) }) }
        var captures: [(name: String, value: String)] = []
        for (segment, part) in zip(segments, path) {
            switch segment {
            case .literal(let literal):
                if !Self.bytes(text, part, equal: literal) { return nil }
            case .wildcard:
                if part.isEmpty { return nil }
            case .capture(let name, let prefix, let suffix):
                let prefixCount = prefix.utf8.count
                let suffixCount = suffix.utf8.count
                guard part.count > prefixCount + suffixCount,
                    Self.bytes(text, part.lowerBound..<(part.lowerBound + prefixCount), equal: prefix),
                    Self.bytes(text, (part.upperBound - suffixCount)..<part.upperBound, equal: suffix)
                else { return nil }
                captures.append((name, text.string((part.lowerBound + prefixCount)..<(part.upperBound - suffixCount))))
            }
        }
        return captures
    }

    @inline(__always)
    private static func bytes(_ text: ByteText, _ range: Range<Int>, equal literal: String) -> Bool {
        if let equal = literal.utf8.withContiguousStorageIfAvailable({ text.equals(range, $0) }) { return equal }
        return literal.utf8.elementsEqual(UnsafeBufferPointer(rebasing: text.bytes[range]))
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
