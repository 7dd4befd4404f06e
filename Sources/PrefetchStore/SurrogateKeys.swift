public import HTTPTypes

/// The surrogate keys a response is tagged with: its upstream's `Surrogate-Key` header (space-separated keys, as
/// Fastly reads it). A store records them when it keeps the response, within fixed bounds, so an upstream cannot
/// grow the record: at most ``maximumCount`` keys per response, each 1 to ``maximumBytes`` bytes of visible ASCII
/// (`!` to `~`); longer or other keys are ignored, and so is everything after the first ``maximumCount``.
public enum SurrogateKeys {
    /// Most keys recorded per response.
    public static let maximumCount = 32
    /// Longest key recorded, in bytes.
    public static let maximumBytes = 256
    /// `Surrogate-Key`.
    public static let headerName = HTTPField.Name("Surrogate-Key")!

    /// Whether `key` is a key a response can be tagged with (1 to ``maximumBytes`` bytes of visible ASCII).
    public static func isValid(_ key: some StringProtocol) -> Bool {
        let bytes = key.utf8
        return !bytes.isEmpty && bytes.count <= maximumBytes && bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// The keys `headers` tag a response with, in order, each once, within the bounds above.
    public static func keys(in headers: HTTPFields) -> [String] {
        var keys: [String] = []
        for value in headers[values: headerName] {
            for word in value.split(whereSeparator: { $0 == " " || $0 == "\t" }) where isValid(word) {
                let key = String(word)
                if !keys.contains(key) { keys.append(key) }
                if keys.count == maximumCount { return keys }
            }
        }
        return keys
    }
}
