import CoreMetrics

/// The updater's metrics; every dimension comes from a fixed enum. Created once per updater.
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
