import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import PrefetchStore

/// `read(_:wait:)` for several keys, as a page's results view uses it: outcomes in the order asked, entries in
/// flight waited on together, each reader settled exactly once.
@Suite struct BatchReadTests {
    @Test func outcomesComeInTheOrderAskedWithFlightsSettledAsTheyComplete() async throws {
        let store = makeStore()
        await put(store, key("/done"), .success(response("done")))
        let first = try await lead(store, key("/first"))
        let second = try await lead(store, key("/second"))
        async let outcomes = store.read([key("/first"), key("/done"), key("/never"), key("/second")], wait: .seconds(30))
        let waiting = await eventually { store.waitingReaders == 2 }
        #expect(waiting)
        await store.complete(key("/second"), token: second, result: .success(response("second")))
        await store.complete(key("/first"), token: first, result: .failure(StoreFailure(code: .timeout, message: "slow")))
        let read = await outcomes
        #expect(read.count == 4)
        if case .failed(let failure, let joined) = read[0] {
            #expect(failure.code == .timeout)
            #expect(joined)
        } else {
            Issue.record("first: \(read[0])")
        }
        #expect(read[1].response == response("done"))
        #expect(read[2] == .absent(.notFound))
        #expect(read[3].response == response("second"))
        #expect(read[3].isJoined)
        #expect(store.waitingReaders == 0)
    }

    @Test func theDeadlineLeavesUnfinishedFlightsPendingAndKeepsWhatCompleted() async throws {
        let store = makeStore()
        let quick = try await lead(store, key("/quick"))
        _ = try await lead(store, key("/stuck"))
        async let outcomes = store.read([key("/stuck"), key("/quick")], wait: .milliseconds(300))
        let waiting = await eventually { store.waitingReaders == 2 }
        #expect(waiting)
        await store.complete(key("/quick"), token: quick, result: .success(response("quick")))
        let read = await outcomes
        #expect(read[0] == .pending)
        #expect(read[1].response == response("quick"))
        #expect(store.waitingReaders == 0)
    }

    @Test func aCancelledReaderGetsPendingAndLeavesNoWaiterBehind() async throws {
        let store = makeStore()
        _ = try await lead(store, key("/stuck"))
        let reader = Task { await store.read([key("/stuck"), key("/stuck")], wait: .seconds(30)) }
        let waiting = await eventually { store.waitingReaders == 2 }
        #expect(waiting)
        reader.cancel()
        #expect(await reader.value == [.pending, .pending])
        #expect(store.waitingReaders == 0)
    }

    @Test func withoutAWaitNothingWaits() async throws {
        let store = makeStore()
        _ = try await lead(store, key("/stuck"))
        #expect(await store.read([key("/stuck")], wait: .zero) == [.pending])
        #expect(store.waitingReaders == 0)
    }
}
