import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import RendererPool
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The page client, the demo pages, the debug view and its JSON endpoints, over HTTP.
@Suite struct WebShellTests {
    static let page = "https://m.example.test/page"

    /// Runs the app with a page whose `info` interface answers after `delayMs` and whose `broken` one answers 503.
    /// `test` gets a client of the page surface and the operator surface's port.
    func withApp(delayMs: Int = 0, _ test: @Sendable (SocketClient, Int) async throws -> Void) async throws {
        let upstream = try await TestUpstream.start()
        let config = TestConfig(
            name: "webshell", version: "7",
            [
                TestPage(
                    Self.page,
                    [
                        slow(upstream.interface("info", "/info?delay=\(delayMs)")),
                        upstream.interface("broken", "/broken?status=503"),
                    ])
            ])
        var settings = ServiceSettings()
        // The `broken` interface's failure is read after the slow one answers: kept far longer than any test.
        settings.engine.negativeTTL = .seconds(120)
        settings.listeners.port = 0
        settings.listeners.adminPort = 0
        settings.listeners.demo = true
        settings.store.bytes = 2 * 1024 * 1024
        settings.configPath = "configs/webshell-test.json"
        var profile = RendererSettings.defaultProfiles["main"]!
        profile.minIdle = 0
        settings.renderers = ["main": profile]
        do {
            let loaded = try config.loaded()
            let (pagePort, adminPort) = (PortBox(), PortBox())
            let app = try buildApplication(
                settings: settings, config: ConfigHolder(loaded), logger: Logger(label: "test"), onServerRunning: { pagePort.set($0) },
                onAdminRunning: { adminPort.set($0) })
            try await withLiveApplication(app, port: pagePort) { client in
                try await test(client, try #require(await adminPort.value()))
            }
        } catch {
            try? await upstream.shutdown()
            throw error
        }
        try await upstream.shutdown()
    }

    func trigger(_ client: some TestHTTPClient) async throws -> String {
        let response = try await client.execute(
            uri: "/v1/prefetch", method: .post, headers: [.contentType: "application/json"],
            body: ByteBuffer(string: #"{"url":"\#(Self.page)?id=1"}"#))
        #expect(response.status == .accepted)
        return try Reply(response).decoded(TriggerAnswer.self).ticket
    }

    /// `interface` with a timeout far past any delay a test gives it.
    func slow(_ interface: TestInterface) -> TestInterface {
        var interface = interface
        interface.timeout = 30000
        return interface
    }

    /// A data read waiting up to the service's longest wait (10 s) by default: far past any delay a test gives.
    func data(_ client: some TestHTTPClient, ticket: String, name: String, wait: Int = 10000) async throws -> ClientResponse {
        try await client.execute(uri: "/v1/prefetch/\(ticket)/data?name=\(name)&wait=\(wait)", method: .get)
    }

    func opens(_ admin: Int, _ query: String = "") async throws -> [DebugRoutes.OpensAnswer.Open] {
        let response = try await oneRequest(port: admin, .get, "/v1/debug/opens" + query)
        #expect(response.status == 200)
        return try response.decoded(DebugRoutes.OpensAnswer.self).opens
    }

    @Test func theClientScriptIsServedCacheableAndRevalidates() async throws {
        try await withApp { client, admin in
            let response = try await client.execute(uri: "/v1/client.js", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("application/javascript") == true)
            #expect(response.headers[.cacheControl]?.contains("max-age") == true)
            let script = String(buffer: response.body)
            #expect(script.contains("PrefetchClient") && script.contains("X-Prefetch-Key") && script.contains("AbortController"))
            #expect(!script.contains("prefetchTicket"), "no ticket travels in a URL")
            let etag = try #require(response.headers[.eTag])
            let again = try await client.execute(uri: "/v1/client.js", method: .get, headers: [.ifNoneMatch: etag])
            #expect(again.status == .notModified)
            #expect(again.body.readableBytes == 0)
        }
    }

    @Test func theDemoPagesAndTheDebugViewAreServedAsHTML() async throws {
        try await withApp { client, admin in
            for (path, marker) in [("/demo/shell.html", "/v1/prefetch"), ("/demo/page.html", "PrefetchClient.get")] {
                let response = try await client.execute(uri: path, method: .get)
                #expect(response.status == .ok, "\(path)")
                #expect(response.headers[.contentType] == "text/html; charset=utf-8", "\(path)")
                #expect(String(buffer: response.body).contains(marker), "\(path)")
            }
            // The debug view is on the operator surface only.
            let ui = try await oneRequest(port: admin, .get, "/ui")
            #expect(ui.status == 200 && ui.header("Content-Type") == "text/html; charset=utf-8" && ui.text.contains("/v1/debug/opens"))
            #expect(try await client.execute(uri: "/ui", method: .get).status == .notFound)
            let demo = try await client.execute(uri: "/demo/", method: .get)
            #expect(demo.status == .found)
            #expect(demo.headers[.location] == "/demo/shell.html")
        }
    }

    @Test func aPageOpenShowsItsFetchesAndThePagesReadsWithoutRevealingTheTicket() async throws {
        // The first read must join the flight: it has the 3 s of `info`'s answer to arrive in.
        try await withApp(delayMs: 3000) { client, admin in
            let ticket = try await trigger(client)
            let joined = try await data(client, ticket: ticket, name: "info")
            #expect(joined.status == .ok)
            let broken = try await data(client, ticket: ticket, name: "broken")
            #expect(broken.status == .notFound)
            let hit = try await data(client, ticket: ticket, name: "info")
            #expect(hit.headers[HTTPField.Name("X-Prefetch")!] == "hit")

            let response = try await oneRequest(port: admin, .get, "/v1/debug/opens?limit=5")
            #expect(!response.text.contains(ticket))
            let open = try #require(try response.decoded(DebugRoutes.OpensAnswer.self).opens.first)
            #expect(open.ticket == String(ticket.prefix(8)) + "…")
            #expect(open.page == Self.page + "?id=1")
            #expect(open.version == "7")
            let requests = open.requests
            #expect(requests.map(\.name) == ["info", "broken"])

            let info = requests[0]
            #expect(info.flight == "leader")
            #expect(info.status == 200)
            #expect((info.bytes ?? 0) > 0)
            let start = info.startMs
            let end = try #require(info.endMs)
            #expect(end - start >= 3000)
            #expect(info.reads.map(\.served) == ["joined", "hit"])
            #expect(info.reads.allSatisfy { $0.answeredMs >= $0.askedMs })

            let failed = requests[1]
            #expect(failed.error == "upstream-5xx")
            #expect(failed.status == 503)
            let missed = failed.reads
            #expect(missed.count == 1)
            #expect(missed.first?.served == "miss")
            #expect(missed.first?.reason == "upstream-5xx")

            // The shell holding the full ticket can select its own open.
            let selected = try await opens(admin, "?ticket=\(ticket)")
            #expect(selected.count == 1)
            #expect(try await opens(admin, "?ticket=AAAAAAAAAAAAAAAAAAAAAA").isEmpty)
        }
    }

    /// The same-site page reads its data by `page=` with its own cookies: each read is recorded on the ticket that
    /// fetched the entry, as a read by ticket is, so the waterfall and the waste metric see it.
    @Test func aSameSiteReadByPageIsRecordedOnTheTicketThatFetchedIt() async throws {
        try await withApp { client, admin in
            let response = try await client.execute(
                uri: "/v1/prefetch", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"url":"\#(Self.page)?id=1","headers":{"Cookie":"sid=alice"}}"#))
            #expect(response.status == .accepted)
            let page = q(Self.page + "?id=1")
            for name in ["info", "broken"] {
                _ = try await client.execute(
                    uri: "/v1/data?page=\(page)&name=\(name)&wait=3000", method: .get, headers: [.cookie: "sid=alice"])
            }
            let requests = try #require((try await opens(admin)).first?.requests)
            let info = requests[0].reads
            #expect(info.count == 1 && ["hit", "joined"].contains(info.first?.served ?? ""), "\(info)")
            let broken = requests[1].reads
            #expect(broken.first?.served == "miss" && broken.first?.reason == "upstream-5xx", "\(broken)")
        }
    }

    /// A shell that reads its results view was handed the responses: the ticket records the reads (so the waterfall
    /// and the waste metric agree with the store, which counted them), a failed result as a miss with its code.
    @Test func aResultsViewIsRecordedAsReadsOfTheTicket() async throws {
        try await withApp { client, admin in
            let ticket = try await trigger(client)
            let results = try await client.execute(uri: "/v1/prefetch/\(ticket)?wait=3000", method: .get)
            #expect(results.status == .ok)
            let requests = try #require((try await opens(admin)).first?.requests)
            let info = requests[0].reads
            #expect(info.count == 1 && ["hit", "joined"].contains(info.first?.served ?? ""), "\(info)")
            let broken = requests[1].reads
            #expect(broken.first?.served == "miss" && broken.first?.reason == "upstream-5xx", "\(broken)")
            let metrics = try await oneRequest(port: admin, .get, "/metrics").text
            let served = metricValue(metrics, "prefetch_config_data_total", labels: #"config="active",result="hit""#) ?? 0
            let joined = metricValue(metrics, "prefetch_config_data_total", labels: #"config="active",result="joined""#) ?? 0
            #expect(
                served + joined == 1 && metricValue(metrics, "prefetch_config_data_total", labels: #"config="active",result="miss""#) == 1)
        }
    }

    @Test func aReadWithAnotherUsersCredentialsIsRecordedAsAMiss() async throws {
        try await withApp { client, admin in
            let response = try await client.execute(
                uri: "/v1/prefetch", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"url":"\#(Self.page)","headers":{"Cookie":"sid=alice"}}"#))
            let ticket = try Reply(response).decoded(TriggerAnswer.self).ticket
            let other = try await client.execute(
                uri: "/v1/prefetch/\(ticket)/data?name=info&wait=2000", method: .get, headers: [.cookie: "sid=mallory"])
            #expect(other.status == .forbidden)
            let reads = try #require((try await opens(admin)).first?.requests)[0].reads
            #expect(reads.first?.reason == "identity-mismatch")
        }
    }

    @Test func readsKeptPerTicketAreBounded() async throws {
        try await withApp { client, admin in
            let ticket = try await trigger(client)
            for _ in 0..<40 {
                _ = try await data(client, ticket: ticket, name: "broken")
            }
            let requests = try #require((try await opens(admin)).first?.requests)
            #expect(requests[1].reads.count == 32)
        }
    }

    @Test func statusShowsTheStoreTheRenderersAndTheConfig() async throws {
        try await withApp { client, admin in
            let ticket = try await trigger(client)
            _ = try await data(client, ticket: ticket, name: "info")
            let status = try await oneRequest(port: admin, .get, "/v1/debug/status").decoded(DebugRoutes.StatusAnswer.self)
            #expect(status.store.budget == 2 * 1024 * 1024)
            #expect(status.store.entries >= 1)
            #expect(status.store.bytes > 0)
            #expect(status.renderers.profiles.keys.sorted() == ["main"])
            let config = status.config
            #expect(config.name == "webshell")
            #expect(config.version == "7")
            #expect(config.source == "configs/webshell-test.json")
            #expect(config.interfaces == 2)
        }
    }

    @Test func aBadLimitIsRefused() async throws {
        try await withApp { client, admin in
            let response = try await oneRequest(port: admin, .get, "/v1/debug/opens?limit=abc")
            #expect(response.status == 400)
            #expect(response.errorCode == "invalid-limit")
        }
    }
}
