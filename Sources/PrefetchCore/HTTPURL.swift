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
    public init(parsing text: String) throws(URLProblem) {
        let bytes = Array(text.utf8)
        if bytes.isEmpty { throw URLProblem("is empty") }
        if bytes.count > Self.maximumLength {
            throw URLProblem("is \(bytes.count) bytes long; the limit is \(Self.maximumLength)")
        }
        if let bad = bytes.firstIndex(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw URLProblem("contains a control character (byte \(bytes[bad])) at offset \(bad)")
        }
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
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCII), let value = Int(portText), value > 0, value <= 65535 else {
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
        "/" + segments(of: path).joined(separator: "/")
    }
}
