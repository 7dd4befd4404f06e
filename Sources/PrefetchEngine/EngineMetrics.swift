public import CoreMetrics
import PrefetchCore
import Synchronization

/// The orchestrator's own metrics. Every dimension is bounded: interface names come from the config, outcomes
/// and reasons from fixed sets; raw URLs and user values never become labels.
///
/// - `prefetch_triggers_total{result}`: `accepted`, or the refusal's code: `no-config`, `invalid-url`,
///   `url-too-long`, `not-ready`, `rate-limited`, `overloaded`.
/// - `prefetch_fetches_total{interface, outcome}`: `ok` (2xx-4xx), `upstream-5xx`, or a fetch error code
///   (`timeout`, `dns`, `connect`, `tls`, `reset`, `too-large`, `protocol`, `cancelled`, `shutdown`, `other`), or
///   `private` (a response fetched without the caller's credentials that sets a cookie or is `Cache-Control: private`,
///   or one made from such an answer: kept for its ticket only).
/// - `prefetch_upstream_duration_seconds{interface}`: upstream latency, a histogram.
/// - `prefetch_upstream_queued_seconds{interface}`: the part of it spent waiting for a transfer slot, a histogram.
/// - `prefetch_flights_total{interface, role}`: `leader` (fetched), `joined` (a flight was running), `fresh`.
/// - `prefetch_data_total{result}`: data requests by `hit`, `joined`, `pending`, `failed` or miss reason.
/// - `prefetch_transfers_in_flight`: upstream transfers queued or running.
/// - `prefetch_tickets`, `prefetch_ticket_bytes`: tickets held, and the bytes they account for.
/// - `prefetch_ticket_budget_bytes`: the byte budget tickets are held under (`--ticket-bytes`).
/// - `prefetch_in_flight_bytes`, `prefetch_in_flight_budget_bytes`: bytes of upstream responses still arriving, and
///   their budget (`--in-flight-bytes`; triggers answer `overloaded` above 90% of it).
/// - `prefetch_request_body_bytes`, `prefetch_request_body_budget_bytes`: bytes of request bodies the page listener
///   holds while they arrive, and their budget (`--request-body-bytes`; a body that would pass it is `overloaded`).
/// - `prefetch_access_denied_total{reason}`: requests refused by the trust model: `credentials-required`,
///   `identity-mismatch`, `invalid-read-key`, `origin-mismatch`, `origin-not-allowed`, `admin-unauthorized`.
/// The store adds its own (`prefetch_store_*`: hits, joins, misses by reason, expired-unused waste, bytes,
/// entries).
public final class EngineMetrics: Sendable {
    let factory: any MetricsFactory
    private let counters = Mutex<[SeriesKey: Counter]>([:])
    private let timers = Mutex<[SeriesKey: Timer]>([:])
    public let inFlight: Gauge
    public let tickets: Gauge
    public let ticketBytes: Gauge
    public let ticketBudgetBytes: Gauge
    public let inFlightBytes: Gauge
    public let inFlightBudgetBytes: Gauge
    public let requestBodyBytes: Gauge
    public let requestBodyBudgetBytes: Gauge
    private let fastHandoffs: Counter
    /// `prefetch_data_total{result}` for a response handed out (`hit`, `joined`), made once: every served read
    /// counts here, without the series cache's lock and hashing.
    private let dataServed: (hit: Counter, joined: Counter)
    /// `prefetch_config_data_total{config, result}`, made once, at ``configDataIndex(_:_:)``.
    let configDataSeries: [Counter]

    /// Where the series of `role` and `result` is in ``configDataSeries``.
    static func configDataIndex(_ role: ConfigRole, _ result: ReadResult) -> Int {
        let row =
            switch role {
            case .active: 0
            case .candidate: 1
            }
        let column =
            switch result {
            case .hit: 0
            case .joined: 1
            case .miss: 2
            }
        return row * 3 + column
    }

    /// Metrics created through `factory`.
    public init(factory: any MetricsFactory) {
        self.factory = factory
        self.inFlight = Gauge(label: "prefetch_transfers_in_flight", factory: factory)
        self.tickets = Gauge(label: "prefetch_tickets", factory: factory)
        self.ticketBytes = Gauge(label: "prefetch_ticket_bytes", factory: factory)
        self.ticketBudgetBytes = Gauge(label: "prefetch_ticket_budget_bytes", factory: factory)
        self.inFlightBytes = Gauge(label: "prefetch_in_flight_bytes", factory: factory)
        self.inFlightBudgetBytes = Gauge(label: "prefetch_in_flight_budget_bytes", factory: factory)
        self.requestBodyBytes = Gauge(label: "prefetch_request_body_bytes", factory: factory)
        self.requestBodyBudgetBytes = Gauge(label: "prefetch_request_body_budget_bytes", factory: factory)
        self.fastHandoffs = Counter(label: "prefetch_data_fast_total", dimensions: [], factory: factory)
        self.dataServed = (
            Counter(label: "prefetch_data_total", dimensions: [("result", ReadResult.hit.rawValue)], factory: factory),
            Counter(label: "prefetch_data_total", dimensions: [("result", ReadResult.joined.rawValue)], factory: factory)
        )
        var series: [(index: Int, counter: Counter)] = []
        for role in ConfigRole.allCases {
            for result in ReadResult.allCases {
                let counter = Counter(
                    label: "prefetch_config_data_total", dimensions: [("config", role.rawValue), ("result", result.rawValue)],
                    factory: factory)
                series.append((Self.configDataIndex(role, result), counter))
            }
        }
        self.configDataSeries = series.sorted { $0.index < $1.index }.map(\.counter)
    }

    /// What a cached series is found by: its label and up to two dimensions, compared without building a string.
    private struct SeriesKey: Hashable {
        var label: String
        var first: (name: String, value: String)?
        var second: (name: String, value: String)?

        static func == (a: SeriesKey, b: SeriesKey) -> Bool {
            a.label == b.label && a.first?.name == b.first?.name && a.first?.value == b.first?.value
                && a.second?.name == b.second?.name && a.second?.value == b.second?.value
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(label)
            hasher.combine(first?.name)
            hasher.combine(first?.value)
            hasher.combine(second?.name)
            hasher.combine(second?.value)
        }
    }

    /// The counter for `label` with up to two dimensions, created once per bounded label set and cached: a hot
    /// path's lookup hashes the strings it is given and allocates nothing.
    func counter(_ label: String, _ first: (String, String)? = nil, _ second: (String, String)? = nil) -> Counter {
        let key = SeriesKey(label: label, first: first.map { ($0.0, $0.1) }, second: second.map { ($0.0, $0.1) })
        return counters.withLock { cache in
            if let existing = cache[key] { return existing }
            let made = Counter(label: label, dimensions: [first, second].compactMap { $0 }, factory: factory)
            cache[key] = made
            return made
        }
    }

    func trigger(_ result: String) { counter("prefetch_triggers_total", ("result", result)).increment() }
    func flight(_ interface: String, role: FlightRole) {
        counter("prefetch_flights_total", ("interface", interface), ("role", role.rawValue)).increment()
    }
    func fetch(_ interface: String, outcome: String) {
        counter("prefetch_fetches_total", ("interface", interface), ("outcome", outcome)).increment()
    }
    /// Counts a data request by `result` (`hit`, `joined`, `pending`, `failed` or a miss reason).
    public func data(_ result: String) { counter("prefetch_data_total", ("result", result)).increment() }
    /// Counts a data request answered with its response, `hit` or `joined` (`prefetch_data_total`).
    public func dataServed(joined: Bool) { (joined ? dataServed.joined : dataServed.hit).increment() }
    /// Counts a data read whose outcome was answered on the event loop, without a hop to a task.
    public func fastHandoff() { fastHandoffs.increment() }
    /// Counts a trigger, an open or a results view answered on the event loop, by its route (`trigger`, `open`,
    /// `results`).
    public func eventLoopAnswer(_ route: String) { counter("prefetch_event_loop_answers_total", ("route", route)).increment() }
    /// Counts a request refused by the trust model, by its bounded `reason` code.
    public func denied(_ reason: String) { counter("prefetch_access_denied_total", ("reason", reason)).increment() }

    func upstreamDuration(_ interface: String, _ duration: Duration) {
        timer("prefetch_upstream_duration_seconds", interface).record(duration)
    }

    func upstreamQueued(_ interface: String, _ duration: Duration) {
        timer("prefetch_upstream_queued_seconds", interface).record(duration)
    }

    /// The timer `label` for `interface`, created once and cached.
    private func timer(_ label: String, _ interface: String) -> Timer {
        let key = SeriesKey(label: label, first: ("interface", interface))
        return timers.withLock { cache in
            if let existing = cache[key] { return existing }
            let made = Timer(label: label, dimensions: [("interface", interface)], factory: factory)
            cache[key] = made
            return made
        }
    }
}

extension Timer {
    /// Records `duration` in nanoseconds.
    func record(_ duration: Duration) {
        recordNanoseconds(duration.nanoseconds)
    }
}
