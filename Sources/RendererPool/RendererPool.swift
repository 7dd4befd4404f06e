/// RendererPool keeps pre-initialised renderers warm so that opening a page does not pay for creating one.
///
/// Design
/// ------
/// - A ``Renderer`` is created by a ``RendererFactory`` (the costly step), reset between leases, health
///   checked before every hand-out, and destroyed. Two kinds exist: `modelled` (a simulation with a creation
///   cost, memory figure, failure and death rates; seedable) and `process` (a real command run through
///   swift-subprocess, warm once it prints its ready line or opens its ready port).
/// - One ``RendererPool`` (an actor) per ``RendererProfile``; ``RendererPools`` holds the named profiles.
///   Every renderer's life is a ``RendererLifecycle`` value (warming → idle → leased → resetting → idle … →
///   retiring → destroyed); the actor only moves renderers along those transitions, and an `await` on a
///   renderer always happens with the renderer already in the state that owns it, so actor reentrancy
///   cannot hand one renderer out twice.
/// - `acquire(page:caller:)`: a warm idle renderer at once (warm hit, most recently used first); otherwise a new
///   one if the pool is under `maxSize` (cold start, created by the acquirer itself); otherwise the acquirer
///   joins a FIFO queue and is served, in order, by the next renderer that becomes idle or the next free
///   slot, up to `acquireTimeout`. Newcomers queue behind existing waiters, so nobody overtakes. Everything
///   that exists counts towards `maxSize`: warming, idle, leased, resetting and retiring renderers.
/// - A lease id is 128 random bits (22 base64url characters): whoever holds it may release or destroy the
///   renderer, so it is not guessable from other ids. An acquire that names a `caller` counts against that
///   caller's `maxLeasesPerCaller` from the moment it starts until its lease ends (released, reclaimed or
///   destroyed) or the acquire fails; a caller at its cap is refused at once instead of queueing, so one
///   caller cannot hold the whole pool while others wait.
/// - A renderer that fails its health check when about to be handed out is destroyed and the acquirer
///   tries again (keeping its place at the head of the queue). `release(id:healthy:)` resets the renderer
///   before it goes back to idle; an unhealthy release, a failed reset, `maxUses` and the (jittered)
///   `maxLifetime` destroy it instead.
/// - `run()` (swift-service-lifecycle ``Service``) does the background work: it hosts renderer processes,
///   refills to `minIdle` one creation at a time in a background-priority child task, and every tick
///   reclaims leases older than `leaseTimeout`, retires idle renderers past their lifetime, shrinks idle
///   renderers unused for `idleTimeout` back towards `minIdle`, and health checks idle renderers. On graceful
///   shutdown or cancellation it fails waiting acquirers, destroys every renderer (leased ones too) and
///   returns only when every renderer process has been reaped.
/// - Before `run()` starts, acquires still work for modelled renderers (they cold-start inline); process
///   renderers need `run()` to host their processes, so a process cold start before `run()` waits for it
///   and fails after `readyTimeoutMs`. Nothing is created in an initialiser.
import Logging
import Metrics
import ServiceLifecycle

/// A renderer handed out by ``RendererPool/acquire(page:caller:)``; give it back with
/// ``RendererPool/release(id:healthy:)``.
public struct Lease: Sendable {
    /// Identifies this lease: 22 URL-safe characters (128 random bits), unguessable from any other lease.
    /// It is the capability to release or destroy the renderer; pass it to `release`.
    public let id: String
    /// The profile the renderer belongs to.
    public let profile: String
    /// The renderer's own identifier.
    public let rendererID: String
    /// `true` when the renderer was already warm (pre-created), `false` when it was created for this acquire.
    public let warm: Bool
    /// Time from the acquire call until the lease was granted.
    public let waited: Duration
    /// How long creating this renderer took.
    public let createTime: Duration
    /// Leases this renderer has served, this one included.
    public let uses: Int
    /// The renderer itself.
    public let renderer: any Renderer
}

/// A pool of renderers for one profile. See the design notes at the top of this file.
public actor RendererPool: Service {
    private enum Grant: Sendable {
        case renderer(String)
        case slot(String)
        case timeout
        case cancelled
        case shutdown
    }

    private struct Waiter {
        let id: Int
        let continuation: CheckedContinuation<Grant, Never>
    }

    private struct Entry {
        var life: RendererLifecycle
        var renderer: (any Renderer)?
        var createTime: Duration = .zero
        var background: Bool
        var leaseID: String?
        /// The caller the current lease counts against, if it named one.
        var caller: String?
    }

    /// The profile's name (the `profile` metric dimension).
    public nonisolated let name: String
    /// The profile this pool follows.
    public nonisolated let profile: RendererProfile

    private let factory: any RendererFactory
    private let host: ProcessHost?
    private let logger: Logger
    private let metrics: PoolMetrics
    private let random: SharedRandom
    private let clock = ContinuousClock()
    private let tick: Duration
    private let healthCheckInterval: Duration

    private var entries: [String: Entry] = [:]
    /// Idle renderer ids, least recently used first.
    private var idle: [String] = []
    /// Renderer id by lease id.
    private var leases: [String: String] = [:]
    /// Acquires in progress plus leases held, by caller; a caller with none has no key.
    private var callerLeases: [String: Int] = [:]
    private var waiters: [Waiter] = []
    /// Waiter ids issued and not yet finished, with an early expiry when it arrived before the enqueue.
    private var openWaits: [Int: Grant?] = [:]
    private var nextRenderer = 0
    private var nextWaiter = 0
    private var closed = false
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []
    private var lastHealthCheck: ContinuousClock.Instant?

    private var created = 0
    private var destroyed = 0
    private var createFailures = 0
    private var warmHits = 0
    private var coldStarts = 0
    private var timeouts = 0
    private var reclaimed = 0
    private var waits = WaitWindow(capacity: 1024)

    /// A pool creating renderers of `profile.kind` (`modelled` or `process`).
    ///
    /// - Parameters:
    ///   - name: the profile name, used in lease ids, logs and as the `profile` metric dimension.
    ///   - seed: makes modelled failures, deaths and lifetime jitter reproducible.
    ///   - tick: how often `run()` does its housekeeping (lease reclaim, lifetime, idle shrink, refill).
    ///   - healthCheckInterval: how often `run()` health checks idle renderers.
    ///   - metricsFactory: where metrics go; the bootstrapped `MetricsSystem.factory` when nil.
    public init(
        name: String,
        profile: RendererProfile,
        logger: Logger,
        seed: UInt64? = nil,
        tick: Duration = .milliseconds(100),
        healthCheckInterval: Duration = .seconds(1),
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        var logger = logger
        logger[metadataKey: "profile"] = "\(name)"
        let factory: any RendererFactory
        let host: ProcessHost?
        if profile.kind == .process {
            let processHost = ProcessHost(logger: logger)
            factory = ProcessRendererFactory(spec: ProcessSpec(profile: profile), host: processHost)
            host = processHost
        } else {
            factory = ModelledRendererFactory(profile: profile, seed: seed.map { $0 &+ 1 })
            host = nil
        }
        self.init(
            name: name, profile: profile, factory: factory, host: host, logger: logger, seed: seed, tick: tick,
            healthCheckInterval: healthCheckInterval, metricsFactory: metricsFactory)
    }

    /// A pool creating renderers with a caller-supplied factory (the profile's `kind` settings are ignored).
    public init(
        name: String,
        profile: RendererProfile,
        factory: any RendererFactory,
        logger: Logger,
        seed: UInt64? = nil,
        tick: Duration = .milliseconds(100),
        healthCheckInterval: Duration = .seconds(1),
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        var logger = logger
        logger[metadataKey: "profile"] = "\(name)"
        self.init(
            name: name, profile: profile, factory: factory, host: nil, logger: logger, seed: seed, tick: tick,
            healthCheckInterval: healthCheckInterval, metricsFactory: metricsFactory)
    }

    private init(
        name: String, profile: RendererProfile, factory: any RendererFactory, host: ProcessHost?, logger: Logger,
        seed: UInt64?, tick: Duration, healthCheckInterval: Duration, metricsFactory: (any MetricsFactory)?
    ) {
        self.name = name
        self.profile = profile
        self.factory = factory
        self.host = host
        self.logger = logger
        self.metrics = PoolMetrics(profile: name, factory: metricsFactory ?? MetricsSystem.factory)
        self.random = SharedRandom(seed: seed)
        self.tick = tick
        self.healthCheckInterval = healthCheckInterval
    }

    // MARK: Acquire and release

    /// Leases a healthy renderer: a warm one at once, else a new one while under `maxSize`, else the first
    /// one freed up for this acquirer in FIFO order. `page` is told to the renderer (it is never a metric).
    ///
    /// `caller` is an opaque id of who asks (the HTTP layer passes a hash, never a raw credential). A named
    /// caller may have at most `maxLeasesPerCaller` acquires and leases at once; `nil` is not counted.
    ///
    /// `acquireTimeout` bounds the time spent queued; a cold start this acquirer performs itself is bounded by
    /// the creation (`createMs`, or `readyTimeoutMs` for a process), as a half-created renderer is not given up.
    ///
    /// Throws ``PoolError`` `callerLimit` at once when `caller` is at its cap, `timeout` after
    /// `acquireTimeout`, `createFailed` when creating a renderer for this acquire failed three times,
    /// `shutdown` once the pool is shutting down, `cancelled` when the task is.
    public func acquire(page: String?, caller: String? = nil) async throws(PoolError) -> Lease {
        if let caller {
            let limit = profile.effectiveMaxLeasesPerCaller
            let held = callerLeases[caller, default: 0]
            guard held < limit else {
                metrics.callerLimit.increment()
                throw PoolError(
                    .callerLimit,
                    "renderer pool \(name): this caller already has \(held) leases held or pending (maxLeasesPerCaller \(limit))")
            }
            callerLeases[caller] = held + 1
        }
        var leased = false
        defer { if !leased { freeCallerSlot(caller) } }
        let lease = try await acquireCounted(page: page, caller: caller)
        leased = true
        return lease
    }

    /// The acquire itself, once the caller's slot is taken; the lease carries `caller` until it ends.
    private func acquireCounted(page: String?, caller: String?) async throws(PoolError) -> Lease {
        let start = clock.now
        let deadline = start.advanced(by: .milliseconds(profile.acquireTimeout))
        var failedCreates = 0
        var keepPlace = false
        while true {
            if closed { throw PoolError(.shutdown, "renderer pool \(name) is shut down") }
            let grant: Grant
            if waiters.isEmpty, let id = takeIdle() {
                grant = .renderer(id)
            } else if waiters.isEmpty, liveCount < profile.maxSize {
                grant = .slot(reserve(background: false))
            } else {
                grant = await wait(until: deadline, atFront: keepPlace)
            }
            switch grant {
            case .renderer(let id):
                if let lease = await checkOut(id, page: page, caller: caller, start: start, warm: true) { return lease }
                keepPlace = true
            case .slot(let id):
                do throws(RendererError) {
                    if let lease = try await createForLease(id, page: page, caller: caller, start: start) { return lease }
                } catch {
                    failedCreates += 1
                    if failedCreates >= 3 {
                        metrics.failed.increment()
                        throw PoolError(.createFailed, "renderer pool \(name) could not create a renderer: \(error)")
                    }
                }
                keepPlace = true
            case .timeout:
                timeouts += 1
                metrics.timeout.increment()
                throw PoolError(
                    .timeout,
                    "renderer pool \(name): no renderer within \(Int(profile.acquireTimeout)) ms (maxSize \(profile.maxSize))"
                )
            case .cancelled:
                throw PoolError(.cancelled, "acquire from renderer pool \(name) was cancelled")
            case .shutdown:
                throw PoolError(.shutdown, "renderer pool \(name) is shut down")
            }
        }
    }

    /// Gives a leased renderer back. A healthy one is reset and becomes idle again, unless it reached
    /// `maxUses` or its lifetime; an unhealthy one (or one whose reset fails) is destroyed. Returns `false`
    /// when the lease is unknown: already released, reclaimed after `leaseTimeout`, or never issued.
    /// Either way the lease's caller slot is free once this returns.
    @discardableResult
    public func release(id leaseID: String, healthy: Bool = true) async -> Bool {
        guard let rendererID = leases[leaseID], entries[rendererID]?.leaseID == leaseID else { return false }
        endLease(of: rendererID)
        guard var entry = entries[rendererID] else { return false }
        let next = entry.life.release(healthy: healthy, at: clock.now)
        entries[rendererID] = entry
        publish()
        switch next {
        case .resetting:
            await resetAfterLease(rendererID)
        case .retiring:
            logger.debug(
                "renderer retired at release",
                metadata: ["renderer": "\(rendererID)", "reason": "\(entry.life.retireReason?.rawValue ?? "")"])
            await destroy(rendererID)
        default:
            break
        }
        return true
    }

    /// Counters, per-state counts and acquire-wait percentiles.
    public func snapshot() -> PoolSnapshot {
        var snapshot = PoolSnapshot(
            profile: name, idle: 0, leased: 0, warming: 0, resetting: 0, retiring: 0, pending: waiters.count,
            created: created, destroyed: destroyed, createFailures: createFailures, warmHits: warmHits,
            coldStarts: coldStarts, timeouts: timeouts, reclaimed: reclaimed, memoryMB: 0,
            acquireWaitMs: waits.percentiles)
        for entry in entries.values {
            switch entry.life.state {
            case .warming: snapshot.warming += 1
            case .idle: snapshot.idle += 1
            case .leased: snapshot.leased += 1
            case .resetting: snapshot.resetting += 1
            case .retiring: snapshot.retiring += 1
            case .destroyed: break
            }
            snapshot.memoryMB += entry.renderer?.memoryMB ?? 0
        }
        return snapshot
    }

    /// Memory warning: destroys every idle renderer, then creates new ones up to `minIdle` (one at a time).
    public func clear() async {
        let now = clock.now
        let victims = idle.filter { entries[$0]?.life.state == .idle }
        idle.removeAll()
        for id in victims { _ = entries[id]?.life.retire(.cleared, at: now) }
        publish()
        logger.info("renderer pool cleared", metadata: ["destroying": "\(victims.count)"])
        await destroyAll(victims)
        await refill()
    }

    // MARK: Service

    /// Hosts renderer processes, keeps `minIdle` warm and does the housekeeping until graceful shutdown or
    /// cancellation; then destroys every renderer and returns once all of them (and their processes) are gone.
    public func run() async throws {
        await withDiscardingTaskGroup { group in
            if let host {
                group.addTask { await host.serve() }
            }
            group.addTask(priority: .background) { await self.refillLoop() }
            await cancelWhenGracefulShutdown { await self.maintainLoop() }
            await self.shutdown()
            self.host?.close()
            group.cancelAll()
        }
    }

    // MARK: Internals: acquire paths

    private var liveCount: Int { entries.count }

    private func reserve(background: Bool) -> String {
        nextRenderer += 1
        let id = "\(name)-\(nextRenderer)"
        let jitter = profile.lifetimeJitter * random.unit()
        let lifetime = Duration.milliseconds(profile.maxLifetime * 1000 * (1 - jitter))
        entries[id] = Entry(
            life: RendererLifecycle(now: clock.now, maxUses: profile.maxUses, lifetime: lifetime),
            background: background)
        publish()
        return id
    }

    /// Takes the most recently used idle renderer and leases it (before any await, so nobody else can).
    private func takeIdle() -> String? {
        let now = clock.now
        while let id = idle.popLast() {
            if entries[id]?.life.lease(at: now) == true { return id }
        }
        return nil
    }

    /// Health checks a renderer already moved to `leased` and turns it into a lease, or destroys it.
    private func checkOut(
        _ id: String, page: String?, caller: String?, start: ContinuousClock.Instant, warm: Bool
    ) async -> Lease? {
        guard let renderer = entries[id]?.renderer else { return nil }
        let healthy = await renderer.isHealthy()
        guard var entry = entries[id], entry.life.state == .leased else { return nil }
        guard healthy else {
            _ = entry.life.retire(.unhealthy, at: clock.now)
            entries[id] = entry
            logger.info("renderer failed its health check at hand-out", metadata: ["renderer": "\(id)"])
            await destroy(id)
            return nil
        }
        await renderer.open(page: page)
        guard entries[id]?.life.state == .leased else { return nil }
        let leaseID = LeaseID.random()
        entries[id]?.leaseID = leaseID
        entries[id]?.caller = caller
        leases[leaseID] = id
        let waited = clock.now - start
        waits.add(waited)
        metrics.wait.recordNanoseconds(nanoseconds(waited))
        if warm {
            warmHits += 1
            metrics.warm.increment()
        } else {
            coldStarts += 1
            metrics.cold.increment()
        }
        publish()
        return Lease(
            id: leaseID, profile: name, rendererID: id, warm: warm, waited: waited, createTime: entry.createTime,
            uses: entry.life.uses, renderer: renderer)
    }

    /// Creates the renderer for a reserved slot and leases it to the acquirer that reserved it.
    private func createForLease(
        _ id: String, page: String?, caller: String?, start: ContinuousClock.Instant
    ) async throws(RendererError) -> Lease? {
        guard let renderer = try await create(id) else { return nil }
        guard entries[id]?.life.lease(at: clock.now) == true else {
            await destroyOrphan(id, renderer)
            return nil
        }
        return await checkOut(id, page: page, caller: caller, start: start, warm: false)
    }

    /// Runs the factory for a reserved (warming) entry. On failure the entry is gone and the error thrown;
    /// returns the renderer, or nil when the entry was retired meanwhile (shutdown) and the renderer destroyed.
    private func create(_ id: String) async throws(RendererError) -> (any Renderer)? {
        let began = clock.now
        let renderer: any Renderer
        do {
            renderer = try await factory.make(id: id)
        } catch {
            createFailures += 1
            logger.warning("renderer creation failed", metadata: ["renderer": "\(id)", "error": "\(error)"])
            _ = entries[id]?.life.retire(.createFailed, at: clock.now)
            finalize(id, countDestroyed: false)
            throw error
        }
        created += 1
        metrics.created.increment()
        guard entries[id]?.life.state == .warming else {
            await destroyOrphan(id, renderer)
            return nil
        }
        entries[id]?.renderer = renderer
        entries[id]?.createTime = clock.now - began
        return renderer
    }

    /// A renderer whose entry was retired while it was being created: attach and destroy it.
    private func destroyOrphan(_ id: String, _ renderer: any Renderer) async {
        if entries[id] != nil {
            entries[id]?.renderer = renderer
            _ = entries[id]?.life.retire(.shutdown, at: clock.now)
            await destroy(id)
        } else {
            await renderer.destroy()
        }
    }

    private func wait(until deadline: ContinuousClock.Instant, atFront: Bool) async -> Grant {
        if clock.now >= deadline { return .timeout }
        nextWaiter += 1
        let waiterID = nextWaiter
        openWaits[waiterID] = .some(nil)
        let grant = await withTaskGroup(of: Void.self, returning: Grant.self) { group in
            group.addTask {
                do {
                    try await Task.sleep(until: deadline, clock: .continuous)
                    await self.expire(waiterID, with: .timeout)
                } catch {
                    await self.expire(waiterID, with: .cancelled)
                }
            }
            let grant = await withCheckedContinuation { (continuation: CheckedContinuation<Grant, Never>) in
                self.enqueue(Waiter(id: waiterID, continuation: continuation), atFront: atFront)
            }
            group.cancelAll()
            return grant
        }
        openWaits[waiterID] = nil
        return grant
    }

    private func enqueue(_ waiter: Waiter, atFront: Bool) {
        if case .some(.some(let early)) = openWaits[waiter.id] {
            waiter.continuation.resume(returning: early)
            return
        }
        if closed {
            waiter.continuation.resume(returning: .shutdown)
            return
        }
        if atFront {
            waiters.insert(waiter, at: 0)
        } else {
            waiters.append(waiter)
        }
        dispatch()
    }

    private func expire(_ waiterID: Int, with grant: Grant) {
        if let index = waiters.firstIndex(where: { $0.id == waiterID }) {
            let waiter = waiters.remove(at: index)
            publish()
            waiter.continuation.resume(returning: grant)
        } else if openWaits[waiterID] != nil {
            // Not enqueued yet (or already served): remember it for an enqueue still to come.
            openWaits[waiterID] = .some(grant)
        }
    }

    /// Serves waiters in order: an idle renderer first, else a free slot to create one in.
    private func dispatch() {
        while !waiters.isEmpty {
            if let id = takeIdle() {
                waiters.removeFirst().continuation.resume(returning: .renderer(id))
            } else if liveCount < profile.maxSize {
                let id = reserve(background: false)
                waiters.removeFirst().continuation.resume(returning: .slot(id))
            } else {
                break
            }
        }
        publish()
    }

    // MARK: Internals: reset and destroy

    private func resetAfterLease(_ id: String) async {
        guard let renderer = entries[id]?.renderer else { return }
        var ok = true
        do {
            try await renderer.reset()
        } catch {
            ok = false
            logger.info("renderer reset failed", metadata: ["renderer": "\(id)", "error": "\(error)"])
        }
        guard var entry = entries[id], entry.life.resetFinished(ok: ok, at: clock.now) else { return }
        entries[id] = entry
        if entry.life.state == .idle {
            idle.append(id)
            dispatch()
        } else {
            await destroy(id)
        }
    }

    /// Destroys a renderer already in `retiring`, then frees its slot.
    private func destroy(_ id: String) async {
        publish()
        if let renderer = entries[id]?.renderer {
            await renderer.destroy()
        }
        finalize(id, countDestroyed: true)
    }

    private func destroyAll(_ ids: [String]) async {
        await withDiscardingTaskGroup { group in
            for id in ids {
                guard let renderer = entries[id]?.renderer else { continue }
                group.addTask { await renderer.destroy() }
            }
        }
        for id in ids { finalize(id, countDestroyed: entries[id]?.renderer != nil) }
    }

    private func finalize(_ id: String, countDestroyed: Bool) {
        guard var entry = entries[id] else { return }
        endLease(of: id)
        _ = entry.life.destroyed(at: clock.now)
        entries[id] = nil
        if countDestroyed {
            destroyed += 1
            metrics.destroyed.increment()
        }
        if entries.isEmpty {
            let drained = drainWaiters
            drainWaiters.removeAll()
            drained.forEach { $0.resume() }
        }
        dispatch()
    }

    // MARK: Internals: background work

    /// Creates idle renderers, one at a time, until `minIdle` are idle or warming (never above `maxSize`,
    /// never while acquirers wait: they create their own). Stops at the first failure.
    private func refill() async {
        while !closed, waiters.isEmpty, liveCount < profile.maxSize {
            let ready = entries.values.count { $0.life.state == .idle || ($0.life.state == .warming && $0.background) }
            guard ready < profile.minIdle else { return }
            let id = reserve(background: true)
            do throws(RendererError) {
                guard try await create(id) != nil else { return }
            } catch {
                return
            }
            guard entries[id]?.life.warmed(at: clock.now) == true else { continue }
            idle.append(id)
            dispatch()
        }
    }

    private func refillLoop() async {
        while !Task.isCancelled, !closed {
            await refill()
            try? await Task.sleep(for: tick)
        }
    }

    private func maintainLoop() async {
        while !Task.isCancelled, !closed {
            await housekeeping()
            try? await Task.sleep(for: tick)
        }
    }

    /// One round of lease reclaim, lifetime expiry, idle shrink and (periodically) idle health checks.
    func housekeeping() async {
        let now = clock.now
        var victims: [String] = []
        let leaseLimit = Duration.milliseconds(profile.leaseTimeout * 1000)
        for (id, entry) in entries where entry.life.state == .leased && now - entry.life.since >= leaseLimit {
            guard entries[id]?.life.retire(.reclaimed, at: now) == true else { continue }
            endLease(of: id)
            reclaimed += 1
            metrics.reclaimed.increment()
            logger.warning(
                "lease reclaimed after leaseTimeout", metadata: ["renderer": "\(id)", "lease": "\(entry.leaseID ?? "")"])
            victims.append(id)
        }
        for id in idle where entries[id]?.life.isExpired(at: now) == true {
            _ = entries[id]?.life.retire(.lifetime, at: now)
            victims.append(id)
        }
        idle.removeAll { entries[$0]?.life.state != .idle }
        let idleLimit = Duration.milliseconds(profile.idleTimeout * 1000)
        while idle.count > profile.minIdle, let oldest = idle.first,
            let since = entries[oldest]?.life.since, now - since >= idleLimit
        {
            idle.removeFirst()
            _ = entries[oldest]?.life.retire(.idle, at: now)
            victims.append(oldest)
        }
        publish()
        if !victims.isEmpty { await destroyAll(victims) }

        if lastHealthCheck.map({ now - $0 >= healthCheckInterval }) ?? true {
            lastHealthCheck = now
            for id in idle {
                guard let renderer = entries[id]?.renderer else { continue }
                let healthy = await renderer.isHealthy()
                guard !healthy, entries[id]?.life.state == .idle else { continue }
                idle.removeAll { $0 == id }
                _ = entries[id]?.life.retire(.unhealthy, at: clock.now)
                logger.info("idle renderer failed its health check", metadata: ["renderer": "\(id)"])
                await destroy(id)
            }
        }
    }

    /// Fails waiters, destroys every renderer (leased ones too) and waits until none is left.
    func shutdown() async {
        closed = true
        let pending = waiters
        waiters.removeAll()
        pending.forEach { $0.continuation.resume(returning: .shutdown) }
        let now = clock.now
        var victims: [String] = []
        for (id, entry) in entries where entry.life.state != .retiring {
            if entries[id]?.life.retire(.shutdown, at: now) == true, entry.renderer != nil {
                victims.append(id)
            }
        }
        idle.removeAll()
        publish()
        logger.info("renderer pool shutting down", metadata: ["destroying": "\(victims.count)"])
        await destroyAll(victims)
        // Renderers still being created, reset or destroyed by other tasks finish on their own.
        if !entries.isEmpty {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                drainWaiters.append(continuation)
            }
        }
    }

    // MARK: Internals: caller slots

    /// Ends the current lease of a renderer, if any: its id no longer releases anything and its caller's
    /// slot is free.
    private func endLease(of rendererID: String) {
        guard let entry = entries[rendererID] else { return }
        if let leaseID = entry.leaseID { leases[leaseID] = nil }
        freeCallerSlot(entry.caller)
        entries[rendererID]?.leaseID = nil
        entries[rendererID]?.caller = nil
    }

    private func freeCallerSlot(_ caller: String?) {
        guard let caller, let held = callerLeases[caller] else { return }
        callerLeases[caller] = held > 1 ? held - 1 : nil
    }

    /// Acquires in progress plus leases held by `caller`.
    func leasesHeld(by caller: String) -> Int {
        callerLeases[caller, default: 0]
    }

    /// The jittered lifetime of every live renderer, by renderer id.
    func lifetimes() -> [String: Duration] {
        entries.mapValues(\.life.lifetime)
    }

    private func publish() {
        var counts = (idle: 0, leased: 0, warming: 0)
        for entry in entries.values {
            switch entry.life.state {
            case .idle: counts.idle += 1
            case .leased: counts.leased += 1
            case .warming: counts.warming += 1
            default: break
            }
        }
        metrics.idle.record(counts.idle)
        metrics.leased.record(counts.leased)
        metrics.warming.record(counts.warming)
        metrics.pending.record(waiters.count)
    }
}

private func nanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
}
