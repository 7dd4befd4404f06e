import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

#if canImport(Glibc)
import Glibc
#endif

/// The `prefetch` executable as an operator runs it: `serve` (signals, graceful shutdown), `fetch` and `plan`.
@Suite("prefetch commands", .timeLimit(.minutes(1)))
struct CommandTests {
    /// A `prefetch serve` process at log level info (see ``ServeProcess``).
    typealias Server = ServeProcess

    @Test(arguments: [SIGTERM, SIGINT])
    func serveFinishesInFlightFetchesOnShutdownSignal(signal: Int32) async throws {
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/drain"
            let config = try TempConfig(
                TestConfig([
                    TestPage(page, [TestInterface(name: "slow", api: "\(upstream.base)/drain/slow?delay=1000", timeout: 30000)])
                ])
            )
            defer { config.remove() }
            let server = try await Server.start(configPath: config.path, untilReady: true)
            do {
                let ready = try await oneRequest(port: server.port, .get, "/readyz")
                #expect(ready.status == 200)
                let trigger = try await oneRequest(port: server.port, .post, "/v1/prefetch", body: #"{"url": "\#(page)"}"#)
                #expect(trigger.status == 202, "\(trigger.text)")
                server.child.signal(signal)

                let status = await server.child.exitStatus(within: 15)
                let log = server.child.stderr
                #expect(status == 0, "exit status; log:\n\(log)")
                // The page open's one line: its one request settled with an answer.
                let completed = log.split(separator: "\n").filter { $0.contains("page open settled") }
                #expect(completed.count == 1, "log:\n\(log)")
                #expect(completed.first?.contains("requests=1") == true && completed.first?.contains("failed=0") == true, "log:\n\(log)")
                #expect(!log.contains("fetch failed"), "log:\n\(log)")
                #expect(upstream.hits(path: "/drain/slow") == 1)
            } catch {
                await server.child.stop()
                throw error
            }
            await server.child.stop()
        }
    }

    /// A results view waiting on the event loop when the signal comes is answered, with the result it waited for,
    /// before the process exits.
    @Test func aWaitingResultsViewIsAnsweredBeforeShutdown() async throws {
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/drain-view"
            let config = try TempConfig(
                TestConfig([
                    TestPage(
                        page, [TestInterface(name: "slow", api: "\(upstream.base)/drain/view?delay=5000", timeout: 30000)])
                ])
            )
            defer { config.remove() }
            let server = try await Server.start(configPath: config.path, untilReady: true)
            do {
                let trigger = try await oneRequest(port: server.port, .post, "/v1/prefetch", body: #"{"url": "\#(page)"}"#)
                let ticket = try trigger.decoded(TriggerAnswer.self).ticket
                async let view = oneRequest(port: server.port, .get, "/v1/prefetch/\(ticket)?wait=10000")
                // The view is waiting (the store counts its reader) before the signal is sent.
                let waiting = await eventually {
                    let metrics = (try? await server.admin(.get, "/metrics").text) ?? ""
                    return metrics.contains("prefetch_store_waiting_readers 1")
                }
                #expect(waiting)
                server.child.signal(SIGTERM)
                let answer = try await view
                #expect(answer.status == 200, "\(answer.text)")
                #expect(answer.text.contains(#""state":"ready""#), "\(answer.text)")
                #expect(await server.child.exitStatus(within: 15) == 0, "log:\n\(server.child.stderr)")
            } catch {
                await server.child.stop()
                throw error
            }
            await server.child.stop()
        }
    }

    @Test func serveRefusesAnInvalidConfigWithExitCode2() async throws {
        // Raw text: the config is invalid on purpose (an ftp:// api), written as the file serve must refuse.
        let config = try TempConfig(
            #"{"code": 200, "data": {"name": "x", "version": "1", "config": [{"url": "https://m.example.test/p", "interfaces": [{"api": "ftp://x", "method": "GET"}]}]}}"#
        )
        defer { config.remove() }
        let run = try await runExecutable("prefetch", ["serve", "--config", config.path, "--port", "0"])
        #expect(run.status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("invalid config"), "\(run.stderr)")
        #expect(run.stderr.contains("data.config[0].interfaces[0].api"), "\(run.stderr)")
        #expect(!run.stdout.contains("listening"))
    }

    @Test func fetchPrintsOneLinePerInterfaceAndASummary() async throws {
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/cli"
            let config = try TempConfig(
                TestConfig([
                    TestPage(
                        page,
                        [
                            TestInterface(name: "one", api: "\(upstream.base)/cli/one", urlParam: true),
                            TestInterface(name: "two", api: "\(upstream.base)/cli/two?bytes=7", method: .POST, body: ["a": 1]),
                        ])
                ])
            )
            defer { config.remove() }
            let run = try await runExecutable("prefetch", ["fetch", "--config", config.path, page + "?id=5"])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let lines = run.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 3, "\(run.stdout)")
            let one = lines.first { $0.hasPrefix("one  ") }
            #expect(one?.contains("GET \(upstream.base)/cli/one?id=5  200  ") == true, "\(run.stdout)")
            let two = lines.first { $0.hasPrefix("two  ") }
            #expect(two?.contains("POST \(upstream.base)/cli/two?bytes=7  200  7 bytes") == true, "\(run.stdout)")
            #expect(lines.last?.hasPrefix("2 requests, 2 answered, 0 failed, ") == true, "\(run.stdout)")
            #expect(upstream.hits(path: "/cli/one") == 1)
            #expect(upstream.hits(path: "/cli/two") == 1)
        }
    }

    /// `prefetch fetch` runs a page's dependent requests as the service does: each once what it needs is in, with
    /// the values it takes (never the `${...}` text as written); one whose need failed is reported, not sent.
    @Test func fetchSendsDependentRequestsWithTheValuesTheyNeed() async throws {
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/cli-dependent"
            let config = try TempConfig(
                TestConfig([
                    TestPage(
                        page,
                        [
                            TestInterface(name: "user", api: "\(upstream.base)/cli/user?mirror=1"),
                            TestInterface(name: "orders", api: "\(upstream.base)/cli/orders?mirror=1", query: ["uid": "${user:/uid}"]),
                            TestInterface(name: "broken", api: "\(upstream.base)/cli/broken?status=500"),
                            TestInterface(name: "after", api: "\(upstream.base)/cli/after", query: ["v": "${broken:/x}"]),
                        ])
                ])
            )
            defer { config.remove() }
            let run = try await runExecutable("prefetch", ["fetch", "--config", config.path, "--header", "Cookie: sid=cli", page])
            #expect(run.status == 1, "one request was not sent: \(run.stdout)\n\(run.stderr)")
            let lines = run.stdout.split(separator: "\n").map(String.init)
            let orders = lines.first { $0.hasPrefix("orders  ") }
            #expect(orders?.contains("/cli/orders?mirror=1&uid=uid-of%5Bsid%3Dcli%5D  200") == true, "\(run.stdout)")
            let after = lines.first { $0.hasPrefix("after  ") }
            #expect(after?.contains("failed dependency-failed") == true, "\(run.stdout)")
            #expect(lines.last?.hasPrefix("4 requests, 3 answered, 1 failed, ") == true, "\(run.stdout)")
            #expect(upstream.hits(path: "/cli/orders") == 1)
            #expect(upstream.hits(path: "/cli/after") == 0, "nothing is sent without what it needs")
        }
    }

    @Test func fetchExitsOneWhenAnInterfaceFails() async throws {
        // A port that was just closed: connections to it are refused.
        let closed = try await TestUpstream.start()
        let closedPort = closed.port
        try await closed.shutdown()
        try await withUpstream { upstream in
            let page = "\(upstream.base)/pages/cli-fail"
            let config = try TempConfig(
                TestConfig([
                    TestPage(
                        page,
                        [
                            TestInterface(name: "fine", api: "\(upstream.base)/cli/fine"),
                            TestInterface(name: "dead", api: "http://127.0.0.1:\(closedPort)/cli/dead", timeout: 2000),
                        ])
                ])
            )
            defer { config.remove() }
            let run = try await runExecutable("prefetch", ["fetch", "--config", config.path, page])
            #expect(run.status == 1, "\(run.stdout)\n\(run.stderr)")
            let lines = run.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 3, "\(run.stdout)")
            #expect(lines.first { $0.hasPrefix("fine  ") }?.contains("  200  ") == true, "\(run.stdout)")
            #expect(lines.first { $0.hasPrefix("dead  ") }?.contains("  failed connect  ") == true, "\(run.stdout)")
            #expect(lines.last?.hasPrefix("2 requests, 1 answered, 1 failed, ") == true, "\(run.stdout)")
        }
    }

    @Test func planEndpointEqualsThePlanCommand() async throws {
        let page = "https://m.example.test/help/new"
        let config = TestConfig([
            TestPage(
                page,
                [
                    TestInterface(api: "https://m.example.test/xx.json", urlParam: true),
                    TestInterface(
                        api: "https://api.example.test/topic/v1/ding/sinkList.json", method: .POST, urlParam: true, bodyParam: true,
                        body: ["cityId": 123456, "visitRecord": [:]], headers: ["X-Client": "h5"]),
                    TestInterface(api: "https://m.example.test/form", method: .PUT, bodyParam: true, params: ["id"], bodyType: .form),
                ]),
            TestPage(
                "https://m.example.test/item/{id}.html",
                [TestInterface(api: "https://m.example.test/item.json", urlParam: true)]),
        ])
        let file = try TempConfig(config)
        defer { file.remove() }
        try await withService(config: config) { service in
            for url in [page + "?id=163&itemId=126&q=%E4%B8%AD+x", page, "https://m.example.test/item/77.html?from=feed"] {
                let http = try await service.admin(.get, "/v1/plan?url=\(q(url))")
                #expect(http.status == 200, "\(http.text)")
                let cli = try await runExecutable("prefetch", ["plan", "--json", "--config", file.path, url])
                #expect(cli.status == 0, "\(cli.stderr)")
                #expect(http.text == cli.stdout.trimmingCharacters(in: .newlines), "\(url)")
                #expect(!http.text.isEmpty)
            }
            let missing = try await service.admin(.get, "/v1/plan?url=\(q("https://m.example.test/none"))")
            #expect(missing.status == 404)
            #expect(missing.errorCode == "no-config")
            let cli = try await runExecutable("prefetch", ["plan", "--json", "--config", file.path, "https://m.example.test/none"])
            #expect(cli.status == 3)
        }
    }
}
