/// RendererPool keeps pre-initialised renderers warm so that opening a page does not pay for creating one.
/// ``RendererPool`` (an actor) is the I/O shell: it creates, resets, health checks and destroys renderers and
/// suspends acquirers, while every decision (who gets which renderer, FIFO order, limits, timeouts, retirement)
/// is made by the pure state machine ``PoolState``, with time passed in from an injected clock.
/// Design notes: docs/design/renderer-pool.md
public import Logging
public import Metrics
public import PrefetchCore
public import ServiceLifecycle
import Synchronization

/// A renderer handed out by ``RendererPool/acquire(page:caller:)``; give it back with
/// ``RendererPool/release(id:healthy:)``.
public struct Lease: Sendable {
    /// Identifies this lease: 22 URL-safe characters (128 random bits), unguessable from any other lease.
    /// It is the capability to release or destroy the renderer; pass it to `release`.
    public let id: LeaseID
    /// The profile the renderer belongs to.
    public let profile: String
    /// The renderer's own identifier.
    public let rendererID: RendererID
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

/// A pool of renderers for one profile. See docs/design/renderer-pool.md.
public actor RendererPool: Service {
    /// An acquirer between its `wait` step and the step that wakes it.
    private enum Waiter {
        /// Suspended on its continuation.
        case suspended(CheckedContinuation<PoolState.AcquireStep, Never>)
        /// Woken before it suspended; the wait returns this at once.
        case settled(PoolState.AcquireStep)
    }

    /// The profile's name (the `profile` metric dimension).
    public nonisolated let name: String
    /// The profile this pool follows.
    public nonisolated let profile: RendererProfile

    private let factory: any RendererFactory
    private let host: ProcessHost?
    private let logger: Logger
    private let metrics: PoolMetrics
    private let clock: any ServiceClock
    private let tick: Duration

    /// The pool's decisions and its renderers, under one lock: the actor's steps take it for each event, and a
    /// warm lease handed out on an event loop (``acquireWithoutSuspending(page:caller:)``) takes it once for the
    /// whole lease. It is never held across a suspension or a renderer call that may block.
    private let core: Mutex<Core>

    private struct Core {
        var state: PoolState
        /// The renderers the factory delivered and that are not destroyed yet, by renderer id.
        var renderers: [RendererID: any Renderer] = [:]
    }
    private var waiters: [PoolState.AcquireID: Waiter] = [:]
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []

    /// A pool creating renderers of `profile.kind` (`modelled` or `process`).
    ///
    /// - Parameters:
    ///   - name: the profile name, used in lease ids, logs and as the `profile` metric dimension.
    ///   - seed: makes modelled failures, deaths and lifetime jitter reproducible.
    ///   - tick: how often `run()` does its housekeeping (lease reclaim, lifetime, idle shrink, refill).
    ///   - healthCheckInterval: how often `run()` health checks idle renderers.
    ///   - metricsFactory: where metrics go; the bootstrapped `MetricsSystem.factory` when nil.
    ///   - clock: the time every timeout, lifetime and tick is measured in.
    public init(
        name: String,
        profile: RendererProfile,
        logger: Logger,
        seed: UInt64? = nil,
        tick: Duration = .milliseconds(100),
        healthCheckInterval: Duration = .seconds(1),
        metricsFactory: (any MetricsFactory)? = nil,
        clock: any ServiceClock = ContinuousClock()
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
            healthCheckInterval: healthCheckInterval, metricsFactory: metricsFactory, clock: clock)
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
        metricsFactory: (any MetricsFactory)? = nil,
        clock: any ServiceClock = ContinuousClock()
    ) {
        var logger = logger
        logger[metadataKey: "profile"] = "\(name)"
        self.init(
            name: name, profile: profile, factory: factory, host: nil, logger: logger, seed: seed, tick: tick,
            healthCheckInterval: healthCheckInterval, metricsFactory: metricsFactory, clock: clock)
    }

    private init(
        name: String, profile: RendererProfile, factory: any RendererFactory, host: ProcessHost?, logger: Logger,
        seed: UInt64?, tick: Duration, healthCheckInterval: Duration, metricsFactory: (any MetricsFactory)?,
        clock: any ServiceClock
    ) {
        self.name = name
        self.profile = profile
        self.factory = factory
        self.host = host
        self.logger = logger
        self.metrics = PoolMetrics(profile: name, factory: metricsFactory ?? MetricsSystem.factory)
        self.clock = clock
        self.tick = tick
        var system = SystemRandomNumberGenerator()
        self.core = Mutex(
            Core(
                state: PoolState(
                    settings: PoolState.Settings(name: name, profile: profile, healthCheckInterval: healthCheckInterval),
                    seed: seed ?? system.next())))
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
        let (id, first, actions) = withState { $0.acquire(caller: caller, now: clock.now) }
        await perform(actions)
        var step = first
        while true {
            switch step {
            case .checkHealth(let rendererID):
                // A renderer missing here was destroyed by a shutdown; the state machine knows it is retired.
                var healthy = false
                if let renderer = renderer(rendererID) {
                    healthy = await renderer.isHealthy()
                    if !healthy {
                        logger.info("renderer failed its health check at hand-out", metadata: ["renderer": "\(rendererID)"])
                    }
                }
                let next = withState { $0.healthChecked(id, healthy: healthy, now: clock.now) }
                await perform(next.actions)
                step = next.step
            case .create(let rendererID):
                let began = clock.now
                let next: (step: PoolState.AcquireStep, actions: PoolState.Actions)
                do throws(RendererError) {
                    try await make(rendererID)
                    next = withState { $0.created(id, createTime: clock.now - began, now: clock.now) }
                } catch {
                    next = withState { $0.createFailed(id, error: error, now: clock.now) }
                }
                await perform(next.actions)
                step = next.step
            case .open(let rendererID):
                await renderer(rendererID)?.open(page: page)
                let next = withState { $0.opened(id, leaseID: LeaseID.random(), now: clock.now) }
                await perform(next.actions)
                step = next.step
            case .wait:
                step = await wait(id)
            case .granted(let grant):
                return lease(grant)
            case .failed(let failure):
                throw poolError(failure)
            }
        }
    }

    /// A warm renderer leased without suspending, for an event loop: the lease ``acquire(page:caller:)`` would grant
    /// at once (the idle renderer it would pick, health checked and told the page, the same state machine steps and
    /// metrics), or nil, with nothing done, when that acquire would have to wait, create a renderer or ask one that
    /// cannot answer at once, or when the renderer it would pick is not healthy (``acquire(page:caller:)`` then
    /// retires it and serves the caller otherwise).
    public nonisolated func acquireWithoutSuspending(page: String?, caller: String? = nil) -> Lease? {
        let now = clock.now
        let taken = core.withLock { core -> (PoolState.Grant, any Renderer, PoolState.Actions)? in
            guard let rendererID = core.state.idleCandidate(caller: caller, now: now),
                let renderer = core.renderers[rendererID] as? any SynchronousRenderer, renderer.isHealthyNow()
            else { return nil }
            let (id, first, actions) = core.state.acquire(caller: caller, now: now)
            guard first == .checkHealth(rendererID) else {
                preconditionFailure("the idle candidate \(rendererID) was not the renderer served (\(first))")
            }
            let checked = core.state.healthChecked(id, healthy: true, now: now)
            renderer.openNow(page: page)
            let opened = core.state.opened(id, leaseID: LeaseID.random(), now: now)
            guard case .granted(let grant) = opened.step else {
                preconditionFailure("a healthy idle renderer opened without a grant (\(opened.step))")
            }
            var all = actions
            all.append(checked.actions)
            all.append(opened.actions)
            return (grant, renderer, all)
        }
        guard let (grant, renderer, actions) = taken else { return nil }
        publish(actions.counts)
        if actions.needsPerforming {
            // Work that suspends (a reset, a destruction, a health check) goes to the actor; its gauges are read
            // when it runs.
            Task {
                var later = actions
                later.counts = self.withState { $0.counts }
                await self.perform(later)
            }
        }
        return lease(grant, renderer: renderer)
    }

    /// Gives a leased renderer back. A healthy one is reset and becomes idle again, unless it reached
    /// `maxUses` or its lifetime; an unhealthy one (or one whose reset fails) is destroyed. Returns `false`
    /// when the lease is unknown: already released, reclaimed after `leaseTimeout`, or never issued.
    /// Either way the lease's caller slot is free once this returns.
    @discardableResult
    public func release(id leaseID: LeaseID, healthy: Bool = true) async -> Bool {
        guard let actions = withState({ $0.release(leaseID: leaseID, healthy: healthy, now: clock.now) }) else { return false }
        await perform(actions)
        return true
    }

    /// Counters, per-state counts and acquire-wait percentiles.
    public func snapshot() -> PoolSnapshot {
        core.withLock { core in
            let memoryMB = core.state.entries.keys.reduce(0) { $0 + (core.renderers[$1]?.memoryMB ?? 0) }
            return core.state.snapshot(memoryMB: memoryMB)
        }
    }

    /// Memory warning: destroys every idle renderer, then creates new ones up to `minIdle` (one at a time).
    public func clear() async {
        let actions = withState { $0.clear(now: clock.now) }
        logger.info("renderer pool cleared", metadata: ["destroying": "\(actions.destroy.count)"])
        await perform(actions)
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

    // MARK: Internals: performing actions

    /// One step of the state machine, under the lock.
    private nonisolated func withState<Result: Sendable>(_ body: (inout PoolState) -> Result) -> Result {
        core.withLock { body(&$0.state) }
    }

    private nonisolated func renderer(_ rendererID: RendererID) -> (any Renderer)? {
        core.withLock { $0.renderers[rendererID] }
    }

    /// Performs what the state machine asked for, feeding every outcome back in (and performing what that
    /// asks for in turn).
    private func perform(_ actions: PoolState.Actions) async {
        publish(actions.counts)
        for resume in actions.resume { wake(resume.id, with: resume.step) }
        if actions.drained {
            let drained = drainWaiters
            drainWaiters.removeAll()
            drained.forEach { $0.resume() }
        }
        for rendererID in actions.reset {
            await reset(rendererID)
        }
        if !actions.destroy.isEmpty {
            await destroy(actions.destroy)
        }
        for rendererID in actions.checkIdle {
            guard let renderer = renderer(rendererID) else { continue }
            let healthy = await renderer.isHealthy()
            if !healthy {
                logger.info("idle renderer failed its health check", metadata: ["renderer": "\(rendererID)"])
            }
            await perform(withState { $0.idleChecked(rendererID, healthy: healthy, now: clock.now) })
        }
    }

    private nonisolated func publish(_ counts: PoolState.Counts) {
        metrics.idle.record(counts.idle)
        metrics.leased.record(counts.leased)
        metrics.warming.record(counts.warming)
        metrics.pending.record(counts.pending)
    }

    /// Runs the factory for a reserved slot; the renderer is kept in `renderers` from then on.
    private func make(_ rendererID: RendererID) async throws(RendererError) {
        do {
            let made = try await factory.make(id: rendererID)
            core.withLock { $0.renderers[rendererID] = made }
        } catch {
            logger.warning("renderer creation failed", metadata: ["renderer": "\(rendererID)", "error": "\(error)"])
            throw error
        }
        metrics.created.increment()
    }

    private func reset(_ rendererID: RendererID) async {
        guard let renderer = renderer(rendererID) else { return }
        var ok = true
        do {
            try await renderer.reset()
        } catch {
            ok = false
            logger.info("renderer reset failed", metadata: ["renderer": "\(rendererID)", "error": "\(error)"])
        }
        await perform(withState { $0.resetFinished(rendererID, ok: ok, now: clock.now) })
    }

    /// Destroys retired renderers (several at once concurrently), then reports each as destroyed.
    private func destroy(_ retirements: [PoolState.Retirement]) async {
        // Each is reported destroyed even if its renderer were missing, so no entry can hold a slot forever.
        var doomed: [(RendererID, (any Renderer)?)] = []
        for retirement in retirements {
            let rendererID = retirement.rendererID
            switch retirement.reason {
            case .reclaimed:
                metrics.reclaimed.increment()
                logger.warning(
                    "lease reclaimed after leaseTimeout",
                    metadata: ["renderer": "\(rendererID)", "lease": "\(retirement.leaseID ?? "")"])
            default:
                logger.debug(
                    "renderer retired", metadata: ["renderer": "\(rendererID)", "reason": "\(retirement.reason.rawValue)"])
            }
            doomed.append((rendererID, renderer(rendererID)))
        }
        if doomed.count == 1 {
            await doomed[0].1?.destroy()
        } else {
            await withDiscardingTaskGroup { group in
                for case (_, let renderer?) in doomed { group.addTask { await renderer.destroy() } }
            }
        }
        for (rendererID, _) in doomed {
            core.withLock { _ = $0.renderers.removeValue(forKey: rendererID) }
            metrics.destroyed.increment()
            await perform(withState { $0.destroyed(rendererID, now: clock.now) })
        }
    }

    /// Suspends an acquirer until the state machine wakes it, or its timer (the acquire timeout on the pool's
    /// clock) or the task's cancellation ends the wait.
    private func wait(_ id: PoolState.AcquireID) async -> PoolState.AcquireStep {
        if case .settled(let step) = waiters.removeValue(forKey: id) { return step }
        guard let deadline = withState({ $0.deadline(of: id) }) else { return .failed(.shutdown) }
        return await withDeadline(
            deadline, clock: clock, onExpiry: { await self.timerFired(id) }, onCancel: { await self.waitCancelled(id) }
        ) {
            await withCheckedContinuation { (continuation: CheckedContinuation<PoolState.AcquireStep, Never>) in
                if case .settled(let step) = waiters.removeValue(forKey: id) {
                    continuation.resume(returning: step)
                } else {
                    waiters[id] = .suspended(continuation)
                }
            }
        }
    }

    private func wake(_ id: PoolState.AcquireID, with step: PoolState.AcquireStep) {
        if case .suspended(let continuation) = waiters.removeValue(forKey: id) {
            continuation.resume(returning: step)
        } else {
            waiters[id] = .settled(step)
        }
    }

    private func timerFired(_ id: PoolState.AcquireID) async {
        await perform(withState { $0.timedOut(id, now: clock.now) })
    }

    private func waitCancelled(_ id: PoolState.AcquireID) async {
        await perform(withState { $0.cancelled(id, now: clock.now) })
    }

    private func lease(_ grant: PoolState.Grant) -> Lease {
        // The grant was made in this actor turn, with the renderer leased: nothing destroyed it meanwhile.
        guard let renderer = renderer(grant.rendererID) else {
            preconditionFailure("renderer \(grant.rendererID) granted without being there")
        }
        return lease(grant, renderer: renderer)
    }

    private nonisolated func lease(_ grant: PoolState.Grant, renderer: any Renderer) -> Lease {
        metrics.wait.recordNanoseconds(grant.waited.nanoseconds)
        if grant.warm {
            metrics.warm.increment()
        } else {
            metrics.cold.increment()
        }
        return Lease(
            id: grant.leaseID, profile: name, rendererID: grant.rendererID, warm: grant.warm, waited: grant.waited,
            createTime: grant.createTime, uses: grant.uses, renderer: renderer)
    }

    private func poolError(_ failure: PoolState.AcquireFailure) -> PoolError {
        switch failure {
        case .callerLimit(let held, let limit):
            metrics.callerLimit.increment()
            return PoolError(
                .callerLimit,
                "renderer pool \(name): this caller already has \(held) leases held or pending (maxLeasesPerCaller \(limit))")
        case .timeout:
            metrics.timeout.increment()
            return PoolError(
                .timeout,
                "renderer pool \(name): no renderer within \(Int(profile.acquireTimeout)) ms (maxSize \(profile.maxSize))")
        case .createFailed(let error):
            metrics.failed.increment()
            return PoolError(.createFailed, "renderer pool \(name) could not create a renderer: \(error)")
        case .shutdown:
            return PoolError(.shutdown, "renderer pool \(name) is shut down")
        case .cancelled:
            return PoolError(.cancelled, "acquire from renderer pool \(name) was cancelled")
        }
    }

    // MARK: Internals: background work

    /// Creates idle renderers, one at a time, while the state machine asks for them (up to `minIdle`, never
    /// above `maxSize`, never while acquirers wait). Stops at the first failure until the next round.
    private func refill() async {
        while let rendererID = withState({ $0.nextRefill(now: clock.now) }) {
            publish(withState { $0.counts })
            let began = clock.now
            do throws(RendererError) {
                try await make(rendererID)
            } catch {
                await perform(withState { $0.refillFailed(rendererID, now: clock.now) })
                return
            }
            await perform(withState { $0.refillCreated(rendererID, createTime: clock.now - began, now: clock.now) })
        }
    }

    private func refillLoop() async {
        while !Task.isCancelled, !withState({ $0.isClosed }) {
            await refill()
            try? await clock.sleep(until: clock.now.advanced(by: tick), tolerance: nil)
        }
    }

    private func maintainLoop() async {
        while !Task.isCancelled, !withState({ $0.isClosed }) {
            await housekeeping()
            try? await clock.sleep(until: clock.now.advanced(by: tick), tolerance: nil)
        }
    }

    /// One round of lease reclaim, lifetime expiry, idle shrink and (every `healthCheckInterval`) idle health
    /// checks.
    func housekeeping() async {
        await perform(withState { $0.tick(now: clock.now) })
    }

    /// Fails waiters, destroys every renderer (leased ones too) and waits until none is left.
    func shutdown() async {
        let actions = withState { $0.shutdown(now: clock.now) }
        logger.info("renderer pool shutting down", metadata: ["destroying": "\(actions.destroy.count)"])
        await perform(actions)
        // Renderers still being created, reset or destroyed by other tasks finish on their own.
        if !withState({ $0.isDrained }) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                drainWaiters.append(continuation)
            }
        }
    }

    // MARK: Internals: test access

    /// Acquires in progress plus leases held by `caller`.
    func leasesHeld(by caller: String) -> Int {
        withState { $0.leasesHeld(by: caller) }
    }

    /// The jittered lifetime of every live renderer, by renderer id.
    func lifetimes() -> [RendererID: Duration] {
        withState { $0.lifetimes() }
    }
}
