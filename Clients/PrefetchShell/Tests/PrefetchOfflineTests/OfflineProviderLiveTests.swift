import Foundation
import ShellTestSupport
import Testing

@testable import PrefetchOffline

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The package against the real provider: `prefetch serve --resources` (PREFETCH_BIN) fetching its resources from an
// origin on 127.0.0.1 whose files the test changes, the CDN mirror written by `prefetch resources export` and served
// by a second process (`python3 -m http.server`), every process on a free port and always stopped. The package's
// clock is the test's; the provider's refreshes are real (`--resources-refresh 1`), and the test waits for the map
// it expects (polled, with a generous deadline), never for a time.

/// A `prefetch serve` with a resource manifest, refreshed every second.
final class LiveProvider {
    let child: ChildProcess
    let port: Int

    /// Starts the service on `port` (0: any free port) with `manifest`, its state under `state`.
    init(manifest: URL, state: URL, port: Int = 0, downloadBase: String? = nil) async throws {
        let binary = try requiredBinary("PREFETCH_BIN")
        let config = state.appendingPathComponent("prefetch.json")
        if !FileManager.default.fileExists(atPath: config.path) {
            try Self.config.write(to: config, atomically: true, encoding: .utf8)
        }
        var arguments = [
            "serve", "--config", config.path, "--port", String(port), "--admin-port", "0", "--log-level", "warning",
            "--state-dir", state.path, "--resources", manifest.path, "--resources-refresh", "1",
        ]
        if let downloadBase { arguments += ["--resource-download-base", downloadBase] }
        child = try ChildProcess(binary, arguments, in: state)
        do {
            self.port = try await child.port(after: "prefetch listening on http://127.0.0.1:")
        } catch {
            await child.stop()
            throw error
        }
    }

    /// A prefetch config with one page (the provider's tests need none; `serve` needs a config).
    static let config = #"""
        {"code":200,"data":{"name":"offline","version":"1","config":[{"url":"http://127.0.0.1/offline","interfaces":[{"name":"none","api":"http://127.0.0.1:9/none","method":"GET","credentials":"omit"}]}]}}
        """#

    var base: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// The map the provider publishes now: its version and its entries' SHA-256 by resource URL.
    func currentMap() async throws -> (version: String, sha256: [String: String]) {
        let (data, _) = try await URLSession.shared.data(from: base.appendingPathComponent("v1/resources"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let payload = try #require(object["data"] as? [String: Any])
        let version = "\(payload["version"] ?? "")"
        let map = payload["resourcemap"] as? [String: [String: Any]] ?? [:]
        return (version, map.mapValues { "\($0["sha256"] ?? "")" })
    }

    /// Waits (at most `seconds`) until the published map names exactly `expected` (resource URL to body); its version.
    @discardableResult
    func waitForMap(_ expected: [String: Data], within seconds: Int = 60) async throws -> String {
        let wanted = expected.mapValues { Digests.sha256($0) }
        let deadline = ContinuousClock.now.advanced(by: .seconds(seconds))
        var last: (version: String, sha256: [String: String])?
        while ContinuousClock.now < deadline {
            if let map = try? await currentMap() {
                if map.sha256 == wanted { return map.version }
                last = map
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ServerError(
            description:
                "the provider did not publish the expected map within \(seconds) s; last: \(String(describing: last)); output: \(child.text)"
        )
    }

    func stop() async { await child.stop() }
}

/// A static origin on 127.0.0.1: the test's resources at their paths, with their types.
struct Origin {
    let server: LocalServer

    init() throws { server = try LocalServer() }

    func url(_ path: String) -> String { "http://127.0.0.1:\(server.port)\(path)" }

    /// Serves `body` at `path` as `ctype` from now on.
    func put(_ path: String, _ body: String, ctype: String) {
        server.set(path, .init(body: Data(body.utf8), contentType: ctype))
    }

    /// Writes the provider's manifest naming `paths` of this origin (atomically: the provider re-reads it at each refresh).
    func writeManifest(_ paths: [String], to file: URL) throws {
        let manifest: [String: Any] = ["allowHosts": ["127.0.0.1:\(server.port)"], "resources": paths.map(url)]
        try JSONSerialization.data(withJSONObject: manifest, options: [.sortedKeys]).write(to: file, options: .atomic)
    }
}

@Suite(.serialized) struct OfflineProviderLiveTests {
    static let css = ("/site/app.css", "#out{color:rgb(1, 2, 3)}", "text/css")
    static let js = ("/site/app.js", "document.getElementById('out').textContent='from app.js'", "application/javascript")
    static let page = (
        "/site/index.html", "<html><link rel=stylesheet href=app.css><p id=out></p><script src=app.js></script></html>", "text/html"
    )
    static let logo = ("/site/logo.png", "PNG-1", "image/png")

    func package(_ provider: URL, mirror: URL? = nil, directory: URL, clock: ManualClock) throws -> OfflinePackage {
        try OfflinePackage(
            configuration: OfflineConfiguration(directory: directory, provider: provider, mirror: mirror, requestTimeout: .seconds(10)),
            clock: clock)
    }

    func lookup(_ offline: OfflinePackage, _ url: String) async -> OfflineResource? {
        await offline.lookup(url: URL(string: url)!)
    }

    @Test func theSDKSyncsFromALiveProviderDownloadingOnlyWhatChangedAndDeletingWhatWasDropped() async throws {
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let origin = try Origin()
        defer { origin.server.close() }
        for (path, body, ctype) in [Self.css, Self.js, Self.page, Self.logo] { origin.put(path, body, ctype: ctype) }
        let manifest = work.appendingPathComponent("resources.json")
        try origin.writeManifest([Self.css.0, Self.js.0, Self.page.0, Self.logo.0], to: manifest)
        let state = work.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let provider = try await LiveProvider(manifest: manifest, state: state)
        do {
            let first = [Self.css, Self.js, Self.page, Self.logo].reduce(into: [String: Data]()) { $0[origin.url($1.0)] = Data($1.1.utf8) }
            let v1 = try await provider.waitForMap(first)
            let directory = work.appendingPathComponent("sdk")
            let clock = ManualClock()
            let offline = try package(provider.base, directory: directory, clock: clock)

            #expect(await offline.check(.start) == .updated(version: v1, source: "provider", downloads: 4, dropped: 0))
            #expect(await offline.downloadPending() == 4)
            for (path, body, ctype) in [Self.css, Self.js, Self.page, Self.logo] {
                #expect(await lookup(offline, origin.url(path)) == OfflineResource(bytes: Data(body.utf8), contentType: ctype))
            }
            #expect(await lookup(offline, origin.url(Self.page.0) + "#top")?.bytes == Data(Self.page.1.utf8))
            #expect(blobFiles(directory).count == 4)

            // The origin's app.js changes and the operator drops logo.png from the manifest; the provider's next refresh
            // publishes a new version.
            let js2 = "document.getElementById('out').textContent='from app.js, version 2'"
            origin.put(Self.js.0, js2, ctype: Self.js.2)
            try origin.writeManifest([Self.css.0, Self.js.0, Self.page.0], to: manifest)
            var second = first
            second[origin.url(Self.js.0)] = Data(js2.utf8)
            second[origin.url(Self.logo.0)] = nil
            let v2 = try await provider.waitForMap(second)
            #expect(v2 != v1)

            // Within 30 s of the last check nothing is asked; then one entry is downloaded and one deleted.
            clock.advance(by: .seconds(29))
            #expect(await offline.check(.pageOpen) == .skipped(reason: "fatigue"))
            clock.advance(by: .seconds(1))
            #expect(await offline.check(.pageOpen) == .updated(version: v2, source: "provider", downloads: 1, dropped: 1))
            #expect(await lookup(offline, origin.url(Self.logo.0)) == nil)
            #expect(await offline.downloadPending() == 1)
            #expect(await offline.counters.downloads == 5)
            #expect(await lookup(offline, origin.url(Self.js.0))?.bytes == Data(js2.utf8))
            #expect(await lookup(offline, origin.url(Self.css.0))?.bytes == Data(Self.css.1.utf8))
            #expect(blobFiles(directory).count == 3)
            #expect(await offline.counters.dropped == 1)

            // An unchanged map downloads nothing.
            clock.advance(by: .seconds(30))
            #expect(await offline.check(.foreground) == .upToDate(source: "provider"))
            #expect(await offline.downloadPending() == 0)
        } catch {
            await provider.stop()
            throw error
        }
        await provider.stop()
    }

    @Test func aBlobWhoseBytesDoNotMatchItsHashIsRefusedCountedAndNeverServed() async throws {
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let origin = try Origin()
        let cdn = try LocalServer()
        defer {
            origin.server.close()
            cdn.close()
        }
        for (path, body, ctype) in [Self.css, Self.js] { origin.put(path, body, ctype: ctype) }
        let manifest = work.appendingPathComponent("resources.json")
        try origin.writeManifest([Self.css.0, Self.js.0], to: manifest)
        // The CDN the map's download URLs point at: app.css's blob as published, app.js's with other bytes.
        let cssHash = Digests.sha256(Data(Self.css.1.utf8))
        let jsHash = Digests.sha256(Data(Self.js.1.utf8))
        cdn.set("/cdn/\(cssHash)", .init(body: Data(Self.css.1.utf8), contentType: Self.css.2))
        cdn.set("/cdn/\(jsHash)", .init(body: Data("alert('tampered')".utf8), contentType: Self.js.2))
        let state = work.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let provider = try await LiveProvider(
            manifest: manifest, state: state, downloadBase: cdn.base.appendingPathComponent("cdn").absoluteString)
        do {
            let v1 = try await provider.waitForMap([
                origin.url(Self.css.0): Data(Self.css.1.utf8), origin.url(Self.js.0): Data(Self.js.1.utf8),
            ])
            let directory = work.appendingPathComponent("sdk")
            let offline = try package(provider.base, directory: directory, clock: ManualClock())

            #expect(await offline.check(.start) == .updated(version: v1, source: "provider", downloads: 2, dropped: 0))
            #expect(await offline.downloadPending() == 1)
            #expect(cdn.count("/cdn/\(jsHash)") == 1 && cdn.count("/cdn/\(cssHash)") == 1)
            #expect(await offline.counters.tamperedRefused == 1)
            #expect(await lookup(offline, origin.url(Self.js.0)) == nil)
            #expect(await lookup(offline, origin.url(Self.css.0))?.bytes == Data(Self.css.1.utf8))
            #expect(blobFiles(directory).count == 1)
            // Tried again on later passes, refused each time, never stored.
            await offline.downloadPending()
            await offline.downloadPending()
            #expect(await offline.counters.tamperedRefused == 3)
            #expect(await offline.pendingDownloads == 0)
            #expect(await lookup(offline, origin.url(Self.js.0)) == nil)
            #expect(blobFiles(directory).count == 1)
        } catch {
            await provider.stop()
            throw error
        }
        await provider.stop()
    }

    @Test func fiveFailuresOfTheProviderTurnToTheExportedMirrorAndItsAnswersBringTheChecksBack() async throws {
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let origin = try Origin()
        defer { origin.server.close() }
        for (path, body, ctype) in [Self.css, Self.js] { origin.put(path, body, ctype: ctype) }
        let manifest = work.appendingPathComponent("resources.json")
        try origin.writeManifest([Self.css.0, Self.js.0], to: manifest)
        let state = work.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)

        // The CDN mirror: `prefetch resources export DIR`, served by a second process.
        let export = work.appendingPathComponent("mirror")
        func exportMirror() async throws {
            let child = try ChildProcess(
                try requiredBinary("PREFETCH_BIN"), ["resources", "export", export.path, "--resources", manifest.path], in: work)
            let status = try await child.exitStatus()
            #expect(status == 0, "export: \(child.text)")
        }
        try await exportMirror()
        let mirrorServer = try ChildProcess(
            "/usr/bin/env", ["python3", "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", export.path], in: work)
        var provider = try await LiveProvider(manifest: manifest, state: state)
        do {
            let mirrorPort = try await mirrorServer.port(after: " port ")
            let mirror = URL(string: "http://127.0.0.1:\(mirrorPort)/resources.json")!
            var published = [origin.url(Self.css.0): Data(Self.css.1.utf8), origin.url(Self.js.0): Data(Self.js.1.utf8)]
            let v1 = try await provider.waitForMap(published)
            let directory = work.appendingPathComponent("sdk")
            let clock = ManualClock()
            let offline = try package(provider.base, mirror: mirror, directory: directory, clock: clock)
            #expect(await offline.check(.start) == .updated(version: v1, source: "provider", downloads: 2, dropped: 0))
            #expect(await offline.downloadPending() == 2)

            // The provider stops answering; the origin's app.js changes and the mirror is exported again.
            let port = provider.port
            await provider.stop()
            let js2 = "document.getElementById('out').textContent='from the mirror'"
            origin.put(Self.js.0, js2, ctype: Self.js.2)
            try await exportMirror()
            for _ in 0..<4 {
                clock.advance(by: .seconds(30))
                #expect(await offline.check(.foreground) == .failed(reason: "transport"))
            }
            #expect(await offline.counters.mirrorAnswers == 0)
            clock.advance(by: .seconds(30))
            // The fifth failure: the mirror is asked in the same check. Its download URLs are its own (relative to
            // resources.json), so both entries are fetched from it: the provider is down.
            let turned = await offline.check(.foreground)
            guard case .updated(let v2, "mirror", 2, 0) = turned else {
                throw ServerError(description: "the fifth failure did not turn to the mirror: \(turned)")
            }
            #expect(v2 != v1)
            #expect(await offline.downloadPending() == 2)
            #expect(await lookup(offline, origin.url(Self.js.0))?.bytes == Data(js2.utf8))
            #expect(await lookup(offline, origin.url(Self.css.0))?.bytes == Data(Self.css.1.utf8))
            clock.advance(by: .seconds(30))
            #expect(await offline.check(.pageOpen) == .upToDate(source: "mirror"))

            // The provider answers again (same port, same state); it publishes the same version as the mirror
            // (versions are derived from the content). Once due (5 minutes after its last ask), it is asked and
            // answers, and the checks stay with it.
            provider = try await LiveProvider(manifest: manifest, state: state, port: port)
            published[origin.url(Self.js.0)] = Data(js2.utf8)
            #expect(try await provider.waitForMap(published) == v2)
            clock.advance(by: .seconds(270))
            let mirrorAnswers = await offline.counters.mirrorAnswers
            let providerAnswers = await offline.counters.providerAnswers
            #expect(await offline.check(.pageOpen) == .upToDate(source: "provider"))
            clock.advance(by: .seconds(30))
            #expect(await offline.check(.pageExit) == .upToDate(source: "provider"))
            #expect(await offline.counters.mirrorAnswers == mirrorAnswers)
            #expect(await offline.counters.providerAnswers == providerAnswers + 2)
        } catch {
            await provider.stop()
            await mirrorServer.stop()
            throw error
        }
        await provider.stop()
        await mirrorServer.stop()
    }
}
