import HTTPTypes
import MetricsTestKit
import PrefetchCore
import PrefetchTestSupport
import Testing

@testable import PrefetchStore

/// Invalidation in memory: what a logout, an interface drop and a surrogate-key purge leave for readers.
@Suite struct InvalidationTests {
    static let alice = Identity(digest: String(repeating: "a", count: 64))
    static let bob = Identity(digest: String(repeating: "b", count: 64))

    func tagged(_ text: String, _ keys: String...) -> StoredResponse {
        var headers: HTTPFields = [.contentType: "text/plain"]
        for value in keys { headers.append(HTTPField(name: SurrogateKeys.headerName, value: value)) }
        return StoredResponse(status: 200, headers: headers, body: Array(text.utf8), fetchedAt: fetchedAt)
    }

    @Test func aLogoutDropsOnlyThatIdentitysEntriesAndReadersLearnWhy() async throws {
        let store = makeStore()
        await put(store, key("/cart", identity: Self.alice), .success(response("alice cart")))
        await put(store, key("/balance", identity: Self.alice), .failure(StoreFailure(code: .timeout, message: "slow")))
        await put(store, key("/cart", identity: Self.bob), .success(response("bob cart")))
        await put(store, key("/cart"), .success(response("shared")))

        #expect(store.invalidate(identity: Self.alice) == 2)

        #expect(await store.read(key("/cart", identity: Self.alice), wait: .zero) == .absent(.invalidated))
        #expect(await store.read(key("/balance", identity: Self.alice), wait: .zero) == .absent(.invalidated))
        #expect(await store.read(key("/cart", identity: Self.bob), wait: .zero).response == response("bob cart"))
        #expect(await store.read(key("/cart"), wait: .zero).response == response("shared"))
        // A second logout finds nothing more; the anonymous identity is never invalidated.
        #expect(store.invalidate(identity: Self.alice) == 0)
        #expect(store.invalidate(identity: .anonymous) == 0)
        #expect(await store.read(key("/cart"), wait: .zero).response == response("shared"))
        // The next trigger fetches again.
        if case .leader = await store.begin(key("/cart", identity: Self.alice), policy: policy()) {
        } else {
            Issue.record("an invalidated key must lead the next flight")
        }
    }

    @Test func aFlightInProgressIsNotTouchedAndItsWaitersGetTheResult() async throws {
        let store = makeStore()
        let token = try await lead(store, key("/cart", identity: Self.alice))
        async let waited = store.read(key("/cart", identity: Self.alice), wait: .seconds(10))
        #expect(await eventually { store.waitingReaders == 1 })
        #expect(store.invalidate(identity: Self.alice) == 0)
        await store.complete(key("/cart", identity: Self.alice), token: token, result: .success(response("fresh")))
        #expect(await waited == .ready(response("fresh"), joined: true))
        #expect(await store.read(key("/cart", identity: Self.alice), wait: .zero).response == response("fresh"))
    }

    @Test func anInterfaceIsDroppedForEveryIdentity() async throws {
        let store = makeStore()
        await put(store, key("/cart", identity: Self.alice), .success(response("a")), policy: policy("cart"))
        await put(store, key("/cart", identity: Self.bob), .success(response("b")), policy: policy("cart"))
        await put(store, key("/cart"), .success(response("shared")), policy: policy("cart"))
        await put(store, key("/news"), .success(response("news")), policy: policy("news"))

        #expect(store.invalidate(label: "cart") == 3)
        for identity in [Self.alice, Self.bob, .anonymous] {
            #expect(await store.read(key("/cart", identity: identity), wait: .zero) == .absent(.invalidated))
        }
        #expect(await store.read(key("/news"), wait: .zero).response == response("news"))
    }

    @Test func aSurrogateKeyDropsTheResponsesTaggedWithIt() async throws {
        let store = makeStore()
        await put(store, key("/p1", identity: Self.alice), .success(tagged("p1", "product-1 catalog")))
        await put(store, key("/p1", identity: Self.bob), .success(tagged("p1 b", "catalog", "product-1")))
        await put(store, key("/p2"), .success(tagged("p2", "product-2  catalog")))
        await put(store, key("/plain"), .success(response("plain")))

        #expect(store.invalidate(surrogateKey: "product-1") == 2)
        #expect(await store.read(key("/p1", identity: Self.alice), wait: .zero) == .absent(.invalidated))
        #expect(await store.read(key("/p1", identity: Self.bob), wait: .zero) == .absent(.invalidated))
        #expect(await store.read(key("/p2"), wait: .zero).response == tagged("p2", "product-2  catalog"))
        #expect(store.invalidate(surrogateKey: "catalog") == 1)
        #expect(store.invalidate(surrogateKey: "product") == 0)
        #expect(await store.read(key("/plain"), wait: .zero).response == response("plain"))
    }

    @Test func anExpiredEntryStaysExpiredAndIsNotCounted() async throws {
        let clock = ManualClock()
        let store = makeStore(clock: clock)
        await put(store, key("/cart", identity: Self.alice), .success(response("old")), policy: policy(ttl: .seconds(1)))
        clock.advance(by: .seconds(2))
        #expect(store.invalidate(identity: Self.alice) == 0)
        #expect(await store.read(key("/cart", identity: Self.alice), wait: .zero) == .absent(.expired))
    }

    @Test func droppedBytesAreReturnedToTheBudgetAndMissesCountedByReason() async throws {
        let metrics = TestMetrics()
        let store = makeStore(metrics: metrics)
        await put(store, key("/cart", identity: Self.alice), .success(response(bytes: 10_000)))
        #expect(await store.snapshot().bytes > 10_000)
        #expect(store.invalidate(identity: Self.alice) == 1)
        let snapshot = await store.snapshot()
        #expect(snapshot.bytes == 0 && snapshot.entries == 0)
        #expect(snapshot.expiredUnused == 1)
        _ = await store.read(key("/cart", identity: Self.alice), wait: .zero)
        let misses = try metrics.expectCounter("prefetch_store_misses_total", [("reason", "invalidated")])
        #expect(misses.totalValue == 1)
    }
}

/// The bounds on what a response's `Surrogate-Key` header can make a store record.
@Suite struct SurrogateKeysTests {
    func keys(_ values: String...) -> [String] {
        var headers = HTTPFields()
        for value in values { headers.append(HTTPField(name: SurrogateKeys.headerName, value: value)) }
        return SurrogateKeys.keys(in: headers)
    }

    @Test func keysAreSpaceSeparatedInOrderOnceAcrossHeaderLines() {
        #expect(keys("a b\tc", "b d") == ["a", "b", "c", "d"])
        #expect(keys("") == [])
        #expect(SurrogateKeys.keys(in: [.contentType: "a b"]) == [])
    }

    @Test func thousandsOfKeysRecordOnlyTheFirstThirtyTwo() {
        let many = keys((0..<5000).map { "k\($0)" }.joined(separator: " "))
        #expect(many.count == SurrogateKeys.maximumCount)
        #expect(many.first == "k0" && many.last == "k31")
    }

    @Test func overlongAndNonASCIIKeysAreIgnored() {
        let long = String(repeating: "x", count: SurrogateKeys.maximumBytes + 1)
        let longest = String(repeating: "y", count: SurrogateKeys.maximumBytes)
        #expect(keys("\(long) ok \(longest) caf\u{e9}") == ["ok", longest])
        #expect(!SurrogateKeys.isValid(long) && SurrogateKeys.isValid(longest) && !SurrogateKeys.isValid(""))
    }
}

/// The decisions of invalidation in `StoreState`, driven with explicit instants.
@Suite struct StoreStateInvalidationTests {
    let start = ContinuousClock.now

    @Test func invalidationEndsCompletedEntriesOnlyAndLeavesATombstone() {
        var state = StoreState(budget: 1 << 20, lockAge: .seconds(10), staleFlightAfter: .seconds(30))
        var effects = Effects()
        let identity = Identity(digest: String(repeating: "c", count: 64))
        let ready = key("/ready", identity: identity)
        let pending = key("/pending", identity: identity)
        guard case .leader(let token) = state.begin(ready, policy: policy(), now: start, effects: &effects) else {
            Issue.record("expected to lead")
            return
        }
        state.complete(ready, token: token, result: .success(response("r")), now: start, effects: &effects)
        _ = state.begin(pending, policy: policy(), now: start, effects: &effects)

        #expect(state.invalidate(identity: identity, now: start + .seconds(1), effects: &effects) == 1)
        #expect(state.index[ready] == nil)
        #expect(state.index[pending] != nil)
        guard case .done(let outcome) = state.read(ready, now: start + .seconds(1), canWait: false, effects: &effects) else {
            Issue.record("expected an answer")
            return
        }
        #expect(outcome == .absent(.invalidated))
        #expect(state.snapshot().entries == 1)
    }
}
