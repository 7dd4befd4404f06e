// RedisStore: the shared `ResponseStore` for several replicas behind a load balancer. Responses and the single flight
// live in Redis (Lua scripts on keys derived from a digest of the whole store key); a per-replica `MemoryStore` takes
// over while Redis is unreachable. `RedisStoreState` makes every decision (health, which path, what a reply means);
// this class is the shell that talks to `RedisPool` and `RedisSubscriber`, reads the clock and performs its steps.
// Design notes: docs/design/redis-store.md

public import CoreMetrics
public import Logging
public import NIOCore
import NIOPosix
public import PrefetchCore
public import PrefetchStore
public import ServiceLifecycle

/// A `ResponseStore` shared by every replica through Redis, with the same promises as `MemoryStore`: single flight
/// per key across replicas, identity isolation, per-interface TTLs, no-store responses handed out exactly once,
/// failures kept for the negative TTL. Run it as a `Service`: `run()` keeps the pub/sub subscriber (prompt wake-ups
/// for waiting readers) and the outage probe alive until graceful shutdown. Without `run()` the store still works;
/// readers then learn of completions by polling. Design notes: docs/design/redis-store.md.
public final class RedisStore: ResponseStore, Service {
    /// Tuning for a `RedisStore`. The defaults suit a store on the same network.
    public struct Configuration: Sendable, Hashable {
        /// Pooled connections, non-blocking on the event loops (see `RedisPool`). A call is written at once behind
        /// whatever is outstanding on its connection, so a page's fan-out needs few; a call made on an event loop
        /// goes on that loop's connection when it has one, so one per event loop keeps every page request's calls
        /// on its own thread; two at least keep a slow call (a `SCAN` for `retain` or `snapshot`) from holding up
        /// everything. Default: the number of cores (the event loops of `MultiThreadedEventLoopGroup.singleton`),
        /// at least 2 and at most 64.
        public var connections: Int = min(64, max(2, System.coreCount))
        /// How long connecting may take before Redis counts as unreachable. Default 500 ms.
        public var connectTimeout: Duration = .milliseconds(500)
        /// How long one command may take before Redis counts as unreachable. Default 500 ms.
        public var commandTimeout: Duration = .milliseconds(500)
        /// After this long a flight's lock expires and another replica may take over. Default 10 s.
        public var lockAge: Duration = .seconds(10)
        /// How often a waiting reader re-checks Redis in case an announcement was lost. Default 100 ms.
        public var pollInterval: Duration = .milliseconds(100)
        /// How long Redis remembers why a value is gone (expired, consumed, evicted). Default 10 min.
        public var tombstoneAge: Duration = .seconds(600)
        /// The key prefix; must not contain glob characters (`*?[]`). Default `prefetch:v1`.
        public var namespace: String = "prefetch:v1"
        /// Most responses in the local tier; 0 disables it. Default 256.
        public var localEntries: Int = 256
        /// Most bytes in the local tier. Default 8 MiB.
        public var localBytes: Int = 8 * 1024 * 1024
        /// Longest a local copy is served; also the longest a dropped entry may still be served here. Default 1 s.
        public var localTTL: Duration = .seconds(1)
        /// Byte budget of the fallback store used while Redis is down. Default 16 MiB.
        public var fallbackBudgetBytes: Int = 16 * 1024 * 1024
        /// First reconnect delay after Redis goes down; doubles per attempt. Default 100 ms.
        public var reconnectInitialBackoff: Duration = .milliseconds(100)
        /// Longest reconnect delay. Default 2 s.
        public var reconnectMaxBackoff: Duration = .seconds(2)
        /// The largest value a Redis reply may carry: a reply with a longer string, or longer than twice this in all,
        /// is a protocol error that closes the connection (a hostile or broken server cannot make this process
        /// buffer more). It must hold the largest entry the store writes, a response body of up to the service's
        /// `maximumResponseBytes` (2 MiB by default) with its headers; `buildApplication` raises it to fit a larger
        /// response cap. Default 16 MiB.
        public var maximumValueBytes: Int = 16 * 1024 * 1024

        /// The defaults.
        public init() {}
    }

    /// Where Redis is: the server, or with Sentinel the credentials and database of the primary the sentinels name
    /// (its host is then a stand-in; ``primary`` is where connections go).
    public let endpoint: RedisEndpoint
    private let primaryLocator: PrimaryLocator

    /// The server new connections go to: the endpoint, or the primary the sentinels named last (nil until they have).
    public var primary: RedisEndpoint? { primaryLocator.current }
    /// The tuning in effect.
    public let configuration: Configuration

    let keySpace: KeySpace
    private let calls: RedisStoreState.Calls
    let state: SharedStoreState
    private let monitor: RedisHealthMonitor
    /// The commands' way to Redis: one server's pool, or a cluster's, routing by slot.
    let pool: any RedisCommands
    /// Where reads keep their timers on the continuous clock (an event loop of the pool's group).
    let timerLoop: any EventLoop
    private let subscriber: RedisSubscriber
    let waiters: LocalWaiters
    let fallback: MemoryStore
    let metrics: RedisStoreMetrics
    let logger: Logger
    /// See `ResponseStore.clock`.
    public let clock: any ServiceClock

    /// Creates a store for `url` (`redis://[user[:password]@]host[:port][/db]`, see `RedisEndpoint.init(url:)`).
    /// Does not connect: connections are made on first use and by `run()`, so creating a store never blocks.
    /// Throws a `RedisStoreError` naming the URL (password masked) if it is invalid. Every connection, the
    /// subscriber's included, sends `AUTH` first; refused credentials make the store degraded, as an outage does.
    /// `clock` times the reconnect backoff, the readers' polling and forgetting stale flights. The pooled connections
    /// live on `eventLoopGroup`'s event loops (nil: `MultiThreadedEventLoopGroup.singleton`, the group Hummingbird serves
    /// on).
    ///
    /// With `redis-sentinel://[user:password@]host:port[,host:port...]/primary-name[/db]` (see
    /// `SentinelEndpoints.init(url:)`) the primary is the one the sentinels name, verified by its `ROLE`, and followed
    /// through a failover (see `RedisSubscriber`). With `redis-cluster://[user:password@]host:port[,host:port...]` (see
    /// `ClusterEndpoints.init(url:)`) each command goes to the primary of its key's slot (see `ClusterPool`).
    public convenience init(
        url: String, configuration: Configuration = Configuration(), logger: Logger,
        metricsFactory: any MetricsFactory = MetricsSystem.factory, clock: any ServiceClock = ContinuousClock(),
        eventLoopGroup: (any EventLoopGroup)? = nil
    ) throws(RedisStoreError) {
        switch RedisURL.Scheme.of(url) {
        case .sentinel:
            let sentinels = try SentinelEndpoints(url: url)
            self.init(
                endpoint: sentinels.template, sentinels: sentinels, configuration: configuration, logger: logger,
                metricsFactory: metricsFactory, clock: clock, eventLoopGroup: eventLoopGroup)
        case .cluster:
            let cluster = try ClusterEndpoints(url: url)
            self.init(
                endpoint: cluster.seeds[0], sentinels: nil, cluster: cluster, configuration: configuration, logger: logger,
                metricsFactory: metricsFactory, clock: clock, eventLoopGroup: eventLoopGroup)
        case .redis, nil:
            // Anything else is refused by the redis:// rules, whose error names the scheme expected.
            self.init(
                endpoint: try RedisEndpoint(url: url), configuration: configuration, logger: logger,
                metricsFactory: metricsFactory, clock: clock, eventLoopGroup: eventLoopGroup)
        }
    }

    /// Checks a store URL by the rules ``init(url:configuration:logger:metricsFactory:clock:eventLoopGroup:)``
    /// applies, without connecting or creating anything: how `prefetch serve` refuses a bad `--store` before it
    /// starts. The message never repeats a password: a URL of an unknown scheme is not echoed at all (it may hold
    /// one anywhere), a known one is named with its password masked.
    public static func check(url: String) throws(RedisStoreError) {
        guard let scheme = RedisURL.Scheme.of(url) else {
            let forms = RedisURL.Scheme.allCases.map(\.form).joined(separator: ", ")
            throw RedisStoreError(
                code: RedisStoreError.invalidURLCode,
                message: "a store URL is one of \(forms) (the value given starts otherwise)")
        }
        _ = try RedisURL(url, as: scheme)
    }

    /// Creates a store for `endpoint`. Does not connect. `clock` times the reconnect backoff, the readers' polling
    /// and forgetting stale flights. The pooled connections live on `eventLoopGroup`'s event loops (nil: the singleton
    /// group Hummingbird serves on).
    public convenience init(
        endpoint: RedisEndpoint, configuration: Configuration = Configuration(), logger: Logger,
        metricsFactory: any MetricsFactory = MetricsSystem.factory, clock: any ServiceClock = ContinuousClock(),
        eventLoopGroup: (any EventLoopGroup)? = nil
    ) {
        self.init(
            endpoint: endpoint, sentinels: nil, configuration: configuration, logger: logger, metricsFactory: metricsFactory,
            clock: clock, eventLoopGroup: eventLoopGroup)
    }

    /// `endpoint` is the server (`sentinels` and `cluster` nil), the credentials and database of the primary
    /// `sentinels` name, or the first node of `cluster`.
    init(
        endpoint: RedisEndpoint, sentinels: SentinelEndpoints?, cluster: ClusterEndpoints? = nil, configuration: Configuration,
        logger: Logger,
        metricsFactory: any MetricsFactory, clock: any ServiceClock, eventLoopGroup: (any EventLoopGroup)?
    ) {
        precondition(configuration.lockAge > .zero, "lockAge must be positive, got \(configuration.lockAge)")
        precondition(configuration.pollInterval > .zero, "pollInterval must be positive")
        precondition(configuration.maximumValueBytes > 0, "maximumValueBytes must be positive")
        self.endpoint = endpoint
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        let initial = RedisStoreState(configuration: configuration, database: endpoint.database)
        self.calls = initial.calls
        self.keySpace = initial.calls.keySpace
        let state = SharedStoreState(initial)
        self.state = state
        let health = RedisHealthMonitor(endpoint: endpoint, state: state, clock: clock, logger: logger, factory: metricsFactory)
        self.monitor = health
        let settings = ConnectionSettings(
            endpoint: endpoint, locator: sentinels == nil ? PrimaryLocator(fixed: endpoint) : PrimaryLocator(), sentinels: sentinels,
            connectTimeout: configuration.connectTimeout,
            commandTimeout: configuration.commandTimeout,
            limits: RESPLimits(maximumValueBytes: configuration.maximumValueBytes))
        let group = eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        let clusterPool = cluster.map {
            ClusterPool(
                cluster: $0, settings: settings, connectionsPerNode: configuration.connections, health: health,
                eventLoopGroup: group, metricsFactory: metricsFactory)
        }
        self.pool =
            clusterPool ?? RedisPool(size: configuration.connections, settings: settings, health: health, eventLoopGroup: group)
        self.timerLoop = group.next()
        let waiters = LocalWaiters()
        self.waiters = waiters
        // Sentinel mode: each failover followed (a move from one known primary to another).
        let primaryMoves = Counter(label: "prefetch_store_redis_primary_moves_total", factory: metricsFactory)
        self.primaryLocator = settings.locator
        let fallback = MemoryStore(
            budgetBytes: configuration.fallbackBudgetBytes, lockAge: configuration.lockAge, logger: logger,
            metricsFactory: metricsFactory)
        self.fallback = fallback
        self.subscriber = RedisSubscriber(
            settings: settings, keySpace: keySpace, cluster: clusterPool, health: health,
            onMessage: { message in
                switch KeySpace.parseMessage(message) {
                case .completed(let digest, let payload):
                    state.withLock { $0.announced(digest) }
                    waiters.notify(digest, payload: payload)
                case .dropped(let digests):
                    let now = clock.now
                    state.withLock { $0.dropped(digests, now: now) }
                case .invalidated(let scope):
                    Self.invalidate(fallback, scope)
                case nil:
                    return
                }
            },
            onResubscribed: {
                state.withLock { $0.resubscribed() }
                waiters.notifyAll()
            },
            onPrimaryMoved: { [primaryMoves] from, to in
                primaryMoves.increment()
                logger.warning(
                    "the Redis sentinels moved the primary: new connections go to the new one",
                    metadata: ["redis.primary.old": "\(from.address)", "redis.primary.new": "\(to.address)"])
            })
        self.metrics = RedisStoreMetrics(factory: metricsFactory)
    }

    /// True while Redis is unreachable and this replica serves from its fallback store.
    public var isDegraded: Bool { state.withLock { $0.isDegraded } }

    /// See `ResponseStore.health`: degraded while Redis is unreachable.
    public var health: StoreHealth { isDegraded ? .degraded : .ok }

    /// Whether this replica hears other replicas' announcements yet (its subscriber has subscribed once since
    /// `run()` started): before that, a completion or drop elsewhere reaches it only by its readers' polling.
    public var isListening: Bool { state.withLock { $0.subscriptions > 0 } }

    /// How many times this store reconnected after an outage.
    public var reconnects: Int { state.withLock { $0.health.reconnects } }

    /// Keeps the subscriber (and with it the outage probe) running until graceful shutdown or cancellation.
    public func run() async throws {
        subscriber.start()
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await subscriber.waitUntilFinished()
            } onCancel: {
                subscriber.stop()
            }
        } onGracefulShutdown: {
            self.subscriber.stop()
        }
    }

    // MARK: ResponseStore

    /// See `ResponseStore.begin(_:then:)`. Every key's script goes to Redis in one pipeline on one connection (one
    /// round trip for a page's requests instead of one each); Redis runs them in order, so each key's outcome is
    /// exactly what a `begin` of its own would get at that point, duplicates included (the first leads, the rest
    /// join). Keys whose script got no answer (Redis went down, even part-way) fall back to this replica's memory
    /// store, one by one in order, as a single `begin` does. `done` runs on the Redis connection's event loop.
    public func begin(
        _ requests: [(key: StoreKey, policy: StorePolicy)], then done: @escaping @Sendable ([BeginOutcome]) -> Void
    ) {
        let claims = requests.map { calls.claim($0.key, policy: $0.policy, token: Self.newToken()) }
        eval(claims.map(\.call)) { [self] replies in
            var outcomes: [BeginOutcome] = []
            outcomes.reserveCapacity(claims.count)
            for (claim, reply) in zip(claims, replies) {
                let now = clock.now
                switch state.withLock({ $0.beginReplied(claim, reply: reply, now: now) }) {
                case .done(let outcome): outcomes.append(outcome)
                case .beginInFallback: outcomes.append(beginInFallback(claim))
                }
            }
            done(outcomes)
        }
    }

    /// See `ResponseStore.settle(_:then:)`. The scripts of every settlement go to Redis in one pipeline, in order
    /// (one round trip for a batch of a page open's results); settlements of flights led in the fallback store are
    /// done there at once. Each reply is then handled as the single operation would handle it, and `done` runs,
    /// on the Redis connection's event loop.
    public func settle(_ settlements: [Settlement], then done: @escaping @Sendable () -> Void) {
        var calls: [ScriptCall] = []
        var handlers: [@Sendable (ArraySlice<Result<RedisValue, RedisCallError>>) -> Void] = []
        var counts: [Int] = []
        for settlement in settlements {
            let (own, settled) = prepare(settlement)
            calls += own
            counts.append(own.count)
            handlers.append(settled)
        }
        let (handled, sizes) = (handlers, counts)
        eval(calls) { replies in
            var start = 0
            for (handle, size) in zip(handled, sizes) {
                handle(replies[start..<start + size])
                start += size
            }
            done()
        }
    }

    /// What one settlement sends to Redis (nothing, when it is done in the fallback store or ignored), and what
    /// handles the replies to it.
    private func prepare(
        _ settlement: Settlement
    ) -> (calls: [ScriptCall], settled: @Sendable (ArraySlice<Result<RedisValue, RedisCallError>>) -> Void) {
        switch settlement {
        case .complete(let key, let token, let result):
            switch state.withLock({ $0.complete(key, token: token) }) {
            case .ignore:
                logger.debug("completion from a stale or unknown flight ignored", metadata: ["store.key": "\(key)"])
                return ([], { _ in })
            case .completeInFallback(let fallbackToken, let digest, let policy):
                fallback.settleAll([.complete(key, token: fallbackToken, result: result)])
                let now = clock.now
                state.withLock { $0.fallbackCompleted(digest, policy: policy, now: now) }
                waiters.notify(digest)
                return ([], { _ in })
            case .completeInRedis(let lead):
                let completion = completion(lead, result: result)
                let sentAt = clock.now
                state.withLock { $0.completing(completion, sentAt: sentAt) }
                return (
                    [completion.call],
                    { [self] replies in
                        settle(completion, key: key, reply: replies[replies.startIndex], sentAt: sentAt)
                    }
                )
            }
        case .abandon(let key, let token):
            switch state.withLock({ $0.abandon(key, token: token) }) {
            case .ignore:
                return ([], { _ in })
            case .abandonInFallback(let fallbackToken):
                fallback.settleAll([.abandon(key, token: fallbackToken)])
                return ([], { _ in })
            case .abandonInRedis(let call):
                return ([call], { _ in })
            }
        case .put(let key, let policy, let result):
            let claim = calls.claim(key, policy: policy, token: Self.newToken())
            let completion = completion(claim.lead, result: result)
            let sentAt = clock.now
            state.withLock { $0.completing(completion, sentAt: sentAt) }
            return (
                [claim.call, completion.call],
                { [self] replies in
                    let (beginReply, completionReply) = (replies[replies.startIndex], replies[replies.startIndex + 1])
                    switch RedisStoreState.putReplied(beginReply: beginReply) {
                    case .declined:
                        state.withLock { $0.completionDropped(completion) }
                    case .settleCompletion:
                        settle(completion, key: key, reply: completionReply, sentAt: sentAt)
                    case .beginInFallback:
                        state.withLock { $0.completionDropped(completion) }
                        guard case .leader(let token) = beginInFallback(claim) else { return }
                        // Led in the fallback store: completed there, with nothing sent to Redis.
                        let (sent, completed) = prepare(.complete(key, token: token, result: result))
                        assert(sent.isEmpty, "a flight led in the fallback store completes there")
                        completed([][...])
                    }
                }
            )
        }
    }

    /// See `ResponseStore.retain`. Drops matching values and in-flight locks in Redis (waking their readers on every
    /// replica), the local tier's copies and the fallback store's entries. Other replicas' local tiers may serve a
    /// dropped entry for at most `localTTL`.
    public func retain(labels: Set<String>) async -> Int {
        state.withLock { $0.retain(labels: labels) }
        var dropped = Set<String>()
        let scanned = await scan(match: "\(keySpace.namespace):*", count: 500) { names in
            let reply = await eval(calls.retain(labels, names: names))
            var all: [String] = []
            for result in reply {
                guard case .success(.array(let digests)) = result else { return nil }
                all += digests.compactMap(\.text)
            }
            return all
        }
        if !scanned.complete { logger.warning("retain could not scan or drop every entry in Redis; some shared entries remain") }
        for digest in scanned.found {
            dropped.insert(digest)
            waiters.notify(digest)
        }
        let droppedInFallback = await fallback.retain(labels: labels)
        return dropped.count + droppedInFallback
    }

    /// Scans every primary for names matching `match` and hands each batch found to `each`, which returns what it
    /// made of it (nil: it failed, and the scan stops). Returns everything `each` returned, and whether the scan
    /// went through every primary.
    private func scan(
        match: String, count: Int, _ each: ([String]) async -> [String]?
    ) async -> (found: [String], complete: Bool) {
        var found: [String] = []
        for primary in await pool.everyPrimary() {
            var cursor = "0"
            repeat {
                let scan = await primary.execute(["SCAN", cursor, "MATCH", match, "COUNT", String(count)].map { Array($0.utf8) })
                guard case .success(.array(let parts)) = scan, parts.count == 2, let next = parts[0].text,
                    case .array(let names) = parts[1]
                else { return (found, false) }
                cursor = next
                let batch = names.compactMap(\.text)
                guard !batch.isEmpty else { continue }
                guard let made = await each(batch) else { return (found, false) }
                found += made
            } while cursor != "0"
        }
        return (found, true)
    }

    /// See `ResponseStore.invalidate(identity:)`. Drops the identity's values in Redis (found through its index set)
    /// and in this replica's fallback store and local tier, and announces it, so every replica drops its local copies
    /// and its fallback store's entries too.
    /// - Throws: ``StoreUnavailable`` when Redis cannot be reached: only this replica's copies were dropped.
    public func invalidate(identity: Identity) async throws(StoreUnavailable) -> Int {
        guard identity != .anonymous else { return 0 }
        let local = fallback.invalidate(identity: identity)
        let sets = calls.invalidateIndexed { [keySpace] group in keySpace.identityIndex(identity, group: group)! }
        return try await invalidateIndexed(sets, scope: .identity(identity)) + local
    }

    /// See `ResponseStore.invalidate(surrogateKey:)`, through the key's index sets, as `invalidate(identity:)`.
    /// - Throws: ``StoreUnavailable`` when Redis cannot be reached: only this replica's copies were dropped.
    public func invalidate(surrogateKey: String) async throws(StoreUnavailable) -> Int {
        guard SurrogateKeys.isValid(surrogateKey) else { return 0 }
        let local = fallback.invalidate(surrogateKey: surrogateKey)
        let sets = calls.invalidateIndexed { [keySpace] group in keySpace.surrogateIndex(surrogateKey, group: group) }
        return try await invalidateIndexed(sets, scope: .surrogateKey(surrogateKey)) + local
    }

    /// See `ResponseStore.invalidate(label:)`. Labels are not indexed: this scans the store's keys on every primary
    /// (`SCAN`, as `retain` does), so it is for operators, not for every request.
    /// - Throws: ``StoreUnavailable`` when Redis cannot be reached part-way: what was found until then is dropped.
    public func invalidate(label: String) async throws(StoreUnavailable) -> Int {
        let local = fallback.invalidate(label: label)
        let scanned = await scan(match: "\(keySpace.namespace):{*}:e:*", count: 500) { names in
            var dropped: [String] = []
            for result in await eval(calls.invalidateLabel(label, valueKeys: names)) {
                guard case .success(.array(let digests)) = result else { return nil }
                dropped += digests.compactMap(\.text)
            }
            return dropped
        }
        await announce(scanned.found, scope: .label(label))
        if !scanned.complete {
            throw StoreUnavailable(message: "Redis could not be scanned or could not drop the entries it holds; some may remain")
        }
        return scanned.found.count + local
    }

    /// Runs the invalidation scripts (one per group's index set) and announces what they dropped.
    private func invalidateIndexed(_ calls: [ScriptCall], scope: KeySpace.Invalidation) async throws(StoreUnavailable) -> Int {
        var dropped: [String] = []
        var failed = false
        for result in await eval(calls) {
            guard case .success(.array(let digests)) = result else {
                failed = true
                continue
            }
            dropped += digests.compactMap(\.text)
        }
        await announce(dropped, scope: scope)
        if failed { throw StoreUnavailable(message: "Redis could not be reached; entries stored there were not all dropped") }
        return dropped.count
    }

    /// Drops the local copies of `digests` here and tells every replica (this one included, harmlessly) to drop
    /// theirs, and to apply `scope` to their fallback stores.
    private func announce(_ digests: [String], scope: KeySpace.Invalidation) async {
        let now = clock.now
        state.withLock { $0.dropped(digests, now: now) }
        let messages = KeySpace.dropAnnouncements(digests) + [KeySpace.scopeAnnouncement(scope)]
        let channel = Array(keySpace.invalidationChannel.utf8)
        let replies = await pool.execute(batch: messages.map { [Array("SPUBLISH".utf8), channel, $0] })
        if replies.contains(where: { if case .success(.integer) = $0 { false } else { true } }) {
            logger.warning(
                "an invalidation could not be announced; other replicas may serve their local copies for up to localTTL",
                metadata: ["store.dropped": "\(digests.count)"])
        }
    }

    /// Applies an announced invalidation to a fallback store (synchronously: the subscriber's thread calls this).
    private static func invalidate(_ fallback: MemoryStore, _ scope: KeySpace.Invalidation) {
        switch scope {
        case .identity(let identity): _ = fallback.invalidate(identity: identity)
        case .label(let label): _ = fallback.invalidate(label: label)
        case .surrogateKey(let key): _ = fallback.invalidate(surrogateKey: key)
        }
    }

    /// See `ResponseStore.snapshot`. `entries` and `pending` count Redis values and locks (every replica's) plus this
    /// replica's fallback store; `bytes` and `budget` are this replica's local tier plus fallback store; the read
    /// counters are this replica's. Evictions and wasted prefetches are the fallback store's (Redis expiries are
    /// silent).
    public func snapshot() async -> StoreSnapshot {
        var entries = 0
        var pending = 0
        _ = await scan(match: "\(keySpace.namespace):*", count: 1000) { [keySpace] names in
            for name in names {
                switch keySpace.kind(of: name) {
                case .entry: entries += 1
                case .lock:
                    entries += 1
                    pending += 1
                case nil: break
                }
            }
            return []
        }
        let memory = await fallback.snapshot()
        let tier = state.withLock { (bytes: $0.local.bytes, budget: $0.local.maxBytes) }
        let totals = metrics.totals
        return StoreSnapshot(
            entries: entries + memory.entries, bytes: tier.bytes + memory.bytes, budget: tier.budget + memory.budget,
            pending: pending + memory.pending, hits: totals.hits + memory.hits, joins: totals.joins + memory.joins,
            misses: totals.misses + memory.misses, evictions: memory.evictions, expiredUnused: memory.expiredUnused)
    }

    /// Readers of this replica that found a flight pending and are waiting on it, for tests.
    var waitingReaders: Int { state.withLock { $0.waitingReaders } }

    // MARK: Performing steps

    private static func newToken() -> FlightToken {
        var random = SecureRandom()
        return FlightToken(UInt64.random(in: 1...UInt64.max, using: &random))
    }

    /// Begins `claim` in the fallback store (Redis gave no answer) and records a lead there.
    private func beginInFallback(_ claim: RedisStoreState.Claim) -> BeginOutcome {
        let outcome = fallback.claim([(key: claim.key, policy: claim.policy)])[0]
        let now = clock.now
        return state.withLock { $0.fallbackBegan(claim, outcome: outcome, now: now) }
    }

    /// The completion of `lead` with `result`, encoded now (the encoding stamps the response's age).
    private func completion(
        _ lead: RedisStoreState.RedisLead, result: Result<StoredResponse, StoreFailure>
    ) -> RedisStoreState.Completion {
        calls.completion(lead, result: result, encoded: EntryCodec.encode(StoredValue(result, label: lead.policy.label)))
    }

    /// Performs what Redis's reply to a completion sent at `sentAt` calls for.
    private func settle(
        _ completion: RedisStoreState.Completion, key: StoreKey, reply: Result<RedisValue, RedisCallError>,
        sentAt: ContinuousClock.Instant
    ) {
        switch state.withLock({ $0.completionReplied(completion, reply: reply, sentAt: sentAt) }) {
        case .wake(let digest, let payload):
            waiters.notify(digest, payload: payload)
        case .ignoredStale:
            logger.debug(
                "completion from a flight whose lock expired or was dropped ignored",
                metadata: ["store.key": "\(key)"])
        case .keepInFallback(let digest, let payload, let error):
            logger.notice(
                "Redis unreachable at completion; keeping the result on this replica",
                metadata: ["store.key": "\(key)", "redis.error": "\(error)"])
            let policy = completion.lead.policy
            if case .leader(let fallbackToken) = fallback.claim([(key: key, policy: policy)])[0] {
                fallback.settleAll([.complete(key, token: fallbackToken, result: completion.result)])
                let now = clock.now
                state.withLock { $0.fallbackCompleted(digest, policy: policy, now: now) }
            }
            waiters.notify(digest, payload: payload)
        }
    }

    /// Runs one script call (see `eval(_:)`).
    private func eval(_ call: ScriptCall) async -> Result<RedisValue, RedisCallError> {
        await eval([call])[0]
    }

    /// Runs `calls` in one pipeline, by SHA; the calls Redis answers `NOSCRIPT` (its script cache was flushed, e.g.
    /// by a restart) go again with their sources, in order, in a second pipeline. Results are in call order. A
    /// Redis error reply (not an outage) is logged and reported as a failure so callers treat it like one.
    private func eval(_ calls: [ScriptCall]) async -> [Result<RedisValue, RedisCallError>] {
        await withCheckedContinuation { continuation in
            eval(calls) { continuation.resume(returning: $0) }
        }
    }

    /// ``eval(_:)`` without a task: `done` gets the results on the Redis connection's event loop (at once when there
    /// is nothing to send).
    func eval(_ calls: [ScriptCall], then done: @escaping @Sendable ([Result<RedisValue, RedisCallError>]) -> Void) {
        guard !calls.isEmpty else { return done([]) }
        pool.submit(batch: calls.map { [Array("EVALSHA".utf8), Array($0.script.sha.utf8)] + $0.tail }) { [self] replies in
            let uncached = replies.indices.filter { index in
                if case .success(.error(let message)) = replies[index], message.hasPrefix("NOSCRIPT") { return true }
                return false
            }
            guard !uncached.isEmpty else { return done(checked(replies)) }
            pool.submit(batch: uncached.map { [Array("EVAL".utf8), Array(calls[$0].script.source.utf8)] + calls[$0].tail }) {
                [self] retried in
                var replies = replies
                for (index, reply) in zip(uncached, retried) { replies[index] = reply }
                done(checked(replies))
            }
        }
    }

    /// Replies with every Redis error reply logged and turned into a failure.
    private func checked(_ replies: [Result<RedisValue, RedisCallError>]) -> [Result<RedisValue, RedisCallError>] {
        replies.map { reply in
            guard case .success(.error(let message)) = reply else { return reply }
            logger.error("Redis rejected a store script", metadata: ["redis.error": "\(message)"])
            return .failure(RedisCallError(kind: .io, message: message))
        }
    }
}
