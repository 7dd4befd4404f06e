import ConfigUpdater
import Foundation
import Logging
import PrefetchCore
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import Synchronization
import Testing

/// How many pages the test config of `version` has: readers use it to tell a torn config from a whole one.
func pageCount(forVersion version: Int) -> Int {
    version % 4 + 1
}

/// A valid config envelope. Its name, page count and api paths all derive from `version`.
func configBody(version: Int, code: Int = 200) -> [UInt8] {
    let pages = (0..<pageCount(forVersion: version)).map { index in
        """
        {"url":"https://shop.example.com/p\(index).html","interfaces":[
          {"api":"https://api.example.com/v\(version)/item\(index)","method":"GET","urlParam":true}]}
        """
    }
    let text = """
        {"code":\(code),"data":{"name":"cfg-v\(version)","version":"\(version)","config":[\(pages.joined(separator: ","))]}}
        """
    return Array(text.utf8)
}

/// Valid JSON, code 200, but a page without interfaces and a bad method: never applicable.
let invalidConfigBody = Array(
    """
    {"code":200,"data":{"name":"broken","version":"99","config":[
      {"url":"https://shop.example.com/p0.html"},
      {"url":"https://shop.example.com/p1.html","interfaces":[{"api":"https://api.example.com/x","method":"FETCH"}]}]}}
    """.utf8)

let notJSONBody = Array("{\"code\":200,\"data\":".utf8)

/// Runs `body` with a running config server, always shut down afterwards.
func withConfigServer<T: Sendable>(_ body: @Sendable (ConfigServer) async throws -> T) async throws -> T {
    let server = try await ConfigServer.start()
    do {
        let result = try await body(server)
        await server.shutdown()
        return result
    } catch {
        await server.shutdown()
        throw error
    }
}

/// A fresh empty directory, removed after `body`.
func withTemporaryDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let path = FileManager.default.temporaryDirectory
        .appendingPathComponent("config-updater-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}

/// Replaces the file at `path` atomically (as a deploy tool would).
func writeFile(_ bytes: [UInt8], to path: String) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
}

/// Settings with test-sized windows; `run()` loops stay quiet unless a test asks otherwise.
func testSettings(
    source: String, fallbackURL: String? = nil, fatigueWindow: Duration = .milliseconds(1),
    stateDirectory: String? = nil, interval: Duration = .seconds(3600),
    fileWatchInterval: Duration = .milliseconds(100), checksOnHangup: Bool = false
) -> ConfigSourceSettings {
    ConfigSourceSettings(
        source: source, fallbackURL: fallbackURL, interval: interval, fatigueWindow: fatigueWindow,
        abnormalThreshold: 5, stateDirectory: stateDirectory, fileWatchInterval: fileWatchInterval,
        requestTimeout: .seconds(3), checksOnHangup: checksOnHangup)
}

/// A refresh that is not throttled: retries while the (test-sized) fatigue window is still open.
func checkNow(_ updater: ConfigUpdater, trigger: RefreshTrigger = .manual) async -> ConfigRefreshResult {
    let deadline = ContinuousClock.now.advanced(by: .seconds(10))
    while true {
        let result = await updater.refresh(trigger: trigger)
        if result.outcome != .throttled || ContinuousClock.now > deadline { return result }
        try? await Task.sleep(for: .milliseconds(5))
    }
}

/// Records an issue unless `condition` becomes true within `seconds`.
///
/// Use this rather than `#expect(await eventually { ... })`: with Swift 6.3.1, an `#expect` around an `await` of a
/// closure-taking call inside another closure can make a later call run the wrong closure.
func expectEventually(
    _ comment: Comment? = nil, within seconds: Int = 10, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () -> Bool
) async {
    let happened = await eventually(within: Double(seconds), condition)
    #expect(happened, comment, sourceLocation: sourceLocation)
}

/// Collects what `onApply` receives.
final class AppliedLog: Sendable {
    struct Entry: Sendable, Equatable {
        var version: String
        var previous: String?
        var origin: ActiveSource
    }

    private let entries = Mutex<[Entry]>([])

    var onApply: @Sendable (AppliedConfig) async -> Void {
        { applied in
            self.entries.withLock {
                $0.append(Entry(version: applied.config.version, previous: applied.previous?.version, origin: applied.origin))
            }
        }
    }

    var all: [Entry] { entries.withLock { $0 } }
    var versions: [String] { all.map(\.version) }
}

let testLogger: Logger = {
    var logger = Logger(label: "prefetch.config.test")
    logger.logLevel = .critical
    return logger
}()
