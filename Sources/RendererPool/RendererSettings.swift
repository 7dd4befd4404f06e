import Foundation

/// Renderer profiles: the `renderers` file (`configs/renderers.json` by default).
///
/// ```json
/// {"renderers": {"main": {"minIdle": 2, "maxSize": 8}, "plain": {"minIdle": 1, "maxSize": 4}}}
/// ```
/// Every profile field is optional (see ``RendererProfile`` and docs/configuration.md, "Warm renderer profiles", for the defaults). Without a file
/// the service runs the two default profiles: `main` (first-party pages) and `plain` (third-party pages).
public enum RendererSettings {
    /// The profiles used when no renderers file exists.
    public static var defaultProfiles: [String: RendererProfile] {
        var main = RendererProfile()
        main.minIdle = 2
        main.maxSize = 8
        var plain = RendererProfile()
        plain.minIdle = 1
        plain.maxSize = 4
        return ["main": main, "plain": plain]
    }

    /// A renderers file that could not be used, with every problem.
    public struct LoadError: Error, CustomStringConvertible {
        public var path: String
        public var problems: [String]
        public var description: String { "invalid renderers file \(path): " + problems.joined(separator: "; ") }
    }

    /// Reads and validates the profiles in `path`.
    public static func load(path: String) throws(LoadError) -> [String: RendererProfile] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LoadError(path: path, problems: ["cannot read the file"])
        }
        struct File: Decodable { var renderers: [String: RendererProfile] }
        let profiles: [String: RendererProfile]
        do {
            profiles = try JSONDecoder().decode(File.self, from: data).renderers
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context), let DecodingError.keyNotFound(
            _, context),
            let DecodingError.dataCorrupted(context)
        {
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            throw LoadError(
                path: path.isEmpty ? "(root)" : String(path.dropFirst()),
                problems: ["\(path.isEmpty ? "" : String(path.dropFirst()) + ": ")\(context.debugDescription)"])
        } catch {
            throw LoadError(path: path, problems: ["\(error)"])
        }
        if profiles.isEmpty { throw LoadError(path: path, problems: ["renderers: at least one profile is required"]) }
        let problems = profiles.keys.sorted().flatMap { profiles[$0]!.problems(path: "renderers.\($0)") }
        if !problems.isEmpty { throw LoadError(path: path, problems: problems) }
        return profiles
    }
}
