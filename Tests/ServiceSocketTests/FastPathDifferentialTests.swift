import Foundation
import HTTPTypes
// The page pipeline under hostile input: random requests (methods, paths, parameters, origins, fetch metadata, read
// keys, cookies, media types and bodies, well-formed or not), each answer held to what the surface promises.
import PrefetchCore
import PrefetchTestSupport
import ServiceTestSupport
import Synchronization
import Testing

@testable import PrefetchService

extension FastHandoffTests {
    /// One random request, written for a service whose page open is `ticket` with `readKey`.
    struct HostileRequest: CustomStringConvertible {
        var method: String
        var target: (_ ticket: String) -> String
        var targetShown: String
        var headers: [(String, (_ readKey: String) -> String)]
        var body: String?

        var description: String { "\(method) \(targetShown) \(headers.map(\.0)) body: \(body ?? "none")" }

        func text(port: Int, ticket: String, readKey: String) -> String {
            var lines = ["\(method) \(target(ticket)) HTTP/1.1", "Host: 127.0.0.1:\(port)"]
            for (name, value) in headers { lines.append("\(name): \(value(readKey))") }
            if let body { lines.append("Content-Length: \(body.utf8.count)") }
            lines.append("Connection: close")
            return lines.joined(separator: "\r\n") + "\r\n\r\n" + (body ?? "")
        }

        static func random(using generator: inout SeededRandom) -> HostileRequest {
            func pick<T>(_ options: [T]) -> T { options.randomElement(using: &generator)! }
            let method = pick(["GET", "GET", "GET", "POST", "POST", "HEAD", "PUT", "OPTIONS"])
            let name = pick(["plain", "cookie", "once", "slow", "nope", "", "pl%61in"])
            var wait = pick([nil, "0", "5", "-1", "abc", "1e3", "99999999999999999999", ""])
            // `slow` never answers: a read of it waits as long as it is told to (a data read, 5 s by default).
            if name == "slow" && wait != "0" && wait != "5" { wait = pick(["0", "5"]) }
            var query: [String] = []
            if Bool.random(using: &generator) { query.append("name=\(name)") }
            if let wait { query.append("wait=\(wait)") }
            if Bool.random(using: &generator) { query.append(pick(["page=\(q(FastHandoffTests.page))", "page=", "api=x", "method=GET"])) }
            let suffix = query.isEmpty ? "" : "?" + query.joined(separator: "&")
            let shapes: [(String, (String) -> String)] = [
                ("/v1/prefetch/{ticket}", { "/v1/prefetch/\($0)" }),
                ("/v1/prefetch/{ticket}/data", { "/v1/prefetch/\($0)/data" }),
                ("/v1/prefetch/{other}", { _ in "/v1/prefetch/AAAAAAAAAAAAAAAAAAAAAA" }),
                ("/v1/prefetch/{bad}/data", { _ in "/v1/prefetch/../data" }),
                ("/v1/prefetch/{bad}", { _ in "/v1/prefetch/not-a-ticket" }),
                ("/v1/prefetch/{encoded}/data", { _ in "/v1/prefetch/a%20b%22c/data" }),
                ("/v1/data", { _ in "/v1/data" }),
                ("/v1/prefetch", { _ in "/v1/prefetch" }),
                ("/v1/prefetch/", { _ in "/v1/prefetch/" }),
                ("//v1/data", { _ in "//v1/data" }),
                ("/v1/open", { _ in "/v1/open" }),
                // The page API's other routes.
                ("/healthz", { _ in "/healthz" }),
                ("/v1/invalidate", { _ in "/v1/invalidate" }),
                ("/v1/renderers/{id}/release", { _ in "/v1/renderers/AAAAAAAAAAAAAAAAAAAAAA/release" }),
                ("/nowhere", { _ in "/nowhere" }),
            ]
            let (shown, path) = pick(shapes)
            // The trigger and the open are taken by the fast path only without a query: half of them have none.
            let posted = shown == "/v1/prefetch" || shown == "/v1/open"
            let suffixUsed = posted && Bool.random(using: &generator) ? "" : suffix
            var headers: [(String, (String) -> String)] = []
            let origin = pick([
                nil, "https://m.example.com", "https://evil.example.com", "null", "https://m.example.com/", "HTTPS://M.EXAMPLE.COM",
            ])
            if let origin { headers.append(("Origin", { _ in origin })) }
            if let site = pick([nil, "same-site", "cross-site", "none"]) { headers.append(("Sec-Fetch-Site", { _ in site })) }
            switch pick(["none", "key", "bad-key", "cookie"]) {
            case "key": headers.append(("X-Prefetch-Key", { $0 }))
            // The key with its last character changed (to "A", or "B" when it already ends in "A": else one key in
            // 64 stayed valid, and the two services disagreed only by chance).
            case "bad-key": headers.append(("X-Prefetch-Key", { key in String(key.dropLast()) + (key.hasSuffix("A") ? "B" : "A") }))
            case "cookie": headers.append(("Cookie", { _ in "visitor=1" }))
            default: break
            }
            var body: String?
            if method == "POST" || method == "PUT" {
                if let type = pick([Optional("application/json"), "application/json; charset=utf-8", "text/plain", nil]) {
                    headers.append(("Content-Type", { _ in type }))
                }
                body = pick([
                    #"{"url": "https://m.example.com/item?id=1"}"#,
                    #"{"url": "https://m.example.com/item", "headers": {"Cookie": "sid=1"}}"#,
                    #"{"url": "https://m.example.com/account"}"#, #"{"url": "https://m.example.com/nowhere"}"#,
                    #"{"url": "https://evil.example.com/item"}"#, #"{"url": 1}"#,
                    #"{"headers": {"Bad Name": "x"}, "url": "https://m.example.com/item"}"#,
                    #"{"url": "https://m.example.com/item", "headers": {"X": "a\u0001b"}}"#, "{", "", "[]",
                    #"{"url": "javascript:alert(1)"}"#,
                ])
            }
            return HostileRequest(
                method: method, target: { path($0) + suffixUsed }, targetShown: shown + suffixUsed, headers: headers, body: body)
        }
    }

    /// 404 random requests (and a few well-formed triggers and opens): whatever a request is, its answer is one the
    /// surface promises. Every answer: a status below 500 (a failed or pending prefetch is a `404` miss), the
    /// security headers, a `Content-Length` that frames its body (none for `HEAD`, `204`, `304`); every error the
    /// API's JSON with its code; a foreign `Origin` never gets CORS headers and never triggers anything; a no-store
    /// entry is handed out at most once.
    @Test func hostileRequestsGetTheSurfacesAnswers() async throws {
        let answered = Mutex(0)
        try await withOne { service in
            let page = try await openPage(service)
            for name in ["plain", "cookie"] { try await waitReady(service, page.ticket, name) }
            let triggersBefore = try await triggerCount(service)
            let onceServed = Mutex(0)
            func check(_ request: HostileRequest, _ label: String) async {
                do {
                    let answer = try await rawExchange(
                        port: service.port, request.text(port: service.port, ticket: page.ticket, readKey: page.readKey))
                    let status = try #require(rawStatus(answer), "\(label): \(request): no answer")
                    let parts = answer.components(separatedBy: "\r\n\r\n")
                    let head = parts.first ?? ""
                    let body = parts.dropFirst().joined(separator: "\r\n\r\n")
                    let shown = "\(label): \(request)\n\(answer)"
                    #expect(status < 500, "\(shown)")
                    #expect(head.contains("X-Content-Type-Options: nosniff") && head.contains("Referrer-Policy: no-referrer"), "\(shown)")
                    let length = head.split(separator: "\r\n").first { $0.hasPrefix("Content-Length: ") }.map {
                        Int($0.dropFirst("Content-Length: ".count)) ?? -1
                    }
                    if request.method == "HEAD" || status == 204 || status == 304 {
                        #expect(body.isEmpty, "\(shown)")
                    } else {
                        #expect(length == body.utf8.count, "the length does not frame the body: \(shown)")
                    }
                    if status >= 400, request.method != "HEAD" {
                        #expect(body.hasPrefix(#"{"error":""#) && body.contains(#","message":""#), "\(shown)")
                    }
                    let foreign = request.headers.contains { $0.0 == "Origin" && $0.1("") == "https://evil.example.com" }
                    if foreign {
                        #expect(status == 403, "\(shown)")
                        if request.method != "HEAD" { #expect(body.contains(#""error":"origin-not-allowed""#), "\(shown)") }
                        #expect(!head.contains("Access-Control-Allow-Origin"), "\(shown)")
                    }
                    if status == 200, body == #"{"n":1}"# { onceServed.withLock { $0 += 1 } }
                    answered.withLock { $0 += 1 }
                } catch {
                    Issue.record("\(label): \(request): \(error)")
                }
            }
            // Fixed seeds, so a failure names the request that shows it and reproduces as it is.
            for seed in 0..<10 {
                var generator = SeededRandom(seed: UInt64(seed))
                for _ in 0..<40 {
                    await check(HostileRequest.random(using: &generator), "seed \(seed)")
                }
            }
            // Well-formed triggers and opens, which the random ones seldom are.
            let json: [(String, (String) -> String)] = [("Content-Type", { _ in "application/json" })]
            for (path, body) in [
                ("/v1/prefetch", #"{"url": "https://m.example.com/item?id=2"}"#),
                ("/v1/open", #"{"url": "https://m.example.com/item?id=3"}"#),
                ("/v1/open", #"{"url": "https://m.example.com/nowhere", "profile": "plain"}"#),
                ("/v1/open", #"{"url": "https://m.example.com/item?id=4", "profile": "none"}"#),
            ] {
                let request = HostileRequest(method: "POST", target: { _ in path }, targetShown: path, headers: json, body: body)
                await check(request, "well-formed")
            }
            #expect(onceServed.withLock { $0 } <= 1, "the no-store entry was handed out more than once")
            // Not vacuous: the store's routes answered some of them on the event loop, opens included, and triggers
            // reached the engine (none from a foreign origin: checked above by their 403).
            let fastReads = try await fastCount(service)
            let fastOthers =
                try await eventLoopAnswers(service, "trigger") + eventLoopAnswers(service, "results") + eventLoopAnswers(service, "open")
            #expect(fastReads + fastOthers > 0, "the event loop answered nothing from the store")
            #expect(try await eventLoopAnswers(service, "open") >= 2, "the well-formed opens were not answered on the event loop")
            #expect(try await triggerCount(service) > triggersBefore, "no trigger reached the engine")
        }
        #expect(answered.withLock { $0 } == 404)
    }

    /// Every trigger the engine saw, by any result.
    func triggerCount(_ service: LiveService) async throws -> Double {
        try await service.admin(.get, "/metrics").text.split(separator: "\n").filter { $0.hasPrefix("prefetch_triggers_total{") }
            .reduce(0) { $0 + (Double($1.split(separator: " ").last ?? "") ?? 0) }
    }
}
