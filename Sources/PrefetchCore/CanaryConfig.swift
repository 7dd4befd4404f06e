/// A candidate config served beside the active one to a share of users (the document's `canary` member):
///
/// ```json
/// {"code": 200, "data": {...}, "canary": {"percent": 10, "data": {"name": ..., "version": "5", "config": [...]}}}
/// ```
///
/// `canary.data` has the schema of `data` and is validated under the same rules (its problems are located under
/// `canary.data`); its version must differ from `data.version`. `percent` is the share of identified callers who
/// get the candidate, 0-100 with at most two decimals.
public struct CanaryConfig: Sendable {
    /// The candidate config (`canary.data`).
    public var config: PrefetchConfig
    /// The share of identified callers served the candidate, in hundredths of a percent (0...10000).
    public var basisPoints: Int

    /// A candidate served to `basisPoints` hundredths of a percent of identified callers (clamped to 0...10000).
    public init(config: PrefetchConfig, basisPoints: Int) {
        self.config = config
        self.basisPoints = min(max(basisPoints, 0), Self.wholeBasisPoints)
    }

    /// `basisPoints` for 100 %.
    public static let wholeBasisPoints = 10_000

    /// The share as a percentage (`10.5` for 10.5 %).
    public var percent: Double { Double(basisPoints) / 100 }

    /// `percent` as written back in documents and answers: `10`, `10.5`, `0.01`.
    public var percentText: String {
        let whole = basisPoints / 100
        let fraction = basisPoints % 100
        if fraction == 0 { return "\(whole)" }
        return fraction % 10 == 0 ? "\(whole).\(fraction / 10)" : "\(whole).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    /// The hundredths of a percent a JSON number literal means, when it is 0-100 with at most two decimals.
    public static func basisPoints(fromLiteral literal: String) -> Int? {
        let parts = literal.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let digits: (Substring) -> Bool = { !$0.isEmpty && $0.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } }
        guard let wholePart = parts.first, digits(wholePart), wholePart.count <= 3, let whole = Int(wholePart) else { return nil }
        var hundredths = 0
        if parts.count == 2 {
            var fraction = parts[1]
            guard digits(fraction) else { return nil }
            while fraction.count > 2, fraction.last == "0" { fraction = fraction.dropLast() }
            guard fraction.count <= 2, let value = Int(fraction) else { return nil }
            hundredths = fraction.count == 1 ? value * 10 : value
        }
        let total = whole * 100 + hundredths
        return total <= wholeBasisPoints ? total : nil
    }
}

extension Validator {
    /// The envelope keys of a `canary` object.
    static let canaryKeys: [StaticString] = ["percent", "data"]

    /// Validates the envelope's `canary` member against the active config (`nil` when `data` was invalid).
    mutating func validateCanary(_ value: Int, active: PrefetchConfig?) -> CanaryConfig? {
        guard let canary = object(value, "canary") else { return nil }
        unknownKeys(canary, known: Self.canaryKeys, "canary")
        var basisPoints: Int?
        if let percent = reader.member(canary, "percent") {
            if reader.kind(percent) == .number {
                let literal = reader.number(percent)
                basisPoints = CanaryConfig.basisPoints(fromLiteral: literal)
                if basisPoints == nil {
                    problem("canary.percent", "must be between 0 and 100 with at most two decimals, got \(literal)")
                }
            } else {
                problem("canary.percent", "must be a number between 0 and 100, got \(reader.kindName(percent))")
            }
        } else {
            problem("canary.percent", "is missing (the share of users, 0-100)")
        }
        guard let data = object(reader.member(canary, "data"), "canary.data") else { return nil }
        // The candidate goes through the very rules `data` does, on a validator of its own, so its paths can be
        // moved under `canary.` without touching the active config's.
        var inner = Validator(reader: reader, document: document)
        let config = inner.validateData(data)
        // A duplicate page names the entry it duplicates: that one is the candidate's too.
        problems += inner.problems.map {
            ConfigProblem(
                path: "canary." + $0.path,
                message: $0.message.replacing("duplicates data.config[", with: "duplicates canary.data.config["))
        }
        warnings += inner.warnings.map { ConfigProblem(path: "canary." + $0.path, message: $0.message) }
        if let config, let active, config.version == active.version {
            problem(
                "canary.data.version",
                "is \(JSONValue.string(config.version).jsonText), the same as data.version: a candidate must be another version")
            return nil
        }
        guard let config, let basisPoints else { return nil }
        return CanaryConfig(config: config, basisPoints: basisPoints)
    }
}
