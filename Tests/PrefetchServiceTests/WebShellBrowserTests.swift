import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchService
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The web shell in a real browser: headless Chromium, driven by `scripts/webshell-browser.py`, loads the demo
/// page from the running service against an upstream that answers after 300 ms.
///
/// The service runs in this process (the very app `prefetch serve` runs) so its config can name the demo page's
/// real URL once the port is known. It needs chromium and python3's websocket-client, which
/// `scripts/ensure-deps.sh test` (run by `scripts/test.sh`) installs; without them it fails, it is never skipped.
@Suite(.serialized)
struct WebShellBrowserTests {
    @Test func prefetchedDataIsReadySoonerInARealBrowser() async throws {
        try await WebShellBrowser.withService { base, _, data, _ in
            let result = try await WebShellBrowser.harness(["compare", "--base", base, "--api", data, "--runs", "5"])
            let runs = try #require(result["runs"] as? [[String: Any]])
            func sources(_ mode: String) -> [String] {
                runs.filter { $0["mode"] as? String == mode }.flatMap {
                    ($0["results"] as? [[String: Any]] ?? []).map { $0["source"] as? String ?? "?" }
                }
            }
            // Without a prefetch the service has nothing for the page (`not-triggered`), so the page's own request is
            // made (through the upstream's CORS) and succeeds.
            #expect(!sources("plain").isEmpty && sources("plain").allSatisfy { $0 == "miss" })
            let plainResults = runs.filter { $0["mode"] as? String == "plain" }.flatMap { $0["results"] as? [[String: Any]] ?? [] }
            #expect(plainResults.allSatisfy { $0["reason"] as? String == "not-triggered" && $0["status"] as? Int == 200 })
            #expect(!sources("prefetch").isEmpty && sources("prefetch").allSatisfy { $0 == "hit" || $0 == "joined" })
            // With prefetch the page read through the read key the shell injected (never a URL); without, with its
            // own credentials.
            let prefetchResults = runs.filter { $0["mode"] as? String == "prefetch" }.flatMap { $0["results"] as? [[String: Any]] ?? [] }
            #expect(prefetchResults.allSatisfy { $0["via"] as? String == "read-key" })
            #expect(plainResults.allSatisfy { $0["via"] as? String == "credentials" })
            #expect(runs.allSatisfy { !(($0["url"] as? String) ?? "").contains("prefetch") }, "the page URL carries no ticket or key")

            let median = try #require(result["medianDataReadyMs"] as? [String: Double])
            let prefetched = try #require(median["prefetch"])
            let plain = try #require(median["plain"])
            print("browser: data ready at \(prefetched) ms with prefetch, \(plain) ms without (medians); saving \(plain - prefetched) ms")
            #expect(prefetched < plain)
        }
    }

    /// A page whose second request needs a value from its first: without prefetch the page waits for one answer
    /// and then the other; with it both were fetched from the tap, the second as soon as the first was in, and the
    /// page reads both as hits.
    @Test func aDependentRequestIsPrefetchedAndReadySoonerInARealBrowser() async throws {
        try await WebShellBrowser.withService(dependent: true) { base, _, user, _ in
            let orders = user.components(separatedBy: "/demo/user")[0] + "/demo/orders?delay=300"
            let then = "demo.orders|\(orders)|\(orders)&uid={}|/data/uid"
            let result = try await WebShellBrowser.harness(["compare", "--base", base, "--api", user, "--then", then, "--runs", "5"])
            let runs = try #require(result["runs"] as? [[String: Any]])
            let prefetchResults = runs.filter { $0["mode"] as? String == "prefetch" }.flatMap { $0["results"] as? [[String: Any]] ?? [] }
            let plainResults = runs.filter { $0["mode"] as? String == "plain" }.flatMap { $0["results"] as? [[String: Any]] ?? [] }
            #expect(prefetchResults.count == 10 && prefetchResults.allSatisfy { ["hit", "joined"].contains($0["source"] as? String) })
            #expect(plainResults.allSatisfy { $0["source"] as? String == "miss" && $0["status"] as? Int == 200 })
            let median = try #require(result["medianDataReadyMs"] as? [String: Double])
            let prefetched = try #require(median["prefetch"])
            let plain = try #require(median["plain"])
            print("browser, dependent: data ready at \(prefetched) ms with prefetch, \(plain) ms without (medians)")
            #expect(prefetched < plain)
        }
    }

    @Test func theDebugViewShowsARealPageOpen() async throws {
        try await WebShellBrowser.withService { base, admin, data, broken in
            let result = try await WebShellBrowser.harness(["ui", "--base", base, "--admin", admin, "--api", data, "--api", broken])
            let ticket = try #require(result["ticket"] as? String)
            let domPath = try #require(result["dom"] as? String)
            let dom = try String(contentsOfFile: domPath, encoding: .utf8)
            #expect(dom.contains("ticket " + ticket.prefix(8)))
            #expect(!dom.contains(ticket))
            #expect(dom.contains("demo.data") && dom.contains("demo.broken"))
            // The page read demo.data from the prefetch, and missed demo.broken because its fetch failed.
            #expect(dom.contains("upstream-5xx"))
            #expect(dom.contains(">hit @") || dom.contains(">joined @"))
            let screenshot = try #require(result["screenshot"] as? String)
            let size = (try FileManager.default.attributesOfItem(atPath: screenshot)[.size] as? NSNumber)?.intValue ?? 0
            #expect(size > 10_000)
        }
    }
}

extension WebShellBrowserTests {
    /// The same-site deployment in a real browser: the shell triggers with the user's cookie and injects no key; the
    /// page reads both interfaces with `page=` and the cookie the browser holds. The waterfall marks both read, and
    /// every view of the session agrees: the debug opens' reads, the per-version data and waste counters, and the
    /// store's counters in `/metrics` and in `/v1/debug/status`.
    @Test func aSameSitePageOpenIsReadInTheWaterfallAndEveryCounterAgrees() async throws {
        try await WebShellBrowser.withService(sameSite: true) { base, admin, data, more in
            let result = try await WebShellBrowser.harness([
                "ui", "--same-site", "--base", base, "--admin", admin, "--api", data, "--api", more,
            ])
            let marks = try #require(result["marks"] as? [String: Any])
            let results = try #require(marks["results"] as? [[String: Any]])
            #expect(results.count == 2 && results.allSatisfy { $0["via"] as? String == "credentials" }, "\(results)")
            #expect(results.allSatisfy { ["hit", "joined"].contains($0["source"] as? String ?? "") }, "\(results)")

            // The waterfall (the /ui DOM) marks both interfaces read.
            let dom = try String(contentsOfFile: try #require(result["dom"] as? String), encoding: .utf8)
            let readMarks = dom.components(separatedBy: ">hit @").count + dom.components(separatedBy: ">joined @").count - 2
            #expect(readMarks == 2, "read marks in the waterfall: \(readMarks)")

            let adminPort = try #require(Int(admin.split(separator: ":").last ?? ""))
            let opens = try #require(try await oneRequest(port: adminPort, .get, "/v1/debug/opens").json["opens"] as? [[String: Any]])
            #expect(opens.count == 1)
            let requests = try #require(opens.first?["requests"] as? [[String: Any]])
            let reads = requests.flatMap { $0["reads"] as? [[String: Any]] ?? [] }
            #expect(requests.count == 2 && requests.allSatisfy { ($0["reads"] as? [[String: Any]])?.count == 1 }, "\(requests)")
            func served(_ kind: String) -> Double { Double(reads.filter { $0["served"] as? String == kind }.count) }

            // A second page open takes the registry's only place: the first ticket leaves, and its unread requests (none)
            // count as waste.
            let next = try await oneRequest(
                port: try #require(Int(base.split(separator: ":").last ?? "")), .post, "/v1/prefetch",
                body: #"{"url": "\#(base)/demo/page.html?run=2"}"#)
            #expect(next.status == 202, "\(next.text)")

            let metrics = try await oneRequest(port: adminPort, .get, "/metrics").text
            func metric(_ name: String, _ labels: String) -> Double { metricValue(metrics, name, labels: labels) ?? -1 }
            #expect(metric("prefetch_config_data_total", #"config="active",result="hit""#) == served("hit"), "\(metrics)")
            #expect(metric("prefetch_config_data_total", #"config="active",result="joined""#) == served("joined"))
            #expect(metric("prefetch_config_data_total", #"config="active",result="miss""#) == 0)
            #expect(metric("prefetch_config_unread_total", #"config="active""#) == 0, "both reads count, so nothing was wasted")
            // Every series of `name` whose labels contain `labels`, summed (one per interface).
            func total(_ name: String, _ labels: String) -> Double {
                metrics.split(separator: "\n").filter { $0.hasPrefix(name + "{") && $0.contains(labels) }
                    .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
            }
            #expect(total("prefetch_data_total", #"result="hit""#) == served("hit"))
            #expect(total("prefetch_data_total", #"result="joined""#) == served("joined"))
            let leaders = Double(requests.filter { $0["flight"] as? String == "leader" }.count)
            #expect(leaders == 2 && total("prefetch_flights_total", #"role="leader""#) == leaders + 2, "two page opens, each fetching both")
            // The status and the store's counters, read one after the other, agree (a read counted between the two
            // reads of them is waited out).
            var store: [String: Any] = [:]
            var storeMetrics = metrics
            let agreed = await eventually(within: 5) {
                guard let status = try? await oneRequest(port: adminPort, .get, "/v1/debug/status").json,
                    let current = status["store"] as? [String: Any],
                    let scraped = try? await oneRequest(port: adminPort, .get, "/metrics").text
                else { return false }
                (store, storeMetrics) = (current, scraped)
                // Every series of `name` (one per interface), summed; none is 0.
                func summed(_ name: String) -> Double {
                    scraped.split(separator: "\n").filter { $0.hasPrefix(name + "{") || $0.hasPrefix(name + " ") }
                        .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
                }
                return Double(current["hits"] as? Int ?? -1) == summed("prefetch_store_hits_total")
                    && Double(current["joins"] as? Int ?? -1) == summed("prefetch_store_joins_total")
            }
            #expect(agreed, "the status's store counts and /metrics disagree: \(store) against \(storeMetrics)")
            #expect(Double((store["hits"] as? Int ?? 0) + (store["joins"] as? Int ?? 0)) == served("hit") + served("joined"))
        }
    }
}

enum WebShellBrowser {
    static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()

    /// Runs the service (config: the demo page with a 300 ms interface and a failing one) and an upstream; calls
    /// `body` with the page and operator surfaces' base URLs and the two interface URLs; stops both.
    /// With `dependent`, the page's interfaces are `demo.user` (a JSON answer in 300 ms) and `demo.orders`, which
    /// needs its `/data/uid` (another 300 ms); `body` gets demo.user's URL in the place of the data interface's.
    /// With `sameSite`, the second interface is `demo.more` (an answer in 100 ms) in the place of the failing one, and
    /// the service holds one ticket (a second page open makes the first leave, and count its waste).
    static func withService(
        dependent: Bool = false, sameSite: Bool = false, _ body: @Sendable @escaping (String, String, String, String) async throws -> Void
    ) async throws {
        let upstream = try await TestUpstream.start()
        let userJSON = #"{"data":{"uid":"u-42 7"}}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let data =
            dependent
            ? "http://127.0.0.1:\(upstream.port)/demo/user?delay=300&contentType=application%2Fjson&body=\(userJSON)"
            : "http://127.0.0.1:\(upstream.port)/demo/data?delay=300"
        let broken =
            sameSite ? "http://127.0.0.1:\(upstream.port)/demo/more?delay=100" : "http://127.0.0.1:\(upstream.port)/demo/broken?status=503"
        let orders = "http://127.0.0.1:\(upstream.port)/demo/orders?delay=300"
        let holder = ConfigHolder(nil)
        var settings = ServiceSettings()
        settings.listeners.port = 0
        settings.listeners.adminPort = 0
        settings.listeners.demo = true
        settings.configPath = "webshell-browser-test"
        if sameSite { settings.engine.ticketCapacity = 1 }
        let adminPort = PortBox()
        do {
            let app = try buildApplication(
                settings: settings, config: holder, logger: Logger(label: "webshell"),
                onServerRunning: { port in
                    let interfaces =
                        dependent
                        ? [
                            TestInterface(name: "demo.user", api: data, urlParam: true, params: ["run"]),
                            TestInterface(
                                name: "demo.orders", api: orders, urlParam: true, params: ["run"], query: ["uid": "${demo.user:/data/uid}"]),
                        ]
                        : [
                            TestInterface(name: "demo.data", api: data, urlParam: true, params: ["run"]),
                            TestInterface(name: sameSite ? "demo.more" : "demo.broken", api: broken),
                        ]
                    let config = TestConfig(
                        name: "webshell-demo", version: "1", [TestPage("http://127.0.0.1:\(port)/demo/page.html", interfaces)])
                    holder.replace(try? config.loaded())
                },
                onAdminRunning: { adminPort.set($0) })
            try await app.test(.live) { client in
                let port = try #require(client.port)
                let admin = try #require(await adminPort.value())
                try await body("http://127.0.0.1:\(port)", "http://127.0.0.1:\(admin)", data, broken)
            }
        } catch {
            try? await upstream.shutdown()
            throw error
        }
        try await upstream.shutdown()
    }

    /// Runs the browser harness (bounded to 3 minutes) and returns its result, the last line it prints.
    static func harness(_ arguments: [String]) async throws -> [String: Any] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webshell-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outURL = directory.appendingPathComponent("stdout")
        let errURL = directory.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        // The shell side injects the read key with the shell SDK's own document-start script (Clients/PrefetchShell's
        // prefetch-shell-script, which scripts/test.sh builds first and names here).
        guard let script = ProcessInfo.processInfo.environment["PREFETCH_SHELL_SCRIPT_BIN"], !script.isEmpty else {
            throw HarnessFailure(
                message:
                    "PREFETCH_SHELL_SCRIPT_BIN is not set: scripts/test.sh builds Clients/PrefetchShell's prefetch-shell-script and sets it"
            )
        }
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["python3", root + "/scripts/webshell-browser.py"] + arguments + [
                "--read-key-script", script, "--out", root + "/.build/test-output",
            ]
        process.currentDirectoryURL = URL(fileURLWithPath: root)
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        try launch(process)
        let deadline = ContinuousClock.now + .seconds(180)
        while process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        if process.isRunning {
            process.terminate()  // the harness stops chromium on SIGTERM
            let killAt = ContinuousClock.now + .seconds(20)
            while process.isRunning && ContinuousClock.now < killAt { try? await Task.sleep(for: .milliseconds(50)) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            Issue.record("the browser harness did not finish within 3 minutes")
        }
        let output = (try? String(contentsOf: outURL, encoding: .utf8)) ?? ""
        let errors = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
        print(output.split(separator: "\n").dropLast().joined(separator: "\n"))
        guard process.terminationStatus == 0, let last = output.split(separator: "\n").last,
            let result = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
        else {
            throw HarnessFailure(
                message: "webshell-browser.py \(arguments.first ?? "") exited \(process.terminationStatus): \(errors.suffix(2000))")
        }
        return result
    }

    struct HarnessFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
