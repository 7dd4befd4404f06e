import HTTPTypes
import NIOCore
import PrefetchStore
import Testing

@testable import PageAPI
@testable import PrefetchService

/// The page API answers in no wire form (`PageAnswer`); the page pipeline writes it as HTTP/1.1 (`EncodedAnswer`),
/// keeping a replay's head per connection (`ReplayHeads`). What a client reads must not depend on whether the head was
/// kept.
struct PageAnswerTests {
    static let stored = StoredResponse(
        status: 200, headers: [.contentType: "application/json", .setCookie: "sid=1", .cacheControl: "max-age=60"],
        body: Array(#"{"items":[1,2,3]}"#.utf8))

    static func bytes(_ answer: EncodedAnswer) -> String {
        guard case .bytes(let head) = answer.head else { return "(framed by the encoder)" }
        return String(buffer: head) + String(buffer: answer.body)
    }

    @Test("a replay written from a kept head is the bytes of a fresh one; another reader's kind gets its own head")
    func keptHeadsAreTheFreshBytes() {
        let heads = ReplayHeads()
        let site = AllowedOrigins.Admission(origin: "https://m.example.com", grant: .withCredentials)
        let mine = PageAnswer(replaying: Self.stored, .init(joined: false, origin: site))
        let fresh = Self.bytes(EncodedAnswer(mine, heads: nil))
        #expect(fresh.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(fresh.lowercased().contains("access-control-allow-origin: https://m.example.com\r\n"))
        #expect(fresh.hasSuffix(#"{"items":[1,2,3]}"#))
        let first = Self.bytes(EncodedAnswer(mine, heads: heads))
        let second = Self.bytes(EncodedAnswer(mine, heads: heads))
        #expect(first == fresh && second == fresh)

        // Another origin, or a joined read, is another head: never the kept one.
        let other = AllowedOrigins.Admission(origin: nil, grant: .none)
        let theirs = Self.bytes(EncodedAnswer(PageAnswer(replaying: Self.stored, .init(joined: false, origin: other)), heads: heads))
        #expect(!theirs.lowercased().contains("access-control-allow-origin") && theirs.hasSuffix(#"{"items":[1,2,3]}"#))
        let joined = Self.bytes(EncodedAnswer(PageAnswer(replaying: Self.stored, .init(joined: true, origin: site)), heads: heads))
        #expect(joined != fresh && joined.lowercased().contains("x-prefetch: joined"))
        // The same bytes again for the first reader, after the others were kept beside it.
        #expect(Self.bytes(EncodedAnswer(mine, heads: heads)) == fresh)

        // A response stored again (a new token) never gets the old one's head.
        var changed = Self.stored
        changed.status = 203
        #expect(
            Self.bytes(EncodedAnswer(PageAnswer(replaying: changed, .init(joined: false, origin: site)), heads: heads)).hasPrefix(
                "HTTP/1.1 203"))
    }

    @Test("an answer to HEAD is the head alone, with the length of the body the GET answer has")
    func headOnly() {
        let response = HTTPResponse(status: .ok, headerFields: [.contentType: "text/plain", .contentLength: "5"])
        let answer = EncodedAnswer(PageAnswer(response, body: ByteBuffer(), headOnly: true), heads: nil)
        let text = Self.bytes(answer)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n") && text.lowercased().contains("content-length: 5\r\n") && text.hasSuffix("\r\n\r\n"))
    }
}
