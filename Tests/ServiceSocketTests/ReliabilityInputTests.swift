import Foundation
import HTTPTypes
import PrefetchCore
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// Hostile or broken input: page URLs that try to redirect a request or smuggle a header, malformed request
/// bodies, junk tickets and waits, and config files that are not configs. Each gets a clear 4xx (or exit code 2)
/// and the service keeps serving.
@Suite("reliability: bad input", .timeLimit(.minutes(2)))
struct ReliabilityInputTests {
    // MARK: Page URLs

    /// Page URLs that the service accepts: whatever they carry, the requests go to the configured api host and
    /// path with exactly the headers of a plain trigger.
    @Test func pageInputCannotChangeTheUpstreamTargetOrAddAHeader() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/inj"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(name: "i.get", api: "\(base)/inj/get", urlParam: true, bodyParam: true),
                        TestInterface(name: "i.post", api: "\(base)/inj/post", method: .POST, urlParam: true, bodyParam: true),
                        TestInterface(name: "i.form", api: "\(base)/inj/form", method: .PUT, bodyParam: true, bodyType: .form),
                    ])
            ])
            let host = "127.0.0.1:\(upstream.port)"
            let big = String(repeating: "x", count: 7 * 1024)
            let accepted: [String] = [
                page + "?id=1",
                page + "?a=1%0d%0aX-Injected:%20yes&b=%0AHost:%20evil.test",
                page + "?next=@evil.test&u=a@evil.test:80",
                page + "?a=1#@evil.test/steal",
                page + "#frag?x=%0d%0aX-Injected:%20yes",
                page + "?a=%00b&%00=1",
                page + "?a=%ZZ&b=%&c=%E4%B8",
                "\(base)/pages/x/../inj?a=../../etc/passwd",
                "\(base)/pages/./inj/?a=//evil.test/x",
                page + "?a=%2F%2Fevil.test%2F&b=http://evil.test/",
                page + "?a=\u{4E2D}\u{6587}&b=\u{1F600}",
                page + "?big=" + big,
            ]
            try await withService(config: config) { service in
                var plainHeaders: [String: [String]] = [:]
                for (index, url) in accepted.enumerated() {
                    let trigger = try await service.trigger(url, credentials: ["Cookie": "sid=\(index)"])
                    #expect(trigger.status == 202, "\(url.prefix(120)): \(trigger.text.prefix(300))")
                    guard let ticket = (try? trigger.decoded(TriggerAnswer.self))?.ticket else { continue }
                    for name in ["i.get", "i.post", "i.form"] {
                        let reply = try await service.get(
                            "/v1/prefetch/\(ticket)/data?name=\(name)&wait=5000", headers: ["Cookie": "sid=\(index)"])
                        #expect(reply.status == 200, "\(name) for \(url.prefix(120)): \(reply.text.prefix(300))")
                        let echo = Echo(reply)
                        #expect(echo.path == "/inj/" + name.dropFirst(2), "\(url.prefix(120))")
                        #expect(echo.values("Host") == [host], "\(url.prefix(120))")
                        #expect(echo.values("Cookie") == ["sid=\(index)"], "\(url.prefix(120))")
                        #expect(echo.values("X-Injected").isEmpty, "\(url.prefix(120))")
                        for header in echo.headers {
                            let text = header.joined(separator: ": ")
                            #expect(!text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(text)")
                            #expect(!text.contains("evil"), "header \(text) for \(url.prefix(120))")
                        }
                        // Every trigger sends the same header names as the plain one.
                        // (`Expect: 100-continue` is libcurl's own choice by body size, not page input.)
                        let names = echo.headers.compactMap { $0.first?.lowercased() }.filter { $0 != "expect" }.sorted()
                        if index == 0 { plainHeaders[name] = names } else { #expect(names == plainHeaders[name], "\(url.prefix(120))") }
                    }
                }
                // Nothing reached the upstream but the three configured paths, all for this host.
                let seen = upstream.requests()
                #expect(seen.count == accepted.count * 3)
                #expect(seen.allSatisfy { $0.host == host && ["/inj/get", "/inj/post", "/inj/form"].contains($0.path) }, "\(seen)")
                #expect(try await service.get("/healthz").status == 200)
            }
        }
    }

    /// Page URLs the service refuses: a clear 400 and nothing fetched.
    @Test func pageURLsWithControlCharactersCredentialsOrOverTheLimitAreRefused() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/refuse"
            let config = TestConfig([
                TestPage(page, [TestInterface(name: "r", api: "\(base)/refuse/r", urlParam: true)])
            ])
            try await withService(config: config) { service in
                let refused: [(String, Int, String)] = [
                    (page + "?a=1\r\nX-Injected: yes", 400, "invalid-url"),
                    (page + "?a=1\nHost: evil.test", 400, "invalid-url"),
                    (page + "?a=\u{0}", 400, "invalid-url"),
                    (page + "?a=\u{7F}", 400, "invalid-url"),
                    ("http://evil.test@127.0.0.1:\(upstream.port)/pages/refuse", 400, "invalid-url"),
                    ("http://user:pass@127.0.0.1:\(upstream.port)/pages/refuse", 400, "invalid-url"),
                    ("javascript:alert(1)", 400, "invalid-url"),
                    ("", 400, "invalid-url"),
                    ("//127.0.0.1/pages/refuse", 400, "invalid-url"),
                ]
                for (url, status, code) in refused {
                    let reply = try await service.trigger(url)
                    #expect(reply.status == status, "\(url.debugDescription): \(reply.text)")
                    #expect(reply.errorCode == code, "\(url.debugDescription): \(reply.text)")
                    let plan = try await service.admin(.get, "/v1/plan?url=\(q(url))")
                    #expect(plan.status == status, "plan \(url.debugDescription): \(plan.text)")
                    let data = try await service.get("/v1/data?page=\(q(url))&name=r")
                    #expect(data.status == status, "data \(url.debugDescription): \(data.text)")
                }
                // A page URL over the 8 KiB limit: 400 naming the limit (a bad field, not an over-long target), nothing fetched.
                let long = try await service.trigger(page + "?big=" + String(repeating: "x", count: 9 * 1024))
                #expect(long.status == 400, "\(long.text.prefix(200))")
                #expect(long.errorCode == "url-too-long")
                #expect(long.apiError?.message.contains("8192") == true)
                // A query over the request body limit: 413, not a crash or a truncated URL.
                let huge = try await service.separateRequest(
                    .post, "/v1/prefetch",
                    body: #"{"url": "\#(page)?big=\#(String(repeating: "y", count: EngineSettings().maximumRequestBody))"}"#)
                #expect(huge.status == 413, "\(huge.text.prefix(200))")
                #expect(huge.errorCode == "too-large")
                // Credentials given in the body cannot carry a header either.
                let smuggled = try await service.request(
                    .post, "/v1/prefetch", body: #"{"url": "\#(page)", "headers": {"Cookie": "a=1\r\nX-Injected: yes"}}"#)
                #expect(smuggled.status == 400, "\(smuggled.text)")
                #expect(smuggled.errorCode == "bad-headers")
                #expect(upstream.hits(path: "/refuse/r") == 0)
                #expect(try await service.get("/healthz").status == 200)
            }
        }
    }

    /// Internationalized host names. Hosts compare as written (ASCII case-insensitively): a webview reports
    /// its location with the punycode host, so that is the spelling a config should use; the Unicode spelling
    /// of the same host is another page (a clear `no-config` miss, never a request elsewhere). Whatever the
    /// spelling, requests go to the api host only.
    @Test func internationalizedPageHostsMatchAsWrittenAndNeverMoveTheApiHost() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let unicodeHost = "m.\u{4F8B}\u{3048}.jp"
            let config = TestConfig([
                TestPage(
                    "https://m.xn--r8jz45g.jp/idn",
                    [TestInterface(name: "n", api: "\(base)/idn/n", urlParam: true, credentials: .include)]),
                TestPage(
                    "https://\(unicodeHost)/uni",
                    [TestInterface(name: "u", api: "\(base)/idn/u", urlParam: true, credentials: .include)]),
            ])
            try await withService(config: config) { service in
                let matching: [(String, String, String)] = [
                    ("https://m.xn--r8jz45g.jp/idn?x=1", "https://m.xn--r8jz45g.jp/idn", "n"),
                    ("https://M.XN--R8JZ45G.JP/idn?x=%E4%BE%8B", "https://m.xn--r8jz45g.jp/idn", "n"),
                    ("https://\(unicodeHost)/uni?x=1", "https://\(unicodeHost)/uni", "u"),
                ]
                for (url, matched, name) in matching {
                    let trigger = try await service.trigger(url, credentials: ["Cookie": "sid=idn"])
                    #expect(trigger.status == 202, "\(url): \(trigger.text)")
                    let answer = try trigger.decoded(TriggerAnswer.self)
                    #expect(answer.matched == matched, "\(url): \(trigger.text)")
                    let ticket = answer.ticket
                    let reply = try await service.get("/v1/prefetch/\(ticket)/data?name=\(name)&wait=5000", headers: ["Cookie": "sid=idn"])
                    #expect(reply.status == 200, "\(reply.text)")
                    #expect(Echo(reply).path == "/idn/\(name)")
                    #expect(Echo(reply).values("Host") == ["127.0.0.1:\(upstream.port)"])
                }
                for url in [
                    "https://\(unicodeHost)/idn?x=1", "https://m.xn--r8jz45g.jp/uni?x=1", "https://m.xn--r8jz45h.jp/idn?x=1",
                    "https://m.xn--r8jz45g.jp.evil.test/idn?x=1",
                ] {
                    let other = try await service.trigger(url)
                    #expect(other.status == 404, "\(url): \(other.text)")
                    #expect(other.errorCode == "no-config", "\(url)")
                }
                let seen = upstream.requests()
                #expect(seen.count == matching.count)
                #expect(seen.allSatisfy { $0.path.hasPrefix("/idn/") && $0.host == "127.0.0.1:\(upstream.port)" })
            }
        }
    }

    // MARK: Request bodies, tickets and waits

    @Test func malformedBodiesAreRefusedWith400AndTheServiceKeepsServing() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/body"
            let config = TestConfig([TestPage(page, [TestInterface(name: "b", api: "\(base)/body/b")])])
            try await withService(config: config) { service in
                let nestedArrays = Array(String(repeating: "[", count: 60_000).utf8)
                let nestedObjects = Array(
                    (#"{"url": "\#(page)", "headers": "# + String(repeating: #"{"a":"#, count: 10_000) + "1"
                        + String(repeating: "}", count: 10_001)).utf8)
                let bodies: [(String, [UInt8])] = [
                    ("invalid UTF-8 in a string", Array(#"{"url": ""#.utf8) + [0xFF, 0xFE, 0xC3] + Array(#""}"#.utf8)),
                    ("invalid UTF-8 outside strings", [0x7B, 0xC0, 0xAF, 0x7D]),
                    ("overlong NUL", Array(#"{"url": "a"#.utf8) + [0xC0, 0x80] + Array(#""}"#.utf8)),
                    ("UTF-16", Array(#"{"url": "x"}"#.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })),
                    ("deeply nested arrays", nestedArrays),
                    ("deeply nested objects", nestedObjects),
                    ("NUL bytes", [0, 0, 0, 0]),
                    ("empty", []),
                    ("a bare string", Array(#""https://x""#.utf8)),
                    ("trailing garbage", Array(#"{"url": "\#(page)"} {}"#.utf8)),
                    ("duplicate keys", Array(#"{"url": "\#(page)", "url": "http://evil.test/"}"#.utf8)),
                    ("url is a number", Array(#"{"url": 1e999}"#.utf8)),
                ]
                for path in ["/v1/prefetch", "/v1/open", "/v1/renderers/acquire"] {
                    for (label, body) in bodies {
                        // Only the trigger requires a body and a string url.
                        if path != "/v1/prefetch" && ["empty", "url is a number"].contains(label) { continue }
                        let reply = try await rawRequest(port: service.port, .post, path, body: body)
                        #expect(reply.status == 400, "\(path) \(label): \(reply.text.prefix(300))")
                        #expect(reply.errorCode != nil, "\(path) \(label): \(reply.text.prefix(300))")
                        #expect(reply.header("Content-Type") == "application/json", "\(path) \(label)")
                    }
                }
                #expect(upstream.hits(path: "/body/b") == 0)
                #expect(try await service.get("/healthz").status == 200)
                let fine = try await service.trigger(page)
                #expect(fine.status == 202)
            }
        }
    }

    @Test func junkTicketsAndWaitsGetClear4xx() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/junk"
            let config = TestConfig([TestPage(page, [TestInterface(name: "j", api: "\(base)/junk/j?delay=100")])])
            var settings = testSettings()
            settings.engine.maximumWait = .seconds(2)
            try await withService(config: config, settings: settings) { service in
                let junkTickets = [
                    String(repeating: "A", count: 22), String(repeating: "_", count: 22), String(repeating: "A", count: 21),
                    String(repeating: "A", count: 23), String(repeating: "Z", count: 4096), "%00", "..%2F..%2Fmetrics",
                    q("\u{4E2D}\u{6587}"), "AAAAAAAAAAAAAAAAAAAA%3D%3D", "-",
                ]
                for ticket in junkTickets {
                    for uri in ["/v1/prefetch/\(ticket)?wait=0", "/v1/prefetch/\(ticket)/data?name=j&wait=0"] {
                        let reply = try await service.get(uri)
                        #expect(reply.status == 404, "\(uri.prefix(100)): \(reply.text.prefix(200))")
                        #expect(reply.errorCode == "unknown-ticket", "\(uri.prefix(100))")
                        #expect(reply.header("X-Prefetch-Reason") == "unknown-ticket")
                        #expect(
                            reply.apiError.map { $0.message.utf8.count < 400 } == true, "the message quotes the ticket bounded")
                    }
                }

                let ticket = try await service.ticket(page)
                let endpoints = ["/v1/prefetch/\(ticket)?", "/v1/prefetch/\(ticket)/data?name=j&", "/v1/data?page=\(q(page))&name=j&"]
                for endpoint in endpoints {
                    for wait in ["", "+5", "0x10", "1e3", "1.0", "%20", "5%00", "--1", "-", "abc", q("\u{0663}")] {
                        let reply = try await service.get(endpoint + "wait=" + wait)
                        #expect(reply.status == 400, "\(endpoint) wait=\(wait): \(reply.text)")
                        #expect(reply.errorCode == "invalid-wait", "\(endpoint) wait=\(wait)")
                    }
                    // Negative waits are 0 and huge ones are capped: answered, never refused or held.
                    for wait in ["-1", "-99999999999999999999999999", "99999999999999999999999999", "\(Int.max)", "\(Int.min)", "0"] {
                        let reply = try await service.get(endpoint + "wait=" + wait)
                        #expect([200, 404].contains(reply.status), "\(endpoint) wait=\(wait): \(reply.text)")
                    }
                }
                #expect(upstream.hits(path: "/junk/j") == 1)
                #expect(try await service.get("/healthz").status == 200)
            }
        }
    }

    // MARK: Config files

    /// What a config file can be instead of a config.
    static let brokenConfigs: [(String, @Sendable (String) throws -> Void)] = [
        (
            "truncated",
            { path in
                let text = TestConfig([
                    TestPage("https://m.example.test/p", [TestInterface(api: "https://m.example.test/a")])
                ]).text
                try Data(text.utf8.prefix(text.utf8.count / 2)).write(to: URL(fileURLWithPath: path))
            }
        ),
        ("empty", { path in try Data().write(to: URL(fileURLWithPath: path)) }),
        (
            "binary",
            { path in
                var generator = SeededRandom(seed: 7)
                try Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: URL(fileURLWithPath: path))
            }
        ),
        (
            "50 MB",
            { path in
                let chunk = Data(String(repeating: " ", count: 1024 * 1024).utf8)
                _ = FileManager.default.createFile(atPath: path, contents: nil)
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
                defer { try? handle.close() }
                try handle.write(contentsOf: Data(TestConfig(name: "x", version: "1", []).text.utf8))
                for _ in 0..<50 { try handle.write(contentsOf: chunk) }
            }
        ),
    ]

    @Test(arguments: brokenConfigs.map(\.0))
    func brokenConfigFilesFailValidateAndServeWithExitCode2(kind: String) async throws {
        let file = try TempConfig("")
        defer { file.remove() }
        try #require(Self.brokenConfigs.first { $0.0 == kind }).1(file.path)

        let validate = try await runExecutable("prefetch", ["validate", "--config", file.path])
        #expect(validate.status == 2, "\(kind): \(validate.stdout) \(validate.stderr)")
        #expect(validate.stderr.contains("error: invalid config \(file.path)"), "\(kind): \(validate.stderr)")
        let detail = validate.stderr.split(separator: "\n").dropFirst().joined(separator: "\n")
        #expect(!detail.isEmpty, "\(kind): no problem listed")
        #expect(validate.stderr.utf8.count < 4096, "\(kind): the message is bounded")
        #expect(!validate.stdout.contains("is valid"))
        if kind == "50 MB" {
            #expect(detail.contains("limit"), "\(detail)")
        } else {
            #expect(detail.contains("not valid JSON"), "\(detail)")
        }

        let serve = try await runExecutable("prefetch", ["serve", "--config", file.path, "--port", "0"])
        #expect(serve.status == 2, "\(kind): \(serve.stderr)")
        #expect(serve.stderr.contains("invalid config"), "\(kind): \(serve.stderr)")
        #expect(!serve.stdout.contains("listening"))
    }
}
