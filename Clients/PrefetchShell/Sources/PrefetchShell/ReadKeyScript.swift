public import Foundation

/// The document-start script that hands a page its read key: `window.__PREFETCH_READ_KEY__ = "<key>";`, run only
/// when the document's origin is the page's own: both its URL's origin (`location.origin`) and its effective origin
/// (`window.origin`, which is `"null"` in an opaque-origin document: one served with CSP `sandbox`, a sandboxed
/// frame), so a document that cannot be told apart from any other never gets the key. A page URL without an origin
/// of its own (`about:blank`, `data:`) gets no script at all (``source(readKey:page:)`` is nil).
///
/// Every value in the script is a JavaScript string literal whose characters outside printable ASCII, and the
/// characters that mean something to a string, an HTML parser or a script element (`\`, `"`, `'`, `<`, `>`, `&`), are
/// written as `\uXXXX` escapes (UTF-16 code units; U+2028 and U+2029, which end a line in older JavaScript, and
/// every control character included). So no key and no page URL can end the string, close a `<script>` element or
/// start a comment, and the script is plain ASCII.
public enum ReadKeyScript {
    /// The global the page client (`client.js`) reads the key from.
    public static let globalName = "__PREFETCH_READ_KEY__"

    /// The script for `readKey`, guarded by the origin of `page` (scheme, host and port as a browser writes
    /// `location.origin`): a document of any other origin (a redirect, a link the user follows) does not get the key.
    public static func source(readKey: String, page: URL) -> String? {
        let origin = Self.origin(of: page)
        guard origin != "null" else { return nil }
        let literal = javaScriptString(origin)
        return
            "if (window.location.origin === \(literal) && window.origin === \(literal)) { window.\(globalName) = \(javaScriptString(readKey)); }"
    }

    /// `text` as a double-quoted JavaScript string literal in printable ASCII without `\`, quotes, `<`, `>` or `&`.
    public static func javaScriptString(_ text: String) -> String {
        var literal = "\""
        for unit in text.utf16 {
            switch unit {
            case 0x20...0x7E where !escaped.contains(unit):
                literal.unicodeScalars.append(Unicode.Scalar(UInt8(unit)))
            default:
                literal += "\\u"
                for shift in stride(from: 12, through: 0, by: -4) {
                    literal.unicodeScalars.append(Unicode.Scalar(hexDigits[Int(unit >> UInt16(shift)) & 0xF]))
                }
            }
        }
        return literal + "\""
    }

    /// The page's origin as `location.origin` spells it: lowercased scheme and host, the port only when it is not
    /// the scheme's default. A URL without a host has the opaque origin `"null"`, which no document matches here.
    static func origin(of page: URL) -> String {
        guard let scheme = page.scheme?.lowercased(), let host = page.host?.lowercased(), !host.isEmpty else { return "null" }
        let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        guard let port = page.port, port != defaultPort else { return "\(scheme)://\(shownHost)" }
        return "\(scheme)://\(shownHost):\(port)"
    }

    private static let escaped: Set<UInt16> = Set("\\\"'<>&".utf16)
    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)
}
