import Foundation

/// The Public Suffix List (the ICANN and private sections, as browsers use them), from the snapshot bundled as a
/// resource (`Resources/public_suffix_list.dat`: Debian's `publicsuffix` package, rules only, labels in punycode;
/// `scripts/update-public-suffixes.sh` refreshes it, and ``snapshot`` names the version it holds).
///
/// A browser refuses a cookie whose `Domain` is a public suffix (`co.uk`, `com.cn`, `github.io`), unless it is the
/// request's own host, where it becomes a host-only cookie (RFC 6265bis §5.7 step 9); this is the list it asks.
struct PublicSuffixList: Sendable {
    /// Plain rules (`co.uk`).
    let rules: Set<String>
    /// The parents of wildcard rules (`*.ck` is stored as `ck`).
    let wildcards: Set<String>
    /// Exception rules without their `!` (`www.ck`).
    let exceptions: Set<String>
    /// The first line of the snapshot (its source and version).
    let snapshot: String

    /// The bundled snapshot, read once.
    static let bundled: PublicSuffixList = {
        guard let url = Bundle.module.url(forResource: "public_suffix_list", withExtension: "dat"),
            let text = try? String(contentsOf: url, encoding: .utf8)
        else {
            // Without the list only the implicit `*` rule holds: every single-label domain is a public suffix.
            return PublicSuffixList(text: "// no Public Suffix List snapshot in the bundle")
        }
        return PublicSuffixList(text: text)
    }()

    /// The list in `text` (one rule a line; `//` comments).
    init(text: String) {
        var rules: Set<String> = []
        var wildcards: Set<String> = []
        var exceptions: Set<String> = []
        var snapshot = ""
        for line in text.split(whereSeparator: \.isNewline) {
            let rule = line.trimmingCharacters(in: .whitespaces).lowercased()
            if rule.hasPrefix("//") {
                if snapshot.isEmpty { snapshot = String(rule.dropFirst(2)).trimmingCharacters(in: .whitespaces) }
                continue
            }
            if rule.isEmpty { continue }
            if rule.hasPrefix("!") {
                exceptions.insert(String(rule.dropFirst()))
            } else if rule.hasPrefix("*.") {
                wildcards.insert(String(rule.dropFirst(2)))
            } else {
                rules.insert(rule)
            }
        }
        self.rules = rules
        self.wildcards = wildcards
        self.exceptions = exceptions
        self.snapshot = snapshot
    }

    /// Whether `domain` (lowercased, no leading dot) is a public suffix: a rule names it, a wildcard rule covers it
    /// and no exception does, or it is a single label (the list's implicit `*` rule).
    func isPublicSuffix(_ domain: String) -> Bool {
        let domain = domain.lowercased()
        if exceptions.contains(domain) { return false }
        if rules.contains(domain) { return true }
        guard let dot = domain.firstIndex(of: ".") else { return !domain.isEmpty }
        return wildcards.contains(String(domain[domain.index(after: dot)...]))
    }
}
