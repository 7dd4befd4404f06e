/// The kind of renderer a profile creates. Kept as an open string so that an unknown kind in a config file is
/// reported by ``RendererProfile/problems(path:)`` with its JSON path instead of failing the whole decode.
public struct RendererKind: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    /// The kind's name as written in the config.
    public var rawValue: String

    /// Wraps a kind name.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// A simulated renderer with a configurable creation cost, memory figure, failure and death rates.
    public static let modelled = RendererKind(rawValue: "modelled")
    /// A real pre-started process, warm once it prints its ready line or opens its ready port.
    public static let process = RendererKind(rawValue: "process")
    /// Every kind this library can create.
    public static let known: [RendererKind] = [.modelled, .process]

    /// Decodes the kind from a plain JSON string.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the kind as a plain JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// The kind's name.
    public var description: String { rawValue }
}

/// How one named pool of renderers behaves. Every field is optional in JSON; the documented default applies
/// when it is missing. Durations follow the unit in their name (seconds unless the name ends in `Ms`).
public struct RendererProfile: Codable, Sendable, Hashable {
    /// Renderers kept warm and idle, ready for the next open (default 1).
    public var minIdle: Int = 1
    /// Hard cap on renderers that exist at once: warming, idle, leased, resetting or being destroyed (default 4).
    public var maxSize: Int = 4
    /// A renderer is destroyed instead of reused after this many leases (default 50).
    public var maxUses: Int = 50
    /// Seconds a renderer may live before it is recycled (default 600); checked while idle and at release.
    public var maxLifetime: Double = 600
    /// Fraction of `maxLifetime` randomly taken off each renderer's life so they do not all expire together
    /// (default 0.1: lives between 90% and 100% of `maxLifetime`).
    public var lifetimeJitter: Double = 0.1
    /// Seconds an idle renderer above `minIdle` may stay unused before it is destroyed (default 300).
    public var idleTimeout: Double = 300
    /// Milliseconds an acquire waits for a renderer when the pool is exhausted, then fails (default 2000).
    public var acquireTimeout: Double = 2000
    /// Seconds a lease may stay unreleased before the pool reclaims (destroys) its renderer (default 60).
    public var leaseTimeout: Double = 60
    /// Leases one caller may hold from this pool at once, acquires in progress included; `nil` (the default)
    /// means `max(1, maxSize / 2)`. See ``effectiveMaxLeasesPerCaller``.
    public var maxLeasesPerCaller: Int?
    /// `modelled` (default) or `process`.
    public var kind: RendererKind = .modelled

    /// Modelled: milliseconds a creation takes (default 300).
    public var createMs: Double = 300
    /// Modelled: memory each renderer reports, in megabytes (default 80).
    public var memoryMB: Int = 80
    /// Modelled: probability in `0..<1` that a creation fails (default 0).
    public var failureRate: Double = 0
    /// Modelled: probability in `0...1` that a health check finds the renderer dead (default 0).
    public var deathRate: Double = 0

    /// Process: the argv to run; the first element is an executable path (absolute or relative to the
    /// working directory). Required for `process`.
    public var command: [String] = []
    /// Process: the stdout line that marks the process warm (default `ready` when `readyPort` is not set).
    public var readyLine: String?
    /// Process: a TCP port on 127.0.0.1 whose opening marks the process warm (default none).
    public var readyPort: Int?
    /// Process: milliseconds the process has to become ready, and to answer a reset (default 5000).
    public var readyTimeoutMs: Double = 5000
    /// Process: a line written to the process's stdin to reset it between leases; the process must print its
    /// ready line again within `readyTimeoutMs`. When absent (the default) reset is a no-op and state is only
    /// cleared by recycling (`maxUses`, `maxLifetime`).
    public var resetLine: String?
    /// Process: milliseconds between SIGTERM and SIGKILL when destroying (default 2000).
    public var terminateGraceMs: Double = 2000

    /// A profile with every default.
    public init() {}

    /// The per-caller cap in force: `maxLeasesPerCaller`, or `max(1, maxSize / 2)` when it is not set.
    public var effectiveMaxLeasesPerCaller: Int {
        maxLeasesPerCaller ?? max(1, maxSize / 2)
    }

    /// The line that marks the process warm: `readyLine`, or `ready` when neither it nor `readyPort` is set.
    public var effectiveReadyLine: String? {
        readyLine ?? (readyPort == nil ? "ready" : nil)
    }

    private enum CodingKeys: String, CodingKey {
        case minIdle, maxSize, maxUses, maxLifetime, lifetimeJitter, idleTimeout, acquireTimeout, leaseTimeout
        case maxLeasesPerCaller
        case kind, createMs, memoryMB, failureRate, deathRate
        case command, readyLine, readyPort, readyTimeoutMs, resetLine, terminateGraceMs
    }

    /// Decodes a profile; missing fields take their documented defaults.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = RendererProfile()
        minIdle = try c.decodeIfPresent(Int.self, forKey: .minIdle) ?? d.minIdle
        maxSize = try c.decodeIfPresent(Int.self, forKey: .maxSize) ?? d.maxSize
        maxUses = try c.decodeIfPresent(Int.self, forKey: .maxUses) ?? d.maxUses
        maxLifetime = try c.decodeIfPresent(Double.self, forKey: .maxLifetime) ?? d.maxLifetime
        lifetimeJitter = try c.decodeIfPresent(Double.self, forKey: .lifetimeJitter) ?? d.lifetimeJitter
        idleTimeout = try c.decodeIfPresent(Double.self, forKey: .idleTimeout) ?? d.idleTimeout
        acquireTimeout = try c.decodeIfPresent(Double.self, forKey: .acquireTimeout) ?? d.acquireTimeout
        leaseTimeout = try c.decodeIfPresent(Double.self, forKey: .leaseTimeout) ?? d.leaseTimeout
        maxLeasesPerCaller = try c.decodeIfPresent(Int.self, forKey: .maxLeasesPerCaller)
        kind = try c.decodeIfPresent(RendererKind.self, forKey: .kind) ?? d.kind
        createMs = try c.decodeIfPresent(Double.self, forKey: .createMs) ?? d.createMs
        memoryMB = try c.decodeIfPresent(Int.self, forKey: .memoryMB) ?? d.memoryMB
        failureRate = try c.decodeIfPresent(Double.self, forKey: .failureRate) ?? d.failureRate
        deathRate = try c.decodeIfPresent(Double.self, forKey: .deathRate) ?? d.deathRate
        command = try c.decodeIfPresent([String].self, forKey: .command) ?? d.command
        readyLine = try c.decodeIfPresent(String.self, forKey: .readyLine)
        readyPort = try c.decodeIfPresent(Int.self, forKey: .readyPort)
        readyTimeoutMs = try c.decodeIfPresent(Double.self, forKey: .readyTimeoutMs) ?? d.readyTimeoutMs
        resetLine = try c.decodeIfPresent(String.self, forKey: .resetLine)
        terminateGraceMs = try c.decodeIfPresent(Double.self, forKey: .terminateGraceMs) ?? d.terminateGraceMs
    }

    /// Every validation problem, each naming its JSON path under `path` (for example
    /// `renderers.main.maxSize: must be >= minIdle (2), got 1`). Empty when the profile is usable.
    public func problems(path: String) -> [String] {
        var out: [String] = []
        func add(_ field: String, _ rule: String, _ got: String) {
            out.append("\(path).\(field): \(rule), got \(got)")
        }
        func fmt(_ value: Double) -> String {
            value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
        }
        if minIdle < 0 { add("minIdle", "must be >= 0", "\(minIdle)") }
        if maxSize < 1 {
            add("maxSize", "must be >= 1", "\(maxSize)")
        } else if maxSize < minIdle {
            add("maxSize", "must be >= minIdle (\(minIdle))", "\(maxSize)")
        }
        if maxUses < 1 { add("maxUses", "must be >= 1", "\(maxUses)") }
        if !(maxLifetime > 0) { add("maxLifetime", "must be > 0 seconds", fmt(maxLifetime)) }
        if !(lifetimeJitter >= 0 && lifetimeJitter < 1) {
            add("lifetimeJitter", "must be in 0..<1", fmt(lifetimeJitter))
        }
        if !(idleTimeout > 0) { add("idleTimeout", "must be > 0 seconds", fmt(idleTimeout)) }
        if !(acquireTimeout >= 0) { add("acquireTimeout", "must be >= 0 ms", fmt(acquireTimeout)) }
        if !(leaseTimeout > 0) { add("leaseTimeout", "must be > 0 seconds", fmt(leaseTimeout)) }
        if let cap = maxLeasesPerCaller, cap < 1 { add("maxLeasesPerCaller", "must be >= 1", "\(cap)") }
        switch kind {
        case .modelled:
            if !(createMs >= 0) { add("createMs", "must be >= 0 ms", fmt(createMs)) }
            if memoryMB < 0 { add("memoryMB", "must be >= 0", "\(memoryMB)") }
            if !(failureRate >= 0 && failureRate < 1) {
                add("failureRate", "must be in 0..<1", fmt(failureRate))
            }
            if !(deathRate >= 0 && deathRate <= 1) { add("deathRate", "must be in 0...1", fmt(deathRate)) }
        case .process:
            if command.isEmpty {
                add("command", "must name an executable for kind process", "[]")
            } else if command[0].isEmpty {
                add("command[0]", "must be a non-empty executable path", "\"\"")
            }
            if let line = readyLine, line.isEmpty { add("readyLine", "must not be empty", "\"\"") }
            if let port = readyPort, !(1...65535).contains(port) {
                add("readyPort", "must be in 1...65535", "\(port)")
            }
            if !(readyTimeoutMs > 0) { add("readyTimeoutMs", "must be > 0 ms", fmt(readyTimeoutMs)) }
            if let line = resetLine, line.isEmpty || line.contains("\n") {
                add("resetLine", "must be one non-empty line", "\"\(line)\"")
            }
            if !(terminateGraceMs >= 0) { add("terminateGraceMs", "must be >= 0 ms", fmt(terminateGraceMs)) }
        default:
            let known = RendererKind.known.map(\.rawValue).joined(separator: ", ")
            add("kind", "must be one of \(known)", "\"\(kind.rawValue)\"")
        }
        return out
    }
}
