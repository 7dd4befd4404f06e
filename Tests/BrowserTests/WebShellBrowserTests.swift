import Foundation
import HTTPTypes
import Logging
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchService
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
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
    /// The demo page loaded with and without a prefetch: what each load saw (the data, where it came from) and the
    /// service's record of the prefetched loads' reads. How much sooner the data is ready is measured by
    /// `bench/browser.sh`, not here: a test asserts what happened, never how long it took.
    @Test func aPrefetchedPageReadsItsDataFromThePrefetchInARealBrowser() async throws {
        try await WebShellBrowser.withService { base, admin, data, _ in
            let result = try await WebShellBrowser.harness(["compare", "--base", base, "--api", data, "--runs", "2"])
            let runs = try #require(result["runs"] as? [[String: Any]])
            let plain = runs.filter { $0["mode"] as? String == "plain" }
            let prefetched = runs.filter { $0["mode"] as? String == "prefetch" }
            #expect(plain.count == 2 && prefetched.count == 2)
            #expect(runs.allSatisfy { !(($0["url"] as? String) ?? "").contains("prefetch") }, "the page URL carries no ticket or key")
            // Without a prefetch the service has nothing for the page (`not-triggered`), so the page's own request is
            // made with its own credentials (through the upstream's CORS) and its answer is the upstream's echo of
            // that request: the interface's URL as the config names it, without the page's `run`.
            for run in plain {
                let results = try #require(run["results"] as? [[String: Any]])
                #expect(results.count == 1, "\(results)")
                #expect(
                    results.allSatisfy {
                        $0["source"] as? String == "miss" && $0["reason"] as? String == "not-triggered" && $0["status"] as? Int == 200
                            && $0["via"] as? String == "credentials"
                    }, "\(results)")
                let shown = run["data"] as? String ?? ""
                #expect(shown.contains(#""path":"/demo/data""#) && shown.contains(#""query":"delay=300""#), "\(shown)")
            }
            // With a prefetch the page reads through the read key the shell injected (never a URL), from the store,
            // and its data is the answer fetched for this very open: the upstream saw the page's own `run`.
            for run in prefetched {
                let results = try #require(run["results"] as? [[String: Any]])
                #expect(results.count == 1, "\(results)")
                #expect(
                    results.allSatisfy {
                        ["hit", "joined"].contains($0["source"] as? String ?? "") && $0["status"] as? Int == 200
                            && $0["via"] as? String == "read-key"
                    }, "\(results)")
                let number = try #require(run["run"] as? Int)
                let shown = run["data"] as? String ?? ""
                #expect(shown.contains(#""path":"/demo/data""#) && shown.contains("run=\(number)"), "\(shown)")
            }

            // The service's side: one open per prefetched load (the warm-up's and the two measured; a plain load
            // triggers nothing), each with the page's one read of demo.data answered from that open's flight, after
            // the flight began and no sooner than it ended (a read never answered from anything else).
            let opens = try await Self.opens(admin: admin)
            #expect(opens.count == 3, "\(opens)")
            for open in opens {
                let requests = try #require(open["requests"] as? [[String: Any]])
                let request = try #require(requests.first { $0["name"] as? String == "demo.data" }, "\(requests)")
                let reads = try #require(request["reads"] as? [[String: Any]])
                #expect(reads.count == 1, "\(request)")
                let read = try #require(reads.first)
                #expect(["hit", "joined"].contains(read["served"] as? String ?? ""), "\(read)")
                let started = try #require(request["startMs"] as? Int)
                let ended = try #require(request["endMs"] as? Int, "\(request)")
                #expect(request["status"] as? Int == 200)
                #expect((read["askedMs"] as? Int ?? -1) >= started && (read["answeredMs"] as? Int ?? -1) >= ended, "\(request)")
            }
        }
    }

    /// The page opens the operator's debug view shows (`/v1/debug/opens`), newest first.
    static func opens(admin: String) async throws -> [[String: Any]] {
        let adminPort = try #require(Int(admin.split(separator: ":").last ?? ""))
        return try #require(try await oneRequest(port: adminPort, .get, "/v1/debug/opens?limit=50").json["opens"] as? [[String: Any]])
    }

    /// A page whose second request needs a value from its first: without prefetch the page asks for one and then
    /// the other; with it both were fetched from the tap, the second once the first was in (the waterfall), the
    /// page reads both from the store, and the second answer is the one made with the first's value.
    /// The time this saves is `bench/browser.sh`'s to measure.
    @Test func aDependentRequestIsPrefetchedAfterTheOneItNeedsInARealBrowser() async throws {
        try await WebShellBrowser.withService(dependent: true) { base, admin, user, _ in
            let orders = user.components(separatedBy: "/demo/user")[0] + "/demo/orders?delay=300"
            let then = "demo.orders|\(orders)|\(orders)&uid={}|/data/uid"
            let result = try await WebShellBrowser.harness(["compare", "--base", base, "--api", user, "--then", then, "--runs", "2"])
            let runs = try #require(result["runs"] as? [[String: Any]])
            let prefetchResults = runs.filter { $0["mode"] as? String == "prefetch" }.flatMap { $0["results"] as? [[String: Any]] ?? [] }
            let plainResults = runs.filter { $0["mode"] as? String == "plain" }.flatMap { $0["results"] as? [[String: Any]] ?? [] }
            #expect(prefetchResults.count == 4 && prefetchResults.allSatisfy { ["hit", "joined"].contains($0["source"] as? String) })
            #expect(plainResults.count == 4 && plainResults.allSatisfy { $0["source"] as? String == "miss" && $0["status"] as? Int == 200 })
            // Every load's second answer (the page shows one a line) is demo.orders' made with demo.user's uid.
            for run in runs {
                let lines = (run["data"] as? String ?? "").split(separator: "\n")
                #expect(lines.count == 2 && lines[1].contains(#""path":"/demo/orders""#) && lines[1].contains("uid=u-42"), "\(lines)")
            }

            // The waterfall the service recorded for each prefetched open: demo.orders needs demo.user, its fetch
            // began no sooner than demo.user's ended, and the page read demo.orders once it had read demo.user.
            let opens = try await Self.opens(admin: admin)
            #expect(opens.count == 3, "\(opens)")
            for open in opens {
                let requests = try #require(open["requests"] as? [[String: Any]])
                let first = try #require(requests.first { $0["name"] as? String == "demo.user" }, "\(requests)")
                let second = try #require(requests.first { $0["name"] as? String == "demo.orders" }, "\(requests)")
                #expect(second["needs"] as? [String] == ["demo.user"], "\(second)")
                let firstEnded = try #require(first["endMs"] as? Int, "\(first)")
                #expect((second["startMs"] as? Int ?? -1) >= firstEnded, "\(requests)")
                let firstReads = try #require(first["reads"] as? [[String: Any]])
                let secondReads = try #require(second["reads"] as? [[String: Any]])
                #expect(firstReads.count == 1 && secondReads.count == 1, "\(requests)")
                #expect(
                    (secondReads.first?["askedMs"] as? Int ?? -1) >= (firstReads.first?["answeredMs"] as? Int ?? Int.max), "\(requests)")
            }
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

extension WebShellBrowser {
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
        let (pagePort, adminPort) = (PortBox(), PortBox())
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
                    pagePort.set(port)
                },
                onAdminRunning: { adminPort.set($0) })
            try await withLiveApplication(app, port: pagePort) { client in
                let port = client.port
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
