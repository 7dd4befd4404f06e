/// An absolute `http` or `https` URL split into the parts the core works with, raw text kept.
///
/// Parsing is deliberately strict and simple: the service decides from these parts which host it will
/// contact, so nothing here guesses. Scheme and host are lowercased; an explicit default port (80 for
/// http, 443 for https) is the same as none; path and query keep their original bytes.
///
/// A value is the text it was parsed from and the parts' offsets in it: parsing makes no `String` (but one lowercased
/// copy of the text when the host has an uppercase letter, or one copy of the parts for a URL with a non-ASCII byte),
/// and ``host``, ``path``, ``query`` and ``fragment`` are made when read. Two values are equal when their parts are,
/// whatever text they were parsed from.
public struct HTTPURL: Sendable {
    /// The text the parts are UTF-8 offset ranges of: the parsed text itself, or the lowercased or normalised copy.
    let text: String
    private let hostStart: UInt32
    private let hostEnd: UInt32
    /// `pathStart == pathEnd`: the URL had no path, which reads as `/`.
    private let pathStart: UInt32
    private let pathEnd: UInt32
    private let queryStart: UInt32
    private let queryEnd: UInt32
    private let fragmentStart: UInt32
    private let fragmentEnd: UInt32
    /// The explicit port, 0 for the scheme's default.
    private let portNumber: UInt16
    private let flags: UInt8
    /// Whether ``text`` is all ASCII (the byte parser read it): then its slices are compared and hashed as bytes.
    let textIsASCII: Bool

    private static let httpsFlag: UInt8 = 1
    private static let queryFlag: UInt8 = 2
    private static let fragmentFlag: UInt8 = 4

    /// `http` or `https`, lowercased.
    public var scheme: String { isHTTPS ? "https" : "http" }
    /// The host, lowercased; an IPv6 literal keeps its brackets.
    public var host: String { String(hostText) }
    /// The port, or `nil` for the scheme's default.
    public var port: Int? { portNumber == 0 ? nil : Int(portNumber) }
    /// The raw path, `/` when the URL had none.
    public var path: String { String(pathText) }
    /// The raw query without `?`, or `nil` when the URL had no `?`.
    public var query: String? { queryText.map(String.init) }
    /// The raw fragment without `#`, or `nil`.
    public var fragment: String? { fragmentText.map(String.init) }

    /// `scheme://host[:port]`, the origin the URL addresses.
    public var origin: String {
        let scheme: StaticString = isHTTPS ? "https://" : "http://"
        let portText = port.map { ":\($0)" } ?? ""
        let host = hostRange
        // Written straight into one `String` of its size (no interpolation, no host slice).
        return withBytes { text in
            String(unsafeUninitializedCapacity: scheme.utf8CodeUnitCount + host.count + portText.utf8.count) { out in
                var count = 0
                for offset in 0..<scheme.utf8CodeUnitCount {
                    out[count] = scheme.utf8Start[offset]
                    count += 1
                }
                for offset in host {
                    out[count] = text.bytes[offset]
                    count += 1
                }
                for byte in portText.utf8 {
                    out[count] = byte
                    count += 1
                }
                return count
            }
        }
    }

    /// The port actually connected to.
    public var effectivePort: Int { port ?? (isHTTPS ? 443 : 80) }

    /// The longest URL accepted, in bytes. Page URLs carry user input; past this they are refused.
    public static let maximumLength = 96 * 1024

    var isHTTPS: Bool { flags & Self.httpsFlag != 0 }

    /// The host's offsets in ``text``.
    var hostRange: Range<Int> { Int(hostStart)..<Int(hostEnd) }
    /// The path's offsets in ``text``; empty when the URL had no path (``path`` is then `/`).
    var pathRange: Range<Int> { Int(pathStart)..<Int(pathEnd) }
    /// The query's offsets in ``text`` (without `?`), or `nil`.
    var queryRange: Range<Int>? { flags & Self.queryFlag == 0 ? nil : Int(queryStart)..<Int(queryEnd) }
    /// The fragment's offsets in ``text`` (without `#`), or `nil`.
    var fragmentRange: Range<Int>? { flags & Self.fragmentFlag == 0 ? nil : Int(fragmentStart)..<Int(fragmentEnd) }

    /// The host as a slice of ``text`` (no copy).
    var hostText: Substring { slice(hostRange) }
    /// The path as a slice of ``text`` (no copy), `/` when the URL had none.
    var pathText: Substring { pathStart == pathEnd ? "/" : slice(pathRange) }
    /// The query as a slice of ``text`` (no copy).
    var queryText: Substring? { queryRange.map(slice) }
    /// The fragment as a slice of ``text`` (no copy).
    var fragmentText: Substring? { fragmentRange.map(slice) }

    /// The host as a ``TextSlice`` of ``text`` (no `Substring` made).
    var hostSlice: TextSlice { TextSlice(text, hostRange, isASCII: textIsASCII) }
    /// The path as a ``TextSlice`` of ``text``, `/` when the URL had none.
    var pathSlice: TextSlice { pathStart == pathEnd ? TextSlice.root : TextSlice(text, pathRange, isASCII: textIsASCII) }

    private func slice(_ range: Range<Int>) -> Substring {
        let utf8 = text.utf8
        let lower = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
        return text[lower..<utf8.index(lower, offsetBy: range.count)]
    }

    /// Calls `body` with the UTF-8 bytes of ``text`` (the ranges above are offsets into them).
    func withBytes<Result>(_ body: (ByteText) -> Result) -> Result {
        if let result = text.utf8.withContiguousStorageIfAvailable({ body(ByteText($0)) }) { return result }
        var copy = text
        return copy.withUTF8 { body(ByteText($0)) }
    }

    /// Calls `body` with the path's bytes (`/` when the URL had none).
    func withPathBytes<Result>(_ body: (ByteText) -> Result) -> Result {
        if pathStart == pathEnd {
            let root: StaticString = "/"
            return body(ByteText(UnsafeBufferPointer(start: root.utf8Start, count: 1)))
        }
        let range = pathRange
        return withBytes { body(ByteText(UnsafeBufferPointer(rebasing: $0.bytes[range]))) }
    }

    /// Parses `text`, or throws a message saying what is wrong with it.
    ///
    /// Works on the UTF-8 bytes: the length and control-character checks scan them once and, when every byte is
    /// ASCII (nearly every URL: browsers and config authors percent-encode the rest), the whole parse is byte
    /// comparisons and offsets, one pass with no `Character` work and no `String` made (the value keeps `text`, or a
    /// copy with the host lowercased). Text with a non-ASCII byte takes ``init(parsingCharacters:)``, which keeps the
    /// `Character` semantics of the original parser (a `/` followed by a combining mark is not a delimiter; hosts
    /// accept any alphabetic scalar), so the accepted set is the same.
    public init(parsing text: String) throws(URLProblem) {
        let outcome: ByteOutcome
        if let done = text.utf8.withContiguousStorageIfAvailable({ Self.parseBytes($0) }) {
            outcome = done
        } else {
            var copy = text
            outcome = copy.withUTF8 { Self.parseBytes($0) }
        }
        switch outcome {
        case .parsed(let parts):
            self.init(text: parts.hostHasUppercase ? Self.lowercasing(parts.host, of: text) : text, parts: parts, isASCII: true)
        case .failed(let problem): throw problem
        case .notASCII: try self.init(parsingCharacters: text)
        }
    }

    /// Where the parts of an ASCII URL are, as the byte parser found them.
    private struct Parts {
        var https: Bool
        var host: Range<Int>
        var hostHasUppercase: Bool
        var port: Int?
        /// Empty when the URL has no path.
        var path: Range<Int>
        var query: Range<Int>?
        var fragment: Range<Int>?
    }

    /// What the byte parser concluded.
    private enum ByteOutcome {
        case parsed(Parts)
        case failed(URLProblem)
        /// Well-formed so far (length, no control character) but not ASCII: the `Character` parser decides.
        case notASCII
    }

    private init(text: String, parts: Parts, isASCII: Bool) {
        self.text = text
        textIsASCII = isASCII
        hostStart = UInt32(parts.host.lowerBound)
        hostEnd = UInt32(parts.host.upperBound)
        pathStart = UInt32(parts.path.lowerBound)
        pathEnd = UInt32(parts.path.upperBound)
        queryStart = UInt32(parts.query?.lowerBound ?? 0)
        queryEnd = UInt32(parts.query?.upperBound ?? 0)
        fragmentStart = UInt32(parts.fragment?.lowerBound ?? 0)
        fragmentEnd = UInt32(parts.fragment?.upperBound ?? 0)
        portNumber = UInt16(parts.port ?? 0)
        flags =
            (parts.https ? Self.httpsFlag : 0) | (parts.query == nil ? 0 : Self.queryFlag) | (parts.fragment == nil ? 0 : Self.fragmentFlag)
    }

    /// One text holding the parts the `Character` parser made, in URL order.
    private init(https: Bool, host: String, port: Int?, path: String, query: String?, fragment: String?) {
        var text = host
        text.reserveCapacity(host.utf8.count + path.utf8.count + (query?.utf8.count ?? 0) + (fragment?.utf8.count ?? 0))
        text += path
        let pathEnd = text.utf8.count
        text += query ?? ""
        let queryEnd = text.utf8.count
        text += fragment ?? ""
        let hostCount = host.utf8.count
        self.init(
            text: text,
            parts: Parts(
                https: https, host: 0..<hostCount, hostHasUppercase: false, port: port, path: hostCount..<pathEnd,
                query: query.map { _ in pathEnd..<queryEnd }, fragment: fragment.map { _ in queryEnd..<text.utf8.count }),
            isASCII: false)
    }

    /// `text` with the ASCII bytes in `range` lowercased (the same length, so every offset still holds).
    private static func lowercasing(_ range: Range<Int>, of text: String) -> String {
        var text = text
        return text.withUTF8 { bytes in
            String(unsafeUninitializedCapacity: bytes.count) { out in
                for offset in 0..<bytes.count {
                    out[offset] = range.contains(offset) ? ByteText.asciiLowercased(bytes[offset]) : bytes[offset]
                }
                return bytes.count
            }
        }
    }

    /// The byte parser: the same checks in the same order as the `Character` parser, on ASCII input.
    private static func parseBytes(_ bytes: UnsafeBufferPointer<UInt8>) -> ByteOutcome {
        if bytes.isEmpty { return .failed(URLProblem("is empty")) }
        if bytes.count > maximumLength {
            return .failed(URLProblem("is \(bytes.count) bytes long; the limit is \(maximumLength)"))
        }
        var ascii = true
        // Printable ASCII eight bytes at a time; the first word with another byte is read byte by byte from there.
        var start = 0
        while start + 8 <= bytes.count && !ByteText.hasNonPrintableByte(ByteText.word(bytes, at: start)) { start += 8 }
        for offset in start..<bytes.count {
            let byte = bytes[offset]
            if byte < 0x20 || byte == 0x7F {
                return .failed(URLProblem("contains a control character (byte \(byte)) at offset \(offset)"))
            }
            if byte >= 0x80 { ascii = false }
        }
        guard ascii else { return .notASCII }
        let text = ByteText(bytes)
        let colonOffset = text.firstIndex(of: UInt8(ascii: ":"), in: 0..<bytes.count)
        guard let colon = colonOffset, colon + 3 <= bytes.count, bytes[colon + 1] == UInt8(ascii: "/"),
            bytes[colon + 2] == UInt8(ascii: "/")
        else {
            return .failed(URLProblem("is not an absolute http(s) URL (no \"://\")"))
        }
        let https: Bool
        if text.equalsIgnoringASCIICase(0..<colon, "http") {
            https = false
        } else if text.equalsIgnoringASCIICase(0..<colon, "https") {
            https = true
        } else {
            return .failed(URLProblem("has scheme \"\(text.string(0..<colon))\"; only http and https are supported"))
        }
        let restStart = colon + 3
        // One scan of the authority, noting its `@` and its last `:` on the way.
        var authorityEnd = restStart
        var sawAt = false
        var lastColon: Int?
        while authorityEnd < bytes.count {
            let byte = bytes[authorityEnd]
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") || byte == UInt8(ascii: "\\") { break }
            if byte == UInt8(ascii: "@") { sawAt = true }
            if byte == UInt8(ascii: ":") { lastColon = authorityEnd }
            authorityEnd += 1
        }
        let authority = restStart..<authorityEnd
        if authorityEnd < bytes.count && bytes[authorityEnd] == UInt8(ascii: "\\") {
            return .failed(URLProblem("has a backslash after the host"))
        }
        if sawAt {
            return .failed(URLProblem("carries credentials (user@host), which are not accepted"))
        }
        if authority.isEmpty { return .failed(URLProblem("has no host")) }

        let host: Range<Int>
        var portText: Range<Int>?
        let bracketed = bytes[authority.lowerBound] == UInt8(ascii: "[")
        if bracketed {
            guard let close = text.firstIndex(of: UInt8(ascii: "]"), in: authority) else {
                return .failed(URLProblem("has an unterminated IPv6 address"))
            }
            host = authority.lowerBound..<(close + 1)
            if close + 1 < authority.upperBound {
                guard bytes[close + 1] == UInt8(ascii: ":") else { return .failed(URLProblem("has junk after the IPv6 address")) }
                portText = (close + 2)..<authority.upperBound
            }
            let inner = (host.lowerBound + 1)..<(host.upperBound - 1)
            if inner.isEmpty || !inner.allSatisfy({ ByteText.isIPv6Byte(bytes[$0]) }) {
                return .failed(URLProblem("has an invalid IPv6 address \"\(text.string(host))\""))
            }
        } else if let colon = lastColon {
            host = authority.lowerBound..<colon
            portText = (colon + 1)..<authority.upperBound
        } else {
            host = authority
        }
        if host.isEmpty { return .failed(URLProblem("has no host")) }
        var hostHasUppercase = false
        if !bracketed {
            var doubleDot = false
            var previous: UInt8 = 0
            for offset in host {
                let byte = bytes[offset]
                guard ByteText.isHostByte(byte) else {
                    return .failed(URLProblem("has an invalid character \"\(Character(Unicode.Scalar(byte)))\" in its host"))
                }
                if ByteText.isASCIIUppercase(byte) { hostHasUppercase = true }
                if byte == UInt8(ascii: ".") && previous == UInt8(ascii: ".") { doubleDot = true }
                previous = byte
            }
            if bytes[host.lowerBound] == UInt8(ascii: ".") || doubleDot {
                return .failed(URLProblem("has an invalid host \"\(text.string(host))\""))
            }
        }
        var port: Int?
        if let portText {
            guard let value = ByteText.portValue(bytes, portText) else {
                return .failed(URLProblem("has an invalid port \"\(text.string(portText))\""))
            }
            port = value
        }
        if port == (https ? 443 : 80) { port = nil }
        // An IPv6 literal's hex digits are lowercased too.
        if bracketed { hostHasUppercase = host.contains { ByteText.isASCIIUppercase(bytes[$0]) } }

        var pathEnd = bytes.count
        var fragment: Range<Int>?
        var query: Range<Int>?
        // One scan for the first `?` and the first `#`: a `?` after the `#` is the fragment's.
        var offset = authorityEnd
        while offset < bytes.count {
            let byte = bytes[offset]
            if byte == UInt8(ascii: "#") {
                fragment = (offset + 1)..<bytes.count
                break
            }
            if byte == UInt8(ascii: "?") && query == nil { query = (offset + 1)..<bytes.count }
            offset += 1
        }
        if let fragment {
            pathEnd = fragment.lowerBound - 1
            if let found = query { query = found.lowerBound..<pathEnd }
        }
        if let query { pathEnd = query.lowerBound - 1 }
        return .parsed(
            Parts(
                https: https, host: host, hostHasUppercase: hostHasUppercase, port: port, path: authorityEnd..<pathEnd,
                query: query, fragment: fragment))
    }

    /// The original `Character`-level parser, for text with a non-ASCII byte (after the byte checks passed).
    ///
    /// Kept because grapheme clustering decides what a delimiter is there (`/` followed by U+0301 is one
    /// `Character`, not a `/`), and hosts accept any alphabetic scalar.
    init(parsingCharacters text: String) throws(URLProblem) {
        let parts = try Self.partsByCharacters(text)
        self.init(https: parts.https, host: parts.host, port: parts.port, path: parts.path, query: parts.query, fragment: parts.fragment)
    }

    /// The parts of `text` by the `Character` rules, as `String`s (what a value stored before it was offsets into its
    /// text; the tests hold every value's parts to them).
    static func partsByCharacters(
        _ text: String
    ) throws(URLProblem) -> (https: Bool, host: String, port: Int?, path: String, query: String?, fragment: String?) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else {
            throw URLProblem("is not an absolute http(s) URL (no \"://\")")
        }
        let scheme = text[..<colon].lowercased()
        guard scheme == "http" || scheme == "https" else {
            throw URLProblem("has scheme \"\(text[..<colon])\"; only http and https are supported")
        }
        var rest = text[text.index(colon, offsetBy: 3)...]
        let delimiters: Set<Character> = ["/", "?", "#", "\\"]
        let authorityEnd = rest.firstIndex(where: { delimiters.contains($0) }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        rest = rest[authorityEnd...]
        if rest.first == "\\" { throw URLProblem("has a backslash after the host") }
        if authority.contains("@") { throw URLProblem("carries credentials (user@host), which are not accepted") }
        if authority.isEmpty { throw URLProblem("has no host") }

        var host: Substring
        var portText: Substring?
        if authority.first == "[" {
            guard let close = authority.firstIndex(of: "]") else { throw URLProblem("has an unterminated IPv6 address") }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { throw URLProblem("has junk after the IPv6 address") }
                portText = after.dropFirst()
            }
            let inner = host.dropFirst().dropLast()
            if inner.isEmpty || !inner.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) {
                throw URLProblem("has an invalid IPv6 address \"\(host)\"")
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        if host.isEmpty { throw URLProblem("has no host") }
        if host.first != "[" {
            for scalar in host.unicodeScalars {
                let ok = scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "." || scalar == "_"
                if !ok || scalar == " " {
                    throw URLProblem("has an invalid character \"\(scalar)\" in its host")
                }
            }
            if host.hasPrefix(".") || host.contains("..") {
                throw URLProblem("has an invalid host \"\(host)\"")
            }
        }
        var port: Int?
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCII), let value = Int(portText), value > 0,
                value <= 65535
            else {
                throw URLProblem("has an invalid port \"\(portText)\"")
            }
            port = value
        }
        if port == (scheme == "https" ? 443 : 80) { port = nil }

        var fragment: String?
        if let hash = rest.firstIndex(of: "#") {
            fragment = String(rest[rest.index(after: hash)...])
            rest = rest[..<hash]
        }
        var query: String?
        if let question = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: question)...])
            rest = rest[..<question]
        }
        return (scheme == "https", host.lowercased(), port, rest.isEmpty ? "/" : String(rest), query, fragment)
    }
}

extension HTTPURL: Hashable {
    /// Equal parts, compared as `String`s compare them.
    public static func == (lhs: HTTPURL, rhs: HTTPURL) -> Bool {
        lhs.flags == rhs.flags && lhs.portNumber == rhs.portNumber && lhs.hostText == rhs.hostText && lhs.pathText == rhs.pathText
            && lhs.queryText == rhs.queryText && lhs.fragmentText == rhs.fragmentText
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(flags)
        hasher.combine(portNumber)
        hasher.combine(hostText)
        hasher.combine(pathText)
        hasher.combine(queryText)
        hasher.combine(fragmentText)
    }
}

extension HTTPURL: CustomDebugStringConvertible {
    /// The parts, as a struct of them would print.
    public var debugDescription: String {
        "HTTPURL(scheme: \(String(reflecting: scheme)), host: \(String(reflecting: host)), port: \(String(reflecting: port)), "
            + "path: \(String(reflecting: path)), query: \(String(reflecting: query)), fragment: \(String(reflecting: fragment)))"
    }
}

/// What is wrong with a URL; the caller adds which URL it was.
public struct URLProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Path handling shared by the matcher and the config loader.
///
/// ASCII paths (the page URLs a browser sends, every path in a generated config) are segmented on bytes into
/// offset ranges; a path with a non-ASCII byte is split as `Character`s, as it always was, because a `/`
/// followed by a combining mark is not a separator there.
enum PathRules {
    /// The segments of a path after removing dot segments (RFC 3986 §5.2.4), as a browser resolves them,
    /// and ignoring one trailing slash: `/a/b/` and `/a/b` are the same page; `/` stays the root.
    static func segments(of path: String) -> [Substring] {
        var output: [Substring] = []
        for segment in path.split(separator: "/", omittingEmptySubsequences: false).dropFirst() {
            switch segment {
            case ".", "%2e", "%2E": continue
            case "..", ".%2e", ".%2E", "%2e.", "%2E.", "%2e%2e", "%2E%2E":
                if !output.isEmpty { output.removeLast() }
            default: output.append(segment)
            }
        }
        if output.last == "" { output.removeLast() }
        return output
    }

    /// The canonical path used as a lookup key.
    static func canonical(_ path: String) -> String {
        var path = path
        let onBytes = path.withUTF8 { bytes -> String?? in
            let text = ByteText(bytes)
            guard text.isASCII(0..<bytes.count) else { return .none }
            var ranges: [Range<Int>] = []
            segmentRanges(text, into: &ranges)
            return .some(canonical(text, ranges))
        }
        switch onBytes {
        case .some(.some(let built)): return built
        case .some(.none): return path
        case .none: return "/" + segments(of: path).joined(separator: "/")
        }
    }

    /// Whether `canonical(text, ranges)` is `nil` (the path is its own canonical form), without cutting the path into
    /// ranges: it starts with `/`, and it is `/` or has no dot segment and no trailing `/`.
    static func isCanonical(_ text: ByteText) -> Bool {
        let count = text.bytes.count
        guard count > 0, text.bytes[0] == UInt8(ascii: "/") else { return false }
        if count == 1 { return true }
        if text.bytes[count - 1] == UInt8(ascii: "/") { return false }
        var start = 1
        while true {
            let end = text.firstIndex(of: UInt8(ascii: "/"), in: start..<count) ?? count
            if dotSegment(text, start..<end) != 0 { return false }
            if end == count { return true }
            start = end + 1
        }
    }

    /// ``segments(of:)`` for an ASCII path, as offset ranges into `text` (`output` is replaced).
    static func segmentRanges(_ text: ByteText, into output: inout [Range<Int>]) {
        output.removeAll(keepingCapacity: true)
        let count = text.bytes.count
        // `split` then `dropFirst`: whatever precedes the first `/` is not a segment.
        guard let firstSlash = text.firstIndex(of: UInt8(ascii: "/"), in: 0..<count) else { return }
        var start = firstSlash + 1
        while true {
            let end = text.firstIndex(of: UInt8(ascii: "/"), in: start..<count) ?? count
            let piece = start..<end
            switch dotSegment(text, piece) {
            case 1: break
            case 2: if !output.isEmpty { output.removeLast() }
            default: output.append(piece)
            }
            if end == count { break }
            start = end + 1
        }
        if let last = output.last, last.isEmpty { output.removeLast() }
    }

    /// 1 for a `.` segment, 2 for a `..` segment (in the spellings ``segments(of:)`` lists), else 0.
    @inline(__always)
    static func dotSegment(_ text: ByteText, _ piece: Range<Int>) -> Int {
        switch piece.count {
        case 1: return text.equals(piece, ".") ? 1 : 0
        case 2: return text.equals(piece, "..") ? 2 : 0
        case 3: return text.equals(piece, "%2e") || text.equals(piece, "%2E") ? 1 : 0
        case 4:
            return text.equals(piece, ".%2e") || text.equals(piece, ".%2E") || text.equals(piece, "%2e.") || text.equals(piece, "%2E.")
                ? 2 : 0
        case 6: return text.equals(piece, "%2e%2e") || text.equals(piece, "%2E%2E") ? 2 : 0
        default: return 0
        }
    }

    /// `"/" + segments joined by "/"`, or `nil` when that is exactly the path already (no copy needed).
    static func canonical(_ text: ByteText, _ ranges: [Range<Int>]) -> String? {
        let count = text.bytes.count
        if count > 0 && text.bytes[0] == UInt8(ascii: "/") {
            if ranges.isEmpty {
                if count == 1 { return nil }
            } else if ranges[0].lowerBound == 1 && ranges[ranges.count - 1].upperBound == count {
                var contiguous = true
                for position in 1..<ranges.count where ranges[position].lowerBound != ranges[position - 1].upperBound + 1 {
                    contiguous = false
                    break
                }
                if contiguous { return nil }
            }
        }
        let length = ranges.reduce(0) { $0 + $1.count + 1 } + (ranges.isEmpty ? 1 : 0)
        return String(unsafeUninitializedCapacity: length) { out in
            var written = 0
            if ranges.isEmpty {
                out[0] = UInt8(ascii: "/")
                return 1
            }
            for range in ranges {
                out[written] = UInt8(ascii: "/")
                written += 1
                for offset in range {
                    out[written] = text.bytes[offset]
                    written += 1
                }
            }
            return written
        }
    }
}
