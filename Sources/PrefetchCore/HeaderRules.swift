public import HTTPTypes

/// The one rule for a header the service is handed, by the config (an interface's fixed headers) or by a caller (a
/// trigger's `headers`): a name is an RFC 9110 token (ASCII only, so nothing case-folds into another name), and a
/// value has no control character but tab.
public enum HeaderRules {
    /// `text` as a header name, or nil when it is not an RFC 9110 token.
    public static func name(_ text: String) -> HTTPField.Name? {
        guard !text.isEmpty, text.utf8.allSatisfy(isTokenByte) else { return nil }
        return HTTPField.Name(text)
    }

    /// Whether `value` holds a control character (other than tab), which no header value may.
    public static func hasControlCharacter(_ value: String) -> Bool {
        value.unicodeScalars.contains { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }
    }

    /// Whether `byte` may appear in a header name (an RFC 9110 `tchar`).
    public static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
