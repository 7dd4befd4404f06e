/// An absolute `http` or `https` URL split into the parts the core works with, raw text kept.
///
/// Parsing is deliberately strict and simple: the service decides from these parts which host it will
/// contact, so nothing here guesses. Scheme and host are lowercased; an explicit default port (80 for
/// http, 443 for https) is the same as none; path and query keep their original bytes.
public struct HTTPURL: Sendable, Hashable {
    /// `http` or `https`, lowercased.
    public var scheme: String
    /// The host, lowercased; an IPv6 literal keeps its brackets.
    public var host: String
    /// The port, or `nil` for the scheme's default.
    public var port: Int?
    /// The raw path, `/` when the URL had none.
    public var path: String
    /// The raw query without `?`, or `nil` when the URL had no `?`.
    public var query: String?
    /// The raw fragment without `#`, or `nil`.
    public var fragment: String?

    /// `scheme://host[:port]`, the origin the URL addresses.
    public var origin: String {
        if let port { return "\(scheme)://\(host):\(port)" }
        return "\(scheme)://\(host)"
    }

    /// The port actually connected to.
    public var effectivePort: Int { port ?? (scheme == "https" ? 443 : 80) }

    /// The longest URL accepted, in bytes. Page URLs carry user input; past this they are refused.
    public static let maximumLength = 96 * 1024

    /// Parses `text`, or throws a message saying what is wrong with it.
    ///
    /// Works on the UTF-8 bytes: the length and control-character checks scan them once and, when every byte is
    /// ASCII (nearly every URL: browsers and config authors percent-encode the rest), the whole parse is byte
    /// comparisons and slices, one pass with no `Character` work. Text with a non-ASCII byte takes
    /// ``init(parsingCharacters:)``, which keeps the `Character` semantics of the original parser (a `/` followed
    /// by a combining mark is not a delimiter; hosts accept any alphabetic scalar), so the accepted set is the same.
    public init(parsing text: String) throws(URLProblem) {
        var text = text
        let outcome = text.withUTF8 { bytes in Self.parseBytes(bytes) }
        switch outcome {
        case .parsed(let url): self = url
        case .failed(let problem): throw problem
        case .notASCII: try self.init(parsingCharacters: text)
        }
    }

    /// What the byte parser concluded.
    private enum ByteOutcome {
        case parsed(HTTPURL)
        case failed(URLProblem)
        /// Well-formed so far (length, no control character) but not ASCII: the `Character` parser decides.
        case notASCII
    }

    private init(scheme: String, host: String, port: Int?, path: String, query: String?, fragment: String?) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
        self.query = query
        self.fragment = fragment
    }

    /// The byte parser: the same checks in the same order as the `Character` parser, on ASCII input.
    private static func parseBytes(_ bytes: UnsafeBufferPointer<UInt8>) -> ByteOutcome {
        if bytes.isEmpty { return .failed(URLProblem("is empty")) }
        if bytes.count > maximumLength {
            return .failed(URLProblem("is \(bytes.count) bytes long; the limit is \(maximumLength)"))
        }
        var ascii = true
        for offset in 0..<bytes.count {
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
        let scheme: String
        if text.equalsIgnoringASCIICase(0..<colon, "http") {
            scheme = "http"
        } else if text.equalsIgnoringASCIICase(0..<colon, "https") {
            scheme = "https"
        } else {
            return .failed(URLProblem("has scheme \"\(text.string(0..<colon))\"; only http and https are supported"))
        }
        let restStart = colon + 3
        var authorityEnd = restStart
        while authorityEnd < bytes.count {
            let byte = bytes[authorityEnd]
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") || byte == UInt8(ascii: "\\") { break }
            authorityEnd += 1
        }
        let authority = restStart..<authorityEnd
        if authorityEnd < bytes.count && bytes[authorityEnd] == UInt8(ascii: "\\") {
            return .failed(URLProblem("has a backslash after the host"))
        }
        if text.firstIndex(of: UInt8(ascii: "@"), in: authority) != nil {
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
        } else if let colon = text.lastIndex(of: UInt8(ascii: ":"), in: authority) {
            host = authority.lowerBound..<colon
            portText = (colon + 1)..<authority.upperBound
        } else {
            host = authority
        }
        if host.isEmpty { return .failed(URLProblem("has no host")) }
        if !bracketed {
            for offset in host where !ByteText.isHostByte(bytes[offset]) {
                return .failed(URLProblem("has an invalid character \"\(Character(Unicode.Scalar(bytes[offset])))\" in its host"))
            }
            if bytes[host.lowerBound] == UInt8(ascii: ".") || text.containsDoubleDot(host) {
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
        if port == (scheme == "https" ? 443 : 80) { port = nil }

        var pathEnd = bytes.count
        var fragment: String?
        if let hash = text.firstIndex(of: UInt8(ascii: "#"), in: authorityEnd..<bytes.count) {
            fragment = text.string((hash + 1)..<bytes.count)
            pathEnd = hash
        }
        var query: String?
        if let question = text.firstIndex(of: UInt8(ascii: "?"), in: authorityEnd..<pathEnd) {
            query = text.string((question + 1)..<pathEnd)
            pathEnd = question
        }
        return .parsed(
            HTTPURL(
                scheme: scheme,
                host: text.lowercasedString(host),
                port: port,
                path: authorityEnd == pathEnd ? "/" : text.string(authorityEnd..<pathEnd),
                query: query,
                fragment: fragment
            ))
    }

    /// The original `Character`-level parser, for text with a non-ASCII byte (after the byte checks passed).
    ///
    /// Kept because grapheme clustering decides what a delimiter is there (`/` followed by U+0301 is one
    /// `Character`, not a `/`), and hosts accept any alphabetic scalar.
    init(parsingCharacters text: String) throws(URLProblem) {
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
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        self.path = rest.isEmpty ? "/" : String(rest)
        self.query = query
        self.fragment = fragment
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
