public import Logging
public import Metrics
public import ServiceLifecycle

/// The named renderer profiles of a deployment, one ``RendererPool`` each, run together as one ``Service``.
public final class RendererPools: Service, Sendable {
    /// The pools by profile name.
    public let pools: [String: RendererPool]

    /// Validates every profile (paths reported under `path`, e.g. `renderers.main.maxSize`) and creates one
    /// pool per profile (metrics to `metricsFactory`, or the bootstrapped `MetricsSystem.factory` when nil). Throws ``PoolError`` `invalidProfile` listing every problem; creates no renderer.
    public init(
        profiles: [String: RendererProfile],
        logger: Logger,
        path: String = "renderers",
        seed: UInt64? = nil,
        tick: Duration = .milliseconds(100),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(PoolError) {
        let problems = profiles.keys.sorted().flatMap { profiles[$0]!.problems(path: "\(path).\($0)") }
        if !problems.isEmpty {
            throw PoolError(.invalidProfile, problems.joined(separator: "; "))
        }
        var pools: [String: RendererPool] = [:]
        for (index, name) in profiles.keys.sorted().enumerated() {
            pools[name] = RendererPool(
                name: name, profile: profiles[name]!, logger: logger, seed: seed.map { $0 &+ UInt64(index) * 7919 },
                tick: tick, metricsFactory: metricsFactory)
        }
        self.pools = pools
    }

    /// The pool for a profile name, if configured.
    public func pool(named name: String) -> RendererPool? {
        pools[name]
    }

    /// Leases a renderer from the named profile, counted against `caller` when one is given (see
    /// ``RendererPool/acquire(page:caller:)``); throws `unknownProfile` for a name not configured.
    public func acquire(profile: String, page: String?, caller: String? = nil) async throws(PoolError) -> Lease {
        guard let pool = pools[profile] else {
            throw PoolError(.unknownProfile, "no renderer profile named \"\(profile)\"")
        }
        return try await pool.acquire(page: page, caller: caller)
    }

    /// Releases the lease with this id in whichever pool issued it; `false` when no pool knows the id
    /// (never issued, already released, or reclaimed).
    @discardableResult
    public func release(id: LeaseID, healthy: Bool = true) async -> Bool {
        for pool in pools.values where await pool.release(id: id, healthy: healthy) { return true }
        return false
    }

    /// Returns a lease to its profile's pool; `false` when the profile or lease is unknown.
    @discardableResult
    public func release(_ lease: Lease, healthy: Bool = true) async -> Bool {
        guard let pool = pools[lease.profile] else { return false }
        return await pool.release(id: lease.id, healthy: healthy)
    }

    /// Snapshots of every pool, by profile name.
    public func snapshot() async -> [String: PoolSnapshot] {
        var out: [String: PoolSnapshot] = [:]
        for (name, pool) in pools { out[name] = await pool.snapshot() }
        return out
    }

    /// Memory warning: clears every pool (destroys idle renderers, refills to `minIdle`).
    public func clear() async {
        await withDiscardingTaskGroup { group in
            for pool in pools.values { group.addTask { await pool.clear() } }
        }
    }

    /// Runs every pool until graceful shutdown or cancellation; returns once every renderer is destroyed.
    public func run() async throws {
        await withDiscardingTaskGroup { group in
            for pool in pools.values {
                group.addTask { try? await pool.run() }
            }
        }
    }
}
