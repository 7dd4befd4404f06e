public import Foundation
public import HTTPTypes
public import PrefetchCore
public import PrefetchTestUpstream
public import PrefetchTestUpstreamTLS
import Synchronization

/// Runs `body` with a fresh upstream on 127.0.0.1 (TLS when given), always shut down afterwards, also when
/// `body` throws.
public func withUpstream<T: Sendable>(
    tls: UpstreamTLS? = nil, http2: Bool = false, _ body: @Sendable (TestUpstream) async throws -> T
) async throws -> T {
    let upstream = try await TestUpstream.start(tls: tls, http2: http2)
    do {
        let result = try await body(upstream)
        try await upstream.shutdown()
        return result
    } catch {
        try? await upstream.shutdown()
        throw error
    }
}

/// Where the package's executables (`prefetch`, `prefetch-upstream`) are when tests run: next to the test bundle
/// in the build products directory.
public func builtExecutable(_ name: String) -> URL? {
    var directories: [URL] = []
    if let selfPath = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        directories.append(URL(fileURLWithPath: selfPath).deletingLastPathComponent())
    }
    directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
    directories.append(Bundle.main.bundleURL)
    if let first = CommandLine.arguments.first {
        directories.append(URL(fileURLWithPath: first).deletingLastPathComponent())
    }
    for directory in directories {
        var candidate = directory
        // Walk up out of a bundle directory (e.g. x.xctest/Contents/MacOS) if needed.
        for _ in 0..<4 {
            let url = candidate.appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue,
                FileManager.default.isExecutableFile(atPath: url.path)
            {
                return url
            }
            candidate = candidate.deletingLastPathComponent()
        }
    }
    return nil
}

private let launchLock = Mutex(())

/// Starts `process`, one launch at a time in the whole test process (every test target runs in one process, and a
/// child must not inherit a descriptor another launch has just opened).
public func launchSerially(_ process: TestProcess) throws {
    try launchLock.withLock { _ in try process.run() }
}

/// Polls `condition` every 10 ms until it holds or `seconds` pass; returns whether it held. The one polling helper
/// of every test target: a bound on how long a test waits for something to happen, never what decides an outcome.
/// So the bound is never shorter than ``eventWaitFloor``: what a test waits for comes as soon as it comes (a
/// passing test never waits the bound out), and on a machine whose cores another job keeps busy an event can take
/// tens of seconds (a 15 s bound on an HTTPDNS answer failed one of ten loaded runs of the suite).
public func eventually(within seconds: Double = 10, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now.advanced(by: .milliseconds(Int64(max(seconds, eventWaitFloor) * 1000)))
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

/// The shortest bound ``eventually`` puts on a wait, in seconds.
public let eventWaitFloor: Double = 60

/// Polls `produce` every 10 ms until it gives a value or `seconds` pass; the first value, or nil. `eventually` for a
/// state that comes with a value (a flight token once a lock has expired).
public func eventuallyValue<T>(within seconds: Double = 10, _ produce: () async throws -> T?) async rethrows -> T? {
    var value: T?
    _ = try await eventually(within: seconds) {
        value = try await produce()
        return value != nil
    }
    return value
}

/// A clock that moves only when a test says so: `advance(by:)` moves `now` and wakes every sleeper whose deadline
/// it reached. Sleepers are counted, so a test can wait until the code under test is asleep before moving time.
public final class ManualClock: ServiceClock {
    public typealias Instant = ContinuousClock.Instant

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Instant
        var sleepers: [Int: Sleeper] = [:]
        var nextID = 0
    }

    private let state: Mutex<State>

    /// A clock reading `start` (by default the real clock's present, so instants compare sensibly with fixtures).
    public init(start: Instant = ContinuousClock.now) {
        state = Mutex(State(now: start))
    }

    public var now: Instant { state.withLock { $0.now } }

    public var minimumResolution: Duration { .zero }

    /// Tasks sleeping on this clock right now.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves `now` forward by `duration` and wakes the sleepers whose deadline it reached, earliest first.
    public func advance(by duration: Duration) {
        let woken: [Sleeper] = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers.removeValue(forKey: id) }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }
}

extension HTTPFields {
    /// Fields from name/value pairs, in order: a test shorthand. Every name must be a valid field name.
    public init(_ pairs: [(String, String)]) {
        self.init(pairs.map { HTTPField(name: HTTPField.Name($0.0)!, value: $0.1) })
    }
}
