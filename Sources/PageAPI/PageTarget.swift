/// A request target in origin form as the page API reads it: the path up to the first `?` (not decoded: routes are
/// matched on its bytes), and the query up to the first `#`, split into `name=value` pairs at `&`. A value is
/// percent-decoded (`+` stays a plus, as in a path: the page client encodes with `encodeURIComponent`); a value
/// whose escapes are malformed is taken as sent, and a name is taken as sent. Every split is at a byte (`?`, `#`,
/// `&`, `=`), whatever follows it: a combining mark after a `?` does not join it to the path, as a split by
/// characters would (the handler's own splits are by byte too).
package struct PageTarget: Sendable {
    package let path: Substring
    package let query: Query

    package init(_ target: String) {
        let bytes = target.utf8
        let query = bytes.firstIndex(of: UInt8(ascii: "?"))
        path = target[..<(query ?? bytes.endIndex)]
        guard let query else {
            self.query = Query(pairs: [])
            return
        }
        let rest = target[bytes.index(after: query)...]
        self.query = Query(rest[..<(rest.utf8.firstIndex(of: UInt8(ascii: "#")) ?? rest.endIndex)])
    }

    /// The query's pairs, in order; a name may repeat (``get(_:)`` takes the first).
    package struct Query: Sendable {
        package let pairs: [(name: Substring, value: Substring)]

        package init(pairs: [(name: Substring, value: Substring)]) {
            self.pairs = pairs
        }

        /// `text` (a query without its `?`) split at `&`, each pair at its first `=` (none: an empty value).
        package init(_ text: Substring) {
            var pairs: [(name: Substring, value: Substring)] = []
            var start = text.startIndex
            while start < text.endIndex {
                let end = text.utf8[start...].firstIndex(of: UInt8(ascii: "&")) ?? text.endIndex
                let pair = text[start..<end]
                if !pair.isEmpty {
                    if let equals = pair.utf8.firstIndex(of: UInt8(ascii: "=")) {
                        let value = pair[pair.utf8.index(after: equals)...]
                        pairs.append((pair[..<equals], Self.decoded(value).map { $0[...] } ?? value))
                    } else {
                        pairs.append((pair, ""))
                    }
                }
                start = end < text.endIndex ? text.utf8.index(after: end) : end
            }
            self.pairs = pairs
        }

        /// The first value of the parameter named `name` (its bytes exactly), or nil.
        package func get(_ name: String) -> String? {
            self[name].map(String.init)
        }

        package subscript(_ name: String) -> Substring? {
            pairs.first { $0.name.utf8.elementsEqual(name.utf8) }?.value
        }

        /// `text` with its `%XX` escapes decoded (the bytes as UTF-8, an invalid sequence replaced), or nil when an
        /// escape is malformed.
        package static func decoded(_ text: Substring) -> String? {
            guard text.utf8.contains(UInt8(ascii: "%")) else { return String(text) }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(text.utf8.count)
            var iterator = text.utf8.makeIterator()
            while let byte = iterator.next() {
                guard byte == UInt8(ascii: "%") else {
                    bytes.append(byte)
                    continue
                }
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        private static func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
    }
}
