// Page URLs as `HTTPURL(parsing:)` reads them (every trigger and `page=` read carries one from the browser).
//
// Checks, beyond no crash and no sanitizer report:
// - the byte parser gives exactly what the `Character` parser it replaced gives (`init(parsingCharacters:)` after the
//   byte prelude of length and control characters): the same URL, or the same message;
// - the parts an accepted URL reads back from its offsets are the `String`s the parser stored before
//   (`referenceURLParts`);
// - an accepted URL has scheme http or https, a lowercase origin, no default or out-of-range port, a path starting
//   with `/`, and is accepted again, unchanged, when written back from its parts;
// - the canonical path (byte rules) is the `Character` segments joined (it is not idempotent, nor meant to be:
//   `/a//` is `/a/`, another page than `/a`);
// - the name derived from an api URL (byte rules) is the one the `Character` rules derive.
import FuzzSupport

@testable import FuzzReference
@testable import PrefetchCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = inputText(data, size)
    let parsed = outcome { () throws(URLProblem) in try HTTPURL(parsing: text) }
    require(parsed == referenceURL(text), "byte parser \(parsed) != Character parser \(referenceURL(text)) for \(text.debugDescription)")
    guard case .success(let url) = parsed else { return 0 }
    // The parts read back from the offsets are the Strings the parser stored before they were offsets.
    let parts = ReferenceURLParts(url)
    require(
        parts == referenceURLParts(text), "parts \(parts) != \(String(describing: referenceURLParts(text))) for \(text.debugDescription)")
    require(url.scheme == "http" || url.scheme == "https", "scheme \(url.scheme)")
    require(url.origin == url.origin.lowercased(), "origin \(url.origin) is not lowercase")
    if let port = url.port {
        require((1...65535).contains(port) && port != (url.scheme == "https" ? 443 : 80), "port \(port) kept")
    }
    require(url.path.hasPrefix("/"), "path \(url.path.debugDescription) does not start with /")
    var written = url.origin + url.path
    if let query = url.query { written += "?" + query }
    if let fragment = url.fragment { written += "#" + fragment }
    let again = outcome { () throws(URLProblem) in try HTTPURL(parsing: written) }
    require(
        again == .success(url), "\(written.debugDescription), written back from the parts of \(text.debugDescription), parses to \(again)")

    let canonical = PathRules.canonical(url.path)
    require(canonical == "/" + PathRules.segments(of: url.path).joined(separator: "/"), "canonical path differs from the segments")
    require(Validator.derivedName(from: url) == Validator.derivedNameFromCharacters(url.path), "derived names differ for \(url.path)")
    return 0
}

private func outcome(_ parse: () throws(URLProblem) -> HTTPURL) -> Result<HTTPURL, URLProblem> {
    do { return .success(try parse()) } catch { return .failure(error) }
}

@_cdecl("FuzzURL_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc: argc, argv: argv, fuzz)
}
