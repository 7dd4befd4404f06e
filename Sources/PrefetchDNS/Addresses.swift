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

/// Why an address is not a public unicast one; the `reason` label of `prefetch_dns_rejected_total`.
enum NonPublicAddress: String, CaseIterable, Sendable {
    /// 127.0.0.0/8, ::1.
    case loopback
    /// 10/8, 172.16/12, 192.168/16, fc00::/7 (unique local), fec0::/10 (the deprecated site-local).
    case `private`
    /// 169.254/16, fe80::/10.
    case linkLocal = "link_local"
    /// 0.0.0.0/8 ("this network"; 0.0.0.0 reaches the local host on Linux), ::.
    case unspecified
    /// 100.64/10, carrier-grade NAT.
    case cgnat
    /// 224/4, ff00::/8.
    case multicast
    /// 240/4, the limited broadcast 255.255.255.255 among them.
    case reserved

    /// How a message names the class: "a loopback address".
    var phrase: String {
        switch self {
        case .loopback: "a loopback address"
        case .private: "a private address"
        case .linkLocal: "a link-local address"
        case .unspecified: "an unspecified address"
        case .cgnat: "a carrier-grade NAT address"
        case .multicast: "a multicast address"
        case .reserved: "a reserved address"
        }
    }

    /// The class of an IP literal that is not public unicast, or nil for a public one (and for a non-literal).
    /// IPv6 forms that embed an IPv4 address (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64
    /// `64:ff9b::a.b.c.d`) are judged by that address.
    init?(literal text: String) {
        var v4 = [UInt8](repeating: 0, count: MemoryLayout<in_addr>.size)
        if v4.withUnsafeMutableBytes({ inet_pton(AF_INET, text, $0.baseAddress) }) == 1 {
            self.init(ipv4: v4)
            return
        }
        var v6 = [UInt8](repeating: 0, count: MemoryLayout<in6_addr>.size)
        guard v6.withUnsafeMutableBytes({ inet_pton(AF_INET6, text, $0.baseAddress) }) == 1 else { return nil }
        self.init(ipv6: v6)
    }

    private init?(ipv4 a: [UInt8]) {
        switch (a[0], a[1]) {
        case (0, _): self = .unspecified
        case (127, _): self = .loopback
        case (10, _), (172, 16...31), (192, 168): self = .private
        case (169, 254): self = .linkLocal
        case (100, 64...127): self = .cgnat
        case (224...239, _): self = .multicast
        case (240...255, _): self = .reserved
        default: return nil
        }
    }

    private init?(ipv6 a: [UInt8]) {
        let head = a.prefix(10)
        let embedded = Array(a.suffix(4))
        if head.allSatisfy({ $0 == 0 }) {
            switch (a[10], a[11]) {
            case (0xFF, 0xFF):
                self.init(ipv4: embedded)
                return
            case (0, 0):
                if embedded == [0, 0, 0, 0] {
                    self = .unspecified
                } else if embedded == [0, 0, 0, 1] {
                    self = .loopback
                } else {
                    self.init(ipv4: embedded)
                }
                return
            default:
                return nil
            }
        }
        if a.prefix(12) == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] {
            self.init(ipv4: embedded)
            return
        }
        switch (a[0], a[1] & 0xC0) {
        case (0xFC...0xFD, _): self = .private
        case (0xFE, 0x80): self = .linkLocal
        case (0xFE, 0xC0): self = .private
        case (0xFF, _): self = .multicast
        default: return nil
        }
    }
}

/// The cache key of a host name: lowercased, without a trailing dot.
func normalizedHost(_ host: String) -> String {
    var name = host.lowercased()
    if name.hasSuffix(".") { name.removeLast() }
    return name
}
