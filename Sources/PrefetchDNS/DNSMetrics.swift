import CoreMetrics
import PrefetchCore

/// The outcome label of `prefetch_dns_lookups_total`.
enum LookupOutcome: String, CaseIterable {
    case ok, error, timeout, fallback
}

/// The resolver's metrics, all created up front with bounded labels (never a host name).
///
/// - `prefetch_dns_lookups_total{source, outcome}`: one `ok`, `error` or `timeout` per lookup by that source (an
///   invalid HTTPDNS answer is an `error`); additionally `{source="httpdns", outcome="fallback"}` once each time a
///   failed HTTPDNS lookup hands the host to the system resolver (whose own lookup is then counted under
///   `source="system"`).
/// - `prefetch_dns_lookup_duration{source}`: the duration of each finished lookup, successful or not.
/// - `prefetch_dns_cached_hosts`: hosts holding an unexpired answer, after every change of the cache.
/// - `prefetch_dns_rejected_total{reason}`: HTTPDNS answers dropped for a non-public address, by the class of the
///   first such address (`loopback`, `private`, `link_local`, `unspecified`, `cgnat`, `multicast`, `reserved`);
///   each is also an `error` and a `fallback` of `source="httpdns"`.
struct DNSMetrics: Sendable {
    private let lookups: [String: Counter]
    private let rejections: [NonPublicAddress: Counter]
    private let durations: [DNSSource: Timer]
    private let cachedHosts: Gauge

    init(factory: any MetricsFactory) {
        var lookups: [String: Counter] = [:]
        var durations: [DNSSource: Timer] = [:]
        for source in DNSSource.allCases {
            for outcome in LookupOutcome.allCases {
                lookups["\(source.rawValue)/\(outcome.rawValue)"] = Counter(
                    label: "prefetch_dns_lookups_total",
                    dimensions: [("source", source.rawValue), ("outcome", outcome.rawValue)],
                    factory: factory
                )
            }
            durations[source] = Timer(
                label: "prefetch_dns_lookup_duration",
                dimensions: [("source", source.rawValue)],
                factory: factory
            )
        }
        self.lookups = lookups
        self.durations = durations
        cachedHosts = Gauge(label: "prefetch_dns_cached_hosts", factory: factory)
        var rejections: [NonPublicAddress: Counter] = [:]
        for reason in NonPublicAddress.allCases {
            rejections[reason] = Counter(
                label: "prefetch_dns_rejected_total", dimensions: [("reason", reason.rawValue)], factory: factory)
        }
        self.rejections = rejections
    }

    func rejected(_ reason: NonPublicAddress) {
        rejections[reason]?.increment()
    }

    func lookup(_ source: DNSSource, _ outcome: LookupOutcome) {
        lookups["\(source.rawValue)/\(outcome.rawValue)"]?.increment()
    }

    func duration(_ source: DNSSource, _ elapsed: Duration) {
        durations[source]?.recordNanoseconds(elapsed.nanoseconds)
    }

    func cached(_ count: Int) {
        cachedHosts.record(count)
    }
}
