import HummingbirdCore
import PrefetchCore
import Testing

@testable import PageAPI

/// The page API reads a request target itself (`PageTarget`), where the page routes once read Hummingbird's `URI`:
/// the same path and the same query values, so moving the page surface off the router changed no answer.
struct PageTargetTests {
    @Test("the path ends at the first ?, the query at the first #, and values are percent-decoded")
    func pathAndQuery() {
        let target = PageTarget("/v1/data?page=https%3A%2F%2Fm.example.com%2Fp%3Fid%3D7&name=a+b&wait=#frag&x=1")
        #expect(target.path == "/v1/data")
        #expect(target.query.get("page") == "https://m.example.com/p?id=7")
        // `+` stays a plus (the page client encodes with encodeURIComponent).
        #expect(target.query.get("name") == "a+b")
        #expect(target.query.get("wait") == "")
        #expect(target.query.get("x") == nil)
    }

    @Test("a repeated name is read from its first pair; a name without = has an empty value; a bad escape is kept as sent")
    func edges() {
        let target = PageTarget("/v1/data?name=first&name=second&flag&api=%zz%41&page=%E2%82")
        #expect(target.query.get("name") == "first")
        #expect(target.query.get("flag") == "")
        #expect(target.query.get("api") == "%zz%41")
        // Bytes that are not UTF-8 once decoded become replacement characters, never a trap.
        #expect(target.query.get("page") == "\u{FFFD}")
        #expect(PageTarget("/healthz").query.pairs.isEmpty)
        #expect(PageTarget("/v1/data?").query.pairs.isEmpty)
    }

    @Test("a combining mark after a separator does not join it: the split is by byte, as the handler's own are")
    func combiningMarks() {
        let results = PageTarget("/v1/prefetch/abc?\u{301}/data")
        #expect(results.path == "/v1/prefetch/abc")
        let page = PageTarget("/v1/data?#\u{301}&page=https%3A%2F%2Fm.example.com%2F")
        #expect(page.path == "/v1/data" && page.query.get("page") == nil)
        let joined = PageTarget("/v1/data?page=a&\u{301}name=x&api=b")
        #expect(joined.query.get("page") == "a" && joined.query.get("name") == nil && joined.query.get("api") == "b")
    }

    @Test("on 2,000 random targets, the path and every value are what Hummingbird's URI reads")
    func sameAsTheRoutersReading() {
        var random = SeededRandom(seed: 0x7A6E7)
        // With combining marks (U+0301, U+200D) that a split by characters would join to a `?`, `#`, `&` or `=`.
        let alphabet = Array("/?#&=%+abcXYZ019-._~!$'()*,;:@".utf8) + [0xE2, 0x82, 0xAC, 0x20, 0xCC, 0x81, 0xE2, 0x80, 0x8D]
        let names = ["page", "name", "api", "wait", "method", "version", "x"]
        for _ in 0..<2000 {
            var bytes: [UInt8] = Array("/v1/".utf8)
            for _ in 0..<Int.random(in: 0..<40, using: &random) {
                if Int.random(in: 0..<6, using: &random) == 0 {
                    bytes += Array((names.randomElement(using: &random)! + "=").utf8)
                } else {
                    bytes.append(alphabet.randomElement(using: &random)!)
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            let ours = PageTarget(text)
            let theirs = URI(text)
            #expect(String(ours.path) == theirs.path, "path of \(text)")
            for name in names {
                #expect(ours.query.get(name) == theirs.queryParameters[name[...]].map(String.init), "\(name) of \(text)")
            }
        }
    }
}
