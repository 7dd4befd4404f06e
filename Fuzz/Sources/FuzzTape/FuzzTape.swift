// The tape (`JSONTape`, unsafe byte code over config JSON) and the loader that validates from it, on arbitrary bytes.
//
// Checks, beyond no crash and no sanitizer report:
// - the tape reads what `JSONParser` (the safe reference, itself held to ReferenceJSONParser) reads: the same value, or
//   the same message at the same line and column;
// - on an accepted document, the tape's compact text is the writer's text of that value, and the source range of each
//   value of the top-level container parses to that value on its own;
// - `ConfigLoader.parse` (on the tape) concludes what the tree-based loader it replaced (ReferenceConfigLoader.swift)
//   concludes: the same config, or the same problems and warnings with the same paths, messages and order;
// - every interface of an accepted config composes from its request template what the rules compose.
import FuzzSupport

@testable import FuzzReference
@testable import PrefetchCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = inputBytes(data, size)
    let parsed: Result<JSONValue, JSONParseError>
    do { parsed = .success(try JSONParser.parse(bytes)) } catch { parsed = .failure(error) }
    let tape: JSONTape
    do {
        tape = try JSONTape.build(bytes)
    } catch {
        require(parsed == .failure(error), "the tape refuses with \(error), the parser gives \(parsed)")
        checkLoader(bytes)
        return 0
    }
    tape.read { reader in
        let value = reader.value(0)
        require(parsed == .success(value), "the tape reads \(value), the parser gives \(parsed)")
        var compact: [UInt8] = []
        reader.writeCompact(0, into: &compact)
        require(String(decoding: compact, as: UTF8.self) == value.jsonText, "the tape's compact text is not the writer's")
        var parts: [Int] = []
        switch reader.kind(0) {
        case .object: parts = reader.members(0).map(\.value)
        case .array: parts = Array(reader.elements(0))
        default: break
        }
        for part in parts {
            let range = reader.sourceRange(part)
            require(
                (try? JSONParser.parse(Array(bytes[range]))) == reader.value(part), "the source range \(range) is not its value")
        }
    }
    checkLoader(bytes)
    return 0
}

private func checkLoader(_ bytes: [UInt8]) {
    let new = summary { () throws(ConfigError) in try ConfigLoader.parse(bytes, source: "fuzz") }
    let old = summary { () throws(ConfigError) in try ReferenceConfigLoader.parse(bytes, source: "fuzz") }
    require(new == old, "the tape-based loader concludes\n\(new)\n--- the tree-based one\n\(old)")
    guard let loaded = try? ConfigLoader.parse(bytes, source: "fuzz") else { return }
    let pairs = QueryPair.split("a=1&_=2&a=3&id=007&role=x&%C3%A9=%22") + [QueryPair(capturedName: "id", value: "12")]
    for config in [loaded.config] + (loaded.canary.map { [$0.config] } ?? []) {
        for entry in config.pages {
            for interface in entry.interfaces {
                require(interface.template != nil, "\(interface.name) has no request template")
                let fast = Composer.compose(interface: interface, pairs: pairs)
                let rules = Composer.composeByRules(interface: interface, pairs: pairs)
                require(
                    fast.url == rules.url && fast.body == rules.body && fast.headers == rules.headers,
                    "\(interface.name): the template composes \(fast.url) \(fast.body ?? "-"), the rules \(rules.url) \(rules.body ?? "-")")
            }
        }
    }
}

/// What a load concluded, as comparable text.
private func summary(_ parse: () throws(ConfigError) -> LoadedConfig) -> String {
    do {
        let loaded = try parse()
        var lines = describe(loaded.config)
        lines += loaded.warnings.map { "warning \($0)" }
        if let canary = loaded.canary { lines += ["canary \(canary.basisPoints)"] + describe(canary.config) }
        return lines.joined(separator: "\n")
    } catch {
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
                    + "\(interface.bodyType) \(interface.credentials) \(interface.secPurpose) \(interface.query) \(interface.references) "
                    + "\(interface.referencePaths)")
        }
    }
    return lines
}

@_cdecl("FuzzTape_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc: argc, argv: argv, fuzz)
}
