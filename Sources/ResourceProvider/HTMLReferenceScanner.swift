import Foundation

/// The static resources an HTML document names in its markup: a small tag scan, not an HTML parser.
///
/// It finds `<script src>`, `<link href>` whose `rel` is `stylesheet`, `modulepreload`, or `preload` with `as` one of
/// `script`, `style`, `image`; `<img src>` and every `<img srcset>` / `<source srcset>` candidate; and the first
/// `<base href>`. Tag and attribute names are case-insensitive, values single-, double- or unquoted (the first of a
/// repeated attribute counts, as in browsers), character references in values decoded (`&amp;`, `&quot;`, `&#39;`,
/// `&#x2F;`, ...). Comments are skipped, and so are the bodies of `<script>`, `<style>`, `<textarea>` and `<title>`:
/// text there is not markup (`"<img src=x>"` in an inline script is not an image). Values that are empty,
/// fragment-only (`#x`), `data:`, `javascript:` or `blob:` are left out.
///
/// It does not find what a script loads, CSS `url()` and `@import`, `<iframe>`, `<video>`/`<audio>` sources,
/// `<link rel=icon>`, modules imported by other modules, `<noscript>`'s alternative markup as such (its tags are
/// scanned like any others), or markup written by `document.write`.
public enum HTMLReferenceScanner {
    /// What a document names: its first `<base href>` (raw, unresolved) and the references in document order (raw,
    /// unresolved, each once).
    public struct References: Sendable, Equatable {
        /// The first `<base href>`'s value, or nil.
        public var base: String?
        /// Each reference once, in the order it first appears.
        public var urls: [String]
    }

    /// The references in `html`.
    public static func scan(_ html: String) -> References {
        let bytes = Array(html.utf8)
        var result = References(base: nil, urls: [])
        var seen: Set<String> = []
        func add(_ raw: String?) {
            guard let raw else { return }
            let value = trimmed(raw)
            guard !value.isEmpty, !value.hasPrefix("#") else { return }
            let lowered = value.lowercased()
            guard !lowered.hasPrefix("data:"), !lowered.hasPrefix("javascript:"), !lowered.hasPrefix("blob:") else { return }
            if seen.insert(value).inserted { result.urls.append(value) }
        }
        var index = 0
        let count = bytes.count
        while index < count {
            guard bytes[index] == UInt8(ascii: "<") else {
                index += 1
                continue
            }
            if starts(bytes, at: index, with: "<!--") {
                index = find(bytes, "-->", from: index + 4).map { $0 + 3 } ?? count
                continue
            }
            let next = index + 1 < count ? bytes[index + 1] : 0
            if next == UInt8(ascii: "!") || next == UInt8(ascii: "?") || next == UInt8(ascii: "/") {
                // A doctype, a processing instruction or an end tag: nothing to find in it.
                index = find(bytes, ">", from: index + 1).map { $0 + 1 } ?? count
                continue
            }
            guard isLetter(next) else {
                index += 1
                continue
            }
            let (tag, end) = parseTag(bytes, from: index + 1)
            index = end
            switch tag.name {
            case "script":
                add(tag.attribute("src"))
            case "link":
                let rel = tokens(tag.attribute("rel"))
                let kind = (tag.attribute("as") ?? "").lowercased()
                if rel.contains("stylesheet") || rel.contains("modulepreload")
                    || (rel.contains("preload") && ["script", "style", "image"].contains(kind))
                {
                    add(tag.attribute("href"))
                }
            case "img":
                add(tag.attribute("src"))
                for candidate in srcsetURLs(tag.attribute("srcset")) { add(candidate) }
            case "source":
                for candidate in srcsetURLs(tag.attribute("srcset")) { add(candidate) }
            case "base":
                if result.base == nil, let href = tag.attribute("href") { result.base = trimmed(href) }
            default:
                break
            }
            // Raw text: the body is not markup, up to its own end tag.
            if ["script", "style", "textarea", "title"].contains(tag.name) {
                index = findEndTag(bytes, tag.name, from: index) ?? count
            }
        }
        return result
    }

    /// The URLs of a `srcset` value: each candidate's URL, its width or density descriptor dropped.
    static func srcsetURLs(_ value: String?) -> [String] {
        guard let value else { return [] }
        let bytes = Array(value.utf8)
        var urls: [String] = []
        var index = 0
        while index < bytes.count {
            while index < bytes.count, isSpace(bytes[index]) || bytes[index] == UInt8(ascii: ",") { index += 1 }
            guard index < bytes.count else { break }
            let start = index
            while index < bytes.count, !isSpace(bytes[index]) { index += 1 }
            var url = Array(bytes[start..<index])
            if url.last == UInt8(ascii: ",") {
                // No descriptors: the comma ends the candidate.
                while url.last == UInt8(ascii: ",") { url.removeLast() }
            } else {
                // Descriptors up to the next comma outside parentheses.
                var depth = 0
                while index < bytes.count {
                    let byte = bytes[index]
                    if byte == UInt8(ascii: "(") { depth += 1 }
                    if byte == UInt8(ascii: ")") { depth = max(0, depth - 1) }
                    if byte == UInt8(ascii: ","), depth == 0 { break }
                    index += 1
                }
            }
            if !url.isEmpty { urls.append(String(decoding: url, as: UTF8.self)) }
        }
        return urls
    }

    struct Tag {
        var name: String
        var attributes: [(name: String, value: String)] = []
        var selfClosing = false

        /// The first attribute named `name` (lowercase), or nil.
        func attribute(_ name: String) -> String? { attributes.first { $0.name == name }?.value }
    }

    /// The start tag whose name begins at `start` (after `<`), and the index after its `>`.
    static func parseTag(_ bytes: [UInt8], from start: Int) -> (Tag, Int) {
        var index = start
        let count = bytes.count
        while index < count, !isSpace(bytes[index]), bytes[index] != UInt8(ascii: ">"), bytes[index] != UInt8(ascii: "/") {
            index += 1
        }
        var tag = Tag(name: String(decoding: bytes[start..<index], as: UTF8.self).lowercased())
        while index < count {
            let byte = bytes[index]
            if byte == UInt8(ascii: ">") { return (tag, index + 1) }
            if isSpace(byte) {
                index += 1
                continue
            }
            if byte == UInt8(ascii: "/") {
                tag.selfClosing = index + 1 < count && bytes[index + 1] == UInt8(ascii: ">")
                index += 1
                continue
            }
            // An attribute name, up to whitespace, `=`, `>` or `/`.
            let nameStart = index
            index += 1
            while index < count, !isSpace(bytes[index]), bytes[index] != UInt8(ascii: "="), bytes[index] != UInt8(ascii: ">"),
                bytes[index] != UInt8(ascii: "/")
            {
                index += 1
            }
            let name = String(decoding: bytes[nameStart..<index], as: UTF8.self).lowercased()
            var after = index
            while after < count, isSpace(bytes[after]) { after += 1 }
            guard after < count, bytes[after] == UInt8(ascii: "=") else {
                tag.attributes.append((name, ""))
                continue
            }
            index = after + 1
            while index < count, isSpace(bytes[index]) { index += 1 }
            var value: ArraySlice<UInt8> = []
            if index < count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") {
                let quote = bytes[index]
                let valueStart = index + 1
                index = valueStart
                while index < count, bytes[index] != quote { index += 1 }
                value = bytes[valueStart..<index]
                index = min(count, index + 1)
            } else {
                let valueStart = index
                while index < count, !isSpace(bytes[index]), bytes[index] != UInt8(ascii: ">") { index += 1 }
                value = bytes[valueStart..<index]
            }
            tag.attributes.append((name, decodeReferences(String(decoding: value, as: UTF8.self))))
        }
        return (tag, count)
    }

    /// `value` with its character references decoded: the named ones URLs carry, and numeric ones.
    static func decodeReferences(_ value: String) -> String {
        guard value.contains("&") else { return value }
        let named: [String: String] = ["amp": "&", "quot": "\"", "apos": "'", "lt": "<", "gt": ">", "sol": "/", "colon": ":"]
        var out = ""
        var rest = Substring(value)
        while let ampersand = rest.firstIndex(of: "&") {
            out += rest[..<ampersand]
            let after = rest[rest.index(after: ampersand)...]
            if let semicolon = after.prefix(10).firstIndex(of: ";") {
                let name = String(after[..<semicolon])
                var decoded: String?
                if let replacement = named[name.lowercased()] {
                    decoded = replacement
                } else if name.hasPrefix("#x") || name.hasPrefix("#X") {
                    decoded = UInt32(name.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init).map { String(Character($0)) }
                } else if name.hasPrefix("#") {
                    decoded = UInt32(name.dropFirst(), radix: 10).flatMap(Unicode.Scalar.init).map { String(Character($0)) }
                }
                if let decoded {
                    out += decoded
                    rest = after[after.index(after: semicolon)...]
                    continue
                }
            }
            out += "&"
            rest = after
        }
        return out + rest
    }

    private static func tokens(_ value: String?) -> Set<String> {
        Set(
            (value ?? "").lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\u{0C}" }).map(
                String.init))
    }

    private static func trimmed(_ value: String) -> String {
        let bytes = Array(value.utf8)
        var start = 0
        var end = bytes.count
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0C || byte == 0x0D
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    private static func lower(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    private static func starts(_ bytes: [UInt8], at index: Int, with text: String) -> Bool {
        let needle = Array(text.utf8)
        guard index + needle.count <= bytes.count else { return false }
        for offset in 0..<needle.count where lower(bytes[index + offset]) != needle[offset] { return false }
        return true
    }

    private static func find(_ bytes: [UInt8], _ text: String, from start: Int) -> Int? {
        var index = start
        while index < bytes.count {
            if starts(bytes, at: index, with: text) { return index }
            index += 1
        }
        return nil
    }

    /// The index after `</name>` (any case, attributes or spaces before its `>`), from `start`.
    private static func findEndTag(_ bytes: [UInt8], _ name: String, from start: Int) -> Int? {
        var index = start
        while let found = find(bytes, "</" + name, from: index) {
            let after = found + 2 + name.utf8.count
            if after >= bytes.count { return bytes.count }
            let byte = bytes[after]
            if isSpace(byte) || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "/") {
                return find(bytes, ">", from: after).map { $0 + 1 } ?? bytes.count
            }
            index = after
        }
        return nil
    }
}

/// The resources a page's HTML adds to the map: its references resolved, filtered and capped.
public enum PageDiscovery {
    /// The most resources one page adds in a refresh; references past it, in document order, are left out.
    public static let maximumPerPage = 64

    /// The references of `html` (the body of `page`), resolved against `page` and its `<base href>`, without their
    /// `#fragment`, kept only when http(s), on `page`'s own host and port (exact match, no registrable-domain
    /// guess: a CDN host is never added by a page) and acceptable to `allowHosts` like any manifest URL; each once,
    /// in document order, at most `limit`.
    public static func resources(in html: String, page: String, allowHosts: [String], limit: Int = maximumPerPage) -> [String] {
        guard let pageURL = URL(string: page), let pageOrigin = origin(of: pageURL) else { return [] }
        let references = HTMLReferenceScanner.scan(html)
        var base = pageURL
        if let href = references.base, let resolved = URL(string: href, relativeTo: pageURL)?.absoluteURL, origin(of: resolved) != nil {
            base = resolved
        }
        var urls: [String] = []
        var seen: Set<String> = []
        for reference in references.urls {
            guard urls.count < limit else { break }
            guard let resolved = URL(string: reference, relativeTo: base)?.absoluteURL, origin(of: resolved) == pageOrigin else {
                continue
            }
            var text = resolved.absoluteString
            if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }
            guard ResourceManifest.problem(with: text, allowHosts: allowHosts) == nil, seen.insert(text).inserted else { continue }
            urls.append(text)
        }
        return urls
    }

    /// `scheme://host:port` of an http(s) URL without user information, lowercased; nil otherwise.
    private static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = url.host?.lowercased(),
            !host.isEmpty, url.user == nil, url.password == nil
        else { return nil }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }
}
