import Foundation
import HTTPTypes
import PrefetchEngine
import PrefetchRuntime
import PrefetchTestSupport
import PrefetchTestUpstream
import PrefetchTestUpstreamTLS
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// One upstream misbehaviour and what the page must see for it.
struct UpstreamFault: Sendable, CustomTestStringConvertible {
    var name: String
    /// The test upstream's script for the faulty interface (its query).
    var script: String
    /// The interface timeout in milliseconds.
    var timeout: Int = 3000
    /// The failure code both endpoints must report, or nil when the response must arrive whole.
    var code: String?
    /// The upstream status the results view reports for the failure (a 5xx answer), else nil.
    var status: Int?
    /// How the api is reached: plain HTTP, HTTPS on the plain port, or HTTPS with a self-signed certificate.
    var transport: Transport = .plain

    enum Transport: Sendable {
        case plain, httpsOnPlainPort, selfSigned
    }

    var testDescription: String { name }

    static let all: [UpstreamFault] = [
        UpstreamFault(name: "latency beyond the timeout", script: "delay=4000", timeout: 500, code: "timeout"),
        UpstreamFault(name: "accepts and never answers", script: "hang=1", timeout: 500, code: "timeout"),
        UpstreamFault(name: "reset in the middle of the body", script: "reset=200", code: "reset"),
        UpstreamFault(name: "body shorter than its Content-Length", script: "short=200", code: "reset"),
        UpstreamFault(name: "slow drip past the timeout", script: "bytes=640&drip=100", timeout: 800, code: "timeout"),
        UpstreamFault(name: "slow drip within the timeout", script: "bytes=64&drip=20", timeout: 5000, code: nil),
        UpstreamFault(name: "503", script: "status=503", code: "upstream-5xx", status: 503),
        UpstreamFault(name: "500 with a body", script: "status=500&bytes=300", code: "upstream-5xx", status: 500),
        UpstreamFault(name: "non-HTTP answer", script: "garbage=1", code: "protocol"),
        UpstreamFault(name: "body over the cap", script: "bytes=9000", code: "too-large"),
        UpstreamFault(name: "https api on a plain-HTTP port", script: "bytes=10", code: "tls", transport: .httpsOnPlainPort),
        UpstreamFault(name: "self-signed certificate without its CA", script: "bytes=10", code: "tls", transport: .selfSigned),
    ]
}

/// Each upstream fault, one at a time, on a page whose other interface is healthy: the page gets a clear miss
/// with the documented code on every endpoint, never a hang or a truncated body, and the rest keeps working.
@Suite("reliability: upstream faults", .timeLimit(.minutes(2)))
struct ReliabilityFaultTests {
    /// The response cap used by these tests (`body over the cap` sends more).
    static let cap = 4096

    @Test(arguments: UpstreamFault.all)
    func faultIsAClearMissAndLeavesTheRestAlone(fault: UpstreamFault) async throws {
        try await withUpstream { upstream in
            let certificate = fault.transport == .selfSigned ? try await SelfSignedCertificate.make() : nil
            defer { certificate?.remove() }
            var secure: TestUpstream?
            if let certificate { secure = try await TestUpstream.start(tls: certificate.tls) }
            do {
                try await check(fault, upstream: upstream, secure: secure)
            } catch {
                try? await secure?.shutdown()
                throw error
            }
            try await secure?.shutdown()
        }
    }

    private func check(_ fault: UpstreamFault, upstream: TestUpstream, secure: TestUpstream?) async throws {
        let base = upstream.base
        let faultBase: String
        switch fault.transport {
        case .plain: faultBase = base
        case .httpsOnPlainPort: faultBase = "https://127.0.0.1:\(upstream.port)"
        case .selfSigned: faultBase = "https://127.0.0.1:\(try #require(secure).port)"
        }
        let page = "\(base)/pages/fault"
        let config = TestConfig([
            TestPage(
                page,
                [
                    TestInterface(name: "fault", api: "\(faultBase)/fault/x?\(fault.script)", timeout: fault.timeout),
                    TestInterface(name: "fine", api: "\(base)/fault/fine?delay=50"),
                ])
        ])
        var settings = testSettings()
        settings.engine.maximumWait = .seconds(8)
        settings.engine.maximumResponseBytes = Self.cap
        try await withService(config: config, settings: settings) { service in
            let ticket = try await service.ticket(page)

            // The data endpoint by ticket, then by page URL (the failure is shared for its negative TTL).
            let byTicket = try await service.get("/v1/prefetch/\(ticket)/data?name=fault&wait=8000")
            let byPage = try await service.get("/v1/data?page=\(q(page))&name=fault&wait=8000")
            for (label, reply) in [("ticket data", byTicket), ("page data", byPage)] {
                if let code = fault.code {
                    #expect(reply.status == 404, "\(label): \(reply.text)")
                    #expect(reply.errorCode == code, "\(label): \(reply.text)")
                    #expect(reply.header("X-Prefetch-Reason") == code, "\(label)")
                    #expect(reply.header("Content-Type") == "application/json", "\(label)")
                    #expect(reply.header("X-Prefetch") == nil, "\(label)")
                    // Nothing of a partial body reaches the page.
                    #expect(!reply.text.contains("abcdefghij"), "\(label): \(reply.text)")
                } else {
                    #expect(reply.status == 200, "\(label): \(reply.text)")
                    #expect(reply.body.count == 64, "\(label)")
                    #expect(reply.text.hasPrefix("abcdefghijklmnopqrstuvwxyzabcdefghij"), "\(label)")
                    #expect(["hit", "joined"].contains(reply.header("X-Prefetch")), "\(label)")
                }
            }

            // The results endpoint reports the same state and code, and no body for a failure.
            let results = try await service.get("/v1/prefetch/\(ticket)?wait=8000")
            #expect(results.status == 200, "\(results.text)")
            let items = try results.decoded(ResultsAnswer.Body.self).results
            #expect(items.count == 2, "\(results.text)")
            let faulty = try #require(items.first { $0.name == "fault" }, "\(results.text)")
            if let code = fault.code {
                #expect(faulty.state == .failed, "\(results.text)")
                #expect(faulty.error == code, "\(results.text)")
                #expect(faulty.status == fault.status, "\(results.text)")
                #expect(faulty.body == nil && faulty.bodyEncoding == nil, "\(results.text)")
            } else {
                #expect(faulty.state == .ready, "\(results.text)")
                #expect(faulty.status == 200)
                #expect(faulty.body?.string?.utf8.count == 64, "\(results.text)")
            }

            // The other interface of the same page is unaffected.
            #expect(items.first { $0.name == "fine" }?.state == .ready, "\(results.text)")
            let fineReply = try await service.get("/v1/prefetch/\(ticket)/data?name=fine&wait=8000")
            #expect(fineReply.status == 200, "\(fineReply.text)")
            #expect(Echo(fineReply).path == "/fault/fine")

            // The service stays up and keeps serving other work; one upstream fetch happened for the fault.
            #expect(try await service.get("/healthz").status == 200)
            #expect(try await service.admin(.get, "/v1/plan?url=\(q(page))").status == 200)
            let metrics = try await service.admin(.get, "/metrics").text
            let outcome = fault.code ?? "ok"
            #expect(metricValue(metrics, "prefetch_fetches_total", labels: #"outcome="\#(outcome)""#) == 1, "\(metrics)")
            if fault.transport == .plain {
                #expect(upstream.hits(path: "/fault/x") == 1)
            }
        }
    }
}
