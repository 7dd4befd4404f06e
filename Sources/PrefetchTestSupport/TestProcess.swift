public import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process for tests, started with `posix_spawn` directly: the part of Foundation's `Process` the tests
/// use (executable, arguments, environment, working directory, standard streams, run, status, signals), without
/// Foundation's launch path, which has crashed in `memcpy` while the test process spawned children (twice in CI).
///
/// The child gets the given standard streams and no other descriptor of the test process (every other one is
/// closed in the child), so a pipe's reader sees end-of-file when its own child exits, whatever else is running.
public final class TestProcess: Sendable {
    /// How a child ended.
    public enum TerminationReason: Sendable, Equatable {
        case exit
        case uncaughtSignal
    }

    private struct Setup {
        var executableURL: URL?
        var arguments: [String] = []
        var environment: [String: String]?
        var currentDirectoryURL: URL?
        var standardInput: Int32?
        var standardOutput: Int32?
        var standardError: Int32?
    }

    private struct Status {
        var pid: pid_t = 0
        /// The raw wait status once the child was reaped.
        var waitStatus: Int32?
    }

    private let setup = Mutex(Setup())
    /// The writing ends of pipes given as standard streams: the child has its copies, so the test process closes
    /// its own after the spawn (as Foundation's `Process` does), or their readers would never see end-of-file.
    private let pipeEnds = Mutex<[FileHandle]>([])
    /// The handles given as standard streams, kept open until the spawn (a handle made in the assignment itself
    /// would otherwise close its descriptor at once).
    private let retained = Mutex<[FileHandle]>([])
    /// `/dev/null`, opened for a stream given as `FileHandle.nullDevice`, closed after the spawn.
    private static let nullPath = "/dev/null"
    private let status = Mutex(Status())

    public init() {}

    public var executableURL: URL? {
        get { setup.withLock { $0.executableURL } }
        set { setup.withLock { $0.executableURL = newValue } }
    }

    public var arguments: [String] {
        get { setup.withLock { $0.arguments } }
        set { setup.withLock { $0.arguments = newValue } }
    }

    /// The child's environment; nil inherits the test process's.
    public var environment: [String: String]? {
        get { setup.withLock { $0.environment } }
        set { setup.withLock { $0.environment = newValue } }
    }

    public var currentDirectoryURL: URL? {
        get { setup.withLock { $0.currentDirectoryURL } }
        set { setup.withLock { $0.currentDirectoryURL = newValue } }
    }

    /// A `FileHandle` the child reads as its standard input (its descriptor must stay open until `run()`);
    /// nil inherits the test process's. Write-only.
    public var standardInput: FileHandle? {
        get { nil }
        set { setup.withLock { $0.standardInput = stream(newValue) } }
    }

    /// A `FileHandle` or a `Pipe` (its writing end) the child writes its standard output to, open until `run()`;
    /// nil inherits the test process's. Write-only.
    public var standardOutput: Any? {
        get { nil }
        set { setup.withLock { $0.standardOutput = stream(newValue) } }
    }

    /// As `standardOutput`, for standard error.
    public var standardError: Any? {
        get { nil }
        set { setup.withLock { $0.standardError = stream(newValue) } }
    }

    /// Keeps what `value` needs until the spawn (a pipe's writing end to close after it, a handle to keep open)
    /// and returns the descriptor it stands for.
    private func stream(_ value: Any?) -> Int32? {
        if let pipe = value as? Pipe { pipeEnds.withLock { $0.append(pipe.fileHandleForWriting) } }
        if let handle = value as? FileHandle { retained.withLock { $0.append(handle) } }
        return Self.descriptor(value)
    }

    /// The descriptor a stream stands for; -1 for `FileHandle.nullDevice` (the child gets `/dev/null`).
    private static func descriptor(_ stream: Any?) -> Int32? {
        switch stream {
        case let handle as FileHandle: handle === FileHandle.nullDevice ? -1 : handle.fileDescriptor
        case let pipe as Pipe: pipe.fileHandleForWriting.fileDescriptor
        default: nil
        }
    }

    public var processIdentifier: Int32 { status.withLock { $0.pid } }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// `posix_spawn_file_actions_addclosefrom_np`, when the C library has it.
    private static let addCloseFrom: AddCloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            return nil
        }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    /// Starts the child. Throws when it cannot be spawned.
    public func run() throws {
        let setup = setup.withLock { $0 }
        guard let executable = setup.executableURL?.path else {
            throw POSIXError(.ENOENT)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let streams: [(Int32?, Int32)] = [(setup.standardInput, 0), (setup.standardOutput, 1), (setup.standardError, 2)]
        for (source, target) in streams {
            guard let source else { continue }
            if source < 0 {
                posix_spawn_file_actions_addopen(&actions, target, Self.nullPath, target == 0 ? O_RDONLY : O_WRONLY, 0)
            } else {
                posix_spawn_file_actions_adddup2(&actions, source, target)
            }
        }
        // Nothing else of ours reaches the child: every descriptor from 3 up is closed in it (glibc 2.34's
        // closefrom action, looked up at run time because the Glibc module does not declare it).
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }
        var program = executable
        var arguments = [executable] + setup.arguments
        if let directory = setup.currentDirectoryURL?.path {
            // GNU env changes the directory, then runs the program: posix_spawn has no portable chdir action.
            program = "/usr/bin/env"
            arguments = ["env", "-C", directory] + arguments
        }
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let environment = setup.environment ?? ProcessInfo.processInfo.environment
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, program, &actions, nil, argv, envp)
        for end in pipeEnds.withLock({ $0 }) { try? end.close() }
        retained.withLock { $0.removeAll() }
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
        status.withLock { $0.pid = pid }
    }

    /// Reaps the child if it ended; returns its wait status once it has.
    private func reap(blocking: Bool) -> Int32? {
        status.withLock { status in
            if let done = status.waitStatus { return done }
            guard status.pid > 0 else { return nil }
            var raw: Int32 = 0
            let reaped = waitpid(status.pid, &raw, blocking ? 0 : WNOHANG)
            guard reaped == status.pid else { return nil }
            status.waitStatus = raw
            return raw
        }
    }

    public var isRunning: Bool {
        processIdentifier > 0 && reap(blocking: false) == nil
    }

    /// The exit code, or the signal that ended the child (0 while it runs).
    public var terminationStatus: Int32 {
        guard let raw = reap(blocking: false) else { return 0 }
        return raw & 0x7F == 0 ? (raw >> 8) & 0xFF : raw & 0x7F
    }

    public var terminationReason: TerminationReason {
        guard let raw = reap(blocking: false) else { return .exit }
        return raw & 0x7F == 0 ? .exit : .uncaughtSignal
    }

    /// Sends SIGTERM.
    public func terminate() {
        signal(SIGTERM)
    }

    /// Sends SIGINT.
    public func interrupt() {
        signal(SIGINT)
    }

    /// Sends `number` to the child while it runs.
    public func signal(_ number: Int32) {
        let pid = processIdentifier
        if pid > 0, reap(blocking: false) == nil { kill(pid, number) }
    }

    /// Blocks until the child ends (a test's thread, never the event loop).
    public func waitUntilExit() {
        _ = reap(blocking: true)
    }
}
