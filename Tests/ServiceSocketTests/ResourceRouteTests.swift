import ArgumentParser
import Foundation
import HTTPTypes
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import ResourceProvider
import ServiceTestSupport
import Testing

@testable import prefetch

/// The offline-package provider's routes in the application `prefetch serve` runs: the check and the blobs on the
/// page surface, fed by the refresher service from a real upstream on 127.0.0.1; and `serve --resources` parsing.
@Suite struct ResourceRouteTests {
    static let helloSHA256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

    static func config(_ upstream: TestUpstream) -> TestConfig {
        TestConfig([TestPage("\(upstream.base)/pages/route", [upstream.interface("a", "/route/a")])])
    }

    static func settings(_ upstream: TestUpstream) throws -> ServiceSettings {
        var settings = testSettings()
        let manifest = try ResourceManifest(
            allowHosts: ["127.0.0.1:\(upstream.port)"],
            resources: ["\(upstream.base)/app.js?body=hello&contentType=application/javascript"])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("resource-routes-\(UUID().uuidString)").path
        settings.resources = ResourceSettings(manifest: manifest, directory: directory)
        return settings
    }

    @Test func theCheckAndTheBlobsAreServedOnThePageSurface() async throws {
        try await withUpstream { upstream in
            try await withPageSurface(config: Self.config(upstream), settings: try Self.settings(upstream)) { service in
                var check = try await service.get("/v1/resources")
                #expect(
                    await eventually {
                        check = (try? await service.get("/v1/resources")) ?? check
                        return (check.json["data"] as? [String: Any])?["version"] as? String != "0"
                    })
                #expect(check.status == 200)
                #expect(check.header("Content-Type") == "application/json")
                #expect(check.json["code"] as? Int == 200)
                let data = try #require(check.json["data"] as? [String: Any])
                let version = try #require(data["version"] as? String)
                let map = try #require(data["resourcemap"] as? [String: [String: Any]])
                let entry = try #require(map["\(upstream.base)/app.js?body=hello&contentType=application/javascript"])
                #expect(entry["sha256"] as? String == Self.helloSHA256)
                #expect(entry["md5"] as? String == "5d41402abc4b2a76b9719d911017c592")
                #expect(entry["ctype"] as? String == "application/javascript")
                let download = try #require(entry["download"] as? String)
                #expect(download == "/v1/resources/blob/\(Self.helloSHA256)")

                // Page input adds nothing: a check naming another URL answers the manifest's map, nothing more.
                let named = try await service.get(
                    "/v1/resources?version=1&url=\(upstream.base)/other.js&resource=\(upstream.base)/other.js")
                let namedMap = (named.json["data"] as? [String: Any])?["resourcemap"] as? [String: Any]
                #expect(namedMap?.keys.sorted() == map.keys.sorted())
                #expect(upstream.hits(path: "/other.js") == 0)

                let current = try await service.get("/v1/resources?version=\(version)")
                #expect((current.json["data"] as? [String: Any])?["update"] as? Bool == false)
                #expect((current.json["data"] as? [String: Any])?["resourcemap"] == nil)

                let blob = try await service.get(download)
                #expect(blob.status == 200)
                #expect(blob.text == "hello")
                #expect(blob.header("ETag") == "\"\(Self.helloSHA256)\"")
                #expect(blob.header("Cache-Control") == "public, max-age=31536000, immutable")
                #expect(blob.header("Content-Type") == "application/javascript")
                #expect(try await service.get(download, headers: ["If-None-Match": "\"\(Self.helloSHA256)\""]).status == 304)
                let part = try await service.get(download, headers: ["Range": "bytes=0-1"])
                #expect(part.status == 206)
                #expect(part.text == "he")
                #expect(try await service.get(download, headers: ["Range": "bytes=5-"]).status == 416)
                let bad = try await service.get("/v1/resources/blob/NOT-A-HASH")
                #expect(bad.status == 400)
                #expect(bad.errorCode == "bad-hash")
                #expect(try await service.get("/v1/resources/blob/\(String(repeating: "a", count: 64))").status == 404)
            }
        }
    }

    /// `HEAD` of a blob is the whole blob's head whatever `Range` says (RFC 9110 14.2: only a `GET` is ranged), with
    /// no byte of it, and is not counted as a read.
    @Test func aHeadOfABlobIgnoresRangeAndIsNotCountedAsARead() async throws {
        try await withUpstream { upstream in
            try await withService(config: Self.config(upstream), settings: try Self.settings(upstream)) { service in
                let download = "/v1/resources/blob/\(Self.helloSHA256)"
                #expect(await eventually { (try? await service.get(download))?.status == 200 }, "the blob is fetched")
                let reads = { () async throws -> Double in
                    metricValue(
                        try await service.admin(.get, "/metrics").text, "prefetch_resource_blob_reads_total", labels: #"outcome="hit""#)
                        ?? 0
                }
                let before = try await reads()
                let answer = try await rawExchange(
                    port: service.port,
                    "HEAD \(download) HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=0-1\r\nConnection: close\r\n\r\n")
                #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
                #expect(answer.contains("Content-Length: 5\r\n") && !answer.contains("Content-Range"), "\(answer)")
                #expect(answer.hasSuffix("\r\n\r\n"), "no body: \(answer)")
                #expect(try await reads() == before, "a HEAD is not a read")
                #expect(try await service.get(download, headers: ["Range": "bytes=0-1"]).status == 206, "a GET still is ranged")
            }
        }
    }

    @Test func withoutResourcesTheCheckAnswersTheEmptyMap() async throws {
        try await withUpstream { upstream in
            try await withPageSurface(config: Self.config(upstream)) { service in
                let check = try await service.get("/v1/resources")
                #expect(check.status == 200)
                #expect(check.json["code"] as? Int == 200)
                let data = try #require(check.json["data"] as? [String: Any])
                #expect(data["version"] as? String == "0")
                #expect((data["resourcemap"] as? [String: Any])?.isEmpty == true)
            }
        }
    }

    @Test func serveRefusesAManifestNamingAFileURLOrAHostOffItsList() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("resource-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("resources.json").path
        try Data(#"{"allowHosts": ["static.example"], "resources": ["file:///etc/passwd", "https://other.example/a.js"]}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        let key = String(repeating: "k", count: 32)
        #expect {
            try Prefetch.Serve.parse(["--config", "configs/prefetch.json", "--identity-key", key, "--resources", path])
                .settings(environment: Environment(variables: [:]))
        } throws: { error in
            let text = "\(error)"
            return text.contains("resources[0]: \"file:///etc/passwd\" is not an http(s) URL")
                && text.contains("resources[1]: \"https://other.example/a.js\": host other.example:443 is not in allowHosts")
        }
        let given = try Prefetch.Serve.parse(["--config", "configs/prefetch.json", "--identity-key", key, "--resources-refresh", "60"])
            .settings(environment: Environment(variables: ["PREFETCH_RESOURCES": "configs/resources.json"]))
        #expect(given.resources?.manifest?.urls.isEmpty == false)
        #expect(given.resources?.refreshInterval == .seconds(60))
        #expect(given.resources?.manifestPath == "configs/resources.json")
    }
    @Test func theStatusAndMetricsAreOnTheOperatorSurfaceOnly() async throws {
        try await withUpstream { upstream in
            var settings = try Self.settings(upstream)
            let missing = "\(upstream.base)/gone.js?status=404"
            settings.resources?.manifest = try ResourceManifest(
                allowHosts: ["127.0.0.1:\(upstream.port)"],
                resources: ["\(upstream.base)/app.js?body=hello&contentType=application/javascript", missing])
            try await withService(config: Self.config(upstream), settings: settings) { service in
                var status = try await service.admin(.get, "/v1/resources/status")
                let refreshed = await eventually {
                    status = (try? await service.admin(.get, "/v1/resources/status")) ?? status
                    return status.json["refreshes"] as? Int ?? 0 >= 1
                }
                #expect(refreshed, "\(status.text)")
                #expect(status.status == 200)
                #expect(status.json["configured"] as? Bool == true)
                #expect(status.json["entries"] as? Int == 1)
                #expect(status.json["bytes"] as? Int == 5)
                #expect(status.json["lastOutcome"] as? String == "partial")
                let failure = (status.json["failures"] as? [String: [String: Any]])?[missing]
                #expect(failure?["reason"] as? String == "status-404")
                let metrics = try await service.admin(.get, "/metrics").text
                #expect(metrics.contains(#"prefetch_resource_refreshes_total{outcome="partial"} 1"#))
                #expect(metrics.contains("prefetch_resource_bytes 5"))
                // Not on the page listener.
                #expect(try await service.get("/v1/resources/status").status == 404)
            }
        }
    }

    @Test func theExportCommandWritesTheMirrorOnlyWhenEveryResourceWasFetched() async throws {
        try await withUpstream { upstream in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("resource-export-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let manifest = directory + "/resources.json"
            func write(_ resources: [String]) throws {
                let list = resources.map { "\"\(upstream.base)\($0)\"" }.joined(separator: ",")
                try Data(#"{"allowHosts": ["127.0.0.1:\#(upstream.port)"], "resources": [\#(list)]}"#.utf8)
                    .write(to: URL(fileURLWithPath: manifest))
            }
            try write(["/app.js?body=hello&contentType=application/javascript"])
            let good = try ChildProcess("prefetch", ["resources", "export", directory + "/mirror", "--resources", manifest])
            #expect(await good.exitStatus(within: 30) == 0, "\(good.stderr)")
            let file = try Data(contentsOf: URL(fileURLWithPath: directory + "/mirror/resources.json"))
            let answer = try JSONDecoder().decode(ResourceCheckAnswer.self, from: file)
            #expect(answer.code == 200 && answer.data.update)
            #expect(answer.data.resourcemap?.values.map(\.download) == [Self.helloSHA256])
            let body = try String(contentsOfFile: directory + "/mirror/" + Self.helloSHA256, encoding: .utf8)
            #expect(body == "hello")
            await good.stop()

            try write(["/app.js?body=hello", "/gone.js?status=404"])
            let partial = try ChildProcess("prefetch", ["resources", "export", directory + "/partial", "--resources", manifest])
            #expect(await partial.exitStatus(within: 30) == 1)
            #expect(partial.stderr.contains("status-404"))
            #expect(!FileManager.default.fileExists(atPath: directory + "/partial/resources.json"))
            await partial.stop()

            try Data(#"{"allowHosts": ["127.0.0.1"], "resources": ["file:///etc/passwd"]}"#.utf8).write(to: URL(fileURLWithPath: manifest))
            let invalid = try ChildProcess("prefetch", ["resources", "export", directory + "/invalid", "--resources", manifest])
            #expect(await invalid.exitStatus(within: 30) == 2)
            #expect(invalid.stderr.contains("resources[0]: \"file:///etc/passwd\" is not an http(s) URL"))
            await invalid.stop()
        }
    }
}
