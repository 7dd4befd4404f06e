import ConfigUpdater
import Foundation
import Logging
import MetricsTestKit
import PrefetchCore
import PrefetchFetcher
import PrefetchTestSupport
import Synchronization
import Testing

@Suite("ConfigUpdater with a URL source")
struct URLSourceTests {
    @Test("the initial load applies the served config, reports primary and keeps a last-good copy")
    func initialLoad() async throws {
        try await withTemporaryDirectory { directory in
            try await withConfigServer { server in
                try await withFetcher { fetcher in
                    server.serve("/cfg", configBody(version: 1))
                    let log = AppliedLog()
                    let updater = try ConfigUpdater(
                        settings: testSettings(source: server.url("/cfg"), stateDirectory: directory),
                        fetcher: fetcher, logger: testLogger, onApply: log.onApply)
                    #expect(updater.current == nil)
                    #expect(updater.status().ready == false)
                    #expect(updater.status().notReadyReason != nil)

                    let status = await updater.loadInitial()
                    #expect(status.ready)
                    #expect(status.version == "1")
                    #expect(status.name == "cfg-v1")
                    #expect(status.active == .primary)
                    #expect(status.lastCheckOutcome == .applied)
                    #expect(status.lastCheckTrigger == .start)
                    #expect(status.loadedAt != nil)
                    #expect(updater.current?.version == "1")
                    #expect(log.all == [AppliedLog.Entry(version: "1", previous: nil, origin: .primary)])

                    let copy = try Data(contentsOf: URL(fileURLWithPath: directory + "/last-good-config.json"))
                    #expect(Array(copy) == configBody(version: 1))
                    // Nothing but the copy is left in the state directory (no temporary files).
                    #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["last-good-config.json"])

                    // A second initial load does not ask again.
                    _ = await updater.loadInitial()
                    #expect(server.hits("/cfg") == 1)
                }
            }
        }
    }

    @Test("two refreshes inside the fatigue window make one remote check; the second answers throttled")
    func fatigueWindow() async throws {
        try await withConfigServer { server in
            try await withFetcher { fetcher in
                server.serve("/cfg", configBody(version: 1))
                let metrics = TestMetrics()
                // The window is measured on a clock moved by hand: however slow the machine, the second refresh is
                // inside it and the third outside.
                let clock = ManualClock()
                let updater = try ConfigUpdater(
                    settings: testSettings(source: server.url("/cfg"), fatigueWindow: .seconds(60)),
                    fetcher: fetcher, logger: testLogger, metricsFactory: metrics, clock: clock)
                let first = await updater.refresh(trigger: .appStart)
                #expect(first.outcome == .applied)
                server.serve("/cfg", configBody(version: 2))

                let second = await updater.refresh(trigger: .pageOpen)
                #expect(second.outcome == .throttled)
                #expect(server.hits("/cfg") == 1)
                #expect(second.status.version == "1")
                let next = try #require(second.status.nextAllowedCheckAt)
                let checkedAt = try #require(second.status.lastCheckAt)
                #expect(next > checkedAt)
                #expect(updater.current?.version == "1")
                #expect(try metrics.expectCounter("prefetch_config_checks_total", [("outcome", "throttled")]).totalValue == 1)

                // Once the window has passed, the next refresh checks again.
                clock.advance(by: .seconds(59))
                #expect(await updater.refresh(trigger: .pageOpen).outcome == .throttled, "a check before the window was up")
                #expect(server.hits("/cfg") == 1)
                clock.advance(by: .seconds(1))
                let third = await updater.refresh(trigger: .foreground)
                #expect(third.outcome == .applied)
                #expect(server.hits("/cfg") == 2)
                #expect(updater.current?.version == "2")
            }
        }
    }

    @Test("concurrent refreshes coalesce into one check")
    func coalescing() async throws {
        try await withConfigServer { server in
            try await withFetcher { fetcher in
                server.serve("/cfg", configBody(version: 3), delay: .milliseconds(200))
                // The fatigue window is on a clock that never moves, so a refresh that a slow machine starts after
                // the check finished is throttled, never a second check: the outcome does not depend on timing.
                let updater = try ConfigUpdater(
                    settings: testSettings(source: server.url("/cfg"), fatigueWindow: .seconds(60)),
                    fetcher: fetcher, logger: testLogger, clock: ManualClock())
                let results = await withTaskGroup(of: ConfigRefreshResult.self) { group in
                    for _ in 0..<8 {
                        group.addTask { await updater.refresh(trigger: .pageOpen) }
                    }
                    return await group.reduce(into: []) { $0.append($1) }
                }
                #expect(server.hits("/cfg") == 1, "eight concurrent refreshes made one check")
                #expect(results.filter { $0.outcome == .applied && !$0.coalesced }.count == 1, "\(results)")
                #expect(results.allSatisfy { ($0.outcome == .applied || $0.outcome == .throttled) && $0.status.version == "3" })
            }
        }
    }

    @Test("the fallback is asked after exactly 5 abnormal answers, and left when the primary recovers")
    func fallbackAfterFiveAbnormal() async throws {
        try await withConfigServer { server in
            try await withFetcher { fetcher in
                server.serve("/cfg", configBody(version: 1))
                server.serve("/cdn", configBody(version: 1))
                let metrics = TestMetrics()
                let updater = try ConfigUpdater(
                    settings: testSettings(source: server.url("/cfg"), fallbackURL: server.url("/cdn")),
                    fetcher: fetcher, logger: testLogger, metricsFactory: metrics)
                let loaded = await updater.loadInitial()
                #expect(loaded.version == "1")

                // Five different kinds of abnormal answers; the first four never reach the fallback.
                let faults: [(ConfigServer.Answer, ConfigCheckErrorCode, String)] = [
                    (.init(status: 503, body: configBody(version: 2)), .httpStatus, "HTTP status 503"),
                    (.init(body: configBody(version: 2, code: 500)), .remoteCode, "code is 500, not 200"),
                    (.init(body: notJSONBody), .invalid, "not valid JSON"),
                    (.init(body: invalidConfigBody), .invalid, "interfaces"),
                ]
                for (index, (answer, code, fragment)) in faults.enumerated() {
                    server.serve("/cfg", answer.body, status: answer.status, delay: answer.delay)
                    let result = await checkNow(updater)
                    #expect(result.outcome == .abnormal)
                    #expect(result.status.consecutiveAbnormal == index + 1)
                    #expect(result.status.fallbackEngaged == false)
                    #expect(result.status.active == .primary)
                    #expect(result.status.lastErrorCode == code)
                    let message = try #require(result.status.lastError)
                    #expect(message.hasPrefix(server.url("/cfg") + ": "))
                    #expect(message.contains(fragment))
                    #expect(server.hits("/cdn") == 0)
                    #expect(updater.current?.version == "1")
                }

                // The fifth: slower than the request timeout.
                server.serve("/cfg", configBody(version: 2), delay: .seconds(8))
                let fifth = await checkNow(updater)
                #expect(fifth.errors.first?.code == .transfer)
                #expect(fifth.status.consecutiveAbnormal == 5)
                #expect(server.hits("/cdn") == 1)
                #expect(fifth.outcome == .fallbackUnchanged)
                #expect(fifth.status.fallbackEngaged)
                #expect(fifth.status.active == .fallback)

                // While engaged, a new version on the fallback is applied (the primary is still asked first).
                server.serve("/cfg", [], status: 500)
                server.serve("/cdn", configBody(version: 2))
                let onFallback = await checkNow(updater)
                #expect(onFallback.outcome == .fallbackApplied)
                #expect(updater.current?.version == "2")
                #expect(server.hits("/cdn") == 2)

                // The primary answers normally: it is active again and the fallback is not asked.
                let primaryHits = server.hits("/cfg")
                server.serve("/cfg", configBody(version: 3))
                let back = await checkNow(updater)
                #expect(back.outcome == .applied)
                #expect(back.status.active == .primary)
                #expect(back.status.fallbackEngaged == false)
                #expect(back.status.consecutiveAbnormal == 0)
                #expect(server.hits("/cfg") == primaryHits + 1)
                #expect(server.hits("/cdn") == 2)
                #expect(updater.current?.version == "3")

                #expect(try metrics.expectCounter("prefetch_config_checks_total", [("outcome", "abnormal")]).totalValue == 4)
                #expect(
                    try metrics.expectCounter("prefetch_config_checks_total", [("outcome", "fallback-applied")]).totalValue == 1)
                #expect(
                    try metrics.expectCounter(
                        "prefetch_config_errors_total", [("source", "primary"), ("reason", "invalid")]
                    ).totalValue == 2)
                #expect(try metrics.expectGauge("prefetch_config_active_source", [("source", "primary")]).lastValue == 1)
                #expect(try metrics.expectGauge("prefetch_config_active_source", [("source", "fallback")]).lastValue == 0)
                #expect(try metrics.expectGauge("prefetch_config_consecutive_abnormal").lastValue == 0)
            }
        }
    }

    @Test("the same version is not re-applied; a different one is")
    func versionCompare() async throws {
        try await withConfigServer { server in
            try await withFetcher { fetcher in
                server.serve("/cfg", configBody(version: 5))
                let log = AppliedLog()
                let updater = try ConfigUpdater(
                    settings: testSettings(source: server.url("/cfg")), fetcher: fetcher, logger: testLogger,
                    onApply: log.onApply)
                _ = await updater.loadInitial()
                let loadedAt = updater.status().loadedAt

                let same = await checkNow(updater)
                #expect(same.outcome == .unchanged)
                #expect(updater.status().loadedAt == loadedAt)
                #expect(log.versions == ["5"])

                server.serve("/cfg", configBody(version: 6))
                let changed = await checkNow(updater)
                #expect(changed.outcome == .applied)
                #expect(updater.current?.version == "6")
                #expect(updater.current?.pages.count == pageCount(forVersion: 6))
                #expect(log.all.last == AppliedLog.Entry(version: "6", previous: "5", origin: .primary))

                // Going back to an older version is a change too: versions are compared, not ordered.
                server.serve("/cfg", configBody(version: 5))
                let recheck = await checkNow(updater)
                #expect(recheck.outcome == .applied)
                #expect(log.versions == ["5", "6", "5"])
            }
        }
    }

    @Test("an invalid push is ignored: the old config keeps serving and the error is kept")
    func invalidPushIgnored() async throws {
        try await withTemporaryDirectory { directory in
            try await withConfigServer { server in
                try await withFetcher { fetcher in
                    server.serve("/cfg", configBody(version: 1))
                    let updater = try ConfigUpdater(
                        settings: testSettings(source: server.url("/cfg"), stateDirectory: directory),
                        fetcher: fetcher, logger: testLogger)
                    _ = await updater.loadInitial()

                    server.serve("/cfg", invalidConfigBody)
                    let result = await checkNow(updater)
                    #expect(result.outcome == .abnormal)
                    #expect(updater.current?.version == "1")
                    let status = updater.status()
                    #expect(status.ready)
                    #expect(status.version == "1")
                    #expect(status.lastErrorCode == .invalid)
                    let message = try #require(status.lastError)
                    #expect(message.contains(server.url("/cfg")))
                    #expect(message.contains("data.config[0].interfaces"))
                    #expect(message.contains("FETCH"))
                    let copy = try Data(contentsOf: URL(fileURLWithPath: directory + "/last-good-config.json"))
                    #expect(Array(copy) == configBody(version: 1))
                }
            }
        }
    }

    @Test("readers always see a whole config while versions swap underneath them")
    func atomicSwapUnderReaders() async throws {
        try await withConfigServer { server in
            try await withFetcher { fetcher in
                server.serve("/cfg", configBody(version: 1))
                let updater = try ConfigUpdater(
                    settings: testSettings(source: server.url("/cfg")), fetcher: fetcher, logger: testLogger)
                _ = await updater.loadInitial()
                let lastVersion = 30
                let writerDone = Flag()

                let (reads, broken) = await withTaskGroup(of: (Int, [String]).self) { group in
                    for _ in 0..<6 {
                        group.addTask {
                            var reads = 0
                            var broken: [String] = []
                            while true {
                                guard let config = updater.current else {
                                    broken.append("current was nil after the first load")
                                    break
                                }
                                reads += 1
                                let version = Int(config.version) ?? -1
                                if config.name != "cfg-v\(version)" || config.pages.count != pageCount(forVersion: version) {
                                    broken.append("version \(config.version) came with \(config.name), \(config.pages.count) pages")
                                }
                                do {
                                    let plan = try Plan.make(page: "https://shop.example.com/p0.html?x=1", config: config)
                                    if plan.version != config.version
                                        || plan.requests.first?.url.contains("/v\(version)/") != true
                                    {
                                        broken.append("the plan of version \(config.version) has other requests")
                                    }
                                } catch {
                                    broken.append("version \(config.version) cannot plan: \(error)")
                                }
                                if version == lastVersion || writerDone.isSet || broken.count > 10 { break }
                                await Task.yield()
                            }
                            return (reads, broken)
                        }
                    }
                    group.addTask {
                        for version in 2...lastVersion {
                            server.serve("/cfg", configBody(version: version))
                            _ = await checkNow(updater)
                        }
                        writerDone.set()
                        return (0, [])
                    }
                    return await group.reduce(into: (0, [String]())) { total, part in
                        total.0 += part.0
                        total.1 += part.1
                    }
                }
                #expect(broken.isEmpty, "\(broken.prefix(3))")
                #expect(reads > 6)
                #expect(updater.current?.version == "\(lastVersion)")
            }
        }
    }

    @Test("a restart without a reachable source serves the last-good copy")
    func restartFromLastGood() async throws {
        try await withTemporaryDirectory { directory in
            let url = try await withConfigServer { server in
                try await withFetcher { fetcher in
                    server.serve("/cfg", configBody(version: 7))
                    let first = try ConfigUpdater(
                        settings: testSettings(source: server.url("/cfg"), stateDirectory: directory),
                        fetcher: fetcher, logger: testLogger)
                    let loaded = await first.loadInitial()
                    #expect(loaded.version == "7")
                    return server.url("/cfg")
                }
            }
            // The server is gone: its port refuses connections.
            try await withFetcher { fetcher in
                let log = AppliedLog()
                let metrics = TestMetrics()
                let second = try ConfigUpdater(
                    settings: testSettings(source: url, stateDirectory: directory), fetcher: fetcher,
                    logger: testLogger, metricsFactory: metrics, onApply: log.onApply)
                let status = await second.loadInitial()
                #expect(status.ready)
                #expect(status.version == "7")
                #expect(status.active == .lastGood)
                #expect(status.lastCheckOutcome == .lastGood)
                #expect(status.lastErrorCode == .transfer)
                #expect(status.lastError?.hasPrefix(url) == true)
                #expect(second.current?.version == "7")
                #expect(log.all == [AppliedLog.Entry(version: "7", previous: nil, origin: .lastGood)])
                #expect(try metrics.expectGauge("prefetch_config_active_source", [("source", "last-good")]).lastValue == 1)
                #expect(try metrics.expectGauge("prefetch_config_ready").lastValue == 1)

                // Still unreachable: the last-good config keeps serving and is not reloaded.
                let again = await checkNow(second)
                #expect(again.outcome == .abnormal)
                #expect(again.status.active == .lastGood)
                #expect(log.all.count == 1)
            }
        }
    }

    @Test("no source and no last-good copy: not ready, with a reason naming both")
    func notReady() async throws {
        try await withTemporaryDirectory { directory in
            try await withConfigServer { server in
                try await withFetcher { fetcher in
                    server.serve("/cfg", configBody(version: 1, code: 500))
                    let metrics = TestMetrics()
                    let updater = try ConfigUpdater(
                        settings: testSettings(source: server.url("/cfg"), stateDirectory: directory),
                        fetcher: fetcher, logger: testLogger, metricsFactory: metrics)
                    let status = await updater.loadInitial()
                    #expect(status.ready == false)
                    #expect(status.active == .none)
                    #expect(updater.current == nil)
                    let reason = try #require(status.notReadyReason)
                    #expect(reason.contains(server.url("/cfg") + ": code is 500, not 200"))
                    #expect(reason.contains("no last-good copy at \(directory)/last-good-config.json"))
                    #expect(try metrics.expectGauge("prefetch_config_ready").lastValue == 0)

                    // The first good answer makes it ready.
                    server.serve("/cfg", configBody(version: 2))
                    let recheck = await checkNow(updater)
                    #expect(recheck.outcome == .applied)
                    #expect(updater.status().ready)
                    #expect(updater.status().notReadyReason == nil)
                }
            }
        }
    }
}

@Suite("ConfigUpdater settings and status")
struct SettingsAndStatusTests {
    @Test("settings that cannot work are refused with a stable code")
    func invalidSettings() {
        func code(_ settings: ConfigSourceSettings, fetcher: Bool = false) -> ConfigSettingsError.Code? {
            do {
                _ = try ConfigUpdater(
                    settings: settings, fetcher: fetcher ? Fetcher(logger: testLogger) : nil, logger: testLogger)
                return nil
            } catch {
                return error.code
            }
        }
        #expect(code(ConfigSourceSettings(source: "")) == .emptySource)
        #expect(code(ConfigSourceSettings(source: "/etc/p.json", fallbackURL: "/tmp/x.json"), fetcher: true) == .fallbackNotURL)
        #expect(code(ConfigSourceSettings(source: "/etc/p.json", fatigueWindow: .zero)) == .outOfRange)
        #expect(code(ConfigSourceSettings(source: "/etc/p.json", abnormalThreshold: 0)) == .outOfRange)
        #expect(code(ConfigSourceSettings(source: "https://cfg.example/p.json")) == .missingFetcher)
        #expect(code(ConfigSourceSettings(source: "/etc/p.json")) == nil)
    }

    @Test("sources are classified by scheme")
    func sourceKinds() {
        #expect(ConfigSource("https://cfg.example/p.json") == .url("https://cfg.example/p.json"))
        #expect(ConfigSource("HTTP://cfg.example/p.json").isRemote)
        #expect(ConfigSource("file:///etc/p.json") == .file(path: "/etc/p.json"))
        #expect(ConfigSource("conf/p.json") == .file(path: "conf/p.json"))
    }

    @Test("the status encodes to JSON with ISO 8601 dates and decodes back")
    func statusJSON() throws {
        let status = ConfigStatus(
            name: "cfg", version: "4", pageCount: 2, source: "https://cfg.example/p.json", active: .lastGood,
            loadedAt: Date(timeIntervalSince1970: 1_700_000_000.25), lastCheckOutcome: .lastGood,
            lastCheckTrigger: .start, consecutiveAbnormal: 1, lastError: "https://cfg.example/p.json: HTTP status 503, not 2xx",
            lastErrorCode: .httpStatus, ready: true)
        let data = try JSONEncoder().encode(status)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["loadedAt"] as? String == "2023-11-14T22:13:20.250Z")
        #expect(object["active"] as? String == "last-good")
        #expect(object["lastCheckOutcome"] as? String == "last-good")
        #expect(object["lastErrorCode"] as? String == "http-status")
        #expect(object["notReadyReason"] == nil)
        #expect(try JSONDecoder().decode(ConfigStatus.self, from: data) == status)
    }
}

/// A one-way flag shared between tasks.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)

    var isSet: Bool { value.load(ordering: .acquiring) }

    func set() { value.store(true, ordering: .releasing) }
}
