// The byte JSON reader (config files, upstream answers read for dependents, bodies spliced into the results view):
// `JSONParser.parse` and `JSONBytes.isValid` on arbitrary bytes.
//
// Checks, beyond no crash and no sanitizer report:
// - the parser gives exactly what the reference parser (ReferenceParsers.swift) gives: the same value, or the same
//   message at the same line and column;
// - the validator agrees: it accepts what the parser accepts, and refuses the rest, but for duplicate member names
//   (it does not look for them) and a byte-order mark (it does not skip one); lone surrogates in `\u` escapes are
//   refused by both (once a finding, Fuzz/Findings/README.md);
// - what the writer makes parses back to the same value, and is the text the reference writer makes;
// - `JSONBytesWriter` splices the accepted bytes (with room for one more level) into valid JSON.
import FuzzSupport
@testable import FuzzReference
@testable import PrefetchCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = inputBytes(data, size)
    let parsed: Result<JSONValue, JSONParseError>
    do { parsed = .success(try JSONParser.parse(bytes)) } catch { parsed = .failure(error) }
    let reference: Result<JSONValue, JSONParseError>
    do { reference = .success(try ReferenceJSONParser.parse(bytes)) } catch { reference = .failure(error) }
    require(parsed == reference, "parser \(parsed) != reference \(reference)")

    let valid = JSONBytes.isValid(bytes)
    let hasBOM = bytes.starts(with: [0xEF, 0xBB, 0xBF])
    switch parsed {
    case .success(let value):
        require(valid || hasBOM, "the parser accepts what the validator refuses")
        let text = value.jsonText
        require(text == referenceText(value), "the writer's text differs from the reference writer's")
        let again = try? JSONParser.parse(text)
        require(again == value, "the written text \(text.debugDescription) parses to another value")
        require(JSONBytes.isValid(Array(text.utf8)), "the written text is not valid JSON")
        if valid && depth(value) < JSONBytes.maximumDepth {
            var writer = JSONBytesWriter()
            writer.beginArray()
            writer.raw(bytes)
            writer.string(text)
            writer.endArray()
            require(JSONBytes.isValid(writer.bytes), "spliced bytes are not valid JSON")
            require(
                (try? JSONParser.parse(writer.bytes)) == .array([value, .string(text)]), "spliced bytes do not parse back to their parts")
        }
    case .failure(let error):
        require(!valid || error.message.hasPrefix("duplicate member name"), "the validator accepts what the parser refuses: \(error)")
    }
    return 0
}

/// How deeply arrays and objects nest in `value` (a scalar is 0).
private func depth(_ value: JSONValue) -> Int {
    switch value {
    case .array(let items): 1 + (items.map(depth).max() ?? 0)
    case .object(let object): 1 + (object.members.map { depth($0.value) }.max() ?? 0)
    default: 0
    }
}

private func referenceText(_ value: JSONValue) -> String {
    var out = ""
    ReferenceJSONWriter.write(value, into: &out)
    return out
}

@_cdecl("FuzzJSON_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc: argc, argv: argv, fuzz)
}
