import Foundation

/// A validated HTTPDNS answer: only IP literals, with the TTL the endpoint gave (nil when it gave none).
struct HTTPDNSAnswer: Equatable {
    var addresses: [String]
    var ttl: Double?

    private struct Wire: Decodable {
        var host: String?
        var ips: [String]
        var ttl: Double?
    }

    /// Parses the documented JSON (`{"host": "...", "ips": [...], "ttl": 60}`) answered for `host`.
    ///
    /// Rejects bad JSON, an empty `ips`, any entry that is not an IPv4/IPv6 literal (an HTTPDNS answer must never
    /// redirect to another name), a `host` other than the one asked for, and a negative or non-finite `ttl`.
    static func parse(_ body: [UInt8], host: String) throws(DNSError) -> HTTPDNSAnswer {
        func invalid(_ why: String) -> DNSError {
            DNSError(code: .invalidAnswer, message: "HTTPDNS answer for \(host) rejected: \(why)")
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(body))
        } catch {
            throw invalid("not the expected JSON object {\"host\", \"ips\", \"ttl\"}")
        }
        if let answered = wire.host, normalizedHost(answered) != normalizedHost(host) {
            throw invalid("it answers for \"\(answered)\"")
        }
        guard !wire.ips.isEmpty else { throw invalid("\"ips\" is empty") }
        var addresses: [String] = []
        for entry in wire.ips {
            guard let address = IPLiteral.canonical(entry) else {
                throw invalid("\"\(entry)\" is not an IP address literal")
            }
            if !addresses.contains(address) { addresses.append(address) }
        }
        if let ttl = wire.ttl {
            guard ttl.isFinite, ttl >= 0 else { throw invalid("ttl \(ttl) is not a non-negative number") }
        }
        return HTTPDNSAnswer(addresses: addresses, ttl: wire.ttl)
    }
}
