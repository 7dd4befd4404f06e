import PrefetchCore
import PropertyBased
import Testing

@testable import PrefetchStore

/// Random sequences of store operations against the locked state, with explicit time: whatever happens, the
/// budget holds, the accounting adds up, in-flight entries are never evicted and only completed entries are in
/// the LRU list.
@Suite struct StorePropertyTests {
    enum Op: CustomStringConvertible {
        case begin(Int)
        case complete(Int, bytes: Int, noStore: Bool)
        case fail(Int)
        case read(Int)
        case advance(milliseconds: Int)

        /// Decodes one generated integer into an operation on one of eight keys.
        init(_ code: Int) {
            let keyIndex = (code / 5) % 8
            switch code % 5 {
            case 0: self = .begin(keyIndex)
            case 1: self = .complete(keyIndex, bytes: (code / 40) % 4_000, noStore: (code / 7) % 4 == 0)
            case 2: self = .fail(keyIndex)
            case 3: self = .read(keyIndex)
            default: self = .advance(milliseconds: (code / 5) % 400)
            }
        }

        var description: String {
            switch self {
            case .begin(let k): "begin(\(k))"
            case .complete(let k, let bytes, let noStore): "complete(\(k), \(bytes)\(noStore ? ", no-store" : ""))"
            case .fail(let k): "fail(\(k))"
            case .read(let k): "read(\(k))"
            case .advance(let ms): "advance(\(ms)ms)"
            }
        }
    }

    @Test func budgetAccountingAndPendingEntriesHoldUnderAnySequence() async {
        await propertyCheck(count: 300, input: Gen.int(in: 0...1_000_000).array(of: 1...250)) { codes in
            let budget = 4 * 1024
            var state = StoreState(budget: budget, lockAge: .seconds(3600), staleFlightAfter: .seconds(3600))
            let keys = (0..<8).map { key("/k/\($0)") }
            let policy = StorePolicy(ttl: .milliseconds(500), negativeTTL: .milliseconds(200), label: "p")
            var now = ContinuousClock.now
            var leading: [Int: FlightToken] = [:]

            for op in codes.map(Op.init) {
                var effects = Effects()
                switch op {
                case .begin(let k):
                    if case .leader(let token) = state.begin(keys[k], policy: policy, now: now, effects: &effects),
                        state.index[keys[k]] != nil
                    {
                        leading[k] = token
                    }
                case .complete(let k, let bytes, let noStore):
                    guard let token = leading.removeValue(forKey: k) else { continue }
                    var stored = response(bytes: bytes)
                    stored.noStore = noStore
                    state.complete(keys[k], token: token, result: .success(stored), now: now, effects: &effects)
                case .fail(let k):
                    guard let token = leading.removeValue(forKey: k) else { continue }
                    let failure = StoreFailure(code: .timeout, message: "k\(k) timed out")
                    state.complete(keys[k], token: token, result: .failure(failure), now: now, effects: &effects)
                case .read(let k):
                    _ = state.read(keys[k], now: now, canWait: false, effects: &effects)
                case .advance(let ms):
                    now += .milliseconds(ms)
                }
                #expect(effects.resumes.isEmpty, "nobody waits in this model")

                let live = state.slots.compactMap { $0 }
                #expect(state.bytes <= budget, "after \(op)")
                #expect(state.bytes == live.reduce(0) { $0 + $1.bytes }, "after \(op)")
                #expect(live.count == state.index.count)
                for (k, token) in leading {
                    let slot = state.index[keys[k]].flatMap { state.slots[$0] }
                    #expect(slot?.entry.isLed(by: token) == true, "in-flight k\(k) must survive \(op)")
                }
                let completed = Set(live.filter { !$0.entry.isPending }.map(\.key))
                #expect(Set(state.lruOrder) == completed)
                #expect(state.lruOrder.count == completed.count)
            }
        }
    }
}
