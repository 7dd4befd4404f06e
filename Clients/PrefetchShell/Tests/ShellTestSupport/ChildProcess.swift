public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Child processes for the tests that run real programs (`prefetch serve`, the test upstream, a static file server):
// each on 127.0.0.1, on a port it reports, its output in a file, always stopped. Shared by the SDK's test targets.

/// Why a live test could not run its processes.
public struct LiveTestError: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) {
        self.description = description
    }
}

/// The path of an executable named by an environment variable; a failure naming the variable otherwise.
public func requiredBinary(_ variable: String) throws -> String {
    guard let path = ProcessInfo.processInfo.environment[variable], !path.isEmpty else {
        throw LiveTestError(
            description:
                "\(variable) is not set: the live tests run the service's binaries. Run scripts/test-clients.sh from the repository root, "
                + "or set PREFETCH_BIN=<path>/prefetch and PREFETCH_UPSTREAM_BIN=<path>/prefetch-upstream")
    }
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw LiveTestError(description: "\(variable)=\(path) is not an executable file")
    }
    return path
}

/// One child process whose output goes to a file; `stop()` ends it (SIGTERM, then SIGKILL after 10 s).
public final class ChildProcess {
    public let process = Process()
    /// Where its output file is: the directory given, or one of its own (removed by `stop()`).
    public let directory: URL
    public let outputFile: URL
    private let ownsDirectory: Bool

    public init(_ executable: String, _ arguments: [String], in directory: URL? = nil) throws {
        if let directory {
            self.directory = directory
            ownsDirectory = false
        } else {
            self.directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-shell-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
            ownsDirectory = true
        }
        outputFile = self.directory.appendingPathComponent("output-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: outputFile.path, contents: nil)
        let handle = try FileHandle(forWritingTo: outputFile)
        defer { try? handle.close() }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try launchSerially(process)
    }

    /// Its output so far.
    public var text: String { (try? String(contentsOf: outputFile, encoding: .utf8)) ?? "" }

    /// Waits (at most `seconds`) for a line containing `prefix` and returns the port number that follows it.
    public func port(after prefix: String, within seconds: Int = 60) async throws -> Int {
        let deadline = ContinuousClock.now.advanced(by: .seconds(seconds))
        while ContinuousClock.now < deadline {
            if let line = text.split(separator: "\n").first(where: { $0.contains(prefix) }),
                let port = Int(line[line.range(of: prefix)!.upperBound...].prefix { $0.isNumber })
            {
                return port
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw LiveTestError(description: "\(process.executableURL?.lastPathComponent ?? "child") reported no port: \(text)")
    }

    /// Waits for the process to end (at most `seconds`); its exit status.
    public func exitStatus(within seconds: Int = 120) async throws -> Int32 {
        let deadline = ContinuousClock.now.advanced(by: .seconds(seconds))
        while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        guard !process.isRunning else {
            await stop()
            throw LiveTestError(description: "\(process.executableURL?.lastPathComponent ?? "child") did not finish: \(text)")
        }
        return process.terminationStatus
    }

    public func stop() async {
        if process.isRunning { process.terminate() }
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while process.isRunning && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        if ownsDirectory { try? FileManager.default.removeItem(at: directory) }
    }
}

private let launches = NSLock()

/// Starts `process`, one launch at a time: Foundation's `Process.run()` is not safe to call from several threads at
/// once (a child can inherit another launch's descriptors).
public func launchSerially(_ process: Process) throws {
    try launches.withLock { try process.run() }
}
