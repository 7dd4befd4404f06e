/// What one request asked the upstream to do, parsed from its query string.
package struct UpstreamScript: Equatable {
    package var status = 200
    package var delayMilliseconds = 0
    var setCookies: [String] = []
    var cacheControl: String?
    var contentType: String?
    var bytes: Int?
    var body: String?
    var dripMilliseconds: Int?
    var resetAfter: Int?
    var shortAfter: Int?
    var garbage = false
    package var hang = false
    /// Hold the answer until the gate of this name is released (`hold=NAME`; `TestUpstream.release(_:)` or
    /// `POST /__release?name=NAME`), so a test decides when an upstream answers instead of a delay deciding it.
    /// Once released, a gate lets every later request through at once (until a reset). `delay` counts from the
    /// release.
    package var hold: String?
    /// `Surrogate-Key` header values to answer with (`surrogateKey`, repeatable).
    var surrogateKeys: [String] = []
    /// A `Surrogate-Key` header of this many generated keys (`key-0 key-1 ...`).
    var generatedSurrogateKeys: Int?
    /// Answer with the mirror: a JSON function of exactly what determines a personalised answer (`mirror=1`).
    var mirror = false
    /// With the mirror: a guest token for this page open (from the request's trace id), set as a cookie too
    /// (`token=1`).
    var token = false
    /// With the mirror: every request header but `traceparent` (whose span id is new on every attempt) reflected
    /// into the answer, sorted by name, the way echo, debug and many gateway error pages reflect them (`reflect=1`).
    var reflect = false

    package init(query: String?) {
        for (name, value) in parseQuery(query) {
            switch name {
            case "status": status = Int(value).map { min(max($0, 100), 999) } ?? status
            case "delay": delayMilliseconds = max(0, Int(value) ?? 0)
            case "setCookie": setCookies.append(value)
            case "cacheControl": cacheControl = value
            case "contentType": contentType = value
            case "bytes": bytes = Int(value).map { max(0, $0) }
            case "body": body = value
            case "drip": dripMilliseconds = Int(value).map { max(0, $0) }
            case "reset": resetAfter = Int(value).map { max(0, $0) }
            case "short": shortAfter = Int(value).map { max(0, $0) }
            case "garbage": garbage = value == "1" || value == "true"
            case "hang": hang = value == "1" || value == "true"
            case "hold": hold = value
            case "surrogateKey": surrogateKeys.append(value)
            case "surrogateKeys": generatedSurrogateKeys = Int(value).map { min(max($0, 0), 100_000) }
            case "mirror": mirror = value == "1" || value == "true"
            case "token": token = value == "1" || value == "true"
            case "reflect": reflect = value == "1" || value == "true"
            default: break
            }
        }
    }
}

/// Splits a raw query string into percent-decoded name/value pairs, in order.
func parseQuery(_ query: String?) -> [(String, String)] {
    guard let query, !query.isEmpty else { return [] }
    return query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
        if let equals = pair.firstIndex(of: "=") {
            return (percentDecoded(pair[..<equals]), percentDecoded(pair[pair.index(after: equals)...]))
        }
        return (percentDecoded(pair), "")
    }
}

/// Percent-decodes `text`; malformed escapes are kept literally. `+` stays `+`.
func percentDecoded(_ text: Substring) -> String {
    var bytes: [UInt8] = []
    let utf8 = Array(text.utf8)
    var index = 0
    while index < utf8.count {
        if utf8[index] == UInt8(ascii: "%"), index + 2 < utf8.count, let byte = hexByte(utf8[index + 1], utf8[index + 2]) {
            bytes.append(byte)
            index += 3
        } else {
            bytes.append(utf8[index])
            index += 1
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// The byte two hex digits spell, or nil when they are not both hex digits.
private func hexByte(_ high: UInt8, _ low: UInt8) -> UInt8? {
    let digits = String(decoding: [high, low], as: UTF8.self)
    return digits.allSatisfy(\.isHexDigit) ? UInt8(digits, radix: 16) : nil
}

/// A JSON string literal for `text`.
func jsonString(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20:
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

/// A deterministic body of `count` bytes ("abc...z" repeated), so truncation is visible.
func patternBytes(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(ascii: "a") + UInt8($0 % 26) }
}
