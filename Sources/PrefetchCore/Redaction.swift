/// How a URL, or any text that may hold one, is shown to people: in logs, errors, `/readyz`, the operator views and
/// trace attributes. The one place that decides it (`scripts/lint.sh` refuses a config or upstream URL interpolated
/// anywhere else), so a new log line or view cannot forget it.
///
/// A URL keeps its scheme, host, port and path; it loses its userinfo (`user:password@`), its query's values (the
/// names stay, each value becomes `…`; a bare entry with no `=` becomes `…`) and its fragment. A URL's query is where access tokens, signatures and
/// session ids travel (`?access_token=…`, presigned URLs); userinfo is a password by definition.
public enum Redaction {
    /// The redacted placeholder for a removed value.
    public static let placeholder = "…"

    /// `text` as shown to people: every `http://`, `https://`, `redis*://` URL in it redacted (see the type's
    /// notes); anything else (a file path, a message) unchanged.
    public static func text(_ text: String) -> String {
        guard text.contains("://") else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count)
        var rest = Substring(text)
        while let range = schemeMarker(in: rest) {
            // The scheme is the run of scheme characters just before `://`.
            let prefix = rest[rest.startIndex..<range.lowerBound]
            let schemeStart =
                prefix.lastIndex(where: { !($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == ".") })
                .map { prefix.index(after: $0) } ?? prefix.startIndex
            result += prefix[prefix.startIndex..<schemeStart]
            // The URL runs to the first whitespace, quote or angle bracket (how URLs end inside messages).
            var urlEnd = rest[range.upperBound...].firstIndex(where: { $0.isWhitespace || "\"'<>`".contains($0) }) ?? rest.endIndex
            // Punctuation that ends a sentence or a parenthesis is the message's, not the URL's.
            while urlEnd > range.upperBound, ":,.;)]".contains(rest[rest.index(before: urlEnd)]) {
                urlEnd = rest.index(before: urlEnd)
            }
            result += url(String(rest[schemeStart..<urlEnd]))
            rest = rest[urlEnd...]
        }
        result += rest
        return result
    }

    /// `url` as shown to people: scheme, host, port and path, the query's names with `…` for their values, no
    /// userinfo and no fragment. Text that is not `scheme://…` is returned unchanged.
    public static func url(_ url: String) -> String {
        guard let marker = schemeMarker(in: Substring(url)) else { return url }
        let scheme = url[url.startIndex..<marker.lowerBound]
        var rest = url[marker.upperBound...]
        if let hash = rest.firstIndex(of: "#") { rest = rest[rest.startIndex..<hash] }
        var query: Substring?
        if let question = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: question)...]
            rest = rest[rest.startIndex..<question]
        }
        // Userinfo ends at the last `@` of the authority (the authority ends at the first `/`).
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        if let at = rest[rest.startIndex..<authorityEnd].lastIndex(of: "@") {
            rest = rest[rest.index(after: at)...]
        }
        var shown = "\(scheme)://\(rest)"
        if let query {
            let names = query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
                let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                return pair.contains("=") ? "\(name)=\(placeholder)" : placeholder
            }
            shown += "?" + names.joined(separator: "&")
        }
        return shown
    }

    /// The range of the first `://` in `text`.
    private static func schemeMarker(in text: Substring) -> Range<Substring.Index>? {
        var index = text.startIndex
        while index < text.endIndex {
            if text[index] == ":", text[index...].hasPrefix("://") {
                return index..<text.index(index, offsetBy: 3)
            }
            index = text.index(after: index)
        }
        return nil
    }
}
