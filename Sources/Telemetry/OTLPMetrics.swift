public import CoreMetrics
import Synchronization
import Tracing

/// A swift-metrics `MetricsFactory` whose series are aggregated cumulatively in process and exported by
/// ``MetricExporter``: counters and floating-point counters as monotonic sums, meters and non-aggregating recorders
/// as gauges (the last value), aggregating recorders and timers as explicit-bucket histograms (timers in seconds).
///
/// One series per label, kind and set of dimensions: making the same metric twice gives the same series, as with
/// the Prometheus factory. The dimensions `unit` and `description` are the metric's unit and description, not
/// attributes.
public final class OTLPMetricsFactory: MetricsFactory, Sendable {
    /// The OpenTelemetry specification's default histogram bounds, for recorders.
    public static let defaultValueBounds: [Double] = [0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000]
    /// The same bounds read as milliseconds, in seconds, for timers.
    public static let defaultDurationBounds: [Double] = defaultValueBounds.map { $0 / 1000 }

    let registry = Mutex(Registry())

    /// An empty factory.
    public init() {}

    /// The monotonic integer sum of `label` and `dimensions`.
    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        series(.counter, label, dimensions) { CounterSeries(identity: $0) }
    }

    /// The monotonic floating-point sum of `label` and `dimensions`.
    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        series(.floatingPointCounter, label, dimensions) { FloatingPointCounterSeries(identity: $0) }
    }

    /// The gauge of `label` and `dimensions`.
    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        series(.gauge, label, dimensions) { GaugeSeries(identity: $0) }
    }

    /// A histogram when `aggregate`, else a gauge holding the last value.
    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        if aggregate {
            return series(.histogram, label, dimensions) { HistogramSeries(identity: $0, bounds: Self.defaultValueBounds) }
        }
        return series(.gauge, label, dimensions) { GaugeSeries(identity: $0) }
    }

    /// The histogram, in seconds, of `label` and `dimensions`.
    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        series(.timer, label, dimensions) { HistogramSeries(identity: $0, bounds: Self.defaultDurationBounds) }
    }

    /// Drops the series (it is no longer exported).
    public func destroyCounter(_ handler: any CounterHandler) { remove(handler) }
    public func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { remove(handler) }
    public func destroyMeter(_ handler: any MeterHandler) { remove(handler) }
    public func destroyRecorder(_ handler: any RecorderHandler) { remove(handler) }
    public func destroyTimer(_ handler: any TimerHandler) { remove(handler) }

    /// Every series now, grouped into metrics by kind and name, sorted by name; `now` is the points' time.
    func collect(now: UInt64 = DefaultTracerClock.now.nanosecondsSinceEpoch) -> [MetricData] {
        let all = registry.withLock { Array($0.series.values) }
        var metrics: [SeriesIdentity.Metric: MetricData] = [:]
        for series in all {
            let identity = series.identity
            metrics[identity.metric, default: MetricData(identity: identity, points: [])].points.append(series.point(now: now))
        }
        return metrics.values.sorted { ($0.name, $0.kind.rawValue) < ($1.name, $1.kind.rawValue) }.map { metric in
            var metric = metric
            metric.points.sort { left, right in
                left.attributes.lexicographicallyPrecedes(right.attributes) { ($0.key, $0.value) < ($1.key, $1.value) }
            }
            return metric
        }
    }

    private func series<Series: MetricSeries>(
        _ kind: MetricKind, _ label: String, _ dimensions: [(String, String)], make: (SeriesIdentity) -> Series
    ) -> Series {
        let identity = SeriesIdentity(kind: kind, label: label, dimensions: dimensions)
        return registry.withLock { registry in
            if let existing = registry.series[identity] as? Series { return existing }
            let made = make(identity)
            registry.series[identity] = made
            return made
        }
    }

    private func remove(_ handler: AnyObject) {
        guard let series = handler as? any MetricSeries else { return }
        registry.withLock { registry in
            if registry.series[series.identity] === series { registry.series[series.identity] = nil }
        }
    }

    struct Registry {
        var series: [SeriesIdentity: any MetricSeries] = [:]
    }
}

/// The shape a series is exported in.
enum MetricKind: Int, Sendable, Hashable {
    case counter, floatingPointCounter, gauge, histogram, timer
}

/// What names a series: its kind, the metric's name, unit and description, and its attributes (sorted by key).
struct SeriesIdentity: Sendable, Hashable {
    struct Metric: Sendable, Hashable {
        var kind: MetricKind
        var name: String
        var unit: String
        var description: String
    }

    var metric: Metric
    var attributes: [Attribute]

    struct Attribute: Sendable, Hashable {
        var key: String
        var value: String
    }

    init(kind: MetricKind, label: String, dimensions: [(String, String)]) {
        var unit = ""
        var description = ""
        var attributes: [Attribute] = []
        for (key, value) in dimensions {
            switch key {
            case "unit": unit = value
            case "description": description = value
            default: attributes.append(Attribute(key: key, value: value))
            }
        }
        metric = Metric(kind: kind, name: label, unit: unit, description: description)
        self.attributes = attributes.sorted { ($0.key, $0.value) < ($1.key, $1.value) }
    }
}

/// One metric as exported: every series of one name and kind.
struct MetricData: Sendable {
    var identity: SeriesIdentity.Metric
    var points: [MetricPoint]

    init(identity: SeriesIdentity, points: [MetricPoint]) {
        self.identity = identity.metric
        self.points = points
    }

    var name: String { identity.name }
    var kind: MetricKind { identity.kind }
}

/// One series' value at a collection.
struct MetricPoint: Sendable {
    enum Value: Sendable, Equatable {
        case int(Int64)
        case double(Double)
        case histogram(Histogram)
    }

    struct Histogram: Sendable, Equatable {
        var bounds: [Double]
        /// One per bound, and one for above the last.
        var counts: [UInt64]
        var count: UInt64
        var sum: Double
        var min: Double?
        var max: Double?
    }

    var attributes: [SeriesIdentity.Attribute]
    var start: UInt64
    var time: UInt64
    var value: Value
}

/// A series in the registry.
protocol MetricSeries: AnyObject, Sendable {
    var identity: SeriesIdentity { get }
    func point(now: UInt64) -> MetricPoint
}

/// A monotonic integer sum.
final class CounterSeries: CounterHandler, MetricSeries {
    let identity: SeriesIdentity
    private let state: Mutex<(value: Int64, start: UInt64)>

    init(identity: SeriesIdentity) {
        self.identity = identity
        state = Mutex((0, DefaultTracerClock.now.nanosecondsSinceEpoch))
    }

    func increment(by amount: Int64) {
        state.withLock { $0.value &+= amount }
    }

    /// Starts the sum again from zero, with a new start time (a cumulative series' reset).
    func reset() {
        state.withLock { $0 = (0, DefaultTracerClock.now.nanosecondsSinceEpoch) }
    }

    func point(now: UInt64) -> MetricPoint {
        let (value, start) = state.withLock { $0 }
        return MetricPoint(attributes: identity.attributes, start: start, time: now, value: .int(value))
    }
}

/// A monotonic floating-point sum.
final class FloatingPointCounterSeries: FloatingPointCounterHandler, MetricSeries {
    let identity: SeriesIdentity
    private let state: Mutex<(value: Double, start: UInt64)>

    init(identity: SeriesIdentity) {
        self.identity = identity
        state = Mutex((0, DefaultTracerClock.now.nanosecondsSinceEpoch))
    }

    func increment(by amount: Double) {
        guard amount.isFinite, amount > 0 else { return }
        state.withLock { $0.value += amount }
    }

    func reset() {
        state.withLock { $0 = (0, DefaultTracerClock.now.nanosecondsSinceEpoch) }
    }

    func point(now: UInt64) -> MetricPoint {
        let (value, start) = state.withLock { $0 }
        return MetricPoint(attributes: identity.attributes, start: start, time: now, value: .double(value))
    }
}

/// The last value set: a meter, or a recorder that does not aggregate.
final class GaugeSeries: MeterHandler, RecorderHandler, MetricSeries {
    let identity: SeriesIdentity
    private let state: Mutex<(value: Double, start: UInt64)>

    init(identity: SeriesIdentity) {
        self.identity = identity
        state = Mutex((0, DefaultTracerClock.now.nanosecondsSinceEpoch))
    }

    func set(_ value: Int64) { set(Double(value)) }
    func set(_ value: Double) { state.withLock { $0.value = value } }
    func increment(by amount: Double) { state.withLock { $0.value += amount } }
    func decrement(by amount: Double) { state.withLock { $0.value -= amount } }
    func record(_ value: Int64) { set(Double(value)) }
    func record(_ value: Double) { set(value) }

    func point(now: UInt64) -> MetricPoint {
        let (value, start) = state.withLock { $0 }
        return MetricPoint(attributes: identity.attributes, start: start, time: now, value: .double(value))
    }
}

/// An explicit-bucket histogram: a recorder that aggregates, or a timer (in seconds).
final class HistogramSeries: RecorderHandler, TimerHandler, MetricSeries {
    let identity: SeriesIdentity
    private let state: Mutex<(histogram: MetricPoint.Histogram, start: UInt64)>

    init(identity: SeriesIdentity, bounds: [Double]) {
        self.identity = identity
        let empty = MetricPoint.Histogram(bounds: bounds, counts: Array(repeating: 0, count: bounds.count + 1), count: 0, sum: 0)
        state = Mutex((empty, DefaultTracerClock.now.nanosecondsSinceEpoch))
    }

    func record(_ value: Int64) { record(Double(value)) }

    func record(_ value: Double) {
        guard !value.isNaN else { return }
        state.withLock { state in
            let bucket = state.histogram.bounds.firstIndex { value <= $0 } ?? state.histogram.bounds.count
            state.histogram.counts[bucket] += 1
            state.histogram.count += 1
            state.histogram.sum += value
            state.histogram.min = Swift.min(state.histogram.min ?? value, value)
            state.histogram.max = Swift.max(state.histogram.max ?? value, value)
        }
    }

    func recordNanoseconds(_ duration: Int64) {
        record(Double(duration) / 1_000_000_000)
    }

    func point(now: UInt64) -> MetricPoint {
        let (histogram, start) = state.withLock { $0 }
        return MetricPoint(attributes: identity.attributes, start: start, time: now, value: .histogram(histogram))
    }
}
