#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// IP literals: parsing, canonical text, and the CURLOPT_CONNECT_TO entry format.
enum IPLiteral {
    /// The canonical text of `text` if it is an IPv4 (dotted quad) or IPv6 literal, else nil. Zone ids
    /// (`fe80::1%eth0`), brackets and host names are not literals.
    static func canonical(_ text: String) -> String? {
        if let v4 = parse(text, family: AF_INET, size: MemoryLayout<in_addr>.size) { return v4 }
        return parse(text, family: AF_INET6, size: MemoryLayout<in6_addr>.size)
    }

    /// Whether `text` is an IP literal, bracketed IPv6 included (such hosts need no resolving).
    static func isLiteral(_ text: String) -> Bool {
        if text.hasPrefix("["), text.hasSuffix("]") {
            return canonical(String(text.dropFirst().dropLast())) != nil
        }
        return canonical(text) != nil
    }

    private static func parse(_ text: String, family: Int32, size: Int) -> String? {
        var storage = [UInt8](repeating: 0, count: size)
        let parsed = storage.withUnsafeMutableBytes { inet_pton(family, text, $0.baseAddress) }
        guard parsed == 1 else { return nil }
        return render(storage, family: family)
    }

    /// The text of a binary address (`in_addr` or `in6_addr` bytes) of `family`.
    static func render(_ bytes: [UInt8], family: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let rendered = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count))
        }
        guard rendered != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Formats one CURLOPT_CONNECT_TO entry `HOST:PORT:ADDRESS:PORT` (an IPv6 address in brackets): transfers to
/// `host:port` connect to `address:port` while URL, Host header, SNI and certificate checks keep `host`.
func connectToEntry(host: String, port: Int, address: String) -> String {
    let target = address.contains(":") ? "[\(address)]" : address
    return "\(host):\(port):\(target):\(port)"
}

/// The host (lowercased, without brackets) and effective port of an absolute http(s) URL, or nil when the URL is
/// not http(s) or has no host.
func hostAndPort(ofURL url: String) -> (host: String, port: Int)? {
    let lowered = url.lowercased()
    let defaultPort: Int
    var rest: Substring
    if lowered.hasPrefix("https://") {
        defaultPort = 443
        rest = Substring(lowered.dropFirst("https://".count))
    } else if lowered.hasPrefix("http://") {
        defaultPort = 80
        rest = Substring(lowered.dropFirst("http://".count))
    } else {
        return nil
    }
    if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
        rest = rest[..<end]
    }
    if let at = rest.lastIndex(of: "@") {
        rest = rest[rest.index(after: at)...]
    }
    let host: Substring
    var portText: Substring = ""
    if rest.hasPrefix("[") {
        guard let close = rest.firstIndex(of: "]") else { return nil }
        host = rest[rest.index(after: rest.startIndex)..<close]
        let after = rest[rest.index(after: close)...]
        if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty { return nil }
    } else if let colon = rest.lastIndex(of: ":") {
        host = rest[..<colon]
        portText = rest[rest.index(after: colon)...]
    } else {
        host = rest
    }
    guard !host.isEmpty else { return nil }
    if portText.isEmpty { return (String(host), defaultPort) }
    guard let port = Int(portText), (1...65535).contains(port) else { return nil }
    return (String(host), port)
}

/// The cache key of a host name: lowercased, without a trailing dot.
func normalizedHost(_ host: String) -> String {
    var name = host.lowercased()
    if name.hasSuffix(".") { name.removeLast() }
    return name
}
