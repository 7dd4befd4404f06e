import Foundation
import Testing

@testable import PrefetchShell

/// The document-start script against hostile keys and page URLs: parsed back, it yields exactly the key and the
/// page's origin, and nothing in it can end the string or the script element.
@Suite struct ReadKeyScriptTests {
    /// Pieces that break naive escaping, mixed into random strings.
    static let hostile = [
        "\"", "'", "`", "\\", "\\\"", "</script>", "</SCRIPT ", "<!--", "-->", "<script>", "]]>", "&", "&quot;", "${x}", "\u{2028}",
        "\u{2029}", "\u{0}", "\n", "\r", "\t", "\u{1B}", "\u{7F}", "\u{85}", "\u{FEFF}", "😀", "é", "\u{10FFFF}", ";alert(1)//", "*/", "/*",
    ]

    static func hostileString(_ random: inout XorShiftRandom) -> String {
        var text = ""
        for _ in 0..<Int(random.next() % 12) {
            switch random.next() % 3 {
            case 0: text += hostile[Int(random.next() % UInt64(hostile.count))]
            case 1: text.unicodeScalars.append(Unicode.Scalar(UInt8(random.next() % 0x80)))
            default: text.unicodeScalars.append(Unicode.Scalar(UInt32(random.next() % 0xD000)) ?? "x")
            }
        }
        return text
    }

    @Test func theScriptSetsTheKeyOnlyInThePagesOrigin() throws {
        let script = ReadKeyScript.source(readKey: "abc-DEF_123", page: URL(string: "https://M.Example.com:443/help/new?id=1#top")!)
        #expect(
            script
                == #"if (window.location.origin === "https://m.example.com" && window.origin === "https://m.example.com") { window.__PREFETCH_READ_KEY__ = "abc-DEF_123"; }"#
        )
        #expect(ReadKeyScript.origin(of: URL(string: "http://127.0.0.1:8080/p")!) == "http://127.0.0.1:8080")
        #expect(ReadKeyScript.origin(of: URL(string: "http://[::1]:80/p")!) == "http://[::1]")
    }

    /// A page URL without an origin of its own (`about:blank`, `data:`) gets no script: a document there has the
    /// opaque origin `"null"`, which every sandboxed document shares.
    @Test func aPageWithoutAnOriginGetsNoKey() {
        for page in ["about:blank", "data:text/html,hi", "file:///tmp/p.html"] {
            #expect(ReadKeyScript.source(readKey: "k", page: URL(string: page)!) == nil, "\(page)")
        }
    }

    @Test func hostileKeysAndURLsNeverBreakOutAndParseBackExactly() throws {
        let seed = UInt64.random(in: 1...UInt64.max)
        var random = XorShiftRandom(seed: seed)
        var cases: [(key: String, page: URL, script: String)] = []
        for _ in 0..<500 {
            let key = Self.hostileString(&random)
            let path = Self.hostileString(&random).addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? ""
            let page = URL(string: "https://m.example.com/" + path) ?? URL(string: "https://m.example.com/")!
            let script = try #require(ReadKeyScript.source(readKey: key, page: page))
            cases.append((key, page, script))
            #expect(script.unicodeScalars.allSatisfy { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F }, "seed \(seed)")
            #expect(!script.lowercased().contains("</script") && !script.contains("<!--"), "seed \(seed)")
            let literals = try JavaScriptLiterals.strings(in: script)
            #expect(literals == [ReadKeyScript.origin(of: page), ReadKeyScript.origin(of: page), key], "seed \(seed): \(script)")
        }
        try Self.checkWithNode(cases, seed: seed)
    }

    /// When node is installed, each script runs in a fresh context whose `location.origin` is the page's: the global
    /// then holds exactly the key; in a context of another origin it stays unset.
    static func checkWithNode(_ cases: [(key: String, page: URL, script: String)], seed: UInt64) throws {
        guard
            let node = ["/usr/bin/node", "/usr/local/bin/node", "/opt/homebrew/bin/node"].first(where: FileManager.default.isExecutableFile)
        else { return }
        let program = """
            const vm = require('vm');
            const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
            const out = cases.map(([script, origin, key]) => {
              const own = {location: {origin}, origin}; own.window = own; vm.runInNewContext(script, own);
              const other = {location: {origin: 'https://evil.example'}, origin: 'https://evil.example'}; other.window = other; vm.runInNewContext(script, other);
              // A document at the page's URL but of an opaque origin (CSP sandbox, a sandboxed frame).
              const opaque = {location: {origin}, origin: 'null'}; opaque.window = opaque; vm.runInNewContext(script, opaque);
              if (own.__PREFETCH_READ_KEY__ !== key) return 'read another key: ' + JSON.stringify(own.__PREFETCH_READ_KEY__);
              if (other.__PREFETCH_READ_KEY__ !== undefined) return 'a document of another origin got the key';
              if (opaque.__PREFETCH_READ_KEY__ !== undefined) return 'an opaque-origin document got the key';
              return 'ok';
            });
            process.stdout.write(JSON.stringify(out));
            """
        let input = try JSONSerialization.data(withJSONObject: cases.map { [$0.script, ReadKeyScript.origin(of: $0.page), $0.key] })
        let output = try runProcess(node, ["-e", program], input: input)
        let results = try #require(try JSONSerialization.jsonObject(with: output) as? [String])
        #expect(results.count == cases.count)
        for (result, testCase) in zip(results, cases) where result != "ok" {
            Issue.record("node: \(result) (seed \(seed)): \(testCase.script)")
        }
    }
}

/// A reader of the double-quoted string literals of a script, independent of the encoder: every escape JavaScript
/// defines for them, and code points from surrogate pairs.
enum JavaScriptLiterals {
    struct Malformed: Error {}

    static func strings(in script: String) throws -> [String] {
        let units = Array(script.utf16)
        var literals: [String] = []
        var index = 0
        while index < units.count {
            guard units[index] == 0x22 else {
                index += 1
                continue
            }
            var decoded: [UInt16] = []
            index += 1
            while true {
                guard index < units.count else { throw Malformed() }
                let unit = units[index]
                if unit == 0x22 { break }
                guard unit != 0x0A, unit != 0x0D else { throw Malformed() }
                if unit != 0x5C {
                    decoded.append(unit)
                    index += 1
                    continue
                }
                guard index + 1 < units.count else { throw Malformed() }
                let escape = units[index + 1]
                index += 2
                switch escape {
                case 0x75:  // \uXXXX
                    guard index + 4 <= units.count,
                        let value = UInt16(String(decoding: units[index..<index + 4], as: UTF16.self), radix: 16)
                    else { throw Malformed() }
                    decoded.append(value)
                    index += 4
                case 0x6E: decoded.append(0x0A)
                case 0x72: decoded.append(0x0D)
                case 0x74: decoded.append(0x09)
                default: decoded.append(escape)
                }
            }
            index += 1
            literals.append(String(decoding: decoded, as: UTF16.self))
        }
        return literals
    }
}
