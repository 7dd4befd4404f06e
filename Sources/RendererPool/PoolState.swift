import PrefetchCore

/// Every decision of one ``RendererPool``, apart from its I/O: which renderer an acquire gets, who waits and in
/// which order, when a renderer is reset, retired, health checked or destroyed, what the background refill
/// creates. A value type with no async, no clock reads and no randomness it does not own (a seeded generator
/// for the lifetime jitter): each event comes in with its `now`, and the answer says what the shell
/// (``RendererPool``) has to do. Modelled on async-http-client's `HTTPConnectionPool.StateMachine` and this
/// repository's `StoreState`; see docs/design/renderer-pool.md.
///
/// Every renderer's life is a ``RendererLifecycle``; an acquire is an ``Acquire`` from its start until it is
/// granted a lease or fails. After every event: `live <= maxSize`, and a queued acquire implies that no renderer
/// is idle and no slot is free (so nobody can overtake the queue).
struct PoolState {
    typealias Instant = ContinuousClock.Instant

    /// Identifies one acquire from its start until it is granted a lease or fails.
    struct AcquireID: Hashable, Sendable, CustomStringConvertible {
        fileprivate let value: Int
        var description: String { "acquire-\(value)" }
    }

    /// The profile's limits and timeouts, as the state machine uses them.
    struct Settings: Sendable {
        var name: String
        var minIdle: Int
        var maxSize: Int
        var maxUses: Int
        /// Seconds; each renderer's lifetime is this minus its jitter.
        var maxLifetimeSeconds: Double
        var lifetimeJitter: Double
        var idleTimeout: Duration
        var acquireTimeout: Duration
        var leaseTimeout: Duration
        var maxLeasesPerCaller: Int
        var healthCheckInterval: Duration
        /// Creations one acquire may see fail before it gives up.
        var createAttempts = 3

        init(name: String, profile: RendererProfile, healthCheckInterval: Duration) {
            self.name = name
            minIdle = profile.minIdle
            maxSize = profile.maxSize
            maxUses = profile.maxUses
            maxLifetimeSeconds = profile.maxLifetime
            lifetimeJitter = profile.lifetimeJitter
            idleTimeout = .milliseconds(profile.idleTimeout * 1000)
            acquireTimeout = .milliseconds(profile.acquireTimeout)
            leaseTimeout = .milliseconds(profile.leaseTimeout * 1000)
            maxLeasesPerCaller = profile.effectiveMaxLeasesPerCaller
            self.healthCheckInterval = healthCheckInterval
        }
    }

    /// What an acquirer does next.
    enum AcquireStep: Equatable, Sendable {
        /// This renderer (already `leased` for the acquirer) must pass a health check; report with
        /// ``healthChecked(_:healthy:now:)``.
        case checkHealth(RendererID)
        /// Create a renderer in this reserved slot; report with ``created(_:createTime:now:)`` or
        /// ``createFailed(_:error:now:)``.
        case create(RendererID)
        /// The renderer is healthy: tell it the page, then report with ``opened(_:leaseID:now:)``.
        case open(RendererID)
        /// Queued: suspend until ``Actions/resume`` names this acquire.
        case wait
        /// Done: the lease is granted.
        case granted(Grant)
        /// Done: the acquire failed (its caller slot is free again).
        case failed(AcquireFailure)
    }

    /// A lease granted to an acquire.
    struct Grant: Equatable, Sendable {
        var leaseID: LeaseID
        var rendererID: RendererID
        var warm: Bool
        var waited: Duration
        var createTime: Duration
        var uses: Int
    }

    /// Why an acquire failed; the shell turns it into a ``PoolError``.
    enum AcquireFailure: Equatable, Sendable {
        case callerLimit(held: Int, limit: Int)
        case timeout
        case createFailed(RendererError)
        case shutdown
        case cancelled
    }

    /// A queued acquire to wake, with its next step (`checkHealth`, `create` or `failed`).
    struct Resume: Equatable, Sendable {
        var id: AcquireID
        var step: AcquireStep
    }

    /// A renderer to destroy; it is already `retiring`.
    struct Retirement: Equatable, Sendable {
        var rendererID: RendererID
        var reason: RendererLifecycle.RetireReason
        /// The lease it was taken from, for a reclaimed one.
        var leaseID: LeaseID?
    }

    /// Renderers per state and queued acquires: what the gauges show.
    struct Counts: Equatable, Sendable {
        var idle = 0
        var leased = 0
        var warming = 0
        var pending = 0
    }

    /// What the shell performs after an event, besides the calling acquirer's own step.
    struct Actions: Equatable, Sendable {
        /// Queued acquires to wake, in queue order.
        var resume: [Resume] = []
        /// Released renderers to reset; report each with ``resetFinished(_:ok:now:)``.
        var reset: [RendererID] = []
        /// Renderers to destroy; report each with ``destroyed(_:now:)``.
        var destroy: [Retirement] = []
        /// Idle renderers to health check, one after another; report each with ``idleChecked(_:healthy:now:)``.
        var checkIdle: [RendererID] = []
        /// The gauges after the event.
        var counts = Counts()
        /// The pool is shut down and every renderer is gone: a waiting shutdown may return.
        var drained = false

        /// Whether anything but the gauges is asked for.
        var needsPerforming: Bool {
            !resume.isEmpty || !reset.isEmpty || !destroy.isEmpty || !checkIdle.isEmpty || drained
        }

        /// `later`'s work after this one's; the gauges after `later`.
        mutating func append(_ later: Actions) {
            resume += later.resume
            reset += later.reset
            destroy += later.destroy
            checkIdle += later.checkIdle
            counts = later.counts
            drained = drained || later.drained
        }
    }

    /// One acquire between its start and its lease or failure.
    struct Acquire: Equatable {
        enum Phase: Equatable {
            case queued
            case checking(RendererID, warm: Bool)
            case creating(RendererID)
            case opening(RendererID, warm: Bool)
        }

        let caller: String?
        let start: Instant
        let deadline: Instant
        var failedCreates = 0
        var phase: Phase
    }

    struct Entry {
        var life: RendererLifecycle
        /// Created by the background refill rather than for an acquire.
        var background: Bool
        /// The factory delivered the renderer (so destroying it is real work and counts).
        var hasRenderer = false
        var createTime: Duration = .zero
        var leaseID: LeaseID?
        /// The caller the current lease counts against, if it named one.
        var caller: String?
    }

    let settings: Settings
    private var random: SeededRandom

    private(set) var entries: [RendererID: Entry] = [:]
    /// Idle renderer ids, least recently used first.
    private(set) var idle: [RendererID] = []
    /// Renderer id by lease id.
    private var leases: [LeaseID: RendererID] = [:]
    /// Acquires in progress plus leases held, by caller; a caller with none has no key.
    private var callerLeases: [String: Int] = [:]
    private(set) var acquires: [AcquireID: Acquire] = [:]
    /// Queued acquires, first come first served.
    private(set) var queue: [AcquireID] = []
    private var nextRenderer = 0
    private var nextAcquire = 0
    private(set) var isClosed = false
    private var lastHealthCheck: Instant?

    private var created = 0
    private var destroyed = 0
    private var createFailures = 0
    private var warmHits = 0
    private var coldStarts = 0
    private var timeouts = 0
    private var reclaimed = 0
    private var waits = WaitWindow(capacity: 1024)

    /// `seed` decides the lifetime jitter of every renderer, in order of creation.
    init(settings: Settings, seed: UInt64) {
        self.settings = settings
        self.random = SeededRandom(seed: seed)
    }

    // MARK: Acquire events

    /// A new acquire by `caller` (nil: not counted). Returns its id and its first step: a warm renderer to
    /// check, a slot to create one in, or a place at the back of the queue; refused at once when the caller
    /// is at its cap, when the pool is shut down, or (with the pool full) when the acquire timeout is zero.
    mutating func acquire(caller: String?, now: Instant) -> (id: AcquireID, step: AcquireStep, actions: Actions) {
        nextAcquire += 1
        let id = AcquireID(value: nextAcquire)
        if let caller {
            let held = callerLeases[caller, default: 0]
            guard held < settings.maxLeasesPerCaller else {
                return (id, .failed(.callerLimit(held: held, limit: settings.maxLeasesPerCaller)), finish(Actions(), now))
            }
            callerLeases[caller] = held + 1
        }
        acquires[id] = Acquire(
            caller: caller, start: now, deadline: now.advanced(by: settings.acquireTimeout), phase: .queued)
        let step = isClosed ? end(id, .shutdown) : serve(id, atFront: false, checkDeadline: true, now: now)
        return (id, step, finish(Actions(), now))
    }

    /// The idle renderer a new acquire by `caller` would be handed at once (its health check next), or nil when it
    /// would not be served by an idle renderer at once: the pool is shut down, acquires are queued (they come
    /// first), the caller is at its cap, or no idle renderer can be leased now. Changes nothing.
    func idleCandidate(caller: String?, now: Instant) -> RendererID? {
        guard !isClosed, queue.isEmpty else { return nil }
        if let caller, callerLeases[caller, default: 0] >= settings.maxLeasesPerCaller { return nil }
        guard let rendererID = idle.last, let entry = entries[rendererID], entry.life.state == .idle else { return nil }
        return rendererID
    }

    /// The health check of the acquire's renderer answered. Healthy: open it. Unhealthy: it is destroyed and
    /// the acquire waits at the head of the queue, where the freed slot reaches it first.
    mutating func healthChecked(_ id: AcquireID, healthy: Bool, now: Instant) -> (step: AcquireStep, actions: Actions) {
        guard let acquire = acquires[id], case .checking(let rendererID, let warm) = acquire.phase else {
            preconditionFailure("\(id) is not health checking a renderer")
        }
        var actions = Actions()
        let step: AcquireStep
        if entries[rendererID]?.life.state != .leased {
            // Retired meanwhile (shutdown); whoever retired it destroys it.
            step = retry(id, checkDeadline: true, now: now)
        } else if healthy {
            acquires[id]?.phase = .opening(rendererID, warm: warm)
            step = .open(rendererID)
        } else {
            retire(rendererID, .unhealthy, now: now, into: &actions)
            step = retry(id, checkDeadline: false, now: now)
        }
        return (step, finish(actions, now))
    }

    /// The renderer for the acquire's slot was created; it is leased to the acquire and health checked next.
    mutating func created(_ id: AcquireID, createTime: Duration, now: Instant) -> (step: AcquireStep, actions: Actions) {
        guard let acquire = acquires[id], case .creating(let rendererID) = acquire.phase else {
            preconditionFailure("\(id) is not creating a renderer")
        }
        var actions = Actions()
        arrived(rendererID, createTime: createTime)
        let step: AcquireStep
        if entries[rendererID]?.life.lease(at: now) == true {
            acquires[id]?.phase = .checking(rendererID, warm: false)
            step = .checkHealth(rendererID)
        } else {
            orphan(rendererID, into: &actions)
            step = retry(id, checkDeadline: true, now: now)
        }
        return (step, finish(actions, now))
    }

    /// Creating the acquire's renderer failed: the slot is free again and the acquire tries again at the head
    /// of the queue, unless this was its last attempt.
    mutating func createFailed(
        _ id: AcquireID, error: RendererError, now: Instant
    ) -> (step: AcquireStep, actions: Actions) {
        guard let acquire = acquires[id], case .creating(let rendererID) = acquire.phase else {
            preconditionFailure("\(id) is not creating a renderer")
        }
        var actions = Actions()
        failedCreation(rendererID, now: now, into: &actions)
        acquires[id]?.failedCreates += 1
        let step: AcquireStep
        if acquire.failedCreates + 1 >= settings.createAttempts {
            step = end(id, .createFailed(error))
        } else {
            step = retry(id, checkDeadline: true, now: now)
        }
        return (step, finish(actions, now))
    }

    /// The renderer was told the page: the lease with `leaseID` is granted, unless the renderer was retired
    /// meanwhile.
    mutating func opened(_ id: AcquireID, leaseID: LeaseID, now: Instant) -> (step: AcquireStep, actions: Actions) {
        guard let acquire = acquires[id], case .opening(let rendererID, let warm) = acquire.phase else {
            preconditionFailure("\(id) is not opening a renderer")
        }
        guard var entry = entries[rendererID], entry.life.state == .leased else {
            return (retry(id, checkDeadline: true, now: now), finish(Actions(), now))
        }
        entry.leaseID = leaseID
        entry.caller = acquire.caller
        entries[rendererID] = entry
        leases[leaseID] = rendererID
        acquires[id] = nil
        let waited = now - acquire.start
        waits.add(waited)
        if warm { warmHits += 1 } else { coldStarts += 1 }
        let grant = Grant(
            leaseID: leaseID, rendererID: rendererID, warm: warm, waited: waited, createTime: entry.createTime,
            uses: entry.life.uses)
        return (.granted(grant), finish(Actions(), now))
    }

    /// The acquire's timer went off: a queued acquire past its deadline fails with `timeout`. An acquire no
    /// longer queued (served meanwhile) or a timer early for the deadline changes nothing.
    mutating func timedOut(_ id: AcquireID, now: Instant) -> Actions {
        guard let acquire = acquires[id], acquire.phase == .queued, now >= acquire.deadline else {
            return finish(Actions(), now)
        }
        return dequeue(id, .timeout, now: now)
    }

    /// The acquiring task was cancelled: a queued acquire fails with `cancelled`; one being served goes on.
    mutating func cancelled(_ id: AcquireID, now: Instant) -> Actions {
        guard acquires[id]?.phase == .queued else { return finish(Actions(), now) }
        return dequeue(id, .cancelled, now: now)
    }

    // MARK: Renderer events

    /// The holder gives a lease back: the renderer is reset when it may serve again, destroyed otherwise.
    /// Nil when no current lease has this id (never issued, released already, reclaimed).
    mutating func release(leaseID: LeaseID, healthy: Bool, now: Instant) -> Actions? {
        guard let rendererID = leases[leaseID], entries[rendererID]?.leaseID == leaseID else { return nil }
        endLease(of: rendererID)
        var actions = Actions()
        switch entries[rendererID]?.life.release(healthy: healthy, at: now) {
        case .resetting:
            actions.reset.append(rendererID)
        case .retiring:
            let reason = entries[rendererID]?.life.retireReason ?? .releasedUnhealthy
            actions.destroy.append(Retirement(rendererID: rendererID, reason: reason))
        default:
            break
        }
        return finish(actions, now)
    }

    /// A reset ended: the renderer is idle again (and serves the head of the queue) or, when it failed, destroyed.
    mutating func resetFinished(_ rendererID: RendererID, ok: Bool, now: Instant) -> Actions {
        var actions = Actions()
        if entries[rendererID]?.life.resetFinished(ok: ok, at: now) == true {
            if entries[rendererID]?.life.state == .idle {
                idle.append(rendererID)
            } else {
                actions.destroy.append(Retirement(rendererID: rendererID, reason: .resetFailed))
            }
        }
        return finish(actions, now)
    }

    /// A renderer was destroyed: its slot is free (and serves the head of the queue).
    mutating func destroyed(_ rendererID: RendererID, now: Instant) -> Actions {
        var actions = Actions()
        finalize(rendererID, now: now, into: &actions)
        return finish(actions, now)
    }

    // MARK: Background events

    /// Reserves a slot for the background refill when fewer than `minIdle` renderers are idle or warming in
    /// the background, nobody waits (waiters create their own) and the pool is under `maxSize`. The shell
    /// creates one renderer at a time and reports with ``refillCreated(_:createTime:now:)`` or
    /// ``refillFailed(_:now:)``.
    mutating func nextRefill(now: Instant) -> RendererID? {
        guard !isClosed, queue.isEmpty, entries.count < settings.maxSize else { return nil }
        let ready = entries.values.count { $0.life.state == .idle || ($0.life.state == .warming && $0.background) }
        guard ready < settings.minIdle else { return nil }
        return reserve(background: true, now: now)
    }

    /// A background creation delivered its renderer: idle from now on, or destroyed when the pool shut down
    /// meanwhile.
    mutating func refillCreated(_ rendererID: RendererID, createTime: Duration, now: Instant) -> Actions {
        var actions = Actions()
        arrived(rendererID, createTime: createTime)
        if entries[rendererID]?.life.warmed(at: now) == true {
            idle.append(rendererID)
        } else {
            orphan(rendererID, into: &actions)
        }
        return finish(actions, now)
    }

    /// A background creation failed: the slot is free again.
    mutating func refillFailed(_ rendererID: RendererID, now: Instant) -> Actions {
        var actions = Actions()
        failedCreation(rendererID, now: now, into: &actions)
        return finish(actions, now)
    }

    /// Housekeeping at `now`: reclaims leases older than `leaseTimeout`, retires idle renderers past their
    /// lifetime, shrinks renderers idle for `idleTimeout` back towards `minIdle` (least recently used first),
    /// and every `healthCheckInterval` asks for a health check of the idle renderers.
    mutating func tick(now: Instant) -> Actions {
        var actions = Actions()
        let overdue = entries.filter { _, entry in
            entry.life.state == .leased && entry.leaseID != nil && now - entry.life.since >= settings.leaseTimeout
        }
        for (rendererID, entry) in overdue.sorted(by: { $0.key < $1.key }) {
            endLease(of: rendererID)
            reclaimed += 1
            retire(rendererID, .reclaimed, leaseID: entry.leaseID, now: now, into: &actions)
        }
        for rendererID in idle where entries[rendererID]?.life.isExpired(at: now) == true {
            retire(rendererID, .lifetime, now: now, into: &actions)
        }
        while idle.count > settings.minIdle, let oldest = idle.first,
            let since = entries[oldest]?.life.since, now - since >= settings.idleTimeout
        {
            retire(oldest, .idle, now: now, into: &actions)
        }
        if lastHealthCheck.map({ now - $0 >= settings.healthCheckInterval }) ?? true {
            lastHealthCheck = now
            actions.checkIdle = idle
        }
        return finish(actions, now)
    }

    /// The health check of an idle renderer answered; a dead one still idle is destroyed.
    mutating func idleChecked(_ rendererID: RendererID, healthy: Bool, now: Instant) -> Actions {
        var actions = Actions()
        if !healthy, entries[rendererID]?.life.state == .idle {
            retire(rendererID, .unhealthy, now: now, into: &actions)
        }
        return finish(actions, now)
    }

    /// Memory warning: every idle renderer is destroyed (the shell refills afterwards).
    mutating func clear(now: Instant) -> Actions {
        var actions = Actions()
        for rendererID in idle { retire(rendererID, .cleared, now: now, into: &actions) }
        return finish(actions, now)
    }

    /// Closes the pool: queued acquires fail with `shutdown`, every renderer that exists is destroyed (leased
    /// ones too); renderers still being created are destroyed when they arrive. `drained` is set once none is
    /// left, by this event or a later one.
    mutating func shutdown(now: Instant) -> Actions {
        isClosed = true
        var actions = Actions()
        for id in queue {
            actions.resume.append(Resume(id: id, step: end(id, .shutdown)))
        }
        queue.removeAll()
        for rendererID in entries.keys.sorted() where entries[rendererID]?.life.state != .retiring {
            retire(rendererID, .shutdown, now: now, into: &actions)
        }
        return finish(actions, now)
    }

    // MARK: Reading

    /// Acquires in progress plus leases held by `caller`.
    func leasesHeld(by caller: String) -> Int {
        callerLeases[caller, default: 0]
    }

    /// The jittered lifetime of every live renderer, by renderer id.
    func lifetimes() -> [RendererID: Duration] {
        entries.mapValues(\.life.lifetime)
    }

    /// Whether the pool is shut down and every renderer is gone.
    var isDrained: Bool { isClosed && entries.isEmpty }

    /// When a queued acquire times out.
    func deadline(of id: AcquireID) -> Instant? {
        acquires[id]?.deadline
    }

    /// Counters, per-state counts and acquire-wait percentiles; `memoryMB` comes from the renderers themselves.
    func snapshot(memoryMB: Int) -> PoolSnapshot {
        var snapshot = PoolSnapshot(
            profile: settings.name, idle: 0, leased: 0, warming: 0, resetting: 0, retiring: 0, pending: queue.count,
            created: created, destroyed: destroyed, createFailures: createFailures, warmHits: warmHits,
            coldStarts: coldStarts, timeouts: timeouts, reclaimed: reclaimed, memoryMB: memoryMB,
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
        }
        return snapshot
    }

    var counts: Counts {
        var counts = Counts(pending: queue.count)
        for entry in entries.values {
            switch entry.life.state {
            case .idle: counts.idle += 1
            case .leased: counts.leased += 1
            case .warming: counts.warming += 1
            default: break
            }
        }
        return counts
    }

    // MARK: Internals

    /// Serves the acquire at once (an idle renderer, most recently used first, else a free slot) when it is
    /// at the head of the queue or would be; queues it otherwise, unless its deadline passed.
    private mutating func serve(_ id: AcquireID, atFront: Bool, checkDeadline: Bool, now: Instant) -> AcquireStep {
        if atFront || queue.isEmpty {
            if let rendererID = takeIdle(now: now) {
                acquires[id]?.phase = .checking(rendererID, warm: true)
                return .checkHealth(rendererID)
            }
            if entries.count < settings.maxSize {
                let rendererID = reserve(background: false, now: now)
                acquires[id]?.phase = .creating(rendererID)
                return .create(rendererID)
            }
        }
        if checkDeadline, let deadline = acquires[id]?.deadline, now >= deadline {
            return end(id, .timeout)
        }
        acquires[id]?.phase = .queued
        if atFront {
            queue.insert(id, at: 0)
        } else {
            queue.append(id)
        }
        return .wait
    }

    /// The acquire lost its renderer or slot: it tries again, keeping its place ahead of every queued acquire.
    private mutating func retry(_ id: AcquireID, checkDeadline: Bool, now: Instant) -> AcquireStep {
        if isClosed { return end(id, .shutdown) }
        return serve(id, atFront: true, checkDeadline: checkDeadline, now: now)
    }

    /// Ends a failed acquire: forgets it and frees its caller slot.
    private mutating func end(_ id: AcquireID, _ failure: AcquireFailure) -> AcquireStep {
        if let acquire = acquires.removeValue(forKey: id) {
            freeCallerSlot(acquire.caller)
        }
        if failure == .timeout { timeouts += 1 }
        return .failed(failure)
    }

    private mutating func dequeue(_ id: AcquireID, _ failure: AcquireFailure, now: Instant) -> Actions {
        queue.removeAll { $0 == id }
        var actions = Actions()
        actions.resume.append(Resume(id: id, step: end(id, failure)))
        return finish(actions, now)
    }

    /// Serves queued acquires in order while renderers are idle or slots free.
    private mutating func dispatch(now: Instant, into actions: inout Actions) {
        while let id = queue.first {
            let step: AcquireStep
            if let rendererID = takeIdle(now: now) {
                acquires[id]?.phase = .checking(rendererID, warm: true)
                step = .checkHealth(rendererID)
            } else if entries.count < settings.maxSize {
                let rendererID = reserve(background: false, now: now)
                acquires[id]?.phase = .creating(rendererID)
                step = .create(rendererID)
            } else {
                break
            }
            queue.removeFirst()
            actions.resume.append(Resume(id: id, step: step))
        }
    }

    /// Every event ends here: queued acquires are served by whatever was freed, and the gauges follow.
    private mutating func finish(_ actions: Actions, _ now: Instant) -> Actions {
        var actions = actions
        dispatch(now: now, into: &actions)
        actions.counts = counts
        if isDrained { actions.drained = true }
        return actions
    }

    private mutating func reserve(background: Bool, now: Instant) -> RendererID {
        nextRenderer += 1
        let rendererID = RendererID("\(settings.name)-\(nextRenderer)")
        let jitter = settings.lifetimeJitter * Double.random(in: 0..<1, using: &random)
        let lifetime = Duration.milliseconds(settings.maxLifetimeSeconds * 1000 * (1 - jitter))
        entries[rendererID] = Entry(
            life: RendererLifecycle(now: now, maxUses: settings.maxUses, lifetime: lifetime), background: background)
        return rendererID
    }

    /// Takes the most recently used idle renderer and leases it.
    private mutating func takeIdle(now: Instant) -> RendererID? {
        while let rendererID = idle.popLast() {
            if entries[rendererID]?.life.lease(at: now) == true { return rendererID }
        }
        return nil
    }

    private mutating func arrived(_ rendererID: RendererID, createTime: Duration) {
        created += 1
        entries[rendererID]?.hasRenderer = true
        entries[rendererID]?.createTime = createTime
    }

    /// A renderer that arrived after its entry was retired (shutdown): destroy it.
    private func orphan(_ rendererID: RendererID, into actions: inout Actions) {
        let reason = entries[rendererID]?.life.retireReason ?? .shutdown
        actions.destroy.append(Retirement(rendererID: rendererID, reason: reason))
    }

    private mutating func failedCreation(_ rendererID: RendererID, now: Instant, into actions: inout Actions) {
        createFailures += 1
        _ = entries[rendererID]?.life.retire(.createFailed, at: now)
        finalize(rendererID, now: now, into: &actions)
    }

    /// Moves a live renderer to `retiring` and, when it exists already, asks for its destruction.
    private mutating func retire(
        _ rendererID: RendererID, _ reason: RendererLifecycle.RetireReason, leaseID: LeaseID? = nil, now: Instant,
        into actions: inout Actions
    ) {
        guard var entry = entries[rendererID], entry.life.retire(reason, at: now) else { return }
        entries[rendererID] = entry
        idle.removeAll { $0 == rendererID }
        if entry.hasRenderer {
            actions.destroy.append(Retirement(rendererID: rendererID, reason: reason, leaseID: leaseID))
        }
    }

    /// Forgets a retired renderer; its slot is free.
    private mutating func finalize(_ rendererID: RendererID, now: Instant, into actions: inout Actions) {
        guard var entry = entries[rendererID], entry.life.destroyed(at: now) else { return }
        endLease(of: rendererID)
        entries[rendererID] = nil
        if entry.hasRenderer { destroyed += 1 }
    }

    /// Ends the current lease of a renderer, if any: its id no longer releases anything and its caller's
    /// slot is free.
    private mutating func endLease(of rendererID: RendererID) {
        guard let entry = entries[rendererID] else { return }
        if let leaseID = entry.leaseID { leases[leaseID] = nil }
        freeCallerSlot(entry.caller)
        entries[rendererID]?.leaseID = nil
        entries[rendererID]?.caller = nil
    }

    private mutating func freeCallerSlot(_ caller: String?) {
        guard let caller, let held = callerLeases[caller] else { return }
        callerLeases[caller] = held > 1 ? held - 1 : nil
    }
}
