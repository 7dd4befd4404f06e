import HTTPTypes

/// The upstream's `Set-Cookie` lines as a shell receives them: a native shell's HTTP transport (Foundation's
/// `HTTPURLResponse` on every platform) joins repeated headers with commas, and the shell SDK splits them back at a
/// comma followed by `name=` (before any `;`). A single line that holds such a comma (`pref=en, sid=attacker;
/// Domain=…`, one cookie to a browser) would come out as two, planting a cookie the upstream never set as such (an
/// upstream that reflects input into a cookie value makes that a session fixation). Such a line is not replayed, so
/// every `Set-Cookie` a shell gets splits back into exactly the lines the upstream sent. An `Expires` date's comma
/// (`Wed, 01 Jan 2031`) is no `name=` and stays.
public enum SetCookieLines {
    /// Whether a joined-header reader would split `value` into more than one cookie.
    public static func wouldSplit(_ value: String) -> Bool {
        var rest = Substring(value)
        while let comma = rest.firstIndex(of: ",") {
            let after = rest[rest.index(after: comma)...]
            let next = after.prefix { $0 != ";" && $0 != "," }
            if let equals = next.firstIndex(of: "="), isToken(next[..<equals].trimmingBlanks) { return true }
            rest = after
        }
        return false
    }

    /// Whether `field` is replayed: any header but a `Set-Cookie` line a shell would split into several cookies.
    static func replayable(_ field: HTTPField) -> Bool {
        field.name != .setCookie || !wouldSplit(field.value)
    }

    private static func isToken(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains($0) }
    }
}

extension Substring {
    fileprivate var trimmingBlanks: Substring {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !blank($0) }), let end = lastIndex(where: { !blank($0) }) else { return "" }
        return self[start...end]
    }
}
