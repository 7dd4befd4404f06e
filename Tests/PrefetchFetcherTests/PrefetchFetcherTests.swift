import Foundation
import HTTPTypes
import Logging
import NIOCore
import PrefetchCore
import PrefetchFetcher
import PrefetchStore
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

@Suite("Fetcher against a real upstream", .timeLimit(.minutes(2)))
struct FetcherTests {
    @Test func requestArrivesExactly() async throws {
        try await withUpstream { upstream in
            try await withFetcher { fetcher in
                let query = "q=%E4%B8%AD&plus=a+b&slash=%2F&empty="
                let headers = HTTPFields([
                    ("X-Trace", "abc"), ("Content-Type", "application/json"), ("X-Empty", ""), ("Cookie", "sid=1; theme=dark"),
                ])
                let body = Array(#"{"page":"home","n":1}"#.utf8)
                let response = try await fetcher.fetch(
                    FetchRequest(
                        method: "POST",
                        url: "http://127.0.0.1:\(upstream.port)/api/feed?\(query)",
                        headers: headers,
                        body: body
                    )
                )
                #expect(response.status == 200)
                #expect(response.httpVersion == "1.1")
                let echo = try Echo(response)
                #expect(echo.method == "POST")
                #expect(echo.path == "/api/feed")
                #expect(echo.query == query)
                #expect(echo.body == #"{"page":"home","n":1}"#)
                let sent = HTTPFields(echo.headers.map { ($0[0], $0[1]) })
                let ours = HTTPFields(sent.filter { header in headers.contains { $0.name == header.name } })
                #expect(ours.map(\.name.rawName) == headers.map(\.name.rawName), "names in order, as written")
                #expect(ours.map(\.value) == headers.map(\.value))
                #expect(echo.values("User-Agent") == ["prefetch/1"])
                #expect(echo.values("Accept").isEmpty)
                #expect(echo.values("Expect").isEmpty)
                #expect(echo.values("Content-Length") == ["\(body.count)"])
            }
        }
    }

    @Test func methodsOtherThanGetAndPost() async throws {
        try await withUpstream { upstream in
            try await withFetcher { fetcher in
                let url = "http://127.0.0.1:\(upstream.port)/m"
                let put = try Echo(await fetcher.fetch(FetchRequest(method: "PUT", url: url, body: Array("x=1".utf8))))
                #expect(put.method == "PUT")
                #expect(put.body == "x=1")
                let delete = try Echo(await fetcher.fetch(FetchRequest(method: "DELETE", url: url)))
                #expect(delete.method == "DELETE")
                #expect(delete.body == nil)
                let get = try Echo(await fetcher.fetch(FetchRequest(url: url, headers: [.accept: "application/json"])))
                #expect(get.method == "GET")
                #expect(get.values("Accept") == ["application/json"])
                let head = try await fetcher.fetch(FetchRequest(method: "HEAD", url: url))
                #expect(head.status == 200)
                #expect(head.body.isEmpty)
            }
        }
    }

    @Test func responseHeadersStatusAndBodyAreCaptured() async throws {
        try await withUpstream { upstream in
            try await withFetcher { fetcher in
                let response = try await fetcher.fetch(
                    FetchRequest(
                        url:
                            "http://127.0.0.1:\(upstream.port)/c?status=404&setCookie=a%3D1%3B%20Path%3D%2F&setCookie=b%3D2&cacheControl=max-age%3D30"
                    )
                )
                #expect(response.status == 404)
                #expect(response.headers.filter { $0.name.rawName == "Set-Cookie" }.map(\.value) == ["a=1; Path=/", "b=2"])
                #expect(response.headers.first { $0.name.rawName == "Cache-Control" }?.value == "max-age=30")
                #expect(!response.headers.contains { $0.name.rawName.hasPrefix("HTTP/") })
                let bytes = try await fetcher.fetch(FetchRequest(url: "http://127.0.0.1:\(upstream.port)/b?bytes=70000"))
                #expect(bytes.body.count == 70000)
                #expect(bytes.body.prefix(3) == [UInt8(ascii: "a"), UInt8(ascii: "b"), UInt8(ascii: "c")])
                #expect(bytes.headers.first { $0.name.rawName == "Content-Type" }?.value == "application/octet-stream")
                // Announced by Content-Length: received into storage of exactly its size, which a store keeps as it
                // is (no copy, nothing rounded up to a power of two).
                #expect(bytes.bodyBuffer.readableBytes == 70000 && bytes.bodyBuffer.storageCapacity == 70000)
                let received = bytes.bodyBuffer.withUnsafeReadableBytes { $0.baseAddress }
                let stored = StoredResponse(status: bytes.status, bodyBuffer: bytes.bodyBuffer)
                #expect(stored.bodyBuffer.withUnsafeReadableBytes { $0.baseAddress } == received)
            }
        }
    }

    @Test func aPinRedirectsTheConnectionButNotTheHost() async throws {
        try await withUpstream { upstream in
            try await withFetcher { fetcher in
                let response = try await fetcher.fetch(
                    FetchRequest(
                        url: "http://api.example.test/ct",
                        pinning: StaticPins([
                            AddressPin(host: "api.example.test", port: 80, address: "127.0.0.1", connectPort: upstream.port)
                        ])
                    )
                )
                let echo = try Echo(response)
                #expect(echo.values("Host") == ["api.example.test"])
                #expect(upstream.hits(path: "/ct") == 1)
            }
        }
    }

    @Test func failuresMapToStableCodes() async throws {
        try await withUpstream { upstream in
            try await withFetcher { fetcher in
                let base = "http://127.0.0.1:\(upstream.port)"
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/t?delay=3000", timeout: .milliseconds(300))) == .timeout)
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/big?bytes=5000", maxResponseBytes: 1000)) == .tooLarge)
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/big?bytes=5000&drip=1", maxResponseBytes: 1000)) == .tooLarge)
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/r?reset=100")) == .reset)
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/s?short=100")) == .reset)
                #expect(await failureCode(fetcher, FetchRequest(url: "\(base)/g?garbage=1")) == .protocol)
                #expect(await failureCode(fetcher, FetchRequest(url: "http://no-such-host.invalid/")) == .dns)
                #expect(await failureCode(fetcher, FetchRequest(url: "file:///etc/hostname")) == .protocol)
                let exact = try await fetcher.fetch(FetchRequest(url: "\(base)/big?bytes=1000", maxResponseBytes: 1000))
                #expect(exact.body.count == 1000)
            }
        }
    }

    @Test func refusedConnectionIsConnectError() async throws {
        // A port bound but not listening refuses every connection, and stays this test's while it is held
        // (a port merely closed could be taken meanwhile by a server another test starts).
        let held = try #require(BoundLocalPort())
        let port = held.port
        try await withFetcher { fetcher in
            let error = await #expect(throws: FetchError.self) {
                try await fetcher.fetch(FetchRequest(url: "http://127.0.0.1:\(port)/x"))
            }
            #expect(error?.code == .connect)
            #expect(error?.message.contains("127.0.0.1:\(port)") == true)
        }
        withExtendedLifetime(held) {}
    }

    @Test func cancellationRemovesTheTransfer() async throws {
        try await withUpstream { upstream in
            try await withFetcher { fetcher in
                let url = "http://127.0.0.1:\(upstream.port)/hang?hang=1"
                let task = Task { await failureCode(fetcher, FetchRequest(url: url, timeout: .seconds(30))) }
                do {
                    let settled = await eventually { upstream.hits(path: "/hang") == 1 }
                    #expect(settled)
                }
                #expect(fetcher.inFlight == 1)
                task.cancel()
                #expect(await task.value == .cancelled)
                do {
                    let settled = await eventually { fetcher.inFlight == 0 }
                    #expect(settled)
                }
                // The fetcher stays usable.
                let after = try await fetcher.fetch(FetchRequest(url: "http://127.0.0.1:\(upstream.port)/ok"))
                #expect(after.status == 200)
            }
        }
    }

    @Test func queuedTransfersTimeOutWhileWaitingForASlot() async throws {
        try await withUpstream { upstream in
            try await withFetcher(FetcherConfiguration(maxTransfers: 1)) { fetcher in
                // The first holds the one slot for 5 s: the second's 200 ms in the queue end well inside that.
                let url = "http://127.0.0.1:\(upstream.port)/slow?delay=5000"
                async let first = failureCode(fetcher, FetchRequest(url: url, timeout: .seconds(20)))
                do {
                    let settled = await eventually { upstream.hits(path: "/slow") == 1 }
                    #expect(settled)
                }
                let second = await failureCode(fetcher, FetchRequest(url: url, timeout: .milliseconds(200)))
                #expect(second == .timeout)
                let firstCode = await first
                #expect(firstCode == nil)
                #expect(upstream.hits(path: "/slow") == 1)
            }
        }
    }

    @Test func thousandConcurrentFetchesOnBoundedThreads() async throws {
        try await withUpstream { upstream in
            let configuration = FetcherConfiguration(maxTransfers: 512, maxConnectionsPerHost: 256)
            try await withFetcher(configuration) { fetcher in
                let url = "http://127.0.0.1:\(upstream.port)/burst?delay=200"
                let sampler = Task {
                    var peak = processThreadCount()
                    while !Task.isCancelled {
                        peak = max(peak, processThreadCount())
                        try? await Task.sleep(for: .milliseconds(25))
                    }
                    return peak
                }
                let statuses = await withTaskGroup(of: Int.self) { group in
                    for _ in 0..<1000 {
                        group.addTask {
                            (try? await fetcher.fetch(FetchRequest(url: url, timeout: .seconds(60))).status) ?? -1
                        }
                    }
                    var all: [Int] = []
                    for await status in group { all.append(status) }
                    return all
                }
                sampler.cancel()
                let peakThreads = await sampler.value
                #expect(statuses.count == 1000)
                #expect(statuses.allSatisfy { $0 == 200 })
                #expect(upstream.hits(path: "/burst") == 1000)
                // The whole test process is sampled while other suites run in parallel (their event loops, thread
                // pools, Redis connection queues, renderer processes: about 250 at a busy moment); a thread per
                // transfer would put it above 1,000.
                #expect(peakThreads < 500)
                #expect(upstream.connections() <= 256)
                #expect(fetcher.inFlight == 0)
            }
        }
    }

    @Test func connectionsAreReused() async throws {
        try await withUpstream { upstream in
            try await withFetcher { fetcher in
                for _ in 0..<50 {
                    let response = try await fetcher.fetch(FetchRequest(url: "http://127.0.0.1:\(upstream.port)/k"))
                    #expect(response.status == 200)
                }
                #expect(upstream.hits(path: "/k") == 50)
                #expect(upstream.connections() <= 2)
            }
        }
    }

    @Test func fetchesSubmittedBeforeRunWaitForIt() async throws {
        try await withUpstream { upstream in
            let fetcher = Fetcher(logger: Logger(label: "prefetch.fetcher.test"))
            let early = Task { try await fetcher.fetch(FetchRequest(url: "http://127.0.0.1:\(upstream.port)/early")) }
            do {
                let settled = await eventually { fetcher.inFlight == 1 }
                #expect(settled)
            }
            #expect(upstream.hits(path: "/early") == 0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await fetcher.run() }
                let status = try await early.value.status
                #expect(status == 200)
                group.cancelAll()
            }
        }
    }

    @Test func gracefulShutdownLetsInFlightTransfersFinish() async throws {
        try await withUpstream { upstream in
            let fetcher = Fetcher(logger: Logger(label: "prefetch.fetcher.test"))
            let url = "http://127.0.0.1:\(upstream.port)/drain?delay=500"
            try await testGracefulShutdown { trigger in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await fetcher.run() }
                    async let inFlight = fetcher.fetch(FetchRequest(url: url, timeout: .seconds(10)))
                    do {
                        let settled = await eventually { upstream.hits(path: "/drain") == 1 }
                        #expect(settled)
                    }
                    trigger.triggerGracefulShutdown()
                    let status = try await inFlight.status
                    #expect(status == 200)
                    // run() returns on its own once nothing is in flight.
                    try await group.next()
                }
            }
            let error = await #expect(throws: FetchError.self) {
                try await fetcher.fetch(FetchRequest(url: url))
            }
            #expect(error?.code == .shutdown)
            #expect(upstream.hits(path: "/drain") == 1)
        }
    }

    @Test func cancellingRunFailsInFlightWithShutdown() async throws {
        try await withUpstream { upstream in
            let fetcher = Fetcher(logger: Logger(label: "prefetch.fetcher.test"))
            let url = "http://127.0.0.1:\(upstream.port)/abort?hang=1"
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await fetcher.run() }
                async let pending = failureCode(fetcher, FetchRequest(url: url, timeout: .seconds(30)))
                do {
                    let settled = await eventually { upstream.hits(path: "/abort") == 1 }
                    #expect(settled)
                }
                group.cancelAll()
                try await group.next()
                let code = await pending
                #expect(code == .shutdown)
            }
            #expect(fetcher.inFlight == 0)
            #expect(await failureCode(fetcher, FetchRequest(url: url)) == .shutdown)
        }
    }

    @Test func runTwiceIsRefused() async throws {
        let refused = try await withFetcher { fetcher in
            // A finished fetch proves the first run() owns the loop.
            #expect(await failureCode(fetcher, FetchRequest(url: "http://no-such-host.invalid/")) == .dns)
            return await #expect(throws: FetchError.self) { try await fetcher.run() } != nil
        }
        #expect(refused)
    }
}
