import Foundation
import PrefetchCore
import Testing

/// The buffered secure random source: every byte handed out once, across refills and threads.
@Suite struct SecureRandomTests {
    @Test func everyDrawIsFreshAcrossManyRefills() {
        // 4,000 draws of 16 bytes cross the 512-byte buffer's refill 125 times; a byte handed out twice, or a
        // buffer not refilled, shows up as a repeated identifier.
        var seen = Set<[UInt8]>()
        for _ in 0..<4_000 {
            let bytes = SecureRandom.bytes(16)
            #expect(bytes.count == 16)
            seen.insert(bytes)
        }
        #expect(seen.count == 4_000)
    }

    @Test func drawsOfEveryLengthAreFilled() {
        // Lengths that do not divide the buffer, one longer than it, and empty. A byte left at zero in each of 64
        // draws of the same length would be a hole in the fill.
        for count in [0, 1, 7, 8, 9, 511, 512, 513, 2_000] {
            var union = [UInt8](repeating: 0, count: count)
            for _ in 0..<64 {
                let bytes = SecureRandom.bytes(count)
                #expect(bytes.count == count)
                for index in bytes.indices { union[index] |= bytes[index] }
            }
            #expect(union.allSatisfy { $0 != 0 }, "a byte of a \(count)-byte draw stayed zero in 64 draws")
        }
    }

    @Test func threadsDrawingAtOnceNeverShareBytes() async {
        let draws = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<8 {
                group.addTask { (0..<500).map { _ in RandomID.make() } }
            }
            var all: [String] = []
            for await batch in group { all += batch }
            return all
        }
        #expect(draws.count == 4_000)
        #expect(Set(draws).count == 4_000)
        #expect(draws.allSatisfy(RandomID.isWellFormed))
    }

    @Test func theGeneratorCoversTheWholeWord() {
        var generator = SecureRandom()
        var union: UInt64 = 0
        var intersection: UInt64 = .max
        for _ in 0..<256 {
            let value = generator.next()
            union |= value
            intersection &= value
        }
        #expect(union == .max)
        #expect(intersection == 0)
    }

    @Test func newTracesAreDistinctAndValid() {
        var traces = Set<String>()
        for _ in 0..<1_000 {
            let root = TraceParent.newRoot()
            #expect(TraceParent(header: root.header) == root)
            let child = root.child()
            #expect(child.traceID == root.traceID && child.parentID != root.parentID)
            traces.insert(root.traceID)
        }
        #expect(traces.count == 1_000)
    }
}
