import Logging
import Subprocess
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(System)
import System
#else
import SystemPackage
#endif

/// Runs renderer processes on behalf of a pool.
///
/// swift-subprocess only lets a process live inside the scope of its `run` call, so every renderer process
/// lives in a child task of ``serve()``, which the pool's `run()` drives. Creating a process renderer queues a
/// ``ProcessLink`` here; the child task launches the command, reports its stdout lines and pid to the link,
/// writes reset lines on request, and on `stop` (or cancellation) tears the process group down (SIGTERM, then
/// SIGKILL after the grace) and reaps it. When `serve()` returns, no renderer process is left.
final class ProcessHost: Sendable {
    private struct State {
        var closed = false
    }

    private let queue: AsyncStream<ProcessLink>
    private let continuation: AsyncStream<ProcessLink>.Continuation
    private let state = Mutex(State())
    private let logger: Logger

    init(logger: Logger) {
        (queue, continuation) = AsyncStream.makeStream(of: ProcessLink.self)
        self.logger = logger
    }

    /// Queues a process to launch; refused (the link fails at once) once the host has closed.
    func submit(_ link: ProcessLink) {
        let accepted = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            continuation.yield(link)
            return true
        }
        if !accepted { link.failBeforeLaunch("the renderer host has shut down") }
    }

    /// Stops accepting processes; ``serve()`` returns once the running ones are gone.
    func close() {
        state.withLock { $0.closed = true }
        continuation.finish()
    }

    /// Hosts queued processes until ``close()`` or cancellation, then waits for every process to be reaped.
    func serve() async {
        await withDiscardingTaskGroup { group in
            for await link in queue {
                group.addTask { await Self.host(link, logger: self.logger) }
            }
        }
        // Links queued after the loop ended were never launched.
        close()
    }

    private static func host(_ link: ProcessLink, logger: Logger) async {
        guard link.beginLaunch() else { return }
        let spec = link.spec
        var options = PlatformOptions()
        // Own session and process group, so teardown reaches whatever the command started.
        options.createSession = true
        let teardown: [TeardownStep] = [
            .gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: spec.grace)
        ]
        options.teardownSequence = teardown
        do {
            _ = try await Subprocess.run(
                .path(FilePath(spec.command[0])),
                arguments: Arguments(Array(spec.command.dropFirst())),
                platformOptions: options,
                input: .inputWriter,
                output: .sequence,
                error: .discarded
            ) { execution in
                link.launched(pid: execution.processIdentifier.value)
                await withTaskGroup(of: Void.self) { group in
                    group.addTask {
                        do {
                            for try await line in execution.standardOutput.strings() {
                                link.received(line: line)
                            }
                        } catch {}
                        link.outputClosed()
                    }
                    group.addTask {
                        for await command in link.commands {
                            switch command {
                            case .write(let text):
                                _ = try? await execution.standardInputWriter.write(text)
                            case .stop:
                                return
                            }
                        }
                    }
                    // Either the process closed its output (it died) or a stop/cancellation arrived: tear down.
                    _ = await group.next()
                    await execution.teardown(using: teardown)
                    group.cancelAll()
                }
            }
        } catch {
            logger.warning(
                "renderer process failed to launch",
                metadata: ["renderer": "\(link.id)", "error": "\(error)"]
            )
            link.failBeforeLaunch("launch of \(spec.command[0]) failed: \(error)")
            return
        }
        link.reaped()
    }
}

/// What a process renderer runs and how it signals readiness (taken from a ``RendererProfile``).
struct ProcessSpec: Sendable {
    var command: [String]
    var readyLine: String?
    var readyPort: Int?
    var readyTimeout: Duration
    var resetLine: String?
    var grace: Duration

    init(profile: RendererProfile) {
        command = profile.command
        readyLine = profile.effectiveReadyLine
        readyPort = profile.readyPort
        readyTimeout = .milliseconds(profile.readyTimeoutMs)
        resetLine = profile.resetLine
        grace = .milliseconds(profile.terminateGraceMs)
    }
}

/// The shared record between a renderer process's host task and its ``ProcessRenderer``.
final class ProcessLink: Sendable {
    enum Command: Sendable {
        case write(String)
        case stop
    }

    private enum Phase {
        case queued, running, reaped
    }

    private struct State {
        var phase = Phase.queued
        var stopRequested = false
        var pid: pid_t?
        var readyLines = 0
        var outputClosed = false
        var failure: String?
        var reapWaiters: [CheckedContinuation<Void, Never>] = []
    }

    let id: String
    let spec: ProcessSpec
    let commands: AsyncStream<Command>
    private let commandSink: AsyncStream<Command>.Continuation
    private let state = Mutex(State())

    init(id: String, spec: ProcessSpec) {
        self.id = id
        self.spec = spec
        (commands, commandSink) = AsyncStream.makeStream(of: Command.self)
    }

    /// The process id once launched (kept after reaping, for inspection).
    var pid: pid_t? { state.withLock { $0.pid } }
    /// How many ready lines the process has printed.
    var readyLines: Int { state.withLock { $0.readyLines } }
    /// Why the process never ran, if it did not.
    var failure: String? { state.withLock { $0.failure } }

    /// Whether the process is running: launched, output open, not reaped, and not exited per the kernel.
    var isAlive: Bool {
        let (pid, running) = state.withLock { s in (s.pid, s.phase == .running && !s.outputClosed) }
        guard running, let pid else { return false }
        return !hasExited(pid)
    }

    /// Whether the host is done with the process (reaped, or never launched).
    var isReaped: Bool { state.withLock { $0.phase == .reaped } }

    func beginLaunch() -> Bool {
        state.withLock { s in
            guard s.phase == .queued, !s.stopRequested else {
                s.phase = .reaped
                return false
            }
            s.phase = .running
            return true
        }
    }

    func launched(pid: pid_t) {
        state.withLock { $0.pid = pid }
    }

    func received(line: String) {
        guard line == spec.readyLine else { return }
        state.withLock { $0.readyLines += 1 }
    }

    func outputClosed() {
        state.withLock { $0.outputClosed = true }
    }

    func failBeforeLaunch(_ message: String) {
        let waiters = state.withLock { s in
            s.failure = s.failure ?? message
            s.phase = .reaped
            return s.reapWaiters.removeAllAndReturn()
        }
        waiters.forEach { $0.resume() }
    }

    func reaped() {
        let waiters = state.withLock { s in
            s.phase = .reaped
            return s.reapWaiters.removeAllAndReturn()
        }
        waiters.forEach { $0.resume() }
    }

    func write(_ line: String) {
        commandSink.yield(.write(line + "\n"))
    }

    /// Asks the host to tear the process down; a process not launched yet never will be.
    func stop() {
        state.withLock { s in
            s.stopRequested = true
            if s.phase == .queued { s.phase = .reaped }
        }
        commandSink.yield(.stop)
        commandSink.finish()
    }

    /// Waits until the host has reaped the process (or never launched it).
    func waitReaped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s -> Bool in
                if s.phase == .reaped { return true }
                s.reapWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}

extension Array {
    fileprivate mutating func removeAllAndReturn() -> [Element] {
        let all = self
        removeAll()
        return all
    }
}

/// Whether the child `pid` has exited, without reaping it (the host's `run` call reaps it).
private func hasExited(_ pid: pid_t) -> Bool {
    var info = siginfo_t()
    let rc = waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT)
    if rc != 0 { return errno == ECHILD }
    #if canImport(Glibc) || canImport(Musl)
    return info._sifields._sigchld.si_pid == pid
    #else
    return info.si_pid == pid
    #endif
}

/// Checks, without ever blocking, whether something accepts TCP connections on 127.0.0.1:`port`.
///
/// A non-blocking connect usually reports "in progress" even on the loopback, so the probe keeps that socket
/// and asks again on the next ``check()`` (callers poll every few milliseconds).
struct PortProbe: ~Copyable {
    let port: Int
    private var pending: Int32 = -1

    init(port: Int) {
        self.port = port
    }

    deinit {
        if pending >= 0 { close(pending) }
    }

    /// `true` once a connection to the port has been accepted.
    mutating func check() -> Bool {
        if pending >= 0 {
            var poller = pollfd(fd: pending, events: Int16(POLLOUT), revents: 0)
            guard poll(&poller, 1, 0) == 1 else { return false }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            let rc = getsockopt(pending, SOL_SOCKET, SO_ERROR, &error, &length)
            close(pending)
            pending = -1
            return rc == 0 && error == 0
        }
        #if canImport(Glibc) || canImport(Musl)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        if fd >= 0 { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        #endif
        guard fd >= 0 else { return false }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if rc == 0 {
            close(fd)
            return true
        }
        if errno == EINPROGRESS {
            pending = fd
        } else {
            close(fd)
        }
        return false
    }
}

/// Creates ``ProcessRenderer``s: launches the profile's command in the pool's ``ProcessHost`` and waits until
/// it prints its ready line (or opens its ready port) within `readyTimeoutMs`.
struct ProcessRendererFactory: RendererFactory {
    let spec: ProcessSpec
    let host: ProcessHost

    func make(id: RendererID) async throws(RendererError) -> any Renderer {
        let link = ProcessLink(id: id.value, spec: spec)
        let renderer = ProcessRenderer(link: link)
        host.submit(link)
        do {
            try await renderer.waitReady(count: 1)
        } catch {
            await renderer.destroy()
            throw error
        }
        return renderer
    }
}

/// A renderer backed by a real process. Alive while the process runs; reset writes `resetLine` to its stdin
/// and waits for the ready line again (a no-op without `resetLine`); destroy terminates and reaps it.
public final class ProcessRenderer: SynchronousRenderer {
    /// The pool-assigned identifier.
    public var id: RendererID { RendererID(link.id) }
    /// Process renderers report no memory figure (0).
    public var memoryMB: Int { 0 }
    let link: ProcessLink
    private let pages = Mutex<[String]>([])
    private let expectedReady = Mutex(1)

    init(link: ProcessLink) {
        self.link = link
    }

    /// The process id, once launched.
    public var processID: Int32? { link.pid }

    /// Records the page for ``openedPages()``; the process itself is not told.
    public func open(page: String?) async {
        openNow(page: page)
    }

    public func openNow(page: String?) {
        guard let page else { return }
        pages.withLock { $0.append(page) }
    }

    /// Pages opened since launch or the last reset.
    public func openedPages() async -> [String] {
        pages.withLock { $0 }
    }

    /// Writes `resetLine` and waits for the ready line again; without `resetLine`, only forgets the pages.
    public func reset() async throws(RendererError) {
        guard link.isAlive else { throw RendererError(.died, "renderer process \(id) has exited") }
        if let line = link.spec.resetLine {
            let target = expectedReady.withLock { n -> Int in
                n += 1
                return n
            }
            link.write(line)
            do {
                try await waitReady(count: target)
            } catch {
                throw RendererError(.resetFailed, "renderer process \(id) did not answer its reset: \(error.message)")
            }
        }
        pages.withLock { $0.removeAll() }
    }

    /// Whether the process is still running.
    public func isHealthy() async -> Bool {
        link.isAlive
    }

    public func isHealthyNow() -> Bool {
        link.isAlive
    }

    /// Terminates the process group (SIGTERM, SIGKILL after the grace) and waits until it is reaped.
    public func destroy() async {
        link.stop()
        await link.waitReaped()
    }

    /// Polls until the process has printed `count` ready lines (or, with a ready port, accepts connections),
    /// failing on exit, on launch failure, or after `readyTimeout`.
    func waitReady(count: Int) async throws(RendererError) {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: link.spec.readyTimeout)
        var probe = link.spec.readyPort.map { PortProbe(port: $0) }
        while true {
            if let failure = link.failure { throw RendererError(.createFailed, failure) }
            if link.pid != nil {
                let lineReady = link.spec.readyLine == nil || link.readyLines >= count
                let portReady = probe?.check() ?? true
                if lineReady && portReady { return }
                if !link.isAlive { throw RendererError(.died, "renderer process \(id) exited before it was ready") }
            } else if link.isReaped {
                throw RendererError(.createFailed, "renderer process \(id) was stopped before it launched")
            }
            if clock.now >= deadline {
                throw RendererError(
                    .readyTimeout,
                    "renderer process \(id) (\(link.spec.command[0])) not ready within \(link.spec.readyTimeout)"
                )
            }
            do {
                try await Task.sleep(for: .milliseconds(10))
            } catch {
                throw RendererError(.createFailed, "waiting for renderer process \(id) was cancelled")
            }
        }
    }
}
