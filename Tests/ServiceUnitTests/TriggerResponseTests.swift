import Foundation
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The trigger's 202 is written with a byte writer for speed; it must say exactly what the Codable answer says.
@Suite struct TriggerResponseTests {
    @Test func theByteWriterWritesWhatTheEncoderWrites() throws {
        let source = #"""
            {"matched": "https://m.example.com/item/{id}", "page": "https://m.example.com/item/7?q=\"a\"/b\n\u0001中",
             "readKey": "k-_9", "readKeyExpiresAt": "2026-11-23T14:41:39Z", "ticket": "t1", "version": "v\\2",
             "requests": [
               {"name": "profile", "api": "https://api.example.com/profile", "method": "GET",
                "url": "https://api.example.com/profile?q=%22a%22", "state": "pending", "flight": "leader"},
               {"name": "feed", "api": "https://api.example.com/feed", "method": "POST",
                "url": "https://api.example.com/feed", "state": "stored", "flight": "fresh"}
             ]}
            """#
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let answer = try decoder.decode(TriggerAnswer.self, from: Data(source.utf8))
        let written = TriggerResponse(answer: answer).bytes()
        let encoded = Array(try JSONEncoding.encoder.encode(answer))
        #expect(String(decoding: written, as: UTF8.self) == String(decoding: encoded, as: UTF8.self))
    }
}
