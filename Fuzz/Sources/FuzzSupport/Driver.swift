import CLibFuzzer

/// Runs libFuzzer with `argv` and `target` as the function under test; returns its exit status.
///
/// SwiftPM names an executable's entry point `<Module>_main` and aliases `main` to it when linking, so a target built
/// with `-parse-as-library` must define that symbol itself: each target's `<Module>_main` calls this.
public func runLibFuzzer(
    argc: CInt, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
    _ target: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt {
    var argc = argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
    return LLVMFuzzerRunDriver(&argc, &argv, target)
}

/// The input as a byte array (libFuzzer may pass a null pointer for an empty input).
public func inputBytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// Stops the run with a message when an invariant does not hold: libFuzzer saves the input as a crash.
public func require(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line
) {
    if !condition() { fatalError("invariant broken: \(message())", file: file, line: line) }
}
