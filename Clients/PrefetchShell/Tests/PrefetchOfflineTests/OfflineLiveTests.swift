import Foundation
import Testing

@testable import PrefetchOffline

/// A resource of a test map: its URL, body and type.
struct TestResource {
    var url: String
    var body: Data
    var ctype: String = "text/css"
    var version: String = "1"

    init(_ url: String, _ body: String, ctype: String = "text/css", version: String = "1") {
        self.url = url
        self.body = Data(body.utf8)
        self.ctype = ctype
        self.version = version
    }

    var sha256: String { Digests.sha256(body) }
    var blobPath: String { "/v1/resources/blob/\(sha256)" }
}

/// A provider on a real local server: `GET /v1/resources` answers what the test publishes, blobs by hash.
final class TestProvider: Sendable {
    let server: LocalServer

    init() throws {
        server = try LocalServer()
    }

    var base: URL { server.base }

    /// Publishes `resources` as map `version` (download URLs relative to the provider, or under `downloadBase`) and
    /// serves their blobs.
    func publish(version: String, _ resources: [TestResource], downloadBase: String? = nil, code: Int = 200) throws {
        server.set("/v1/resources", .json(try Self.envelope(version: version, resources, downloadBase: downloadBase, code: code)))
        for resource in resources { server.set(resource.blobPath, .init(body: resource.body, contentType: resource.ctype)) }
    }

    static func envelope(version: String, _ resources: [TestResource], downloadBase: String? = nil, code: Int = 200) throws -> String {
        var map: [String: Any] = [:]
        for resource in resources {
            map[resource.url] = [
                "version": resource.version, "md5": Digests.md5(resource.body), "sha256": resource.sha256,
                "download": (downloadBase ?? "") + resource.blobPath, "ctype": resource.ctype,
            ]
        }
        let object: [String: Any] = ["code": code, "data": ["version": version, "update": true, "resourcemap": map, "removed": []]]
        return String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    /// Answers every check abnormally: `{"code":500}`.
    func fail() {
        server.set("/v1/resources", .json(#"{"code":500,"msg":"down"}"#))
    }

    /// The checks it received.
    var checks: Int { server.count("/v1/resources") }

    /// The blob downloads it received, all hashes together.
    var blobReads: Int { server.requests.filter { $0.hasPrefix("/v1/resources/blob/") }.count }
}

/// A fresh state directory, removed by the caller.
func temporaryDirectory() throws -> URL {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-offline-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

func blobFiles(_ directory: URL) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("blobs").path)) ?? []).sorted()
}

/// The package against a real provider (and mirror) on 127.0.0.1, on a clock the test moves.
@Suite struct OfflineLiveTests {
    let css = TestResource("https://shop.example/static/app.css", "body{color:red}")
    let js = TestResource("https://shop.example/static/app.js", "console.log(1)", ctype: "application/javascript;charset=UTF-8")
    let page = TestResource("https://shop.example/topic/p.html?_stat_area=banner_2", "<html>hi</html>", ctype: "text/html")

    func package(
        _ provider: URL, mirror: URL? = nil, directory: URL, clock: ManualClock = ManualClock(),
        tweak: (inout OfflineConfiguration) -> Void = { _ in }
    ) throws -> OfflinePackage {
        var configuration = OfflineConfiguration(directory: directory, provider: provider, mirror: mirror, requestTimeout: .seconds(5))
        tweak(&configuration)
        return try OfflinePackage(configuration: configuration, clock: clock)
    }

    @Test func aPublishedMapIsDownloadedVerifiedAndServedWithItsTypeAndTheFragmentIgnored() async throws {
        let provider = try TestProvider()
        defer { provider.server.close() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try provider.publish(version: "553", [css, js, page])
        let offline = try package(provider.base, directory: directory)

        #expect(await offline.check(.start) == .updated(version: "553", source: "provider", downloads: 3, dropped: 0))
        #expect(provider.server.requests.first == "/v1/resources")  // no version before the first map
        // Never on the lookup path: a resource whose body is not stored yet is a miss, and nothing is fetched for it.
        #expect(await offline.lookup(url: URL(string: css.url)!) == nil)
        #expect(provider.blobReads == 0)

        #expect(await offline.downloadPending() == 3)
        #expect(provider.blobReads == 3)
        #expect(await offline.lookup(url: URL(string: css.url)!) == OfflineResource(bytes: css.body, contentType: "text/css"))
        #expect(await offline.lookup(url: URL(string: js.url)!)?.contentType == "application/javascript;charset=UTF-8")
        #expect(await offline.lookup(url: URL(string: page.url + "#param")!)?.bytes == page.body)
        #expect(await offline.lookup(url: URL(string: "https://shop.example/static/other.css")!) == nil)
        #expect(await offline.pendingDownloads == 0)
    }

    @Test func checksAreMadeAtMostOncePer30SecondsWhateverTheTrigger() async throws {
        let provider = try TestProvider()
        defer { provider.server.close() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try provider.publish(version: "1", [css])
        let clock = ManualClock()
        let offline = try package(provider.base, directory: directory, clock: clock)

        #expect(await offline.check(.start) == .updated(version: "1", source: "provider", downloads: 1, dropped: 0))
        clock.advance(by: .seconds(10))
        #expect(await offline.check(.pageOpen) == .skipped(reason: "fatigue"))
        clock.advance(by: .seconds(19))
        #expect(await offline.check(.foreground) == .skipped(reason: "fatigue"))
        #expect(provider.checks == 1)
        clock.advance(by: .seconds(1))
        #expect(await offline.check(.pageExit) == .upToDate(source: "provider"))
        #expect(provider.checks == 2)
        // The applied version goes with each later check.
        #expect(provider.server.requests.last == "/v1/resources?version=1")
    }

    @Test func aNewVersionDownloadsOnlyNewAndChangedEntriesAndDeletesDroppedOnes() async throws {
        let provider = try TestProvider()
        defer { provider.server.close() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try provider.publish(version: "1", [css, js, page])
        let clock = ManualClock()
        let offline = try package(provider.base, directory: directory, clock: clock)
        await offline.check(.start)
        await offline.downloadPending()
        #expect(blobFiles(directory).count == 3)

        // Version 2: app.js changed, p.html dropped, app.css unchanged, a new image.
        let js2 = TestResource(js.url, "console.log(2)", ctype: js.ctype, version: "2")
        let image = TestResource("https://shop.example/static/logo.png", "PNG", ctype: "image/png")
        try provider.publish(version: "2", [css, js2, image])
        clock.advance(by: .seconds(30))
        #expect(await offline.check(.pageOpen) == .updated(version: "2", source: "provider", downloads: 2, dropped: 1))
        #expect(await offline.lookup(url: URL(string: page.url)!) == nil)
        #expect(await offline.lookup(url: URL(string: js.url)!) == nil)  // the old body is gone, the new one not here yet
        #expect(await offline.lookup(url: URL(string: css.url)!)?.bytes == css.body)
        let before = provider.blobReads
        #expect(await offline.downloadPending() == 2)
        #expect(provider.blobReads == before + 2)
        #expect(provider.server.requests.suffix(2).sorted() == [image.blobPath, js2.blobPath].sorted())
        #expect(await offline.lookup(url: URL(string: js.url)!)?.bytes == js2.body)
        #expect(blobFiles(directory).count == 3)
        #expect(await offline.counters.dropped == 1)

        // The same version again, with another map: not applied (versions compare as text, and are equal).
        try provider.publish(version: "2", [css])
        clock.advance(by: .seconds(30))
        #expect(await offline.check(.foreground) == .upToDate(source: "provider"))
        #expect(await offline.lookup(url: URL(string: image.url)!)?.bytes == image.body)
    }

    @Test func afterFiveAbnormalAnswersTheMirrorIsAskedAndTheProviderAgainOnceItAnswers() async throws {
        let provider = try TestProvider()
        let mirror = try LocalServer()
        defer {
            provider.server.close()
            mirror.close()
        }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The mirror's file: the provider's latest map, download URLs absolute (on the provider's blob path).
        try provider.publish(version: "9", [css])
        mirror.set(
            "/xcache/configure.json", .json(try TestProvider.envelope(version: "9", [css], downloadBase: provider.base.absoluteString)))
        provider.fail()
        let clock = ManualClock()
        let offline = try package(
            provider.base, mirror: mirror.base.appendingPathComponent("xcache/configure.json"), directory: directory, clock: clock)

        for _ in 0..<4 {
            #expect(await offline.check(.foreground) == .failed(reason: "code"))
            clock.advance(by: .seconds(30))
        }
        #expect(mirror.requests.isEmpty)
        #expect(await offline.check(.foreground) == .updated(version: "9", source: "mirror", downloads: 1, dropped: 0))
        #expect(provider.checks == 5 && mirror.requests.count == 1)
        await offline.downloadPending()
        #expect(await offline.lookup(url: URL(string: css.url)!)?.bytes == css.body)

        // The next checks go to the mirror alone, until the provider is due again (5 minutes after its last ask).
        clock.advance(by: .seconds(30))
        #expect(await offline.check(.pageOpen) == .upToDate(source: "mirror"))
        #expect(provider.checks == 5 && mirror.requests.count == 2)
        try provider.publish(version: "9", [css])
        clock.advance(by: .seconds(270))
        #expect(await offline.check(.pageOpen) == .upToDate(source: "provider"))
        #expect(provider.checks == 6 && mirror.requests.count == 2)
        clock.advance(by: .seconds(30))
        #expect(await offline.check(.pageExit) == .upToDate(source: "provider"))
        #expect(provider.checks == 7 && mirror.requests.count == 2)
    }

    @Test func aProviderThatDoesNotAnswerCountsAsAbnormalToo() async throws {
        let down = try LocalServer()
        down.close()  // connections are refused from now on
        let mirror = try LocalServer()
        defer { mirror.close() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        mirror.set("/map.json", .json(try TestProvider.envelope(version: "3", [css], downloadBase: mirror.base.absoluteString)))
        let clock = ManualClock()
        let offline = try package(down.base, mirror: mirror.base.appendingPathComponent("map.json"), directory: directory, clock: clock)
        for _ in 0..<4 {
            #expect(await offline.check(.start) == .failed(reason: "transport"))
            clock.advance(by: .seconds(30))
        }
        #expect(await offline.check(.start) == .updated(version: "3", source: "mirror", downloads: 1, dropped: 0))
    }

    @Test func aTamperedDownloadIsRefusedCountedAndNeverServed() async throws {
        let provider = try TestProvider()
        defer { provider.server.close() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try provider.publish(version: "1", [css, js])
        provider.server.set(css.blobPath, .init(body: Data("body{color:blue}".utf8), contentType: "text/css"))
        let offline = try package(provider.base, directory: directory)
        await offline.check(.start)

        #expect(await offline.downloadPending() == 1)
        #expect(await offline.counters.tamperedRefused == 1)
        #expect(await offline.lookup(url: URL(string: css.url)!) == nil)
        #expect(blobFiles(directory).count == 1)
        // Retried on later passes, then given up until a map changes the entry.
        #expect(await offline.downloadPending() == 0)
        #expect(await offline.downloadPending() == 0)
        #expect(await offline.counters.tamperedRefused == 3)
        #expect(await offline.pendingDownloads == 0)
        #expect(await offline.lookup(url: URL(string: css.url)!) == nil)
    }

    @Test func aBodyChangedOnDiskIsRefusedDeletedAndDownloadedAgain() async throws {
        let provider = try TestProvider()
        defer { provider.server.close() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try provider.publish(version: "1", [css])
        let offline = try package(provider.base, directory: directory)
        await offline.check(.start)
        await offline.downloadPending()
        let file = directory.appendingPathComponent("blobs").appendingPathComponent(try #require(blobFiles(directory).first))
        try Data("body{color:evil}".utf8).write(to: file)

        #expect(await offline.lookup(url: URL(string: css.url)!) == nil)
        #expect(await offline.counters.tamperedRefused == 1)
        #expect(blobFiles(directory).isEmpty)
        #expect(await offline.pendingDownloads == 1)
        #expect(await offline.downloadPending() == 1)
        #expect(await offline.lookup(url: URL(string: css.url)!)?.bytes == css.body)
    }

    @Test func theMapTheBodiesAndTheWorkListSurviveARestart() async throws {
        let provider = try TestProvider()
        defer { provider.server.close() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try provider.publish(version: "4", [css, js, page])
        provider.server.set(js.blobPath, .init(status: 503, body: Data()))
        provider.server.set(page.blobPath, .init(status: 503, body: Data()))
        do {
            let first = try package(provider.base, directory: directory)
            await first.check(.start)
            #expect(await first.downloadPending() == 1)
            #expect(await first.pendingDownloads == 2)
        }
        try provider.publish(version: "4", [css, js, page])
        let second = try package(provider.base, directory: directory)
        #expect(await second.appliedVersion == "4")
        #expect(await second.pendingDownloads == 2)
        #expect(await second.lookup(url: URL(string: css.url)!)?.bytes == css.body)
        #expect(await second.counters.diskHits == 1)
        let reads = provider.blobReads
        #expect(await second.downloadPending() == 2)
        #expect(provider.blobReads == reads + 2)
        #expect(await second.check(.start) == .upToDate(source: "provider"))
        #expect(provider.server.requests.last == "/v1/resources?version=4")
        #expect(await second.lookup(url: URL(string: page.url)!)?.bytes == page.body)
    }

    @Test func memoryServesRepeatedLookupsUntilAMemoryWarningAndDiskStaysWithinItsCapacity() async throws {
        let provider = try TestProvider()
        defer { provider.server.close() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let big = (0..<3).map { TestResource("https://shop.example/static/\($0).js", String(repeating: "\($0)", count: 1000)) }
        try provider.publish(version: "1", big)
        let offline = try package(provider.base, directory: directory) { $0.diskCapacity = 2500 }
        await offline.check(.start)
        #expect(await offline.downloadPending() == 3)
        // Three bodies of 1000 bytes in 2500: the first stored was evicted.
        #expect(await offline.storedBytes().disk == 2000)
        #expect(blobFiles(directory).count == 2)
        let stored = try #require(await offline.lookup(url: URL(string: big[2].url)!))
        #expect(stored.bytes == big[2].body)
        _ = await offline.lookup(url: URL(string: big[2].url)!)
        let counters = await offline.counters
        #expect(counters.diskHits == 1 && counters.memoryHits == 1)
        #expect(await offline.storedBytes().memory == 1000)
        await offline.handleMemoryWarning()
        #expect(await offline.storedBytes().memory == 0)
        _ = await offline.lookup(url: URL(string: big[2].url)!)
        #expect(await offline.counters.diskHits == 2)
    }

    @Test func runMakesTheNotifiedChecksAndTheDownloadsInTheBackground() async throws {
        let provider = try TestProvider()
        defer { provider.server.close() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try provider.publish(version: "1", [css])
        let offline = try package(provider.base, directory: directory)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await offline.run() }
            offline.notify(.start)
            // Bounded in seconds (a count is what is asserted): the check and the download happen without the test.
            // Generous: the downloads run at the lowest priority, which a loaded machine serves last.
            let deadline = ContinuousClock.now.advanced(by: .seconds(120))
            while await offline.lookup(url: URL(string: css.url)!) == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            group.cancelAll()
        }
        #expect(await offline.lookup(url: URL(string: css.url)!)?.bytes == css.body)
        #expect(provider.checks == 1 && provider.blobReads == 1)
    }
}
