import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import RendererPool
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The renderer pool through the HTTP API: `/v1/renderers/*` and `/v1/open`.
@Suite struct RendererAPITests {
    static let pageConfig = TestConfig(
        name: "t", version: "1",
        [TestPage("https://m.example.test/page", [TestInterface(name: "info", api: "http://127.0.0.1:9/info", timeout: 200)])])

    func settings(main: RendererProfile, plain: RendererProfile? = nil) -> ServiceSettings {
        var settings = ServiceSettings()
        settings.listeners.port = 0
        settings.listeners.adminPort = 0
        var profiles = ["main": main]
        if let plain { profiles["plain"] = plain }
        settings.renderers = profiles
        return settings
    }

    func profile(minIdle: Int, maxSize: Int, createMs: Double = 20, acquireTimeout: Double = 300, perCaller: Int? = nil) -> RendererProfile
    {
        var profile = RendererProfile()
        profile.maxLeasesPerCaller = perCaller
        profile.minIdle = minIdle
        profile.maxSize = maxSize
        profile.createMs = createMs
        profile.acquireTimeout = acquireTimeout
        return profile
    }

    /// Runs the app; `test` gets a client of the page surface and the operator surface's port.
    func withApp(_ settings: ServiceSettings, _ test: @Sendable (SocketClient, Int) async throws -> Void) async throws {
        let config = try Self.pageConfig.loaded()
        let (pagePort, adminPort) = (PortBox(), PortBox())
        let app = try buildApplication(
            settings: settings, config: ConfigHolder(config), logger: Logger(label: "test"), onServerRunning: { pagePort.set($0) },
            onAdminRunning: { adminPort.set($0) })
        try await withLiveApplication(app, port: pagePort) { client in
            try await test(client, try #require(await adminPort.value()))
        }
    }

    func post(_ client: some TestHTTPClient, _ path: String, _ body: String) async throws -> ClientResponse {
        try await client.execute(uri: path, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: body))
    }

    /// Polls the pool state until `predicate` holds (bounded), returning the last state.
    func waitForState(_ admin: Int, profile: String, _ predicate: (PoolsAnswer.Pool) -> Bool) async throws -> PoolsAnswer.Pool? {
        var state: PoolsAnswer.Pool?
        for _ in 0..<100 {
            let response = try await oneRequest(port: admin, .get, "/v1/renderers")
            state = try response.decoded(PoolsAnswer.self).profiles[profile]
            if let state, predicate(state) { return state }
            try await Task.sleep(for: .milliseconds(50))
        }
        return state
    }

    @Test func theMainProfileIsKeptWarmAndAcquireIsAWarmHit() async throws {
        try await withApp(settings(main: profile(minIdle: 2, maxSize: 3))) { client, admin in
            let warm = try await waitForState(admin, profile: "main") { $0.idle == 2 }
            #expect(warm?.idle == 2)
            let response = try await post(client, "/v1/renderers/acquire", #"{"profile":"main","page":"https://m.example.test/page"}"#)
            #expect(response.status == .ok)
            let lease = try Reply(response).decoded(LeaseAnswer.self)
            #expect(lease.warm == true)
            #expect(lease.uses == 1)
            let id = lease.id
            let after = try await waitForState(admin, profile: "main") { $0.leased == 1 }
            #expect(after?.warmHits == 1)

            // The id is the capability: 22 random URL-safe characters; a guessed one releases nothing.
            #expect(
                id.count == 22
                    && id.utf8.allSatisfy {
                        $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (UInt8(ascii: "0")...UInt8(ascii: "z")).contains($0)
                    })
            let guessed = try await post(client, "/v1/renderers/main-1%231/release", #"{"healthy":true}"#)
            #expect(guessed.status == .notFound)
            let release = try await post(client, "/v1/renderers/\(id)/release", #"{"healthy":true}"#)
            #expect(release.status == .ok)
            let again = try await post(client, "/v1/renderers/\(id)/release", #"{"healthy":true}"#)
            #expect(again.status == .notFound)

            let metrics = try await oneRequest(port: admin, .get, "/metrics").text
            #expect(metrics.contains(#"renderer_pool_acquires_total{profile="main",result="warm"} 1"#))
        }
    }

    @Test func anExhaustedPoolAnswers503AfterItsAcquireTimeout() async throws {
        try await withApp(settings(main: profile(minIdle: 0, maxSize: 1, acquireTimeout: 200, perCaller: 2))) { client, admin in
            let first = try await post(client, "/v1/renderers/acquire", #"{"profile":"main"}"#)
            #expect(first.status == .ok)
            #expect(try Reply(first).decoded(LeaseAnswer.self).warm == false)
            let second = try await post(client, "/v1/renderers/acquire", #"{"profile":"main"}"#)
            #expect(second.status == .serviceUnavailable)
            #expect(Reply(second).errorCode == "timeout")
            let state = try await waitForState(admin, profile: "main") { $0.timeouts == 1 }
            #expect(state?.timeouts == 1)
            #expect(state?.coldStarts == 1)
        }
    }

    @Test func oneCallerCannotHoldMoreThanItsShareOfAPool() async throws {
        // maxSize 4, so each caller (a client address: credentials are only claims) may hold 2 at once.
        try await withApp(settings(main: profile(minIdle: 0, maxSize: 4))) { client, admin in
            let port = client.port
            func acquire(from address: String, cookie: String) async throws -> String {
                try await rawExchange(
                    port: port, from: address,
                    rawPost("/v1/renderers/acquire", port: port, body: #"{"profile":"main"}"#, headers: ["Cookie": cookie]))
            }
            #expect(rawStatus(try await acquire(from: "127.0.0.1", cookie: "sid=greedy-1")) == 200)
            let second = try await acquire(from: "127.0.0.1", cookie: "sid=greedy-2")
            #expect(rawStatus(second) == 200)
            // A third, even with yet another invented cookie, is over this address's share.
            let third = try await acquire(from: "127.0.0.1", cookie: "sid=greedy-3")
            #expect(rawStatus(third) == 429, "\(third.prefix(300))")
            #expect(third.contains("caller-limit") && third.contains("Retry-After"))
            // Another client still gets a renderer, and releasing frees the greedy client's slot.
            #expect(rawStatus(try await acquire(from: "127.0.0.2", cookie: "sid=polite")) == 200)
            let id = try #require(second.split(separator: "\"id\":\"").last?.prefix(22))
            let release = try await rawExchange(port: port, rawPost("/v1/renderers/\(id)/release", port: port, body: "{}"))
            #expect(rawStatus(release) == 200, "\(release.prefix(300))")
            #expect(rawStatus(try await acquire(from: "127.0.0.1", cookie: "sid=greedy-4")) == 200)
        }
    }

    @Test func badInputGetsAClearError() async throws {
        try await withApp(settings(main: profile(minIdle: 0, maxSize: 1))) { client, admin in
            let unknown = try await post(client, "/v1/renderers/acquire", #"{"profile":"nope"}"#)
            #expect(unknown.status == .notFound)
            #expect(Reply(unknown).errorCode == "unknown-profile")
            let wrongType = try await post(client, "/v1/renderers/acquire", #"{"profile":7}"#)
            #expect(wrongType.status == .badRequest)
            let broken = try await post(client, "/v1/renderers/acquire", #"{"profile":"#)
            #expect(broken.status == .badRequest)
            #expect(Reply(broken).errorCode == "bad-json")
            let badHealthy = try await post(client, "/v1/renderers/x/release", #"{"healthy":"yes"}"#)
            #expect(badHealthy.status == .badRequest)
        }
    }

    @Test func openTriggersThePrefetchAndLeasesTheProfileForThePage() async throws {
        try await withApp(settings(main: profile(minIdle: 1, maxSize: 2), plain: profile(minIdle: 1, maxSize: 2))) { client, admin in
            _ = try await waitForState(admin, profile: "plain") { $0.idle == 1 }
            let knownReply = Reply(try await post(client, "/v1/open", #"{"url":"https://m.example.test/page?id=1"}"#))
            let known = try knownReply.decoded(OpenAnswer.self)
            let ticket = try #require(known.prefetch)
            #expect(ticket.ticket.count == 22)
            #expect(known.renderer?.profile == "main")

            let otherReply = Reply(try await post(client, "/v1/open", #"{"url":"https://elsewhere.example.test/x"}"#))
            let other = try otherReply.decoded(OpenAnswer.self)
            // Both halves are present as null when they did not happen, which a decoded optional cannot tell from absent.
            #expect(otherReply.json["prefetch"] is NSNull)
            #expect(knownReply.json["prefetchError"] is NSNull && knownReply.json["rendererError"] is NSNull)
            #expect(other.prefetchError?.error == "no-config")
            #expect(other.renderer?.profile == "plain")

            let invalid = try await post(client, "/v1/open", #"{"url":"not a url"}"#)
            #expect(invalid.status == .badRequest)
        }
    }

    /// `POST /v1/open` is answered on the event loop whatever its lease does: a warm renderer leased at once (the
    /// lease and the trigger without a task), a lease the pool must decide (the caller at its share: refused by the
    /// pool, in one task), a profile that does not exist, and a body that is no open.
    @Test func everyOpenIsAnsweredOnTheEventLoop() async throws {
        func opens() async throws -> (answers: [String], eventLoop: Int, leased: Int?, warmHits: Int?) {
            let settings = settings(main: profile(minIdle: 2, maxSize: 3, perCaller: 1))
            let collected = Answers()
            try await withApp(settings) { client, admin in
                _ = try await waitForState(admin, profile: "main") { $0.idle == 2 }
                let port = client.port
                let body = #"{"url":"https://m.example.test/page?id=1","headers":{"Cookie":"sid=a"}}"#
                let first = try await rawExchange(port: port, rawPost("/v1/open", port: port, body: body))
                await collected.add(first)
                // The first open's flight settles before the second open (its results view waits for it), so both
                // runs answer the second open's prefetch half the same way: from a settled entry, never a race.
                let ticket = try #require(first.firstMatch(of: /"ticket":"([A-Za-z0-9_-]+)"/)?.output.1)
                let settled = try await oneRequest(port: port, .get, "/v1/prefetch/\(ticket)?wait=10000", headers: ["Cookie": "sid=a"])
                #expect(settled.status == 200 && !settled.text.contains(#""state":"pending""#), "\(settled.text)")
                // A body that is no open, and a profile that does not exist: refused, and a renderer error.
                await collected.add(try await rawExchange(port: port, rawPost("/v1/open", port: port, body: #"{"url": 1}"#)))
                let unknown = #"{"url":"https://m.example.test/page?id=1","profile":"nope","headers":{"Cookie":"sid=a"}}"#
                await collected.add(try await rawExchange(port: port, rawPost("/v1/open", port: port, body: unknown)))
                // The same client again: at its share (one lease), so the pool decides its renderer half.
                await collected.add(try await rawExchange(port: port, rawPost("/v1/open", port: port, body: body)))
                let state = try await waitForState(admin, profile: "main") { $0.leased == 1 }
                let metrics = try await oneRequest(port: admin, .get, "/metrics").text
                let line = metrics.split(separator: "\n").first { $0.hasPrefix(#"prefetch_event_loop_answers_total{route="open"} "#) }
                await collected.finish(
                    eventLoop: line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0, leased: state?.leased,
                    warmHits: state?.warmHits)
            }
            return await collected.result
        }
        let fast = try await opens()
        #expect(fast.eventLoop == 4, "every open was answered on the event loop")
        #expect(fast.answers.first?.contains(#""warm":true"#) == true, "\(fast.answers.first ?? "")")
        #expect(fast.answers.first?.contains(#""prefetch":{"#) == true, "\(fast.answers.first ?? "")")
        #expect(fast.answers.map(rawStatus) == [200, 400, 200, 200], "\(fast.answers)")
        #expect(
            fast.answers[1].contains(#""error":"missing-url""#) || fast.answers[1].contains(#""error":"bad-json""#), "\(fast.answers[1])")
        #expect(fast.answers[2].contains("unknown-profile"), "\(fast.answers[2])")
        #expect(fast.answers.last?.contains("caller-limit") == true, "\(fast.answers.last ?? "")")
        for answer in fast.answers {
            #expect(answer.contains("X-Content-Type-Options: nosniff") && answer.contains("Cache-Control: private, no-store"), "\(answer)")
        }
        #expect(
            fast.leased == 1 && fast.warmHits == 1,
            "leased \(String(describing: fast.leased)), warm hits \(String(describing: fast.warmHits))")
    }

    /// An open whose page is refused (it fails the whole open) is answered at once, and no renderer is leased or
    /// started for it: the pool, which keeps none idle, has nothing pending, warming or created after the answer.
    @Test func anOpenRefusedForItsPageLeasesNoRenderer() async throws {
        try await withApp(settings(main: profile(minIdle: 0, maxSize: 1, createMs: 300))) { client, admin in
            let port = client.port
            let body = #"{"url":"javascript:alert(1)","profile":"main"}"#
            let answer = try await rawExchange(port: port, rawPost("/v1/open", port: port, body: body))
            #expect(rawStatus(answer) == 400 && answer.contains("invalid-url"), "\(answer)")
            let state = try await oneRequest(port: admin, .get, "/v1/renderers").decoded(PoolsAnswer.self).profiles["main"]
            #expect(
                state?.pending == 0 && state?.warming == 0 && state?.created == 0 && state?.leased == 0, "\(String(describing: state))")
        }
    }

    /// An open whose client leaves while the pool is still creating its renderer does not keep that renderer
    /// leased to nobody until the pool's reclaim: it is handed back as soon as it comes.
    @Test func aRendererLeasedForAClientThatLeftIsHandedBack() async throws {
        var main = profile(minIdle: 0, maxSize: 1, createMs: 300)
        main.leaseTimeout = 600
        try await withApp(settings(main: main)) { client, admin in
            let port = client.port
            let body = #"{"url":"https://m.example.test/page?id=1","profile":"main"}"#
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
            // The request, then the client is gone before the renderer is made.
            try await channel.executeThenClose { _, outbound in
                try await outbound.write(ByteBuffer(string: rawPost("/v1/open", port: port, body: body)))
            }
            let state = try await waitForState(admin, profile: "main") { $0.created == 1 && $0.leased == 0 }
            #expect(state?.created == 1 && state?.leased == 0 && state?.idle == 1, "\(String(describing: state))")
        }
    }

    /// The same for a lease asked on its own (`POST /v1/renderers/acquire`, answered in a task): a renderer the pool
    /// made for a client that left is handed back as soon as it comes.
    @Test func aLeaseForAClientThatLeftIsHandedBack() async throws {
        var main = profile(minIdle: 0, maxSize: 1, createMs: 300)
        main.leaseTimeout = 600
        try await withApp(settings(main: main)) { client, admin in
            let port = client.port
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
            try await channel.executeThenClose { _, outbound in
                try await outbound.write(ByteBuffer(string: rawPost("/v1/renderers/acquire", port: port, body: #"{"profile":"main"}"#)))
            }
            let state = try await waitForState(admin, profile: "main") { $0.created == 1 && $0.leased == 0 }
            #expect(state?.created == 1 && state?.leased == 0 && state?.idle == 1, "\(String(describing: state))")
        }
    }

    @Test func invalidProfilesAreRefusedWithTheirPath() {
        var bad = RendererProfile()
        bad.minIdle = 3
        bad.maxSize = 1
        var settings = ServiceSettings()
        settings.renderers = ["main": bad]
        #expect(throws: PoolError.self) {
            _ = try buildApplication(settings: settings, config: ConfigHolder(nil), logger: Logger(label: "test"))
        }
    }

    @Test func theRenderersFileIsValidatedWithPaths() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("renderers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("renderers.json").path
        try #"{"renderers":{"main":{"minIdle":5,"maxSize":2}}}"#.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: RendererSettings.LoadError.self) { try RendererSettings.load(path: path) }
        do {
            _ = try RendererSettings.load(path: path)
        } catch {
            #expect(error.problems.contains { $0.hasPrefix("renderers.main.maxSize") })
        }
        let sample = try RendererSettings.load(path: repositoryRoot + "/configs/renderers.json")
        #expect(Set(sample.keys) == ["main", "plain"])
    }
}

/// What one run of opens collected.
private actor Answers {
    var answers: [String] = []
    var eventLoop = 0
    var leased: Int?
    var warmHits: Int?

    func add(_ answer: String) { answers.append(answer) }

    func finish(eventLoop: Int, leased: Int?, warmHits: Int?) {
        self.eventLoop = eventLoop
        self.leased = leased
        self.warmHits = warmHits
    }

    var result: (answers: [String], eventLoop: Int, leased: Int?, warmHits: Int?) { (answers, eventLoop, leased, warmHits) }
}
