import PrefetchCore

/// How the service resolves upstream host names ahead of time. Every field is optional in JSON; a missing one takes
/// the documented default, so `{}` is a valid configuration (system resolver only).
///
/// Durations are seconds (fractions allowed) except the `…Ms` fields, which are milliseconds.
public struct DNSSettings: Codable, Sendable, Equatable {
    /// The HTTPDNS endpoint (`http://` or `https://`), or nil to use only the system resolver. Default nil.
    ///
    /// The resolver sends `GET <endpoint>?host=<name>` (`&host=` when the endpoint already has a query) and accepts
    /// `200` with `{"host": "<name>", "ips": ["1.2.3.4", "2001:db8::1"], "ttl": 60}`: `ips` must be a non-empty
    /// list of IPv4/IPv6 literals (a host name anywhere in it rejects the whole answer), `host`, when present, must
    /// equal the name asked for, and `ttl` (seconds, ≥ 0) defaults to `systemTTL` when absent. Anything else is an
    /// invalid answer and the host falls back to the system resolver.
    public var httpdns: String?
    /// The whole budget of one HTTPDNS request, in milliseconds. Default 1000.
    public var timeoutMs: Int
    /// The budget of one system resolver (getaddrinfo) lookup, in milliseconds. Default 5000.
    public var systemTimeoutMs: Int
    /// The lifetime given to system resolver answers, which carry no TTL of their own, in seconds. Default 60.
    public var systemTTL: Double
    /// The shortest lifetime any answer is kept for, in seconds (HTTPDNS TTLs below it are raised). Default 5;
    /// at least 1.
    public var minTTL: Double
    /// The longest lifetime any answer is kept for, in seconds (HTTPDNS TTLs above it are lowered). Default 3600.
    public var maxTTL: Double
    /// The fraction of an answer's lifetime after which it is refreshed in the background, in (0, 1]. Default 0.75:
    /// an answer with a 60 s TTL is refreshed 45 s after it arrived, so a steady host never has an expired answer.
    public var refreshAhead: Double
    /// How long to wait, in seconds, before resolving a host again after every source failed. Default 5. An
    /// unexpired earlier answer stays in use meanwhile.
    public var failureRetry: Double
    /// The most lookups run at once (each system lookup occupies a thread while it blocks). Default 8.
    public var maxConcurrentLookups: Int
    /// Whether HTTPDNS answers may pin hosts to non-public addresses. Default false: an answer holding a
    /// loopback, private, link-local, unspecified, CGNAT, multicast or reserved address (IPv4-mapped and
    /// other IPv4-embedding IPv6 forms included) is rejected as invalid and the host falls back to the system
    /// resolver, so a forged or misconfigured HTTPDNS cannot aim upstream requests (and the callers'
    /// credentials) at internal services. Set it only where the APIs really live on such addresses.
    public var allowPrivateAddresses: Bool

    /// Creates settings; every parameter has the documented default.
    public init(
        httpdns: String? = nil,
        timeoutMs: Int = 1000,
        systemTimeoutMs: Int = 5000,
        systemTTL: Double = 60,
        minTTL: Double = 5,
        maxTTL: Double = 3600,
        refreshAhead: Double = 0.75,
        failureRetry: Double = 5,
        maxConcurrentLookups: Int = 8,
        allowPrivateAddresses: Bool = false
    ) {
        self.httpdns = httpdns
        self.timeoutMs = timeoutMs
        self.systemTimeoutMs = systemTimeoutMs
        self.systemTTL = systemTTL
        self.minTTL = minTTL
        self.maxTTL = maxTTL
        self.refreshAhead = refreshAhead
        self.failureRetry = failureRetry
        self.maxConcurrentLookups = maxConcurrentLookups
        self.allowPrivateAddresses = allowPrivateAddresses
    }

    private enum CodingKeys: String, CodingKey {
        case httpdns, timeoutMs, systemTimeoutMs, systemTTL, minTTL, maxTTL, refreshAhead, failureRetry
        case maxConcurrentLookups, allowPrivateAddresses
    }

    /// Decodes settings, taking the default for every missing field.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = DNSSettings()
        httpdns = try container.decodeIfPresent(String.self, forKey: .httpdns)
        timeoutMs = try container.decodeIfPresent(Int.self, forKey: .timeoutMs) ?? defaults.timeoutMs
        systemTimeoutMs = try container.decodeIfPresent(Int.self, forKey: .systemTimeoutMs) ?? defaults.systemTimeoutMs
        systemTTL = try container.decodeIfPresent(Double.self, forKey: .systemTTL) ?? defaults.systemTTL
        minTTL = try container.decodeIfPresent(Double.self, forKey: .minTTL) ?? defaults.minTTL
        maxTTL = try container.decodeIfPresent(Double.self, forKey: .maxTTL) ?? defaults.maxTTL
        refreshAhead = try container.decodeIfPresent(Double.self, forKey: .refreshAhead) ?? defaults.refreshAhead
        failureRetry = try container.decodeIfPresent(Double.self, forKey: .failureRetry) ?? defaults.failureRetry
        maxConcurrentLookups =
            try container.decodeIfPresent(Int.self, forKey: .maxConcurrentLookups) ?? defaults.maxConcurrentLookups
        allowPrivateAddresses =
            try container.decodeIfPresent(Bool.self, forKey: .allowPrivateAddresses) ?? defaults.allowPrivateAddresses
    }

    /// Checks every field; the error names the first offending one and its value.
    public func validate() throws(DNSError) {
        func invalid(_ field: String, _ value: String, _ rule: String) -> DNSError {
            DNSError(code: .invalidSettings, message: "dns.\(field) is \(value); \(rule)")
        }
        if let httpdns {
            guard let url = try? HTTPURL(parsing: httpdns), !url.host.isEmpty else {
                throw invalid("httpdns", "\"\(Redaction.text(httpdns))\"", "it must be an absolute http:// or https:// URL")
            }
            guard !httpdns.contains("#") else {
                throw invalid("httpdns", "\"\(Redaction.text(httpdns))\"", "it must not contain a fragment")
            }
        }
        guard timeoutMs > 0 else { throw invalid("timeoutMs", "\(timeoutMs)", "it must be positive") }
        guard systemTimeoutMs > 0 else { throw invalid("systemTimeoutMs", "\(systemTimeoutMs)", "it must be positive") }
        guard minTTL.isFinite, minTTL >= 1 else { throw invalid("minTTL", "\(minTTL)", "it must be at least 1 second") }
        guard maxTTL.isFinite, maxTTL >= minTTL else {
            throw invalid("maxTTL", "\(maxTTL)", "it must be at least minTTL (\(minTTL))")
        }
        guard systemTTL.isFinite, systemTTL > 0 else { throw invalid("systemTTL", "\(systemTTL)", "it must be positive") }
        guard refreshAhead.isFinite, refreshAhead > 0, refreshAhead <= 1 else {
            throw invalid("refreshAhead", "\(refreshAhead)", "it must be in (0, 1]")
        }
        guard failureRetry.isFinite, failureRetry > 0 else {
            throw invalid("failureRetry", "\(failureRetry)", "it must be positive")
        }
        guard maxConcurrentLookups > 0 else {
            throw invalid("maxConcurrentLookups", "\(maxConcurrentLookups)", "it must be positive")
        }
    }

    /// `ttl` seconds clamped to `[minTTL, maxTTL]`, as a duration.
    func clampedLifetime(_ ttl: Double) -> Duration {
        let seconds = min(max(ttl, minTTL), maxTTL)
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }
}

/// A failure of DNS prefetch: a bounded `code` plus a human message naming the host or setting concerned.
public struct DNSError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The failure category, safe as a metric label.
    public var code: DNSErrorCode
    /// A human-readable explanation naming the offending input.
    public var message: String

    /// Creates an error.
    public init(code: DNSErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    /// "code: message".
    public var description: String { "\(code.rawValue): \(message)" }
}

/// Why a DNS operation failed. A small, stable set.
public enum DNSErrorCode: String, Sendable, CaseIterable {
    /// A `DNSSettings` field is out of range, or HTTPDNS is configured without a fetcher.
    case invalidSettings = "invalid_settings"
    /// The HTTPDNS endpoint answered something other than the documented JSON of IP literals.
    case invalidAnswer = "invalid_answer"
    /// The HTTPDNS request failed (connection, TLS, non-200 status).
    case httpdnsFailed = "httpdns_failed"
    /// The lookup did not finish within its budget.
    case timeout
    /// The system resolver could not resolve the name.
    case notFound = "not_found"
    /// Too many system lookups are still blocked in getaddrinfo; the lookup was not started.
    case saturated
    /// The lookup was abandoned because the resolver is stopping.
    case cancelled
}
