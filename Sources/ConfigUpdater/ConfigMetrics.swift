import CoreMetrics
import PrefetchCore

/// The updater's metrics; every dimension comes from a fixed enum. Created once per updater.
///
/// The served versions are text (`data.version` is compared as text), so no version becomes a label value (a
/// source that stamps every push would make a new series each time). Each role (`config`: `active`, `candidate`)
/// has two gauges instead, NaN while no config holds the role:
/// - `prefetch_config_version{config}`: the version as a number when it is one (digits with an optional
///   fraction, at most 15 digits: "4", "20240501", "4.2"); NaN for any other text ("ops-1", "v4").
/// - `prefetch_config_version_fingerprint{config}`: every version's 32-bit FNV-1a hash of its UTF-8 text, an
///   integer below 2^32: it changes when the version does, and replicas serving the same version show the same
///   value (what `count_values` counts to find replicas that disagree).
final class ConfigMetrics: Sendable {
    /// The active-source gauge has one series per source that can serve a config.
    static let servingSources: [ActiveSource] = [.primary, .fallback, .lastGood]

    private let checks: [CheckOutcome: Counter]
    private let errors: [String: Counter]
    private let loadedTimestamp: Gauge
    private let consecutiveAbnormal: Gauge
    private let activeSource: [ActiveSource: Gauge]
    private let ready: Gauge
    private let canaryPercent: Gauge
    private let version: [ConfigRole: Gauge]
    private let fingerprint: [ConfigRole: Gauge]

    init(factory: any MetricsFactory) {
        var checks: [CheckOutcome: Counter] = [:]
        for outcome in CheckOutcome.allCases {
            checks[outcome] = Counter(
                label: "prefetch_config_checks_total", dimensions: [("outcome", outcome.rawValue)], factory: factory)
        }
        self.checks = checks
        var errors: [String: Counter] = [:]
        for role in ["primary", "fallback", "last-good"] {
            for code in ConfigCheckErrorCode.allCases {
                errors["\(role)/\(code.rawValue)"] = Counter(
                    label: "prefetch_config_errors_total", dimensions: [("source", role), ("reason", code.rawValue)],
                    factory: factory)
            }
        }
        self.errors = errors
        loadedTimestamp = Gauge(label: "prefetch_config_loaded_timestamp_seconds", factory: factory)
        consecutiveAbnormal = Gauge(label: "prefetch_config_consecutive_abnormal", factory: factory)
        var activeSource: [ActiveSource: Gauge] = [:]
        for source in Self.servingSources {
            activeSource[source] = Gauge(
                label: "prefetch_config_active_source", dimensions: [("source", source.rawValue)], factory: factory)
        }
        self.activeSource = activeSource
        ready = Gauge(label: "prefetch_config_ready", factory: factory)
        canaryPercent = Gauge(label: "prefetch_config_canary_percent", factory: factory)
        var version: [ConfigRole: Gauge] = [:]
        var fingerprint: [ConfigRole: Gauge] = [:]
        for role in ConfigRole.allCases {
            version[role] = Gauge(label: "prefetch_config_version", dimensions: [("config", role.rawValue)], factory: factory)
            fingerprint[role] = Gauge(
                label: "prefetch_config_version_fingerprint", dimensions: [("config", role.rawValue)], factory: factory)
        }
        self.version = version
        self.fingerprint = fingerprint
        for gauge in version.values { gauge.record(Double.nan) }
        for gauge in fingerprint.values { gauge.record(Double.nan) }
        canaryPercent.record(0)
        for gauge in activeSource.values { gauge.record(0) }
        ready.record(0)
        consecutiveAbnormal.record(0)
    }

    func check(_ outcome: CheckOutcome) {
        checks[outcome]?.increment()
    }

    /// `role` is "primary", "fallback" or "last-good".
    func error(role: String, _ code: ConfigCheckErrorCode) {
        errors["\(role)/\(code.rawValue)"]?.increment()
    }

    func loaded(atEpochSeconds seconds: Double) {
        loadedTimestamp.record(seconds)
        ready.record(1)
    }

    /// The versions now served: the active config's and the candidate's (nil without a canary).
    func versions(active: String, candidate: String?) {
        for role in ConfigRole.allCases {
            let served = role == .active ? active : candidate
            version[role]?.record(served.map(Self.numericVersion) ?? .nan)
            fingerprint[role]?.record(served.map(Self.fingerprint) ?? .nan)
        }
    }

    /// `version` as a number when it is digits with an optional fraction and at most 15 digits (exact in a
    /// Double); NaN otherwise.
    static func numericVersion(_ version: String) -> Double {
        let parts = version.utf8.split(separator: UInt8(ascii: "."), maxSplits: 1, omittingEmptySubsequences: false)
        let digits = parts.reduce(0) { $0 + $1.count }
        guard (1...15).contains(digits), parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { (48...57).contains($0) } }) else {
            return .nan
        }
        return Double(version) ?? .nan
    }

    /// The 32-bit FNV-1a hash of `version`'s UTF-8 bytes.
    static func fingerprint(_ version: String) -> Double {
        var hash: UInt32 = 2_166_136_261
        for byte in version.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        return Double(hash)
    }

    /// The candidate's share in percent; 0 without a candidate.
    func canary(basisPoints: Int?) {
        canaryPercent.record(Double(basisPoints ?? 0) / 100)
    }

    func state(active: ActiveSource, consecutiveAbnormal count: Int) {
        for (source, gauge) in activeSource {
            gauge.record(source == active ? 1 : 0)
        }
        consecutiveAbnormal.record(count)
    }
}
