import Foundation
import PrefetchTestSupport
import PrefetchTestUpstream
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The results view is written with a byte writer (upstream JSON is spliced in as it is); `ResultsAnswer.Body` is how
/// tests and clients read it, so it must decode every state the writer writes and lose nothing of it.
@Suite struct ResultsAnswerTests {
    @Test func theDecodedAnswerSaysWhatTheWrittenBytesSay() async throws {
        try await withUpstream { upstream in
            let base = upstream.base
            let page = "\(base)/pages/results"
            let config = TestConfig([
                TestPage(
                    page,
                    [
                        TestInterface(
                            name: "json", api: "\(base)/results/json?body=%7B%22ok%22%3Atrue%2C%22n%22%3A%5B1%2C2.5%5D%7D&setCookie=a%3D1"),
                        TestInterface(name: "text", api: "\(base)/results/text?body=plain%20text&contentType=text/plain"),
                        TestInterface(name: "null", api: "\(base)/results/null?body=null"),
                        TestInterface(name: "down", api: "\(base)/results/down?status=503"),
                        TestInterface(name: "hung", api: "\(base)/results/hung?hang=1", timeout: 300),
                        TestInterface(name: "once", api: "\(base)/results/once?cacheControl=no-store"),
                        TestInterface(name: "slow", api: "\(base)/results/slow?hang=1", timeout: 10000),
                    ])
            ])
            try await withService(config: config) { service in
                let ticket = try await service.ticket(page)
                // The no-store response is handed out once: to this read, so the results find it consumed.
                #expect(try await service.get("/v1/prefetch/\(ticket)/data?name=once&wait=5000").status == 200)
                let reply = try await service.get("/v1/prefetch/\(ticket)?wait=3000")
                #expect(reply.status == 200, "\(reply.text)")

                let answer = try reply.decoded(ResultsAnswer.Body.self)
                #expect(answer.ticket == ticket && answer.page == page && answer.version == "7")
                let results = Dictionary(uniqueKeysWithValues: answer.results.map { ($0.name, $0) })
                #expect(answer.results.map(\.name) == ["json", "text", "null", "down", "hung", "once", "slow"], "in config order")
                #expect(answer.results.map(\.state) == [.ready, .ready, .ready, .failed, .failed, .missing, .pending], "\(reply.text)")

                let json = try #require(results["json"])
                #expect(json.status == 200 && json.bodyEncoding == .json && json.error == nil && json.elapsedMs != nil)
                #expect(json.body == .object(["ok": .bool(true), "n": .array([.number(1), .number(2.5)])]))
                #expect(json.headers?.contains { $0.first?.lowercased() == "content-type" } == true, "\(reply.text)")
                #expect(json.headers?.contains { $0.first?.lowercased() == "set-cookie" } == false, "never shown to page script")
                #expect(results["text"]?.body == .string("plain text") && results["text"]?.bodyEncoding == .text)
                #expect(results["null"]?.bodyEncoding == .json && results["null"]?.body == nil, "JSON null reads as no value")

                #expect(results["down"]?.status == 503 && results["down"]?.error == "upstream-5xx")
                #expect(results["hung"]?.status == nil && results["hung"]?.error == "timeout")
                #expect(results["hung"]?.message?.isEmpty == false)
                #expect(results["once"]?.error == "consumed")
                #expect(results["slow"]?.error == nil && results["slow"]?.elapsedMs == nil, "still in flight")

                // Encoded again, the decoded answer is the same JSON as the bytes: every member (nulls included)
                // was read, and nothing was invented.
                let encoded = try JSONEncoding.encoder.encode(answer)
                let written = try JSONSerialization.jsonObject(with: Data(reply.body)) as? NSDictionary
                let again = try JSONSerialization.jsonObject(with: encoded) as? NSDictionary
                #expect(
                    written != nil && written == again, "written \(reply.text)\nencoded again \(String(decoding: encoded, as: UTF8.self))")
            }
        }
    }
}
