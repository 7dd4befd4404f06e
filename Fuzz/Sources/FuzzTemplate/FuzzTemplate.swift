// Reference templates `${name:/pointer}` (config strings) and JSON pointers resolved in an upstream's JSON answer,
// the path of a dependent request's values. The input is a template, a newline, then the answer's bytes.
//
// Checks, beyond no crash and no sanitizer report:
// - a string without `${` is one literal (or nothing); a parsed template's literals and references write back to the
//   text it was parsed from;
// - a pointer's tokens, escaped again, are its text; it resolves to a value that is in the document;
// - rendering gives text or a `dependency_value` error, never anything else.
import FuzzSupport
@testable import PrefetchCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = inputBytes(data, size)
    let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
    let text = String(decoding: bytes[..<newline], as: UTF8.self)
    let document = newline < bytes.count ? try? JSONParser.parse(Array(bytes[(newline + 1)...])) : nil

    if let pointer = JSONPointer(text) {
        let escaped = pointer.tokens.map { $0.replacing("~", with: "~0").replacing("/", with: "~1") }
        require(pointer.tokens.isEmpty ? text.isEmpty : "/" + escaped.joined(separator: "/") == text, "pointer \(text.debugDescription) round trip")
        if let document { _ = pointer.resolve(in: document) }
    }
    switch Template.parse(text) {
    case .failure(let problem):
        require(!problem.message.isEmpty, "a template problem without a message")
        require(Template.mayHold(text), "a text without ${ fails as a template")
    case .success(let template):
        if !Template.mayHold(text) {
            require(template.references.isEmpty, "a text without ${ holds a reference")
        }
        var written = ""
        for part in template.parts {
            switch part {
            case .literal(let literal): written += literal
            case .reference(let reference):
                require(!reference.interface.isEmpty, "a reference without an interface")
                written += reference.description
            }
        }
        require(written == text, "template \(text.debugDescription) writes back as \(written.debugDescription)")
        var values: [Reference: JSONValue] = [:]
        if let document {
            for reference in template.references { values[reference] = reference.pointer.resolve(in: document) }
        }
        do {
            _ = try template.render(values, for: "fuzz")
        } catch {
            require(error.code == .dependencyValue, "render failed with \(error.code)")
        }
    }
    return 0
}

@_cdecl("FuzzTemplate_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc: argc, argv: argv, fuzz)
}
