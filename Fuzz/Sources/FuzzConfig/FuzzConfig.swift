// Config JSON as `ConfigLoader.parse` reads it (a file, or a config source polled over HTTP).
//
// Checks, beyond no crash and no sanitizer report:
// - validation is a function of the JSON value: the document written back compactly by `JSONWriter` validates to the
//   same config (or the same problems and warnings);
// - every problem and warning has a message;
// - an accepted config plans each entry's own URL (placeholders filled in) to that entry or a more specific one, and
//   every plan keeps the composer's invariants (`PlanChecks`), dependents resolved against an empty answer included.
import FuzzSupport
@testable import PrefetchCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = inputBytes(data, size)
    let outcome = summary { () throws(ConfigError) in try ConfigLoader.parse(bytes, source: "fuzz") }
    if let root = try? JSONParser.parse(bytes) {
        let again = summary { () throws(ConfigError) in try ConfigLoader.parse(Array(root.jsonText.utf8), source: "fuzz") }
        require(outcome == again, "the config validates differently once written back:\n\(outcome)\n---\n\(again)")
    }
    guard let loaded = try? ConfigLoader.parse(bytes, source: "fuzz") else { return 0 }
    for config in [loaded.config] + (loaded.canary.map { [$0.config] } ?? []) {
        for entry in config.pages {
            let page = entry.url.replacing("{", with: "x").replacing("}", with: "y").replacing("*", with: "z")
            guard let plan = try? Plan.make(page: page + "?fuzz=1&a=b", config: config), let url = try? HTTPURL(parsing: page + "?fuzz=1&a=b")
            else { continue }
            PlanChecks.check(plan, page: url, config: config)
            for request in plan.requests where !request.dependencies.isEmpty {
                // With answers that hold nothing, a dependent fails with a dependency error, never anything else.
                let values = Dictionary(request.interface.references.map { ($0, JSONValue.object(JSONObject())) }) { first, _ in first }
                do {
                    let resolved = try request.resolved(with: values)
                    require(!resolved.url.contains("${"), "a resolved request still holds a reference")
                } catch {
                    require(DependencyError.codes.contains(error.code), "unknown dependency error code \(error.code)")
                }
            }
        }
    }
    return 0
}

/// What validation concluded, as comparable text.
private func summary(_ parse: () throws(ConfigError) -> LoadedConfig) -> String {
    do {
        let loaded = try parse()
        var lines = describe(loaded.config)
        lines += loaded.warnings.map { "warning \($0)" }
        if let canary = loaded.canary { lines += ["canary \(canary.basisPoints)"] + describe(canary.config) }
        for problem in loaded.warnings { require(!problem.message.isEmpty, "a warning without a message") }
        return lines.joined(separator: "\n")
    } catch {
        for problem in error.problems + error.warnings { require(!problem.message.isEmpty, "a problem without a message at \(problem.path)") }
        return (error.problems.map { "problem \($0)" } + error.warnings.map { "warning \($0)" }).joined(separator: "\n")
    }
}

private func describe(_ config: PrefetchConfig) -> [String] {
    var lines = ["config \(config.name) \(config.version)"]
    for entry in config.pages {
        lines.append("page \(entry.index) \(entry.url) \(entry.parsedURL) \(String(describing: entry.pattern)) \(entry.partnerOrigins)")
        for interface in entry.interfaces {
            lines.append(
                "  \(interface.name) \(interface.method) \(interface.api) \(interface.apiURL) url=\(interface.urlParam) body=\(interface.bodyParam) "
                    + "\(JSONValue.object(interface.body).jsonText) \(interface.hasBody) ttl=\(interface.ttlSeconds) "
                    + "timeout=\(interface.timeoutMilliseconds) \(interface.headers) \(interface.params?.sorted() ?? []) "
                    + "\(interface.bodyType) \(interface.credentials) \(interface.secPurpose) \(interface.query) \(interface.references)")
        }
    }
    return lines
}

@_cdecl("FuzzConfig_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc: argc, argv: argv, fuzz)
}
