import Foundation
import HTTPTypes
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// Process renderers under a real `prefetch serve`: warm on start, leased through the API, and none left
/// behind once the service has shut down.
@Suite struct RendererProcessTests {
    /// PIDs of live renderer scripts whose command line contains `marker` (not `serve`, whose arguments name the
    /// same directory).
    static func processes(marked marker: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry), let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
            let commandLine = String(decoding: data.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
            guard commandLine.contains(marker), commandLine.contains("renderer.sh") else { return nil }
            // A zombie already exited; it only waits to be reaped.
            let status = (try? String(contentsOfFile: "/proc/\(entry)/status", encoding: .utf8)) ?? ""
            return status.contains("State:\tZ") ? nil : pid
        }
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func noRendererProcessOutlivesServe(signal: Int32) async throws {
        let marker = "prefetch-renderer-\(UUID().uuidString)"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(marker)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let script = directory.appendingPathComponent("renderer.sh").path
        // A stand-in renderer: warm once it prints "ready", "ready" again after each "reset", alive until stdin closes.
        try "#!/bin/sh\necho ready\nwhile read -r line; do [ \"$line\" = reset ] && echo ready; done\n".write(
            toFile: script, atomically: true, encoding: .utf8)
        let renderers = directory.appendingPathComponent("renderers.json").path
        try
            #"{"renderers": {"main": {"kind": "process", "command": ["/bin/sh", "\#(script)", "\#(marker)"], "resetLine": "reset", "minIdle": 2, "maxSize": 3, "maxLeasesPerCaller": 3, "readyTimeoutMs": 10000}}}"#
            .write(toFile: renderers, atomically: true, encoding: .utf8)
        let config = try TempConfig(TestConfig([TestPage("https://m.example.test/r", [TestInterface(api: "https://api.example.test/r")])]))
        defer { config.remove() }

        let server = try await CommandTests.Server.start(configPath: config.path, arguments: ["--renderers", renderers], untilReady: true)
        do {
            let warm = await eventually(within: 20) { Self.processes(marked: marker).count == 2 }
            #expect(warm, "minIdle process renderers did not start: \(server.child.stderr)")
            let lease = try await oneRequest(port: server.port, .post, "/v1/renderers/acquire", body: #"{"profile": "main"}"#)
            #expect(lease.status == 200, "\(lease.text)")
            #expect(try lease.decoded(LeaseAnswer.self).warm)
            let cold = try await oneRequest(port: server.port, .post, "/v1/renderers/acquire", body: #"{"profile": "main"}"#)
            #expect(cold.status == 200, "\(cold.text)")
            #expect(Self.processes(marked: marker).count >= 2)

            server.child.signal(signal)
            #expect(await server.child.exitStatus(within: 20) == 0, "\(server.child.stderr)")
            let gone = await eventually(within: 10) { Self.processes(marked: marker).isEmpty }
            #expect(gone, "renderer processes left behind: \(Self.processes(marked: marker))")
        } catch {
            await server.child.stop()
            throw error
        }
        await server.child.stop()
        for pid in Self.processes(marked: marker) { kill(pid, SIGKILL) }
    }
}
