// The RESP2 reply parser (`RESPParser`), which reads whatever bytes the Redis server (or anything that answers on its
// address) sends the pool.
//
// Checks, beyond no crash and no sanitizer report:
// - the input parsed in one piece and in pieces cut where the input says gives the same replies and the same
//   error (a reply never depends on how the bytes arrived);
// - every reply parsed, encoded again as a server would, parses back to itself;
// - the bytes consumed never exceed the limits: no bulk string, array, nesting or reply beyond them is handed out;
// - a command encoded from the input is read back by the parser as the array of bulk strings it is.
import FuzzSupport
import NIOCore

@testable import RedisStore

/// Small limits, so the fuzzer reaches them, and the store's own.
let smallLimits = RESPLimits(maximumBulkBytes: 64, maximumReplyBytes: 512, maximumElements: 32, maximumDepth: 4, maximumLineBytes: 48)
let storeLimits = RESPLimits(maximumValueBytes: 16 * 1024 * 1024)

/// Every reply in `chunks` fed one after another, and the error that stopped the parse, if any.
func parse(_ chunks: [ArraySlice<UInt8>], limits: RESPLimits) -> ([RedisValue], RESPError.Kind?) {
    var parser = RESPParser(limits: limits)
    var buffer = ByteBuffer()
    var values: [RedisValue] = []
    do throws(RESPError) {
        for chunk in chunks {
            buffer.writeBytes(chunk)
            while let value = try parser.next(from: &buffer) { values.append(value) }
        }
    } catch {
        return (values, error.kind)
    }
    return (values, nil)
}

/// How deep `value`'s arrays nest, how many elements they hold, and its longest string.
func shape(_ value: RedisValue) -> (depth: Int, elements: Int, longest: Int) {
    switch value {
    case .array(let elements):
        var result = (depth: 1, elements: elements.count, longest: 0)
        for element in elements {
            let inner = shape(element)
            result.depth = max(result.depth, inner.depth + 1)
            result.elements += inner.elements
            result.longest = max(result.longest, inner.longest)
        }
        return result
    case .string(let bytes): return (0, 0, bytes.count)
    default: return (0, 0, 0)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = inputBytes(data, size)
    guard let control = input.first else { return 0 }
    let bytes = input.dropFirst()
    let limits = control & 1 == 0 ? smallLimits : storeLimits

    let (whole, wholeError) = parse([bytes], limits: limits)
    // Cut points drawn from the control byte: every `step` bytes, or byte by byte.
    let step = Int(control >> 1) % 13 + 1
    let pieces = stride(from: bytes.startIndex, to: bytes.endIndex, by: step).map {
        bytes[$0..<min($0 + step, bytes.endIndex)]
    }
    let (split, splitError) = parse(pieces, limits: limits)
    require(whole == split, "the replies depend on how the bytes arrived: \(whole) vs \(split) (pieces of \(step))")
    require(wholeError == splitError, "the error depends on how the bytes arrived: \(String(describing: wholeError)) vs \(String(describing: splitError))")

    for value in whole {
        let measured = shape(value)
        require(measured.depth <= limits.maximumDepth, "a reply nested \(measured.depth) deep was handed out")
        require(measured.elements <= limits.maximumElements, "a reply of \(measured.elements) elements was handed out")
        require(measured.longest <= limits.maximumBulkBytes, "a string of \(measured.longest) bytes was handed out")
        var encoded = ByteBuffer()
        RESPEncoder.encode(reply: value, into: &encoded)
        // The encoder writes a status or error as given; one the parser produced holds no CR or LF.
        let again = parse([Array(encoded.readableBytesView)[...]], limits: storeLimits)
        require(again.0 == [value] && again.1 == nil, "\(value) does not survive being encoded again: \(again)")
    }

    // A command of the input's bytes, split into arguments at each 0xFF.
    let command = bytes.split(separator: 0xFF, omittingEmptySubsequences: false).map { Array($0) }
    var encoded = ByteBuffer()
    RESPEncoder.encode(command, into: &encoded)
    require(encoded.readableBytes == RESPEncoder.encodedCount(command), "encodedCount is not what encode wrote")
    let read = parse([Array(encoded.readableBytesView)[...]], limits: storeLimits)
    require(
        read.0 == [.array(command.map { .string($0) })] && read.1 == nil,
        "a command does not read back as its arguments: \(command) -> \(read)")
    return 0
}

@_cdecl("FuzzRESP_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc: argc, argv: argv, fuzz)
}
