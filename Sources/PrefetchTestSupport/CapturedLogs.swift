public import Logging
import Synchronization

/// Every log line of a logger, rendered as `level message key=value ... [error=...]`, for tests that check what
/// reaches the logs (a warning was written, a secret was not).
public final class CapturedLogs: Sendable {
    private let lines = Mutex<[String]>([])

    /// Starts empty.
    public init() {}

    /// A logger at `trace` level that records here.
    public var logger: Logger {
        Logger(label: "prefetch.test.captured") { _ in Handler(sink: self) }
    }

    /// Every line so far, in order.
    public var all: [String] { lines.withLock { $0 } }

    fileprivate func append(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    private struct Handler: LogHandler {
        let sink: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            let rendered = merged.keys.sorted().map { "\($0)=\(merged[$0]!)" }.joined(separator: " ")
            sink.append("\(event.level) \(event.message) \(rendered)\(event.error.map { " error=\($0)" } ?? "")")
        }
    }
}
