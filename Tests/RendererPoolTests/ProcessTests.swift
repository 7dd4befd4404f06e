import Logging
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceLifecycle
import Testing

@testable import RendererPool

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The stand-in renderer script, found next to this file.
let rendererScript: String = {
    let parts = String(#filePath).split(separator: "/", omittingEmptySubsequences: false).dropLast()
    return parts.joined(separator: "/") + "/Fixtures/renderer.sh"
}()

func processProfile(
    minIdle: Int = 1, maxSize: Int = 2, command: [String] = ["/bin/sh", rendererScript],
    _ adjust: (inout RendererProfile) -> Void = { _ in }
) -> RendererProfile {
    var profile = RendererProfile()
    profile.kind = .process
    profile.command = command
    profile.minIdle = minIdle
    profile.maxSize = maxSize
    // Generous, so a busy machine does not fail a start; the tests about readiness set their own.
    profile.readyTimeoutMs = 20_000
    profile.terminateGraceMs = 500
    adjust(&profile)
    return profile
}

/// Whether a process with this pid exists at all (a zombie still counts: it has not been reaped).
func processExists(_ pid: Int32) -> Bool {
    kill(pid, 0) == 0 || errno == EPERM
}

/// Whether the process has exited (zombie, waiting to be reaped) or is gone.
func processHasDied(_ pid: Int32) -> Bool {
    guard processExists(pid) else { return true }
    let fd = open("/proc/\(pid)/stat", O_RDONLY)
    guard fd >= 0 else { return true }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 512)
    let count = read(fd, &buffer, buffer.count)
    guard count > 0 else { return true }
    let text = String(decoding: buffer[0..<count], as: UTF8.self)
    // Format: pid (comm) state ...
    guard let close = text.lastIndex(of: ")") else { return false }
    let state = text[text.index(after: close)...].dropFirst().first
    return state == "Z" || state == "X"
}

extension Lease {
    var pid: Int32 { (renderer as! ProcessRenderer).processID! }
}

@Suite(.timeLimit(.minutes(1))) struct ProcessRendererTests {
    @Test func aProcessIsWarmOnceItPrintsReadyAndResetsBetweenLeases() async throws {
        let profile = processProfile(minIdle: 1, maxSize: 1) { $0.resetLine = "reset" }
        let pool = RendererPool(name: "proc", profile: profile, logger: testLogger, tick: .milliseconds(20))
        let pid = try await withRunningPool(pool) {
            do {
                let settled = await eventually { await pool.snapshot().idle == 1 }
                #expect(settled)
            }
            let first = try await pool.acquire(page: "https://app.example/a")
            #expect(first.warm)
            #expect(processExists(first.pid))
            await pool.release(id: first.id)
            let second = try await pool.acquire(page: "https://app.example/b")
            #expect(second.rendererID == first.rendererID)
            #expect(second.pid == first.pid)
            #expect(second.uses == 2)
            #expect(await second.renderer.openedPages() == ["https://app.example/b"])
            #expect((second.renderer as! ProcessRenderer).link.readyLines == 2)
            return first.pid
        }
        #expect(!processExists(pid))
        #expect(await pool.snapshot().live == 0)
    }

    @Test func aKilledProcessIsNeverHandedOut() async throws {
        let pool = RendererPool(
            name: "proc", profile: processProfile(minIdle: 1, maxSize: 1), logger: testLogger,
            tick: .milliseconds(20), healthCheckInterval: .seconds(60))
        try await withRunningPool(pool) {
            do {
                let settled = await eventually { await pool.snapshot().idle == 1 }
                #expect(settled)
            }
            let first = try await pool.acquire(page: nil)
            let victim = first.pid
            await pool.release(id: first.id)
            #expect(await pool.snapshot().idle == 1)
            kill(victim, SIGKILL)
            do {
                let settled = await eventually { processHasDied(victim) }
                #expect(settled)
            }
            let second = try await pool.acquire(page: nil)
            #expect(second.pid != victim)
            #expect(!processHasDied(second.pid))
            #expect(await second.renderer.isHealthy())
            do {
                let settled = await eventually { !processExists(victim) }
                #expect(settled)
            }
            await pool.release(id: second.id)
        }
    }

    @Test func gracefulShutdownLeavesNoProcessBehind() async throws {
        let pools = try RendererPools(
            profiles: ["web": processProfile(minIdle: 2, maxSize: 3)], logger: testLogger, tick: .milliseconds(20))
        let pool = try #require(pools.pool(named: "web"))
        let group = ServiceGroup(configuration: .init(services: [pools], logger: testLogger))
        var pids: [Int32] = []
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            do {
                let settled = await eventually { await pool.snapshot().idle == 2 }
                #expect(settled)
            }
            let leases = [
                try await pools.acquire(profile: "web", page: nil),
                try await pools.acquire(profile: "web", page: nil),
                try await pools.acquire(profile: "web", page: nil),
            ]
            // The first two were pre-warmed; the third is cold unless the background refill won the race for it.
            let firstTwoWarm = leases[0].warm && leases[1].warm
            #expect(firstTwoWarm)
            pids = leases.map(\.pid)
            #expect(Set(pids).count == 3)
            #expect(pids.allSatisfy(processExists))
            await pools.release(leases[0])
            // One renderer idle, two still leased when the shutdown comes.
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        for pid in pids { #expect(!processExists(pid), "renderer process \(pid) survived shutdown") }
        let snapshot = await pool.snapshot()
        #expect(snapshot.live == 0)
        #expect(snapshot.destroyed == 3)
    }

    @Test func aProcessThatExitsBeforeReadyFailsCreation() async throws {
        let profile = processProfile(minIdle: 0, maxSize: 1, command: ["/bin/sh", "-c", "exit 3"])
        let pool = RendererPool(name: "proc", profile: profile, logger: testLogger)
        try await withRunningPool(pool) {
            await #expect(throws: PoolError.self) { try await pool.acquire(page: nil) }
        }
        let snapshot = await pool.snapshot()
        #expect(snapshot.createFailures == 3)
        #expect(snapshot.live == 0)
    }

    @Test func aProcessThatNeverGetsReadyTimesOutAndIsKilled() async throws {
        let profile = processProfile(minIdle: 0, maxSize: 1, command: ["/bin/sh", rendererScript, "31.77"]) {
            $0.readyTimeoutMs = 200
        }
        let pool = RendererPool(name: "proc", profile: profile, logger: testLogger)
        try await withRunningPool(pool) {
            do throws(PoolError) {
                _ = try await pool.acquire(page: nil)
                Issue.record("acquire should fail")
            } catch {
                #expect(error.code == .createFailed)
                #expect(error.message.contains("not ready within"))
            }
            #expect(await pool.snapshot().live == 0)
            // The script's own child (`sleep 31.77`) went down with its process group.
            do {
                let settled = await eventually { processIDs(withArgument: "31.77").isEmpty }
                #expect(settled)
            }
        }
    }

    @Test func aMissingExecutableFailsCreation() async throws {
        let profile = processProfile(minIdle: 0, maxSize: 1, command: ["/nonexistent/renderer"])
        let pool = RendererPool(name: "proc", profile: profile, logger: testLogger)
        try await withRunningPool(pool) {
            await #expect(throws: PoolError.self) { try await pool.acquire(page: nil) }
        }
        #expect(await pool.snapshot().createFailures == 3)
    }

    @Test func aProcessIsWarmOnceItsReadyPortOpens() async throws {
        let port = freeLoopbackPort()
        let server = """
            import socket, time
            time.sleep(0.2)
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", \(port)))
            s.listen()
            time.sleep(60)
            """
        let profile = processProfile(minIdle: 0, maxSize: 1, command: ["/usr/bin/python3", "-c", server]) {
            $0.readyPort = port
        }
        #expect(profile.effectiveReadyLine == nil)
        #expect(!(await portAccepts(port, within: 0.05)))
        let pool = RendererPool(name: "proc", profile: profile, logger: testLogger)
        let pid = try await withRunningPool(pool) {
            let lease = try await pool.acquire(page: nil)
            #expect(await portAccepts(port, within: 2))
            return lease.pid
        }
        #expect(!processExists(pid))
    }
}

/// A port nothing listens on right now (bound to port 0, then closed).
func freeLoopbackPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether 127.0.0.1:`port` accepts a connection within `seconds`.
func portAccepts(_ port: Int, within seconds: Double) async -> Bool {
    var probe = PortProbe(port: port)
    let deadline = ContinuousClock.now.advanced(by: .milliseconds(seconds * 1000))
    while ContinuousClock.now < deadline {
        if probe.check() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return false
}

/// Live (non-zombie) processes whose command line has `argument` as one of its arguments.
func processIDs(withArgument argument: String) -> [Int32] {
    guard let dir = opendir("/proc") else { return [] }
    defer { closedir(dir) }
    var found: [Int32] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard let pid = Int32(name), !processHasDied(pid) else { continue }
        let fd = open("/proc/\(pid)/cmdline", O_RDONLY)
        guard fd >= 0 else { continue }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &buffer, buffer.count)
        close(fd)
        guard count > 0 else { continue }
        let arguments = buffer[0..<count].split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        if arguments.contains(argument) { found.append(pid) }
    }
    return found
}
