import Foundation
import ShellTestSupport
import Testing

/// Headless Chromium as a web shell with an offline package: `scripts/offline-browser.py render` serves a small site
/// from a static origin on 127.0.0.1, publishes its map with `prefetch serve --resources` (PREFETCH_BIN), syncs the
/// shell emulator (this package's `prefetch-shell-offline`, the SDK's offline cache as a command), then STOPS the
/// origin and the provider and loads the page, DevTools `Fetch` handing every request to the emulator. The page must
/// render from the offline cache alone: the text its scripts set, its stylesheet's effect, its image.
@Suite(.serialized) struct OfflineBrowserTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The shell emulator: PREFETCH_SHELL_OFFLINE_BIN, else the one built next to this test binary
    /// (`swift build --build-tests` builds the package's executables too).
    static func emulator() throws -> String {
        if let path = ProcessInfo.processInfo.environment["PREFETCH_SHELL_OFFLINE_BIN"], !path.isEmpty { return path }
        let binary = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
        var directory = binary.deletingLastPathComponent()
        // On Darwin the tests run inside a bundle (<bin>/PrefetchShellPackageTests.xctest/Contents/MacOS/...).
        while directory.pathComponents.contains(where: { $0.hasSuffix(".xctest") }) { directory.deleteLastPathComponent() }
        let path = directory.appendingPathComponent("prefetch-shell-offline").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ServerError(
                description:
                    "prefetch-shell-offline is not at \(path): build it (swift build --build-tests --package-path Clients/PrefetchShell) "
                    + "or set PREFETCH_SHELL_OFFLINE_BIN")
        }
        return path
    }

    @Test func aPageRendersFromTheOfflinePackageWithItsOriginStopped() async throws {
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let script = Self.repository.appendingPathComponent("scripts/offline-browser.py").path
        let harness = try ChildProcess(
            "/usr/bin/env",
            ["python3", script, "render", "--prefetch", try requiredBinary("PREFETCH_BIN"), "--shell-offline", try Self.emulator()],
            in: work)
        let status = try await harness.exitStatus(within: 300)
        let output = harness.text
        try #require(status == 0, "the harness failed: \(output)")
        let last = try #require(output.split(separator: "\n").last, "no output")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any], "not JSON: \(last)")

        // Nothing answers on the network: the origin and the provider were stopped before the page was opened.
        #expect(result["originRefused"] as? Bool == true)
        #expect(result["providerRefused"] as? Bool == true)
        // The page rendered: its scripts ran (app.js used lib.js), its stylesheet applied, its image decoded.
        #expect(result["text"] as? String == "rendered for the offline package")
        #expect(result["color"] as? String == "rgb(0, 128, 0)")
        #expect(result["background"] as? String == "rgb(1, 2, 3)")
        #expect(result["imageWidth"] as? Int == 40)
        // Every resource of the page came from the offline cache; nothing else was asked but the browser's favicon.
        let page = try #require(result["page"] as? String)
        let site = page.replacingOccurrences(of: "index.html", with: "")
        let served = Set(result["served"] as? [String] ?? [])
        #expect(served == Set(["index.html", "app.css", "lib.js", "app.js", "logo.svg"].map { site + $0 }))
        let missed = result["missed"] as? [String] ?? []
        #expect(missed.allSatisfy { $0.hasSuffix("/favicon.ico") }, "requests the offline package did not answer: \(missed)")
    }
}
