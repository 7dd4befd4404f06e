/// A request target in origin form as the page API reads it: the path up to the first `?` (not decoded: routes are
/// matched on its bytes), and the query up to the first `#`, split into `name=value` pairs at `&`. A value is
/// percent-decoded (`+` stays a plus, as in a path: the page client encodes with `encodeURIComponent`); a value
/// whose escapes are malformed is taken as sent, and a name is taken as sent.
package struct PageTarget: Sendable {
    package let path: Substring
    package let query: Query

    package init(_ target: String) {
        let query = target.firstIndex(of: "?")
        path = target[..<(query ?? target.endIndex)]
        guard let query else {
            self.query = Query(pairs: [])
            return
        }
        let rest = target[target.index(after: query)...]
        self.query = Query(rest[..<(rest.firstIndex(of: "#") ?? rest.endIndex)])
    }

    /// The query's pairs, in order; a name may repeat (``get(_:)`` takes the first).
    package struct Query: Sendable {
        package let pairs: [(name: Substring, value: Substring)]

        package init(pairs: [(name: Substring, value: Substring)]) {
            self.pairs = pairs
        }

        /// `text` (a query without its `?`) split at `&`, each pair at its first `=` (none: an empty value).
        package init(_ text: Substring) {
            pairs = text.split(separator: "&").map { pair in
                guard let equals = pair.firstIndex(of: "=") else { return (pair, "") }
                let value = pair[pair.index(after: equals)...]
                return (pair[..<equals], Self.decoded(value).map { $0[...] } ?? value)
            }
        }

        /// The first value of `name`, or nil.
        package func get(_ name: String) -> String? {
            pairs.first { $0.name == name }.map { String($0.value) }
        }

        package subscript(_ name: String) -> Substring? {
            pairs.first { $0.name == name }?.value
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
