import Foundation
import Logging
import PrefetchCore
import PrefetchTestSupport
import PrefetchTestUpstream
import Testing

@testable import RendererPool

/// Lease ids are unguessable capabilities, and one caller cannot hold more than its share of a pool.
@Suite(.timeLimit(.minutes(1))) struct LeaseIDTests {
    static let urlSafe = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

    @Test func leaseIDsAre22URLSafeCharactersAndDistinct() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(maxSize: 1), logger: testLogger, seed: 7)
        var ids: [LeaseID] = []
        for _ in 0..<500 {
            let lease = try await pool.acquire(page: nil)
            ids.append(lease.id)
            #expect(await pool.release(id: lease.id))
        }
        for id in ids {
            #expect(id.value.count == 22, "\(id)")
            #expect(id.value.allSatisfy { Self.urlSafe.contains($0) }, "\(id)")
        }
        #expect(Set(ids).count == ids.count)
        // Nothing structured: no fixed prefix or suffix such as the pool's name (a random id may contain "main"
        // somewhere by chance, about once in 2,000 runs of 500 ids, so that is not what is asserted).
        #expect(Set(ids.map { $0.value.prefix(4) }).count > 450 && Set(ids.map { $0.value.suffix(4) }).count > 450)
    }

    @Test func aSeededPoolStillDrawsUnpredictableIDs() async throws {
        let first = RendererPool(name: "main", profile: modelledProfile(), logger: testLogger, seed: 1)
        let second = RendererPool(name: "main", profile: modelledProfile(), logger: testLogger, seed: 1)
        let a = try await first.acquire(page: nil)
        let b = try await second.acquire(page: nil)
        #expect(a.rendererID == b.rendererID)
        #expect(a.id != b.id)
    }

    @Test func anUnknownOrGuessedIDReleasesNothing() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(maxSize: 2), logger: testLogger)
        let pools = try RendererPools(profiles: ["main": modelledProfile()], logger: testLogger)
        let lease = try await pool.acquire(page: nil, caller: "alice")
        var altered = Array(lease.id.value)
        altered[altered.count - 1] = altered.last == "A" ? "B" : "A"
        let guesses: [LeaseID] = [
            "", "main-1#1", "main-1", LeaseID(stringLiteral: lease.rendererID.value), LeaseID(stringLiteral: String(altered)),
            LeaseID.random(),
            LeaseID(stringLiteral: lease.id.value.uppercased()),
        ]
        for guess in guesses where guess != lease.id {
            #expect(await pool.release(id: guess, healthy: false) == false, "\(guess)")
            #expect(await pools.release(id: guess, healthy: false) == false, "\(guess)")
        }
        #expect(await pool.snapshot().leased == 1)
        #expect(await pool.leasesHeld(by: "alice") == 1)
        #expect(!lease.modelled.isDestroyed)
        #expect(await pool.release(id: lease.id))
        #expect(await pool.leasesHeld(by: "alice") == 0)
    }

    @Test func thePoolsReleaseALeaseByIDAlone() async throws {
        let pools = try RendererPools(
            profiles: ["main": modelledProfile(), "plain": modelledProfile()], logger: testLogger)
        let lease = try await pools.acquire(profile: "plain", page: nil, caller: "alice")
        #expect(await pools.release(id: lease.id))
        #expect(await pools.release(id: lease.id) == false)
        let plain = try #require(pools.pool(named: "plain"))
        #expect(await plain.snapshot().idle == 1)
        #expect(await plain.leasesHeld(by: "alice") == 0)
    }
}

@Suite(.timeLimit(.minutes(1))) struct CallerShareTests {
    @Test func aCallerAtItsCapIsRefusedWhileAnotherCallerIsServed() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(maxSize: 4), logger: testLogger)
        #expect(pool.profile.effectiveMaxLeasesPerCaller == 2)
        _ = try await pool.acquire(page: nil, caller: "alice")
        _ = try await pool.acquire(page: nil, caller: "alice")
        let refused = await #expect(throws: PoolError.self) { try await pool.acquire(page: nil, caller: "alice") }
        #expect(refused?.code == .callerLimit)
        #expect(refused?.message.contains("maxLeasesPerCaller 2") == true)
        let bob = try await pool.acquire(page: nil, caller: "bob")
        #expect(!bob.renderer.id.value.isEmpty)
        _ = try await pool.acquire(page: nil)
        #expect(await pool.snapshot().leased == 4)
        #expect(await pool.snapshot().pending == 0)
    }

    @Test func aRefusedCallerDoesNotQueueEvenWhenThePoolIsFull() async throws {
        let profile = modelledProfile(maxSize: 1, acquireTimeout: 30_000)
        let pool = RendererPool(name: "main", profile: profile, logger: testLogger, clock: ManualClock())
        _ = try await pool.acquire(page: nil, caller: "alice")
        let refused = await #expect(throws: PoolError.self) { try await pool.acquire(page: nil, caller: "alice") }
        #expect(refused?.code == .callerLimit)
        #expect(await pool.snapshot().timeouts == 0)
    }

    @Test func releasingReclaimingOrDestroyingFreesTheSlot() async throws {
        let profile = modelledProfile(maxSize: 4) {
            $0.maxLeasesPerCaller = 1
            $0.leaseTimeout = 0.05
        }
        let clock = ManualClock()
        let pool = RendererPool(name: "main", profile: profile, logger: testLogger, clock: clock)

        let first = try await pool.acquire(page: nil, caller: "alice")
        await #expect(throws: PoolError.self) { try await pool.acquire(page: nil, caller: "alice") }
        #expect(await pool.release(id: first.id))

        let second = try await pool.acquire(page: nil, caller: "alice")
        #expect(await pool.release(id: second.id, healthy: false))
        #expect(second.modelled.isDestroyed)

        let forgotten = try await pool.acquire(page: nil, caller: "alice")
        clock.advance(by: .milliseconds(50))
        await pool.housekeeping()
        #expect(await pool.leasesHeld(by: "alice") == 0)
        #expect(await pool.snapshot().reclaimed == 1)
        #expect(forgotten.modelled.isDestroyed)
        #expect(await pool.release(id: forgotten.id) == false)
        _ = try await pool.acquire(page: nil, caller: "alice")
    }

    @Test func aFailedAcquireGivesItsSlotBack() async throws {
        let pool = RendererPool(name: "main", profile: modelledProfile(maxSize: 1, acquireTimeout: 0), logger: testLogger)
        let held = try await pool.acquire(page: nil, caller: "bob")
        let failed = await #expect(throws: PoolError.self) { try await pool.acquire(page: nil, caller: "alice") }
        #expect(failed?.code == .timeout)
        #expect(await pool.leasesHeld(by: "alice") == 0)
        await pool.release(id: held.id)
        _ = try await pool.acquire(page: nil, caller: "alice")
    }

    @Test func concurrentAcquiresOfOneCallerCountWhileTheyQueue() async throws {
        let profile = modelledProfile(maxSize: 2) { $0.maxLeasesPerCaller = 1 }
        let pool = RendererPool(name: "main", profile: profile, logger: testLogger, clock: ManualClock())
        let blockers = [try await pool.acquire(page: nil), try await pool.acquire(page: nil)]
        let outcomes = await withTaskGroup(of: PoolError.Code?.self, returning: [PoolError.Code?].self) { group in
            for _ in 0..<3 {
                group.addTask {
                    do throws(PoolError) {
                        _ = try await pool.acquire(page: nil, caller: "alice")
                        return nil
                    } catch {
                        return error.code
                    }
                }
            }
            group.addTask {
                _ = await eventually { await pool.snapshot().pending == 1 }
                await pool.release(id: blockers[0].id)
                return .cancelled
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == nil }.count == 1)
        #expect(outcomes.filter { $0 == .callerLimit }.count == 2)
        #expect(await pool.leasesHeld(by: "alice") == 1)
    }

    @Test func theCapDefaultsToHalfTheMaxSizeAndIsValidated() throws {
        func decode(_ json: String) throws -> RendererProfile {
            try JSONDecoder().decode(RendererProfile.self, from: Data(json.utf8))
        }
        #expect(try decode("{}").effectiveMaxLeasesPerCaller == 2)
        #expect(try decode(#"{"maxSize":9}"#).effectiveMaxLeasesPerCaller == 4)
        #expect(try decode(#"{"maxSize":1,"minIdle":0}"#).effectiveMaxLeasesPerCaller == 1)
        #expect(try decode(#"{"maxLeasesPerCaller":3}"#).effectiveMaxLeasesPerCaller == 3)
        let zero = try decode(#"{"maxLeasesPerCaller":0}"#)
        #expect(zero.problems(path: "renderers.main") == ["renderers.main.maxLeasesPerCaller: must be >= 1, got 0"])
        #expect(throws: PoolError.self) { try RendererPools(profiles: ["main": zero], logger: testLogger) }
    }
}
