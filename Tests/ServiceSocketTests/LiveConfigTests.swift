import ConfigUpdater
import Foundation
import HTTPTypes
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// `serve` following a config URL: a real local HTTP server (python3's http.server over a directory the
/// test rewrites) stands in for the config server.
@Suite(.serialized) struct LiveConfigTests {
    final class ConfigServer: Sendable {
        let directory: URL
        let port: Int
        let process: TestProcess

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-config-server-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            port = try freeLocalPort()
            process = TestProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", directory.path, "\(port)"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
        }

        var url: String { "http://127.0.0.1:\(port)/prefetch.json" }

        /// Replaces the served config (atomically: a reader never sees half a file).
        func serve(_ config: some ConfigDocument) throws {
            let text = config.documentText
            let temporary = directory.appendingPathComponent(".next")
            try Data(text.utf8).write(to: temporary)
            _ = rename(temporary.path, directory.appendingPathComponent("prefetch.json").path)
        }

        func start() async throws {
            try launch(process)
            let up = await eventually(within: 10) { (try? await oneRequest(port: self.port, .get, "/prefetch.json")) != nil }
            if !up { throw CommandTestError(message: "the config server did not start") }
        }

        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            try? FileManager.default.removeItem(at: directory)
        }
    }

    static func config(version: String, api: String) -> TestConfig {
        TestConfig(version: version, [TestPage("https://m.example.test/live", [TestInterface(name: "feed", api: api)])])
    }

    func planVersion(_ server: CommandTests.Server) async throws -> String? {
        let plan = try await server.admin(.get, "/v1/plan?url=\(q("https://m.example.test/live"))")
        return plan.json["version"] as? String
    }

    @Test func aChangedConfigIsFollowedAndABrokenPushChangesNothingButTheError() async throws {
        let configServer = try ConfigServer()
        defer { configServer.stop() }
        try configServer.serve(Self.config(version: "1", api: "https://api.example.test/v1/feed"))
        try await configServer.start()
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-state-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }
        let server = try await CommandTests.Server.start(
            configPath: configServer.url,
            arguments: ["--config-interval", "1", "--config-fatigue", "1", "--state-dir", state.path])
        defer { server.child.signal(SIGKILL) }

        let loaded = await eventually(within: 10) { (try? await planVersion(server)) == "1" }
        #expect(loaded, "\(server.child.stderr)")
        // A config over plain http:// could be changed on the path: the operator is told at start.
        #expect(server.child.stderr.contains("config source is plain http://"), "\(server.child.stderr)")

        try configServer.serve(Self.config(version: "2", api: "https://api.example.test/v2/feed"))
        let followed = await eventually(within: 10) { (try? await planVersion(server)) == "2" }
        #expect(followed)
        let plan = try await server.admin(.get, "/v1/plan?url=\(q("https://m.example.test/live"))")
        #expect(plan.text.contains("https://api.example.test/v2/feed"))

        // Raw text: a broken push, which the loader must refuse ("nope" is no page URL).
        try configServer.serve(#"{"code": 200, "data": {"name": "broken", "version": "3", "config": [{"url": "nope"}]}}"#)
        let reported = await eventually(within: 10) {
            let status = try? await server.admin(.get, "/v1/config").decoded(ConfigStatus.self)
            return status?.lastError?.contains("data.config[0].url") == true
        }
        #expect(reported)
        #expect(try await planVersion(server) == "2", "a broken push is never applied")
        let status = try await server.admin(.get, "/v1/config").decoded(ConfigStatus.self)
        #expect(status.version == "2")
        #expect(status.source == configServer.url)
        #expect(status.consecutiveAbnormal >= 1)

        let refresh = try await server.admin(.post, "/v1/config/refresh", body: #"{"trigger": "page_open"}"#)
        #expect(refresh.status == 200)
        #expect(["abnormal", "throttled"].contains(try refresh.decoded(ConfigRoutes.RefreshAnswer.self).outcome), "\(refresh.text)")
        let badTrigger = try await server.admin(.post, "/v1/config/refresh", body: #"{"trigger": "whenever"}"#)
        #expect(badTrigger.status == 400)

        // The last good copy lets a restart without the config server serve version 2.
        server.child.signal(SIGTERM)
        #expect(await server.child.exitStatus(within: 15) == 0)
        configServer.stop()
        let restarted = try await CommandTests.Server.start(configPath: configServer.url, arguments: ["--state-dir", state.path])
        defer { restarted.child.signal(SIGKILL) }
        let fromLastGood = await eventually(within: 10) { (try? await planVersion(restarted)) == "2" }
        #expect(fromLastGood, "\(restarted.child.stderr)")
        let ready = try await restarted.admin(.get, "/v1/config")
        #expect(try ready.decoded(ConfigStatus.self).active == .lastGood)
    }

    @Test func withNoSourceAndNoLastGoodCopyTheServiceStartsNotReady() async throws {
        let closed = try freeLocalPort()
        let server = try await CommandTests.Server.start(configPath: "http://127.0.0.1:\(closed)/prefetch.json")
        defer { server.child.signal(SIGKILL) }
        let notReady = await eventually(within: 15) {
            let ready = try? await oneRequest(port: server.port, .get, "/readyz")
            return ready?.status == 503 && (try? ready?.decoded(ReadinessAnswer.self))?.code == .noConfig
        }
        #expect(notReady)
        let trigger = try await oneRequest(port: server.port, .post, "/v1/prefetch", body: #"{"url": "https://m.example.test/live"}"#)
        #expect(trigger.status == 503)
        #expect(trigger.errorCode == "not-ready")
        let health = try await oneRequest(port: server.port, .get, "/healthz")
        #expect(health.status == 200)
    }
}

extension LiveConfigTests {
    // Raw text: files that are no config at all (empty, cut off mid-document, binary).
    @Test(arguments: ["", "{\"code\": 200, \"data\": {\"na", "\u{01}\u{02}\u{FF}binary"])
    func aConfigFileReplacedByGarbageKeepsTheRunningConfig(garbage: String) async throws {
        let file = try TempConfig(Self.config(version: "1", api: "https://api.example.test/v1/feed"))
        defer { file.remove() }
        let server = try await CommandTests.Server.start(configPath: file.path, untilReady: true)
        defer { server.child.signal(SIGKILL) }
        #expect(try await planVersion(server) == "1")

        try Data(garbage.utf8).write(to: URL(fileURLWithPath: file.path))
        let refresh = try await server.admin(.post, "/v1/config/refresh", body: #"{"trigger": "foreground"}"#)
        #expect(try refresh.decoded(ConfigRoutes.RefreshAnswer.self).outcome == "abnormal", "\(refresh.text)")
        #expect(try await planVersion(server) == "1", "the running config keeps serving")
        let status = try await server.admin(.get, "/v1/config")
        #expect(try status.decoded(ConfigStatus.self).lastError?.contains(file.path) == true, "\(status.text)")
        let trigger = try await oneRequest(port: server.port, .post, "/v1/prefetch", body: #"{"url": "https://m.example.test/live"}"#)
        #expect(trigger.status == 202)
    }
}
