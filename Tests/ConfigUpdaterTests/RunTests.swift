import ConfigUpdater
import Foundation
import PrefetchCore
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing
import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs `updater.run()` while `body` runs, then cancels it. Fails if `run()` throws.
func whileRunning<T: Sendable>(_ updater: ConfigUpdater, _ body: @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await updater.run() }
        defer { group.cancelAll() }
        return try await body()
    }
}

@Suite("ConfigUpdater.run()")
struct RunTests {
    @Test("a file source is re-read when the file changes; a broken write is ignored")
    func fileChangePickedUp() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/prefetch.json"
            try writeFile(configBody(version: 1), to: path)
            let updater = try ConfigUpdater(
                settings: testSettings(source: path, fileWatchInterval: .milliseconds(100)), logger: testLogger)
            try await whileRunning(updater) {
                await expectEventually { updater.current?.version == "1" }
                try writeFile(configBody(version: 2), to: path)
                // `current` changes before the check that changed it is recorded as finished.
                await expectEventually { updater.status().lastCheckTrigger == .fileChanged }
                #expect(updater.current?.version == "2")
                #expect(updater.status().active == .primary)

                try writeFile(invalidConfigBody, to: path)
                await expectEventually { updater.status().lastErrorCode == .invalid }
                #expect(updater.current?.version == "2")
                #expect(updater.status().lastError?.hasPrefix(path + ": ") == true)

                try writeFile(configBody(version: 3), to: path)
                await expectEventually { updater.current?.version == "3" }
            }
        }
    }

    @Test("a file source is not throttled by the fatigue window")
    func fileSourceNotThrottled() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/prefetch.json"
            try writeFile(configBody(version: 1), to: path)
            let updater = try ConfigUpdater(
                settings: testSettings(source: path, fatigueWindow: .seconds(60)), logger: testLogger)
            let loaded = await updater.loadInitial()
            #expect(loaded.version == "1")
            try writeFile(configBody(version: 2), to: path)
            let result = await updater.refresh(trigger: .pageOpen)
            #expect(result.outcome == .applied)
            #expect(result.status.nextAllowedCheckAt == nil)
            #expect(updater.current?.version == "2")
        }
    }

    @Test("with a file primary, the fallback URL is still asked at most once per fatigue window")
    func filePrimaryFallbackWindow() async throws {
        try await withTemporaryDirectory { directory in
            try await withConfigServer { server in
                try await withFetcher { fetcher in
                    let path = directory + "/prefetch.json"
                    try writeFile(configBody(version: 1), to: path)
                    server.serve("/cdn", configBody(version: 2))
                    let updater = try ConfigUpdater(
                        settings: testSettings(source: path, fallbackURL: server.url("/cdn"), fatigueWindow: .seconds(60)),
                        fetcher: fetcher, logger: testLogger)
                    _ = await updater.loadInitial()
                    try writeFile(notJSONBody, to: path)
                    for _ in 1...4 {
                        let outcome = await updater.refresh(trigger: .fileChanged).outcome
                        #expect(outcome == .abnormal)
                    }
                    let fifth = await updater.refresh(trigger: .fileChanged).outcome
                    #expect(fifth == .fallbackApplied)
                    #expect(server.hits("/cdn") == 1)
                    let sixth = await updater.refresh(trigger: .fileChanged).outcome
                    #expect(sixth == .abnormal)
                    #expect(server.hits("/cdn") == 1)
                    #expect(updater.current?.version == "2")
                }
            }
        }
    }

    /// Time moves by hand: the interval loop is asleep on the test's clock (counted by `sleepers`) before each step.
    @Test("run() checks every interval")
    func intervalChecks() async throws {
        try await withConfigServer { server in
            try await withFetcher { fetcher in
                server.serve("/cfg", configBody(version: 1))
                let clock = ManualClock()
                let updater = try ConfigUpdater(
                    settings: testSettings(source: server.url("/cfg"), interval: .seconds(60)),
                    fetcher: fetcher, logger: testLogger, clock: clock)
                try await whileRunning(updater) {
                    await expectEventually { updater.current?.version == "1" && clock.sleepers == 1 }
                    let loaded = server.hits("/cfg")
                    clock.advance(by: .seconds(59))
                    #expect(clock.sleepers == 1 && server.hits("/cfg") == loaded, "a check before the interval was up")
                    clock.advance(by: .seconds(1))
                    await expectEventually { server.hits("/cfg") == loaded + 1 && clock.sleepers == 1 }
                    #expect(updater.status().lastCheckOutcome == .unchanged)
                    server.serve("/cfg", configBody(version: 2))
                    clock.advance(by: .seconds(60))
                    await expectEventually { updater.current?.version == "2" && clock.sleepers == 1 }
                    #expect(server.hits("/cfg") == loaded + 2)
                    clock.advance(by: .seconds(60))
                    await expectEventually { server.hits("/cfg") == loaded + 3 && updater.status().lastCheckOutcome == .unchanged }
                    #expect(updater.status().lastCheckTrigger == .interval)
                }
            }
        }
    }

    @Test("run() starts not ready without any config and keeps checking until a source answers")
    func startsNotReady() async throws {
        try await withConfigServer { server in
            try await withFetcher { fetcher in
                server.serve("/cfg", Array("oops".utf8), status: 503)
                let clock = ManualClock()
                let updater = try ConfigUpdater(
                    settings: testSettings(source: server.url("/cfg"), interval: .seconds(60)),
                    fetcher: fetcher, logger: testLogger, clock: clock)
                try await whileRunning(updater) {
                    await expectEventually { server.hits("/cfg") >= 1 && updater.status().lastCheckAt != nil && clock.sleepers >= 1 }
                    #expect(updater.status().ready == false)
                    #expect(updater.status().notReadyReason?.contains("HTTP status 503") == true)
                    server.serve("/cfg", configBody(version: 1))
                    #expect(updater.status().ready == false, "ready before a check asked again")
                    clock.advance(by: .seconds(60))
                    await expectEventually { updater.status().ready }
                }
            }
        }
    }

    @Test("SIGHUP makes run() check")
    func hangupTriggersCheck() async throws {
        // Keep a SIGHUP handler installed for the whole test, so no signal can take the default action (exit),
        // whether or not the updater's own handler is installed yet.
        let guardHandler = await UnixSignalsSequence(trapping: .sighup)
        try await withConfigServer { server in
            try await withFetcher { fetcher in
                server.serve("/cfg", configBody(version: 1))
                let updater = try ConfigUpdater(
                    settings: testSettings(source: server.url("/cfg"), checksOnHangup: true),
                    fetcher: fetcher, logger: testLogger)
                try await whileRunning(updater) {
                    await expectEventually { updater.current?.version == "1" }
                    server.serve("/cfg", configBody(version: 2))
                    // run() traps SIGHUP before its initial load; repeating only guards against a lost signal.
                    var heard = false
                    var attempts = 0
                    while !heard && attempts < 20 {
                        attempts += 1
                        kill(getpid(), SIGHUP)
                        heard = await eventually(within: 1) { updater.status().lastCheckTrigger == .signal }
                    }
                    #expect(heard)
                    #expect(updater.current?.version == "2")
                    #expect(server.hits("/cfg") >= 2)
                }
            }
        }
        // The guard goes only once no SIGHUP the test sent is still waiting to be taken (a signal sent by the last
        // round may still be pending when the updater has heard an earlier one); it used to wait 100 ms instead.
        #expect(await eventually(within: 10) { !Self.hangupPending() }, "a SIGHUP the test sent was never taken")
        withExtendedLifetime(guardHandler) {}
    }

    /// Whether a SIGHUP is pending for this process (or the calling thread).
    static func hangupPending() -> Bool {
        var pending = sigset_t()
        sigemptyset(&pending)
        sigpending(&pending)
        return sigismember(&pending, SIGHUP) == 1
    }

    @Test("run() returns on graceful shutdown")
    func gracefulShutdown() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/prefetch.json"
            try writeFile(configBody(version: 1), to: path)
            let updater = try ConfigUpdater(settings: testSettings(source: path), logger: testLogger)
            try await testGracefulShutdown { trigger in
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        try await updater.run()
                        return true
                    }
                    group.addTask {
                        try await Task.sleep(for: .seconds(10))
                        return false
                    }
                    await expectEventually { updater.current?.version == "1" }
                    trigger.triggerGracefulShutdown()
                    let returnedFirst = try await group.next()
                    group.cancelAll()
                    #expect(returnedFirst == true)
                }
            }
        }
    }
}
