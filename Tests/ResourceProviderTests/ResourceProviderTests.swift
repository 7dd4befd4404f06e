import Foundation
import HTTPTypes
import Logging
import MetricsTestKit
import NIOCore
import PrefetchFetcher
import PrefetchTestSupport
import Synchronization
import Testing

@testable import ResourceProvider

// The provider against a real origin on 127.0.0.1 and the service's own libcurl fetcher: what a shell's SDK gets
// from the check and the blob reads, and what the operator's manifest may and may not name.

private let helloSHA256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
private let helloMD5 = "5d41402abc4b2a76b9719d911017c592"

private func temporaryDirectory() -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("resource-provider-\(UUID().uuidString)").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

private func quietLogger() -> Logger {
    var logger = Logger(label: "prefetch.resources.test")
    logger.logLevel = .critical
    return logger
}

private func manifest(
    _ origin: FileOrigin, _ paths: [String], maxResourceBytes: Int? = nil, maxTotalBytes: Int? = nil
) throws
    -> ResourceManifest
{
    try ResourceManifest(
        allowHosts: ["127.0.0.1:\(origin.port)"], maxResourceBytes: maxResourceBytes, maxTotalBytes: maxTotalBytes,
        resources: paths.map(origin.url))
}

private func makeProvider(
    _ manifest: ResourceManifest?, fetcher: Fetcher, directory: String = temporaryDirectory(), downloadBase: String? = nil,
    metrics: TestMetrics = TestMetrics()
) -> ResourceProvider {
    ResourceProvider(
        settings: ResourceSettings(manifest: manifest, directory: directory, downloadBase: downloadBase), fetcher: fetcher,
        logger: quietLogger(), metricsFactory: metrics)
}

@Suite struct ResourceManifestTests {
    @Test func aManifestNamingAFileURLIsRefusedNamingTheField() throws {
        let error = #expect(throws: ManifestError.self) {
            try ResourceManifest(allowHosts: ["127.0.0.1:8080"], resources: ["http://127.0.0.1:8080/a.js", "file:///etc/passwd"])
        }
        #expect(error?.problems.count == 1)
        #expect(error?.problems.first?.hasPrefix("resources[1]: \"file:///etc/passwd\" is not an http(s) URL") == true)
    }

    @Test func aHostOffTheAllowListIsRefused() throws {
        let error = #expect(throws: ManifestError.self) {
            try ResourceManifest(
                allowHosts: ["127.0.0.1:8080"], resources: [], pages: ["https://m.example/home": ["http://127.0.0.1:9090/a.js"]])
        }
        #expect(
            error?.problems == [
                "pages[\"https://m.example/home\"][0]: \"http://127.0.0.1:9090/a.js\": host 127.0.0.1:9090 is not in allowHosts"
            ])
    }

    @Test func fragmentsDuplicatesCredentialsAndBadCapsAreRefusedEachNamed() throws {
        let error = #expect(throws: ManifestError.self) {
            try ResourceManifest.decode(
                Data(
                    #"""
                    {"allowHosts": ["127.0.0.1"], "maxResourceBytes": 0,
                     "resources": ["http://127.0.0.1/a.js#x", "http://127.0.0.1/b.js", "http://127.0.0.1/b.js", "http://u:p@127.0.0.1/c.js"]}
                    """#.utf8))
        }
        let problems = error?.problems ?? []
        #expect(problems.count == 4)
        #expect(problems.contains { $0.hasPrefix("maxResourceBytes: 0") })
        #expect(problems.contains { $0.hasPrefix("resources[0]:") && $0.contains("#fragment") })
        #expect(problems.contains { $0 == "resources[2]: \"http://127.0.0.1/b.js\" is listed twice" })
        #expect(problems.contains { $0.hasPrefix("resources[3]:") })
    }

    @Test func pagesAndResourcesAreOneListEachURLOnce() throws {
        let manifest = try ResourceManifest(
            allowHosts: ["static.example"], resources: ["https://static.example/a.js"],
            pages: ["https://m.example/p": ["https://static.example/a.js", "https://static.example/b.css"]])
        #expect(manifest.urls == ["https://static.example/a.js", "https://static.example/b.css"])
    }

    @Test func theExampleManifestIsValid() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("configs/resources.json").path
        let manifest = try ResourceManifest.load(path: path)
        #expect(!manifest.urls.isEmpty)
    }
}

@Suite struct ResourceProviderTests {
    @Test func theMapCarriesEachBodysHashesAndTypeAndTheBodyIsStoredByHash() async throws {
        try await withOrigin { origin in
            origin.set("/app.js", "hello", ctype: "application/javascript;charset=UTF-8")
            origin.set("/site.css", "body{}", ctype: "text/css")
            try await withFetcher { fetcher in
                let directory = temporaryDirectory()
                let provider = makeProvider(try manifest(origin, ["/app.js", "/site.css"]), fetcher: fetcher, directory: directory)
                #expect(await provider.refresh() == .ok)
                let answer = provider.check(version: nil)
                #expect(answer.code == 200)
                #expect(answer.data.update)
                let entry = try #require(answer.data.resourcemap?[origin.url("/app.js")])
                #expect(entry.sha256 == helloSHA256)
                #expect(entry.md5 == helloMD5)
                #expect(entry.ctype == "application/javascript;charset=UTF-8")
                #expect(entry.download == "/v1/resources/blob/\(helloSHA256)")
                #expect(answer.data.resourcemap?[origin.url("/site.css")]?.ctype == "text/css")
                #expect(answer.data.version != "0")
                let stored = try Data(contentsOf: URL(fileURLWithPath: directory + "/resources/blobs/" + helloSHA256))
                #expect(String(decoding: stored, as: UTF8.self) == "hello")
                // The wire form is the envelope the SDK parses.
                let json = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(answer)) as? [String: Any])
                #expect(json["code"] as? Int == 200)
                let data = try #require(json["data"] as? [String: Any])
                #expect(data["version"] as? String == answer.data.version)
                #expect(data["update"] as? Bool == true)
            }
        }
    }

    @Test func theCurrentVersionGetsUpdateFalseAndNoMap() async throws {
        try await withOrigin { origin in
            origin.set("/app.js", "hello", ctype: "application/javascript")
            try await withFetcher { fetcher in
                let provider = makeProvider(try manifest(origin, ["/app.js"]), fetcher: fetcher)
                await provider.refresh()
                let current = provider.check(version: nil).data.version
                let answer = provider.check(version: current)
                #expect(answer.code == 200)
                #expect(answer.data == .init(version: current, update: false, resourcemap: nil, removed: nil))
                let json = String(decoding: try JSONEncoder().encode(answer), as: UTF8.self)
                #expect(!json.contains("resourcemap"))
            }
        }
    }

    @Test func aChangedBodyBumpsTheVersionAndADroppedURLIsListedInRemoved() async throws {
        try await withOrigin { origin in
            origin.set("/app.js", "one", ctype: "application/javascript")
            origin.set("/old.css", "old", ctype: "text/css")
            try await withFetcher { fetcher in
                let provider = makeProvider(try manifest(origin, ["/app.js", "/old.css"]), fetcher: fetcher)
                await provider.refresh()
                let first = provider.version
                // Unchanged inputs: the same version.
                await provider.refresh()
                #expect(provider.version == first)
                origin.set("/app.js", "two", ctype: "application/javascript")
                provider.use(try manifest(origin, ["/app.js"]))
                await provider.refresh()
                let second = provider.version
                #expect(second != first)
                let answer = provider.check(version: first)
                #expect(answer.data.update)
                #expect(answer.data.removed == [origin.url("/old.css")])
                #expect(answer.data.resourcemap?.keys.sorted() == [origin.url("/app.js")])
                #expect(answer.data.resourcemap?[origin.url("/app.js")]?.sha256 != nil)
                // A version the provider never published: the whole map, no `removed`.
                #expect(provider.check(version: "12345").data.removed == nil)
                // The dropped resource's body is no longer served, nor kept on disk; the published ones are.
                #expect(provider.blob(Digests.sha256(Array("old".utf8))).status == .notFound)
                let stored = try FileManager.default.contentsOfDirectory(atPath: provider.blobDirectory).filter { $0.count == 64 }
                #expect(stored == [Digests.sha256(Array("two".utf8))])
            }
        }
    }

    @Test func aRefreshSendsTheValidatorsAndA304KeepsTheBody() async throws {
        try await withOrigin { origin in
            origin.set("/app.js", "hello", ctype: "application/javascript")
            try await withFetcher { fetcher in
                let provider = makeProvider(try manifest(origin, ["/app.js"]), fetcher: fetcher)
                await provider.refresh()
                let first = provider.version
                #expect(await provider.refresh() == .ok)
                #expect(origin.notModified == 1)
                #expect(provider.version == first)
                #expect(provider.blob(helloSHA256).status == .ok)
                // No credentials: the provider sends no cookie or authorization of anyone.
                for headers in origin.seenHeaders {
                    #expect(headers["cookie"] == nil)
                    #expect(headers["authorization"] == nil)
                }
            }
        }
    }

    @Test func anOverCapResourceIsNotStoredAndCountedAsFailedThePreviousCopyKept() async throws {
        try await withOrigin { origin in
            origin.set("/small.js", "hello", ctype: "application/javascript")
            origin.set("/big.js", String(repeating: "x", count: 100), ctype: "application/javascript")
            try await withFetcher { fetcher in
                let metrics = TestMetrics()
                let directory = temporaryDirectory()
                let provider = makeProvider(
                    try manifest(origin, ["/small.js", "/big.js"], maxResourceBytes: 50), fetcher: fetcher, directory: directory,
                    metrics: metrics)
                #expect(await provider.refresh() == .partial)
                let map = provider.check(version: nil).data.resourcemap ?? [:]
                #expect(map.keys.sorted() == [origin.url("/small.js")])
                let failure = try #require(provider.status().failures[origin.url("/big.js")])
                #expect(failure.reason == "too-large")
                #expect(failure.count == 1)
                #expect(!failure.previousKept)
                let bigHash = Digests.sha256(Array(String(repeating: "x", count: 100).utf8))
                #expect(!FileManager.default.fileExists(atPath: directory + "/resources/blobs/" + bigHash))
                #expect(try metrics.expectCounter("prefetch_resource_refreshes_total", [("outcome", "partial")]).totalValue == 1)
                // The published version as a number, for the dashboard's panel.
                #expect(try metrics.expectGauge("prefetch_resource_map_version").lastValue == Double(provider.version))

                // The small one grows past the cap: refused, its previous copy still published.
                origin.set("/small.js", String(repeating: "y", count: 60), ctype: "application/javascript")
                #expect(await provider.refresh() == .failed)
                #expect(provider.check(version: nil).data.resourcemap?[origin.url("/small.js")]?.sha256 == helloSHA256)
                #expect(provider.status().failures[origin.url("/small.js")]?.previousKept == true)
                #expect(provider.status().failures[origin.url("/big.js")]?.count == 2)
            }
        }
    }

    @Test func resourcesPastTheTotalCapAreRefused() async throws {
        try await withOrigin { origin in
            origin.set("/a.js", "hello", ctype: "application/javascript")
            origin.set("/b.js", "world!", ctype: "application/javascript")
            try await withFetcher { fetcher in
                let provider = makeProvider(try manifest(origin, ["/a.js", "/b.js"], maxTotalBytes: 8), fetcher: fetcher)
                #expect(await provider.refresh() == .partial)
                #expect(provider.check(version: nil).data.resourcemap?.keys.sorted() == [origin.url("/a.js")])
                #expect(provider.status().failures[origin.url("/b.js")]?.reason == "over-total")
                #expect(provider.status().bytes == 5)
            }
        }
    }

    @Test func twoProvidersOverTheSameInputsPublishTheSameVersion() async throws {
        try await withOrigin { origin in
            origin.set("/app.js", "hello", ctype: "application/javascript")
            origin.set("/site.css", "body{}", ctype: "text/css")
            try await withFetcher { fetcher in
                let one = makeProvider(try manifest(origin, ["/app.js", "/site.css"]), fetcher: fetcher)
                // The other lists them in another order, with its own directory.
                let other = makeProvider(try manifest(origin, ["/site.css", "/app.js"]), fetcher: fetcher)
                await one.refresh()
                await other.refresh()
                #expect(one.version != "0")
                #expect(one.version == other.version)
                #expect(one.check(version: nil) == other.check(version: nil))
            }
        }
    }

    @Test func withoutAManifestTheMapIsEmptyWithVersion0() async throws {
        try await withFetcher { fetcher in
            let provider = makeProvider(nil, fetcher: fetcher)
            #expect(await provider.refresh() == .ok)
            let answer = provider.check(version: nil)
            #expect(answer.code == 200)
            #expect(answer.data.version == "0")
            #expect(answer.data.resourcemap == [:])
            #expect(provider.check(version: "0").data.update == false)
        }
    }

    @Test func aDownloadBaseNamesTheCDNCopy() async throws {
        try await withOrigin { origin in
            origin.set("/app.js", "hello", ctype: "application/javascript")
            try await withFetcher { fetcher in
                let provider = makeProvider(
                    try manifest(origin, ["/app.js"]), fetcher: fetcher, downloadBase: "https://cdn.example/offline/")
                await provider.refresh()
                #expect(
                    provider.check(version: nil).data.resourcemap?[origin.url("/app.js")]?.download
                        == "https://cdn.example/offline/\(helloSHA256)")
            }
        }
    }

    @Test func theExportWritesTheMirrorFileAndEachBodyOnce() async throws {
        try await withOrigin { origin in
            origin.set("/app.js", "hello", ctype: "application/javascript")
            origin.set("/same.js", "hello", ctype: "application/javascript")
            try await withFetcher { fetcher in
                let provider = makeProvider(try manifest(origin, ["/app.js", "/same.js"]), fetcher: fetcher)
                await provider.refresh()
                let directory = temporaryDirectory() + "/mirror"
                let written = try await ResourceExport.write(provider, to: directory)
                #expect(written == .init(version: provider.version, entries: 2, blobs: 1))
                let file = try Data(contentsOf: URL(fileURLWithPath: directory + "/resources.json"))
                let answer = try JSONDecoder().decode(ResourceCheckAnswer.self, from: file)
                #expect(answer.data.update)
                #expect(answer.data.version == provider.version)
                #expect(answer.data.resourcemap?[origin.url("/app.js")]?.download == helloSHA256)
                let body = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + helloSHA256))
                #expect(String(decoding: body, as: UTF8.self) == "hello")
            }
        }
    }
}

@Suite struct BlobAnswerTests {
    @Test func blobsByHashWithETag304RangeAnd416() async throws {
        try await withOrigin { origin in
            origin.set("/app.js", "hello", ctype: "application/javascript")
            try await withFetcher { fetcher in
                let metrics = TestMetrics()
                let provider = makeProvider(try manifest(origin, ["/app.js"]), fetcher: fetcher, metrics: metrics)
                await provider.refresh()

                let whole = provider.blob(helloSHA256)
                #expect(whole.status == .ok)
                #expect(String(buffer: whole.body) == "hello")
                #expect(whole.headers[.contentType] == "application/javascript")
                #expect(whole.headers[.eTag] == "\"\(helloSHA256)\"")
                #expect(whole.headers[.cacheControl] == "public, max-age=31536000, immutable")

                let revalidated = provider.blob(helloSHA256, ifNoneMatch: "\"\(helloSHA256)\"")
                #expect(revalidated.status == .notModified)
                #expect(revalidated.body.readableBytes == 0)

                let part = provider.blob(helloSHA256, range: "bytes=1-3")
                #expect(part.status == .partialContent)
                #expect(String(buffer: part.body) == "ell")
                #expect(part.headers[.contentRange] == "bytes 1-3/5")
                #expect(String(buffer: provider.blob(helloSHA256, range: "bytes=-2").body) == "lo")
                #expect(String(buffer: provider.blob(helloSHA256, range: "bytes=3-").body) == "lo")

                let outside = provider.blob(helloSHA256, range: "bytes=9-12")
                #expect(outside.status == .rangeNotSatisfiable)
                #expect(outside.headers[.contentRange] == "bytes */5")

                let unknown = provider.blob(String(repeating: "0", count: 64))
                #expect(unknown.status == .notFound)
                #expect(unknown.headers[.contentType] == "application/json")

                for bad in [helloSHA256.uppercased(), "abc", helloSHA256 + "0", "../../etc/passwd"] {
                    let answer = provider.blob(bad)
                    #expect(answer.status == .badRequest)
                    let json = try #require(
                        try JSONSerialization.jsonObject(with: Data(answer.body.readableBytesView)) as? [String: String])
                    #expect(json["error"] == "bad-hash")
                }
                #expect(try metrics.expectCounter("prefetch_resource_blob_reads_total", [("outcome", "bad-hash")]).totalValue == 4)
                #expect(try metrics.expectCounter("prefetch_resource_blob_reads_total", [("outcome", "hit")]).totalValue == 1)
            }
        }
    }
}

@Suite struct ResourcePersistenceTests {
    @Test func aRestartedProviderPublishesTheSavedMapWithoutFetching() async throws {
        try await withOrigin { origin in
            origin.set("/app.js", "one", ctype: "application/javascript")
            origin.set("/old.css", "old", ctype: "text/css")
            try await withFetcher { fetcher in
                let directory = temporaryDirectory()
                let first = makeProvider(try manifest(origin, ["/app.js", "/old.css"]), fetcher: fetcher, directory: directory)
                await first.refresh()
                let before = first.version
                origin.set("/app.js", "hello", ctype: "application/javascript")
                first.use(try manifest(origin, ["/app.js"]))
                await first.refresh()

                let requests = origin.requests("/app.js")
                let restarted = makeProvider(try manifest(origin, ["/app.js"]), fetcher: fetcher, directory: directory)
                #expect(await restarted.restore())
                #expect(origin.requests("/app.js") == requests, "nothing is fetched to restore")
                #expect(restarted.version == first.version)
                #expect(restarted.check(version: nil) == first.check(version: nil))
                #expect(restarted.check(version: before).data.removed == [origin.url("/old.css")])
                #expect(String(buffer: restarted.blob(helloSHA256).body) == "hello")

                // A body changed on disk is not published again.
                try Data("tampered".utf8).write(to: URL(fileURLWithPath: directory + "/resources/blobs/" + helloSHA256))
                let tampered = makeProvider(try manifest(origin, ["/app.js"]), fetcher: fetcher, directory: directory)
                #expect(await tampered.restore())
                #expect(tampered.check(version: nil).data.resourcemap == [:])
                #expect(tampered.blob(helloSHA256).status == .notFound)
            }
        }
    }
}

@Suite struct ResourceRefreshWidthTests {
    @Test func aRefreshOfMoreResourcesThanItsWidthFetchesEveryOneOnce() async throws {
        try await withOrigin { origin in
            let paths = (0..<20).map { "/r\($0).js" }
            for path in paths { origin.set(path, "body of \(path)", ctype: "application/javascript") }
            try await withFetcher { fetcher in
                var settings = ResourceSettings(manifest: try manifest(origin, paths), directory: temporaryDirectory())
                settings.concurrency = 3
                let provider = ResourceProvider(settings: settings, fetcher: fetcher, logger: quietLogger(), metricsFactory: TestMetrics())
                #expect(await provider.refresh() == .ok)
                #expect(provider.status().entries == 20)
                #expect(paths.allSatisfy { origin.requests($0) == 1 })
            }
        }
    }
}

@Suite struct PageDiscoveryTests {
    @Test func aDiscoverPageAddsItsSameHostReferencesAndNeverAnotherHost() async throws {
        try await withOrigin { origin in
            let page = origin.url("/shop/home")
            origin.set(
                "/shop/home",
                """
                <!DOCTYPE html><html><head>
                <link rel="stylesheet" href="/shop/site.css">
                <SCRIPT src="app.js?v=1&amp;x=2"></SCRIPT>
                <script src="http://localhost:\(origin.port)/cdn.js"></script>
                <!-- <script src="/shop/old.js"></script> -->
                </head><body><img srcset="logo.png 1x, logo@2x.png 2x"></body></html>
                """, ctype: "text/html")
            origin.set("/shop/site.css", "body{}", ctype: "text/css")
            origin.set("/shop/app.js", "hello", ctype: "application/javascript")
            origin.set("/shop/logo.png", "png1", ctype: "image/png")
            origin.set("/shop/logo@2x.png", "png2", ctype: "image/png")
            origin.set("/cdn.js", "cdn", ctype: "application/javascript")
            origin.set("/shop/old.js", "old", ctype: "application/javascript")
            origin.set("/listed.js", "listed", ctype: "application/javascript")
            // Both hosts are allowed: the cross-host reference is dropped because it is not the page's host.
            let json = """
                {"allowHosts": ["127.0.0.1:\(origin.port)", "localhost:\(origin.port)"],
                 "pages": {"\(page)": {"resources": ["\(origin.url("/listed.js"))"], "discover": true}}}
                """
            let manifest = try ResourceManifest.decode(Data(json.utf8))
            #expect(manifest.discoverPages == [page])
            try await withFetcher { fetcher in
                let provider = makeProvider(manifest, fetcher: fetcher)
                #expect(await provider.refresh() == .ok)
                let expected = ["/listed.js", "/shop/site.css", "/shop/app.js?v=1&x=2", "/shop/logo.png", "/shop/logo@2x.png"].map(
                    origin.url)
                let map = try #require(provider.check(version: nil).data.resourcemap)
                #expect(map.keys.sorted() == expected.sorted())
                #expect(map[origin.url("/shop/app.js?v=1&x=2")]?.sha256 == helloSHA256)
                #expect(origin.requests("/cdn.js") == 0)
                #expect(origin.requests("/shop/old.js") == 0)
                // The page itself is not published, and its fetch carried no credentials.
                #expect(map[page] == nil)
                for headers in origin.seenHeaders { #expect(headers["cookie"] == nil && headers["authorization"] == nil) }
                // The page fails: the resources it named last time stay, and the failure is reported by the page.
                origin.state.files.withLock { _ = $0.removeValue(forKey: "/shop/home") }
                let version = provider.version
                #expect(await provider.refresh() == .partial)
                #expect(provider.version == version)
                let failure = try #require(provider.status().failures[page])
                #expect(failure.reason == "page-status-404")
                #expect(failure.previousKept)
            }
        }
    }

    @Test func aDiscoverPageOffTheAllowListIsRefused() throws {
        let error = #expect(throws: ManifestError.self) {
            try ResourceManifest.decode(
                Data(#"{"allowHosts": ["static.example"], "pages": {"https://m.example/home": {"discover": true}}}"#.utf8))
        }
        #expect(error?.problems.count == 1)
        #expect(error?.problems.first?.hasPrefix("pages[\"https://m.example/home\"].discover:") == true)
    }
}
