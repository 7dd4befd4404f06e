// RedisStore: the shared `ResponseStore` for several replicas behind a load balancer.
//
// Design
// ======
//
// A trigger can land on one replica and the page's data request on another, so responses and the single flight
// live in Redis. The promises are `MemoryStore`'s (see ResponseStore.swift); this notes how each is kept.
//
// Keys. A store key becomes its fingerprint, a SHA-256 over its identity digest, method and request digest, so
// identity isolation holds exactly as in memory: a response is only found under the whole key it was stored under.
// Per digest D: `<ns>:e:D` the value, `<ns>:lock:D` the leader lock, `<ns>:t:D` a tombstone saying why the value is
// gone (`expired`, `consumed`, `evicted`), kept `tombstoneAge`. `<ns>` is `prefetch:v1` by default.
//
// Single flight across replicas. `begin` runs one Lua script: `fresh` if a value exists, else
// `SET lock NX PX lockAge` (leader) or `joined`. The lock's expiry is the lock age (nginx `proxy_cache_lock_age`):
// a dead leader blocks nobody longer than that, and its late `complete` is ignored because `complete` and
// `abandon` compare the lock's value (label + a random 64-bit token) before deleting it. `complete` stores the value
// with `PX ttl` (a failure with `PX negativeTTL`), leaves an `expired` tombstone that outlives it, and PUBLISHes the
// digest on the store's channel (`<ns>:done:<db>`). A result that is not kept (a failure with a zero negative TTL, a
// response with a zero TTL) travels inside the message instead, so the waiting readers still get it.
// A page open claims all its requests with `begin(_:)`: the scripts go in one pipeline on one connection, and Redis
// runs them one after another, so each key answers exactly as a `begin` of its own would (of duplicates the first
// leads). `put` (a ticket record) pipelines the begin script and the complete script the same way.
//
// Reads. `read` runs one Lua script: the value (a no-store one is deleted in the same atomic step and leaves a
// `consumed` tombstone, so it is handed out exactly once across all replicas), `pending` while the lock is held,
// or the tombstone's reason. A pending reader registers locally and sleeps until the announcement for its digest
// arrives (one subscriber connection per store, on its own thread, dispatches to this replica's readers), re-checking
// every `pollInterval` in case a message was lost (or `run()` is not running). As in memory, a reader that arrived
// during a flight keeps waiting when the flight is abandoned, for the next leader, until its own deadline. A reader
// woken by a completion on this replica takes the response from the local tier, where the completion put it, rather
// than reading Redis again; and a reader on the replica that leads the flight knows it is pending without asking
// (see `LocalLeads`), so a page's reads through the replica that triggered it cost Redis nothing until woken.
//
// Threads. hiredis is blocking: each pooled connection belongs to a worker with a serial dispatch queue, and async
// callers suspend on continuations. Nothing blocks the cooperative pool. Every call is bounded by the connect and
// command timeouts (`redisSetTimeout`). Calls that find their worker busy wait and then go together as one pipeline
// (see `RedisPool`), so under load the round trips, and the thread wake-ups that cost more CPU than Redis itself,
// grow with the connections rather than with the calls.
//
// Local tier. An optional small in-process LRU of ready responses (see `LocalTier`): never a no-store response,
// never past the Redis expiry it was read with, and never older than `localTTL` (default 1 s). That last bound is
// the only staleness: after `retain(labels:)` on another replica, this replica may serve the dropped entry for at
// most `localTTL`. TTL expiry and consumption are never violated.
//
// Outage. When a call cannot reach Redis the store is `isDegraded` (gauge `prefetch_store_redis_up` 0) and every
// operation falls back to a per-replica `MemoryStore`: `begin` leads (or joins) in the fallback, `complete` writes
// there (also a Redis-led flight that completes during the outage), `read` answers from the local tier or the
// fallback. So during an outage each replica fetches for itself and serves its own results; nothing is lost and
// isolation holds. After Redis returns, a key Redis knows nothing about is still answered from the fallback while
// the outage's result for it lives (its TTL), so a page opened during the outage still finds its data. While down,
// callers fail fast (no network) and one attempt per backoff period (100 ms doubling to 2 s) reconnects; the
// subscriber probes the same way, so recovery needs no traffic.
// `prefetch_store_redis_reconnects_total` counts recoveries. Nothing throws; nothing waits longer than the timeouts.
//
// Metrics: the memory store's read counters under the same names (hits, joins by interface; misses by reason),
// plus `prefetch_store_redis_up` and `prefetch_store_redis_reconnects_total`. Redis expiries are silent, so
// evictions and wasted prefetches are only counted for the fallback store.

import CoreMetrics
import Crypto
import Logging
import PrefetchCore
import PrefetchStore
import ServiceLifecycle
import Synchronization

/// A `ResponseStore` shared by every replica through Redis, with the same promises as `MemoryStore`: single flight
/// per key across replicas, identity isolation, per-interface TTLs, no-store responses handed out exactly once,
/// failures kept for the negative TTL. Run it as a `Service`: `run()` keeps the pub/sub subscriber (prompt wake-ups
/// for waiting readers) and the outage probe alive until graceful shutdown. Without `run()` the store still works;
/// readers then learn of completions by polling. See the design notes at the top of RedisStore.swift.
public final class RedisStore: ResponseStore, Service {
    /// Tuning for a `RedisStore`. The defaults suit a store on the same network.
    public struct Configuration: Sendable, Hashable {
        /// Pooled blocking connections, each with its own thread. Calls that meet a busy connection go together in its
        /// next round trip (see `RedisPool`), so a page's fan-out needs few: on a 2-core machine 1, 2 and 4 were
        /// alike in latency within the noise, and fewer connections cost less CPU (fewer thread wake-ups). Two keep a
        /// slow call (a `SCAN` for `retain` or `snapshot`) from holding up everything. Default 2.
        public var connections: Int = 2
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

        /// The defaults.
        public init() {}
    }

    /// Where Redis is.
    public let endpoint: RedisEndpoint
    /// The tuning in effect.
    public let configuration: Configuration

    private let keySpace: KeySpace
    private let health: RedisHealthMonitor
    private let pool: RedisPool
    private let subscriber: RedisSubscriber
    private let waiters: LocalWaiters
    private let leads: LocalLeads
    private let local: Mutex<LocalTier>
    private let flights = Mutex(FlightBook())
    private let waitingCount = Atomic<Int>(0)
    /// Digests with a result in the fallback store, and until when it may still be there: after Redis returns,
    /// reads Redis knows nothing about are answered from the fallback for these, so an outage's results stay
    /// readable for their TTL.
    private let fallbackResults = Mutex<[String: ContinuousClock.Instant]>([:])
    private let fallback: MemoryStore
    private let metrics: RedisStoreMetrics
    private let logger: Logger
    private let clock = ContinuousClock()

    /// Creates a store for `url` (`redis://[user[:password]@]host[:port][/db]`, see `RedisEndpoint.init(url:)`).
    /// Does not connect: connections are made on first use and by `run()`, so creating a store never blocks.
    /// Throws a `RedisStoreError` naming the URL (password masked) if it is invalid. Every connection, the
    /// subscriber's included, sends `AUTH` first; refused credentials make the store degraded, as an outage does.
    public convenience init(
        url: String, configuration: Configuration = Configuration(), logger: Logger,
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) throws(RedisStoreError) {
        self.init(
            endpoint: try RedisEndpoint(url: url), configuration: configuration, logger: logger,
            metricsFactory: metricsFactory)
    }

    /// Creates a store for `endpoint`. Does not connect.
    public init(
        endpoint: RedisEndpoint, configuration: Configuration = Configuration(), logger: Logger,
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) {
        precondition(configuration.lockAge > .zero, "lockAge must be positive, got \(configuration.lockAge)")
        precondition(configuration.pollInterval > .zero, "pollInterval must be positive")
        self.endpoint = endpoint
        self.configuration = configuration
        self.logger = logger
        let keySpace = KeySpace(namespace: configuration.namespace, database: endpoint.database)
        self.keySpace = keySpace
        let health = RedisHealthMonitor(
            endpoint: endpoint, initialBackoff: configuration.reconnectInitialBackoff,
            maxBackoff: configuration.reconnectMaxBackoff, logger: logger, factory: metricsFactory)
        self.health = health
        let settings = ConnectionSettings(
            endpoint: endpoint, connectTimeout: configuration.connectTimeout,
            commandTimeout: configuration.commandTimeout)
        self.pool = RedisPool(size: configuration.connections, settings: settings, health: health)
        let waiters = LocalWaiters()
        self.waiters = waiters
        let leads = LocalLeads(window: min(configuration.lockAge, configuration.localTTL))
        self.leads = leads
        self.subscriber = RedisSubscriber(
            settings: settings, channel: keySpace.channel, health: health,
            onMessage: { message in
                guard let (digest, payload) = KeySpace.parseAnnouncement(message) else { return }
                leads.forget(digest)
                waiters.notify(digest, payload: payload)
            },
            onResubscribed: {
                leads.forgetAll()
                waiters.notifyAll()
            })
        self.local = Mutex(
            LocalTier(
                maxEntries: configuration.localEntries, maxBytes: configuration.localBytes,
                ttlCap: configuration.localTTL))
        self.fallback = MemoryStore(
            budgetBytes: configuration.fallbackBudgetBytes, lockAge: configuration.lockAge, logger: logger,
            metricsFactory: metricsFactory)
        self.metrics = RedisStoreMetrics(factory: metricsFactory)
    }

    /// True while Redis is unreachable and this replica serves from its fallback store.
    public var isDegraded: Bool { !health.isUp }

    /// How many times this store reconnected after an outage.
    public var reconnects: Int { health.reconnects }

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

    /// See `ResponseStore.begin`. Falls back to this replica's memory store while Redis is unreachable.
    public func begin(_ key: StoreKey, policy: StorePolicy) async -> BeginOutcome {
        await begin([(key: key, policy: policy)])[0]
    }

    /// See `ResponseStore.begin(_:)`. Every key's script goes to Redis in one pipeline on one connection (one round
    /// trip for a page's requests instead of one each); Redis runs them in order, so each key's outcome is exactly
    /// what a `begin` of its own would get at that point, duplicates included (the first leads, the rest join).
    /// Keys whose script got no answer (Redis went down, even part-way) fall back to this replica's memory store,
    /// one by one in order, as a single `begin` does.
    public func begin(_ requests: [(key: StoreKey, policy: StorePolicy)]) async -> [BeginOutcome] {
        let claims = requests.map { claim($0.key, policy: $0.policy) }
        let replies = await eval(claims.map(\.call))
        var outcomes: [BeginOutcome] = []
        outcomes.reserveCapacity(requests.count)
        for (request, (claim, reply)) in zip(requests, zip(claims, replies)) {
            outcomes.append(await settle(claim, key: request.key, policy: request.policy, reply: reply))
        }
        return outcomes
    }

    /// See `ResponseStore.put`. The begin and complete scripts go to Redis in one pipeline: the complete script runs
    /// right after the begin script and only finds its lock when the begin led, so a key in flight or fresh is left
    /// alone, exactly as a `begin` followed (when leading) by a `complete`. A key whose begin got no answer takes
    /// that path through the fallback store.
    @discardableResult
    public func put(_ key: StoreKey, policy: StorePolicy, result: Result<StoredResponse, StoreFailure>) async -> Bool {
        let claim = claim(key, policy: policy)
        let completion = completion(keySpace.keys(digest: claim.digest), lockValue: claim.lockValue, policy: policy, result: result)
        let sentAt = clock.now
        let replies = await eval([claim.call, completion.call])
        guard case .leader(let token) = await settle(claim, key: key, policy: policy, reply: replies[0]) else {
            return false
        }
        guard case .success("leader") = replies[0].map(\.text) else {
            // Led in the fallback store (Redis gave no answer): complete there.
            await complete(key, token: token, result: result)
            return true
        }
        _ = flights.withLock { $0.take(token, key: key) }
        leads.ended(claim.digest, token: token)
        await settle(completion, key: key, reply: replies[1], sentAt: sentAt)
        return true
    }

    /// A begin for `key` ready to send: a fresh token, the lock value it is held under, and the script call.
    private func claim(_ key: StoreKey, policy: StorePolicy) -> Claim {
        let keys = keySpace.keys(for: key)
        let token = FlightToken(UInt64.random(in: 1...UInt64.max))
        let lockValue = EntryCodec.lock(label: policy.label, token: token)
        let call = ScriptCall(
            Scripts.begin, keys: [keys.entry, keys.lock, keys.tombstone],
            arguments: [lockValue, Array(String(milliseconds(configuration.lockAge)).utf8)])
        return Claim(token: token, lockValue: lockValue, digest: keys.digest, call: call)
    }

    /// A begin ready to send (see `claim`).
    private struct Claim {
        let token: FlightToken
        let lockValue: [UInt8]
        let digest: String
        let call: ScriptCall
    }

    /// The outcome of a begin from Redis's reply: a leader's flight is recorded; no answer leads (or joins) in the
    /// fallback store.
    private func settle(
        _ claim: Claim, key: StoreKey, policy: StorePolicy,
        reply: Result<RedisValue, RedisCallError>
    ) async -> BeginOutcome {
        switch reply.map(\.text) {
        case .success("leader"):
            let now = clock.now
            record(
                claim.token,
                Flight(key: key, digest: claim.digest, policy: policy, mode: .redis(lockValue: claim.lockValue), startedAt: now))
            leads.lead(claim.digest, token: claim.token, label: policy.label, startedAt: now)
            return .leader(claim.token)
        case .success("joined"):
            return .joined
        case .success("fresh"):
            return .fresh
        default:
            let outcome = await fallback.begin(key, policy: policy)
            guard case .leader(let fallbackToken) = outcome else { return outcome }
            record(
                claim.token,
                Flight(key: key, digest: claim.digest, policy: policy, mode: .fallback(fallbackToken), startedAt: clock.now))
            return .leader(claim.token)
        }
    }

    /// See `ResponseStore.complete`. A result Redis cannot take (it went down mid-flight) is kept in the fallback
    /// store instead, so this replica's readers still get it.
    public func complete(_ key: StoreKey, token: FlightToken, result: Result<StoredResponse, StoreFailure>) async {
        guard let flight = flights.withLock({ $0.take(token, key: key) }) else {
            logger.debug("completion from a stale or unknown flight ignored", metadata: ["store.key": "\(key)"])
            return
        }
        let keys = keySpace.keys(digest: flight.digest)
        switch flight.mode {
        case .fallback(let fallbackToken):
            await fallback.complete(key, token: fallbackToken, result: result)
            noteFallbackResult(keys.digest, policy: flight.policy)
            waiters.notify(keys.digest)
        case .redis(let lockValue):
            leads.ended(keys.digest, token: token)
            let completion = completion(keys, lockValue: lockValue, policy: flight.policy, result: result)
            let sentAt = clock.now
            let reply = await eval([completion.call])[0]
            await settle(completion, key: key, reply: reply, sentAt: sentAt)
        }
    }

    /// What completing a Redis-led flight sends and needs afterwards.
    private struct Completion {
        let keys: KeySpace.Keys
        let policy: StorePolicy
        let result: Result<StoredResponse, StoreFailure>
        /// The encoded result.
        let encoded: [UInt8]
        /// How long Redis keeps it; zero when it only travels in the announcement.
        let keep: Duration
        let call: ScriptCall

        var kept: Bool { keep > .zero }
    }

    /// The complete script call for a flight held under `lockValue`.
    private func completion(
        _ keys: KeySpace.Keys, lockValue: [UInt8], policy: StorePolicy, result: Result<StoredResponse, StoreFailure>
    ) -> Completion {
        let value: StoredValue
        let keep: Duration
        switch result {
        case .success(let response):
            value = .response(response, label: policy.label)
            // A no-store response must sit in Redis for its one reader; it never travels in a message.
            keep = response.noStore ? max(policy.ttl, .milliseconds(1)) : policy.ttl
        case .failure(let failure):
            value = .failure(failure, label: policy.label)
            keep = policy.negativeTTL
        }
        let encoded = EntryCodec.encode(value)
        let kept = keep > .zero
        let announcement = KeySpace.announcement(keys.digest, payload: kept ? nil : encoded)
        let call = ScriptCall(
            Scripts.complete, keys: [keys.entry, keys.lock, keys.tombstone],
            arguments: [
                lockValue, encoded, Array(String(kept ? milliseconds(keep) : 0).utf8),
                Array(String(milliseconds(configuration.tombstoneAge)).utf8),
                Array(keySpace.channel.utf8), announcement,
            ])
        return Completion(keys: keys, policy: policy, result: result, encoded: encoded, keep: keep, call: call)
    }

    /// Acts on Redis's reply to a completion sent at `sentAt`: a kept response goes to the local tier and this
    /// replica's readers are woken; a result Redis could not take is kept in the fallback store instead.
    private func settle(
        _ completion: Completion, key: StoreKey, reply: Result<RedisValue, RedisCallError>, sentAt: ContinuousClock.Instant
    ) async {
        let (keys, policy, result, encoded, kept) =
            (completion.keys, completion.policy, completion.result, completion.encoded, completion.kept)
        switch reply {
        case .success(.integer(1)):
            if kept, case .success(let response) = result {
                local.withLock {
                    $0.put(
                        keys.digest, response: response, label: policy.label,
                        redisExpiresAt: sentAt + completion.keep, now: sentAt)
                }
            }
            waiters.notify(keys.digest, payload: kept ? nil : encoded)
        case .success:
            logger.debug(
                "completion from a flight whose lock expired or was dropped ignored",
                metadata: ["store.key": "\(key)"])
        case .failure(let error):
            logger.notice(
                "Redis unreachable at completion; keeping the result on this replica",
                metadata: ["store.key": "\(key)", "redis.error": "\(error)"])
            if case .leader(let fallbackToken) = await fallback.begin(key, policy: policy) {
                await fallback.complete(key, token: fallbackToken, result: result)
                noteFallbackResult(keys.digest, policy: policy)
            }
            waiters.notify(keys.digest, payload: kept ? nil : encoded)
        }
    }

    /// See `ResponseStore.abandon`.
    public func abandon(_ key: StoreKey, token: FlightToken) async {
        guard let flight = flights.withLock({ $0.take(token, key: key) }) else { return }
        switch flight.mode {
        case .fallback(let fallbackToken):
            await fallback.abandon(key, token: fallbackToken)
        case .redis(let lockValue):
            leads.ended(flight.digest, token: token)
            _ = await eval(Scripts.abandon, keys: [keySpace.keys(digest: flight.digest).lock], arguments: [lockValue])
        }
    }

    /// See `ResponseStore.read`. A reader whose task is already cancelled does not wait.
    public func read(_ key: StoreKey, wait: Duration) async -> ReadOutcome {
        switch await resolve(key, wait: wait) {
        case .counted(let outcome, let label):
            metrics.record(outcome, label: label)
            return outcome
        case .countedByFallback(let outcome):
            return outcome
        }
    }

    /// See `ResponseStore.retain`. Drops matching values and in-flight locks in Redis (waking their readers on every
    /// replica), the local tier's copies and the fallback store's entries. Other replicas' local tiers may serve a
    /// dropped entry for at most `localTTL`.
    public func retain(labels: Set<String>) async -> Int {
        local.withLock { $0.retain(labels: labels) }
        leads.retain(labels: labels)
        var dropped = Set<String>()
        var cursor = "0"
        let keptLabels = labels.sorted().map { Array($0.utf8) }
        repeat {
            let scan = await pool.execute(
                ["SCAN", cursor, "MATCH", "\(keySpace.namespace):*", "COUNT", "500"].map { Array($0.utf8) })
            guard case .success(.array(let parts)) = scan, parts.count == 2, let next = parts[0].text,
                case .array(let found) = parts[1]
            else {
                logger.warning("retain could not scan Redis; shared entries were not dropped")
                break
            }
            cursor = next
            var pairs: [[UInt8]] = []
            for case .string(let name) in found {
                let text = String(decoding: name, as: UTF8.self)
                guard let tombstone = keySpace.tombstone(forValueOrLock: text) else { continue }
                pairs.append(name)
                pairs.append(Array(tombstone.utf8))
            }
            guard !pairs.isEmpty else { continue }
            let reply = await eval(
                Scripts.retain, keys: pairs,
                arguments: [
                    Array(String(milliseconds(configuration.tombstoneAge)).utf8), Array(keySpace.channel.utf8),
                    Array(String(KeySpace.digestLength).utf8),
                ] + keptLabels)
            guard case .success(.array(let digests)) = reply else {
                logger.warning("retain could not drop entries in Redis")
                break
            }
            for case .string(let digest) in digests {
                let text = String(decoding: digest, as: UTF8.self)
                dropped.insert(text)
                waiters.notify(text)
            }
        } while cursor != "0"
        let droppedInFallback = await fallback.retain(labels: labels)
        return dropped.count + droppedInFallback
    }

    /// See `ResponseStore.snapshot`. `entries` and `pending` count Redis values and locks (every replica's) plus this
    /// replica's fallback store; `bytes` and `budget` are this replica's local tier plus fallback store; the read
    /// counters are this replica's. Evictions and wasted prefetches are the fallback store's (Redis expiries are
    /// silent).
    public func snapshot() async -> StoreSnapshot {
        var entries = 0
        var pending = 0
        var cursor = "0"
        repeat {
            let scan = await pool.execute(
                ["SCAN", cursor, "MATCH", "\(keySpace.namespace):*", "COUNT", "1000"].map { Array($0.utf8) })
            guard case .success(.array(let parts)) = scan, parts.count == 2, let next = parts[0].text,
                case .array(let found) = parts[1]
            else { break }
            cursor = next
            for case .string(let name) in found {
                switch keySpace.kind(of: String(decoding: name, as: UTF8.self)) {
                case .entry: entries += 1
                case .lock:
                    entries += 1
                    pending += 1
                case nil: break
                }
            }
        } while cursor != "0"
        let memory = await fallback.snapshot()
        let tier = local.withLock { (bytes: $0.bytes, budget: $0.maxBytes) }
        let totals = metrics.totals
        return StoreSnapshot(
            entries: entries + memory.entries, bytes: tier.bytes + memory.bytes, budget: tier.budget + memory.budget,
            pending: pending + memory.pending, hits: totals.hits + memory.hits, joins: totals.joins + memory.joins,
            misses: totals.misses + memory.misses, evictions: memory.evictions, expiredUnused: memory.expiredUnused)
    }

    /// Readers of this replica that found a flight pending and are waiting on it, for tests.
    var waitingReaders: Int { waitingCount.load(ordering: .relaxed) }

    // MARK: Reading

    private enum Resolution {
        case counted(ReadOutcome, label: String?)
        case countedByFallback(ReadOutcome)
    }

    private enum Probe {
        case value(StoredValue, pttl: Int64)
        case pending
        case absent(AbsentReason)
        case unavailable
    }

    private func resolve(_ key: StoreKey, wait: Duration) async -> Resolution {
        let keys = keySpace.keys(for: key)
        let start = clock.now
        if let item = local.withLock({ $0.get(keys.digest, now: start) }) {
            return .counted(.ready(item.response, joined: false), label: item.label)
        }
        let canWait = wait > .zero && !Task.isCancelled
        let deadline = start + wait
        let registration = canWait ? waiters.register(keys.digest) : nil
        defer { if let registration { waiters.unregister(registration) } }
        var arrivedDuringFlight = false
        defer { if arrivedDuringFlight { waitingCount.subtract(1, ordering: .relaxed) } }
        // The first look needs no round trip while this replica holds the key's lock: the flight is pending.
        var asked = !leads.isLeading(keys.digest, now: start)
        while true {
            let sentAt = clock.now
            let probed: Probe = asked ? await probe(keys) : .pending
            asked = true
            switch probed {
            case .value(.response(let response, let label), let pttl):
                if pttl > 0 {
                    local.withLock {
                        $0.put(
                            keys.digest, response: response, label: label,
                            redisExpiresAt: sentAt + .milliseconds(pttl), now: sentAt)
                    }
                }
                return .counted(.ready(response, joined: arrivedDuringFlight), label: label)
            case .value(.failure(let failure, let label), _):
                return .counted(.failed(failure, joined: arrivedDuringFlight), label: label)
            case .absent(.notFound) where !arrivedDuringFlight && hasFallbackResult(keys.digest):
                return .countedByFallback(await fallback.read(key, wait: .zero))
            case .absent(let reason):
                // A flight this reader joined was abandoned (or its unkept result was missed): wait for the next
                // leader, as the memory store does.
                if !(arrivedDuringFlight && reason == .notFound) { return .counted(.absent(reason), label: nil) }
            case .pending:
                if !arrivedDuringFlight { waitingCount.add(1, ordering: .relaxed) }
                arrivedDuringFlight = true
            case .unavailable where arrivedDuringFlight && !hasFallbackResult(keys.digest):
                // Redis went down under a flight this reader joined: its leader (if on this replica) completes into
                // the fallback and announces it locally, so keep waiting.
                break
            case .unavailable:
                let remaining = max(.zero, deadline - clock.now)
                return .countedByFallback(await fallback.read(key, wait: Task.isCancelled ? .zero : remaining))
            }
            let now = clock.now
            guard let registration, now < deadline, !Task.isCancelled else { return .counted(.pending, label: nil) }
            let woken = await registration.signal.wait(upTo: min(deadline - now, configuration.pollInterval))
            if let payload = woken.payload, let value = EntryCodec.decode(payload) {
                switch value {
                case .response(let response, let label):
                    return .counted(.ready(response, joined: true), label: label)
                case .failure(let failure, let label):
                    return .counted(.failed(failure, joined: true), label: label)
                }
            }
            // A flight completed on this replica put its (kept, not no-store) response in the local tier before the
            // wake-up: serve it from there and spare Redis the second read.
            if woken.fired, let item = local.withLock({ $0.get(keys.digest, now: clock.now) }) {
                return .counted(.ready(item.response, joined: arrivedDuringFlight), label: item.label)
            }
        }
    }

    private func probe(_ keys: KeySpace.Keys) async -> Probe {
        let reply = await eval(
            Scripts.read, keys: [keys.entry, keys.lock, keys.tombstone],
            arguments: [Array(String(milliseconds(configuration.tombstoneAge)).utf8)])
        switch reply {
        case .success(.array(let parts)):
            switch parts.first {
            case .integer(1):
                guard parts.count == 3, case .string(let bytes) = parts[1], case .integer(let pttl) = parts[2],
                    let value = EntryCodec.decode(bytes)
                else {
                    logger.error("undecodable value in Redis; treating it as absent", metadata: ["store.digest": "\(keys.digest)"])
                    return .absent(.notFound)
                }
                return .value(value, pttl: pttl)
            case .integer(2):
                return .pending
            case .integer(3):
                let reason = parts.count == 2 ? parts[1].text.flatMap(AbsentReason.init(rawValue:)) : nil
                return .absent(reason ?? .notFound)
            default:
                return .unavailable
            }
        default:
            return .unavailable
        }
    }

    // MARK: Internals

    private func noteFallbackResult(_ digest: String, policy: StorePolicy) {
        let now = clock.now
        let until = now + max(policy.ttl, policy.negativeTTL)
        fallbackResults.withLock { results in
            if results.count >= 4096 { results = results.filter { $0.value > now } }
            results[digest] = until
        }
    }

    private func hasFallbackResult(_ digest: String) -> Bool {
        let now = clock.now
        return fallbackResults.withLock { results in
            guard let until = results[digest] else { return false }
            if until > now { return true }
            results[digest] = nil
            return false
        }
    }

    private func record(_ token: FlightToken, _ flight: Flight) {
        let staleAfter = configuration.lockAge * 3
        flights.withLock { $0.insert(token, flight, staleAfter: staleAfter) }
    }

    /// Runs a script by SHA, sending its source only when Redis does not have it cached. A Redis error reply (not
    /// an outage) is logged and reported as a failure so callers treat it like one.
    private func eval(
        _ script: LuaScript, keys: [String], arguments: [[UInt8]]
    ) async
        -> Result<RedisValue, RedisCallError>
    {
        await eval([ScriptCall(script, keys: keys, arguments: arguments)])[0]
    }

    private func eval(
        _ script: LuaScript, keys: [[UInt8]], arguments: [[UInt8]]
    ) async
        -> Result<RedisValue, RedisCallError>
    {
        await eval([ScriptCall(script, keys: keys, arguments: arguments)])[0]
    }

    /// Runs `calls` in one pipeline, by SHA; the calls Redis answers `NOSCRIPT` (its script cache was flushed, e.g.
    /// by a restart) go again with their sources, in order, in a second pipeline. Results are in call order. A
    /// Redis error reply (not an outage) is logged and reported as a failure so callers treat it like one.
    private func eval(_ calls: [ScriptCall]) async -> [Result<RedisValue, RedisCallError>] {
        var replies = await pool.execute(batch: calls.map { [Array("EVALSHA".utf8), Array($0.script.sha.utf8)] + $0.tail })
        let uncached = replies.indices.filter { index in
            if case .success(.error(let message)) = replies[index], message.hasPrefix("NOSCRIPT") { return true }
            return false
        }
        if !uncached.isEmpty {
            let retried = await pool.execute(
                batch: uncached.map { [Array("EVAL".utf8), Array(calls[$0].script.source.utf8)] + calls[$0].tail })
            for (index, reply) in zip(uncached, retried) { replies[index] = reply }
        }
        return replies.map { reply in
            guard case .success(.error(let message)) = reply else { return reply }
            logger.error("Redis rejected a store script", metadata: ["redis.error": "\(message)"])
            return .failure(RedisCallError(kind: .io, message: message))
        }
    }
}

/// One script call, ready to pipeline: `tail` is what follows the script's SHA or source in `EVALSHA`/`EVAL`.
struct ScriptCall: Sendable {
    let script: LuaScript
    let tail: [[UInt8]]

    init(_ script: LuaScript, keys: [[UInt8]], arguments: [[UInt8]]) {
        self.script = script
        self.tail = [Array(String(keys.count).utf8)] + keys + arguments
    }

    init(_ script: LuaScript, keys: [String], arguments: [[UInt8]]) {
        self.init(script, keys: keys.map { Array($0.utf8) }, arguments: arguments)
    }
}

/// A flight this replica leads: where it is held and what `complete` needs to know.
struct Flight: Sendable {
    enum Mode: Sendable {
        /// Led in Redis under this lock value.
        case redis(lockValue: [UInt8])
        /// Led in the fallback store (Redis was down at `begin`) under its token.
        case fallback(FlightToken)
    }

    var key: StoreKey
    /// The key's digest (see `KeySpace`), so completing needs no second hash.
    var digest: String
    var policy: StorePolicy
    var mode: Mode
    var startedAt: ContinuousClock.Instant
}

/// The flights this replica leads, by token. A leader that never completes is forgotten after three lock ages (its
/// lock has expired long before, so its completion would be ignored anyway).
struct FlightBook: Sendable {
    private(set) var flights: [FlightToken: Flight] = [:]
    private var lastPrune: ContinuousClock.Instant?

    mutating func insert(_ token: FlightToken, _ flight: Flight, staleAfter: Duration) {
        let now = flight.startedAt
        if lastPrune.map({ now - $0 >= .seconds(1) }) ?? true {
            lastPrune = now
            flights = flights.filter { now - $0.value.startedAt < staleAfter }
        }
        flights[token] = flight
    }

    /// Removes and returns the flight `token` leads for `key`; nil for an unknown token or another key.
    mutating func take(_ token: FlightToken, key: StoreKey) -> Flight? {
        guard let flight = flights[token], flight.key == key else { return nil }
        flights[token] = nil
        return flight
    }
}

/// Names in Redis for one store: keys per store key, and the announcement channel.
struct KeySpace: Sendable {
    struct Keys: Sendable {
        let digest: String
        let entry: String
        let lock: String
        let tombstone: String
    }

    enum Kind {
        case entry
        case lock
    }

    /// Hex digits in a key digest.
    static let digestLength = 64

    let namespace: String
    let channel: String

    init(namespace: String, database: Int) {
        self.namespace = namespace
        // Pub/sub ignores the database number, so the channel carries it.
        self.channel = "\(namespace):done:\(database)"
    }

    func keys(for key: StoreKey) -> Keys {
        keys(digest: Self.digest(of: key))
    }

    /// The names for the key whose digest is `digest`.
    func keys(digest: String) -> Keys {
        Keys(
            digest: digest, entry: "\(namespace):e:\(digest)", lock: "\(namespace):lock:\(digest)",
            tombstone: "\(namespace):t:\(digest)")
    }

    func kind(of name: String) -> Kind? {
        if name.hasPrefix("\(namespace):e:") { return .entry }
        if name.hasPrefix("\(namespace):lock:") { return .lock }
        return nil
    }

    /// The tombstone key for a value or lock key; nil for any other name.
    func tombstone(forValueOrLock name: String) -> String? {
        guard kind(of: name) != nil, name.utf8.count > Self.digestLength else { return nil }
        return "\(namespace):t:\(name.suffix(Self.digestLength))"
    }

    /// The key's fixed-size fingerprint (a SHA-256 over identity, method and request digest) in hex.
    static func digest(of key: StoreKey) -> String {
        Hex.encode(key.fingerprint)
    }

    /// The message announcing a completion: the digest, then `|` and the encoded result when it is not stored.
    static func announcement(_ digest: String, payload: [UInt8]?) -> [UInt8] {
        var out = Array(digest.utf8)
        if let payload {
            out.append(UInt8(ascii: "|"))
            out.append(contentsOf: payload)
        }
        return out
    }

    static func parseAnnouncement(_ message: [UInt8]) -> (digest: String, payload: [UInt8]?)? {
        guard message.count >= digestLength else { return nil }
        let digest = String(decoding: message[..<digestLength], as: UTF8.self)
        guard message.count > digestLength + 1, message[digestLength] == UInt8(ascii: "|") else {
            return (digest, nil)
        }
        return (digest, Array(message[(digestLength + 1)...]))
    }
}
