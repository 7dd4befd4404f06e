/// A page's parameters as composing from a template reads them: the query's pairs, then the captured path segments,
/// each pair's texts (the URL text, the decoded name, its skeleton and the decoded value) byte ranges of one buffer.
///
/// Made per plan in memory lent for the plan (``with(query:captures:_:)``): cutting and decoding the page's query makes
/// no `String` and allocates nothing. It holds exactly what ``QueryPair`` holds (a property test holds the two to each
/// other), for pages whose parameter names are ASCII: there, comparing bytes is comparing `String`s. A page whose query
/// has a non-ASCII byte, or a name that decodes to non-ASCII text, has no table, and is composed from ``QueryPair``s.
struct PageParameters {
    struct Pair {
        /// The pair as it goes into a URL (``QueryPair/urlText``).
        var url: Range<Int>
        /// The decoded name, ASCII.
        var name: Range<Int>
        /// The name's ``Composer/nameSkeleton(_:)``.
        var skeleton: Range<Int>
        /// The decoded value's UTF-8 (the text of ``QueryPair/jsonValue``).
        var value: Range<Int>
        /// Whether the value is a canonical integer (a JSON number).
        var isNumber: Bool
    }

    let bytes: UnsafeBufferPointer<UInt8>
    let pairs: UnsafeBufferPointer<Pair>

    var count: Int { pairs.count }

    @inline(__always)
    func bytes(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: bytes[range]) }

    /// Whether the decoded names of pairs `first` and `second` are the same name.
    @inline(__always)
    func sameName(_ first: Int, _ second: Int) -> Bool {
        ByteText(bytes).equals(pairs[first].name, bytes(pairs[second].name))
    }

    /// Calls `body` with the parameters of a page whose raw query is `query` (its bytes, or `nil` for no query) and
    /// whose pattern captured `captures`; `nil` when they cannot be a table (a non-ASCII query byte or name).
    static func with<Result>(
        query: UnsafeBufferPointer<UInt8>?, captures: [(name: String, value: String)], _ body: (PageParameters) -> Result?
    ) -> Result? {
        let query = query ?? UnsafeBufferPointer(start: nil, count: 0)
        guard ByteText(query).isASCII(0..<query.count) else { return nil }
        // Room for the worst case: a pair's URL text at most three bytes per raw byte, its name, skeleton and value at most
        // one each; a capture's URL text both parts encoded, its name, skeleton and value.
        var capacity = 6 * query.count
        var pairCapacity = captures.count + 1
        for byte in query where byte == UInt8(ascii: "&") { pairCapacity += 1 }
        for capture in captures { capacity += 5 * capture.name.utf8.count + 4 * capture.value.utf8.count + 1 }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(capacity, 1)) { buffer in
            withUnsafeTemporaryAllocation(of: Pair.self, capacity: pairCapacity) { pairs in
                var builder = Builder(buffer: buffer, pairs: pairs)
                var start = 0
                while start < query.count {
                    let end = ByteText(query).firstIndex(of: UInt8(ascii: "&"), in: start..<query.count) ?? query.count
                    if start < end { guard builder.addRaw(UnsafeBufferPointer(rebasing: query[start..<end])) else { return nil } }
                    start = end + 1
                }
                for capture in captures {
                    let added = capture.name.utf8.withContiguousStorageIfAvailable { name in
                        capture.value.utf8.withContiguousStorageIfAvailable { value in builder.addCapture(name: name, value: value) }
                    }
                    guard case .some(.some(true)) = added else { return nil }
                }
                let table = PageParameters(
                    bytes: UnsafeBufferPointer(rebasing: buffer[..<builder.used]),
                    pairs: UnsafeBufferPointer(rebasing: pairs[..<builder.pairCount]))
                return body(table)
            }
        }
    }

    /// Calls `body` with the table of `pairs` (their texts copied into it); `nil` when a name is not ASCII.
    static func with<Result>(_ pairs: [QueryPair], _ body: (PageParameters) -> Result?) -> Result? {
        var capacity = 1
        for pair in pairs {
            guard pair.name.isPlainASCII else { return nil }
            capacity +=
                pair.urlText.utf8.count + pair.name.utf8.count + pair.skeleton.utf8.count + Composer.text(of: pair.jsonValue).utf8.count
        }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            withUnsafeTemporaryAllocation(of: Pair.self, capacity: max(pairs.count, 1)) { table in
                var builder = Builder(buffer: buffer, pairs: table)
                for pair in pairs {
                    builder.add(
                        url: { $0.put(pair.urlText) }, name: { $0.put(pair.name) }, skeleton: { $0.put(pair.skeleton) },
                        value: { $0.put(Composer.text(of: pair.jsonValue)) },
                        isNumber: { if case .number = pair.jsonValue { true } else { false } }())
                }
                return body(
                    PageParameters(
                        bytes: UnsafeBufferPointer(rebasing: buffer[..<builder.used]),
                        pairs: UnsafeBufferPointer(rebasing: table[..<builder.pairCount])))
            }
        }
    }

    /// Writes pairs into the lent memory.
    private struct Builder {
        let buffer: UnsafeMutableBufferPointer<UInt8>
        let pairs: UnsafeMutableBufferPointer<Pair>
        var used = 0
        var pairCount = 0

        init(buffer: UnsafeMutableBufferPointer<UInt8>, pairs: UnsafeMutableBufferPointer<Pair>) {
            self.buffer = buffer
            self.pairs = pairs
        }

        /// Writes one text with `write` and returns its range.
        private mutating func text(_ write: (inout ByteWriter) -> Void) -> Range<Int> {
            var writer = ByteWriter(UnsafeMutableBufferPointer(rebasing: buffer[used...]))
            write(&writer)
            let range = used..<(used + writer.count)
            used += writer.count
            return range
        }

        /// The skeleton of an ASCII name, as ``Composer/nameSkeleton(_:)`` makes it.
        private mutating func skeleton(of name: Range<Int>) -> Range<Int> {
            let bytes = UnsafeBufferPointer(rebasing: buffer[name])
            return text { Composer.writeASCIISkeleton(bytes, into: &$0) }
        }

        /// A decoded name or value, as ``FormEncoding/decode(_:plusIsSpace:)-(UnsafeBufferPointer<UInt8>,_)`` decodes
        /// it: the raw text when the decoded bytes are not UTF-8.
        private mutating func decoded(_ raw: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool) -> Range<Int> {
            let range = text { FormEncoding.decode(raw, plusIsSpace: plusIsSpace, into: &$0) }
            let bytes = UnsafeBufferPointer(rebasing: buffer[range])
            if !ByteText(bytes).isASCII(0..<bytes.count) && String(validating: bytes, as: UTF8.self) == nil {
                used = range.lowerBound
                return text { $0.put(raw) }
            }
            return range
        }

        mutating func add(
            url: (inout ByteWriter) -> Void, name: (inout ByteWriter) -> Void, skeleton: (inout ByteWriter) -> Void,
            value: (inout ByteWriter) -> Void, isNumber: Bool
        ) {
            pairs[pairCount] = Pair(url: text(url), name: text(name), skeleton: text(skeleton), value: text(value), isNumber: isNumber)
            pairCount += 1
        }

        /// One raw `name=value` pair of an ASCII query, as ``QueryPair/init(bytes:)`` reads it; `false` when its name
        /// is not ASCII once decoded.
        mutating func addRaw(_ raw: UnsafeBufferPointer<UInt8>) -> Bool {
            let url = text { FormEncoding.sanitizeQueryText(raw, into: &$0) }
            let equals = raw.firstIndex(of: UInt8(ascii: "="))
            let rawName = UnsafeBufferPointer(rebasing: raw[..<(equals ?? raw.count)])
            let rawValue = UnsafeBufferPointer(rebasing: raw[(equals.map { $0 + 1 } ?? raw.count)...])
            let name = decoded(rawName, plusIsSpace: true)
            guard ByteText(UnsafeBufferPointer(buffer)).isASCII(name) else { return false }
            let skeleton = skeleton(of: name)
            let value = decoded(rawValue, plusIsSpace: true)
            let isNumber = QueryPair.isCanonicalInteger(UnsafeBufferPointer(rebasing: buffer[value]))
            pairs[pairCount] = Pair(url: url, name: name, skeleton: skeleton, value: value, isNumber: isNumber)
            pairCount += 1
            return true
        }

        /// A value captured from a `{name}` path segment, as ``QueryPair/init(capturedName:value:)`` reads it; `false`
        /// for a non-ASCII name.
        mutating func addCapture(name rawName: UnsafeBufferPointer<UInt8>, value rawValue: UnsafeBufferPointer<UInt8>) -> Bool {
            guard ByteText(rawName).isASCII(0..<rawName.count) else { return false }
            let name = text { $0.put(rawName) }
            let skeleton = skeleton(of: name)
            let value = decoded(rawValue, plusIsSpace: false)
            let valueBytes = UnsafeBufferPointer(rebasing: buffer[value])
            let url = text { writer in
                FormEncoding.encodeComponent(rawName, into: &writer)
                writer.put(UInt8(ascii: "="))
                FormEncoding.encodeComponent(valueBytes, into: &writer)
            }
            pairs[pairCount] = Pair(
                url: url, name: name, skeleton: skeleton, value: value, isNumber: QueryPair.isCanonicalInteger(valueBytes))
            pairCount += 1
            return true
        }
    }
}

/// Where bytes are written: a ``ByteWriter`` into memory sized ahead, a ``ByteCount`` that sizes it, or an array.
protocol ByteSink {
    mutating func put(_ byte: UInt8)
    mutating func put(_ bytes: UnsafeBufferPointer<UInt8>)
}

extension ByteSink {
    mutating func put(_ text: String) {
        if text.utf8.withContiguousStorageIfAvailable({ put($0) }) == nil { for byte in text.utf8 { put(byte) } }
    }
}

/// Counts what would be written.
struct ByteCount: ByteSink {
    var count = 0

    @inline(__always)
    mutating func put(_ byte: UInt8) { count += 1 }
    @inline(__always)
    mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) { count += bytes.count }
}

extension Array: ByteSink where Element == UInt8 {
    mutating func put(_ byte: UInt8) { append(byte) }
    mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) { append(contentsOf: bytes) }
}
