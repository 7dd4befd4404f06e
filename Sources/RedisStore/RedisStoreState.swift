import PrefetchStore
import Synchronization

/// Every decision of a `RedisStore`, as a value type: no I/O, nothing async, no clock of its own.
///
/// It holds the connection health (`RedisHealth`), the flights this replica leads (`FlightBook`, `LeadBook`), the
/// local tier of ready responses (`LocalTier`), which keys have a result in the fallback store (`FallbackResults`),
/// and how many readers wait on flights. The store (the shell) reads the clock, feeds it events with the instant
/// they happened (a script's reply, a call's failure, a wake-up, an announcement), and performs the step each one
/// returns: run this script, begin or complete in the fallback store, wake these readers, wait this long, answer.
/// Building script calls is pure too (`Calls`); decoding values is not (it maps `fetchedAt` onto this process's
/// clock), so the shell decodes replies (`Probe(reply:)`) and encodes results before handing them in.
///
/// After `HTTPConnectionPool.StateMachine` in async-http-client and `StoreState` in PrefetchStore.
struct RedisStoreState: Sendable {
    typealias Instant = ContinuousClock.Instant
    typealias Reply = Result<RedisValue, RedisCallError>

    /// Builds the script calls (pure; the shell keeps a copy to build calls without the lock).
    let calls: Calls
    /// How often a waiting reader re-checks Redis in case an announcement was lost.
    let pollInterval: Duration
    /// A leader that never completes is forgotten after this long: three lock ages, long after its lock expired.
    let staleFlightAfter: Duration

    private(set) var health: RedisHealth
    private(set) var flights = FlightBook()
    private(set) var leads: LeadBook
    private(set) var local: LocalTier
    private(set) var fallbackResults = FallbackResults()
    /// Readers that found a flight pending and wait on it.
    private(set) var waitingReaders = 0

    init(configuration: RedisStore.Configuration, database: Int) {
        calls = Calls(
            keySpace: KeySpace(namespace: configuration.namespace, database: database), lockAge: configuration.lockAge,
            tombstoneAge: configuration.tombstoneAge)
        pollInterval = configuration.pollInterval
        staleFlightAfter = configuration.lockAge * 3
        health = RedisHealth(
            initialBackoff: configuration.reconnectInitialBackoff, maxBackoff: configuration.reconnectMaxBackoff)
        leads = LeadBook(window: min(configuration.lockAge, configuration.localTTL))
        local = LocalTier(
            maxEntries: configuration.localEntries, maxBytes: configuration.localBytes, ttlCap: configuration.localTTL)
    }

    // MARK: Connection health

    /// True while Redis is unreachable: calls fail fast and operations take the fallback path.
    var isDegraded: Bool { !health.isUp }

    /// Whether a connection may try the network at `now`: always while up; while down, one caller per backoff
    /// period (100 ms doubling to 2 s by default).
    mutating func claimAttempt(now: Instant) -> Bool {
        health.claimAttempt(now: now)
    }

    /// A call reached Redis at `now`. `.cameUp` once per outage: the shell counts the reconnect and marks Redis up.
    mutating func callSucceeded(now: Instant) -> RedisHealth.Transition {
        health.succeeded(now: now)
    }

    /// A call could not reach Redis at `now`. `.wentDown` once per outage: the shell marks the store degraded.
    mutating func callFailed(now: Instant) -> RedisHealth.Transition {
        health.failed(now: now)
    }

    // MARK: Begin

    /// What a begin does after its script's reply.
    enum BeginStep: Sendable, Hashable {
        /// Redis answered.
        case done(BeginOutcome)
        /// Redis gave no answer: begin in the fallback store and report its outcome with `fallbackBegan`.
        case beginInFallback
    }

    /// Interprets the begin script's reply at `now`: a lead is recorded (`leader`), `joined` and `fresh` pass
    /// through, and anything else (no answer, an error reply, an unknown reply) takes the fallback path.
    mutating func beginReplied(_ claim: Claim, reply: Reply, now: Instant) -> BeginStep {
        switch reply.map(\.text) {
        case .success("leader"):
            flights.insert(
                claim.token,
                Flight(
                    key: claim.key, digest: claim.keys.digest, policy: claim.policy, mode: .redis(lockValue: claim.lockValue),
                    startedAt: now),
                staleAfter: staleFlightAfter)
            leads.lead(claim.keys.digest, token: claim.token, label: claim.policy.label, startedAt: now)
            return .done(.leader(claim.token))
        case .success("joined"):
            return .done(.joined)
        case .success("fresh"):
            return .done(.fresh)
        default:
            return .beginInFallback
        }
    }

    /// The fallback store answered a begin at `now`: a lead there is recorded under the claim's token, so the caller
    /// completes or abandons it through this store.
    mutating func fallbackBegan(_ claim: Claim, outcome: BeginOutcome, now: Instant) -> BeginOutcome {
        guard case .leader(let fallbackToken) = outcome else { return outcome }
        flights.insert(
            claim.token,
            Flight(key: claim.key, digest: claim.keys.digest, policy: claim.policy, mode: .fallback(fallbackToken), startedAt: now),
            staleAfter: staleFlightAfter)
        return .leader(claim.token)
    }

    // MARK: Put

    /// What a `put` (the begin and complete scripts in one pipeline) does after the begin script's reply.
    enum PutStep: Sendable, Hashable {
        /// The key is fresh or in flight: nothing was stored.
        case declined
        /// The begin led, so the complete script right after it took the result: settle its reply with
        /// `completionReplied`. No flight is recorded; it ended in the same round trip.
        case settleCompletion
        /// Redis gave no answer: begin in the fallback store (`fallbackBegan`) and, when that leads, complete.
        case beginInFallback
    }

    /// Interprets the begin script's reply within a `put`.
    static func putReplied(beginReply: Reply) -> PutStep {
        switch beginReply.map(\.text) {
        case .success("leader"): .settleCompletion
        case .success("joined"), .success("fresh"): .declined
        default: .beginInFallback
        }
    }

    // MARK: Complete

    /// What a `complete` does.
    enum CompleteStep: Sendable, Hashable {
        /// No such flight here (an unknown token, another key, or one forgotten as stale): ignore it.
        case ignore
        /// Led in the fallback store: complete there under `fallbackToken`, report `fallbackCompleted`, and wake this
        /// replica's readers of `digest`.
        case completeInFallback(fallbackToken: FlightToken, digest: String, policy: StorePolicy)
        /// Led in Redis: encode the result, run `Calls.completion(lead, ...)` and settle with `completionReplied`.
        case completeInRedis(RedisLead)
    }

    /// The leader of `token` completes `key`; ends the flight (and its lead) whatever happens next.
    mutating func complete(_ key: StoreKey, token: FlightToken) -> CompleteStep {
        guard let flight = flights.take(token, key: key) else { return .ignore }
        switch flight.mode {
        case .fallback(let fallbackToken):
            return .completeInFallback(fallbackToken: fallbackToken, digest: flight.digest, policy: flight.policy)
        case .redis(let lockValue):
            leads.ended(flight.digest, token: token)
            let keys = calls.keySpace.keys(digest: flight.digest)
            return .completeInRedis(
                RedisLead(
                    keys: keys, lockValue: lockValue, policy: flight.policy,
                    identityIndex: calls.keySpace.identityIndex(flight.key.identity, group: keys.group)))
        }
    }

    /// What follows the complete script's reply.
    enum CompletionStep: Sendable, Hashable {
        /// Redis took the result (and announced it to every replica): wake this replica's readers of `digest` with
        /// `payload` (the encoded result when Redis does not keep it, else nil).
        case wake(digest: String, payload: [UInt8]?)
        /// The flight's lock had expired or was dropped: Redis ignored the result, and so does the shell.
        case ignoredStale
        /// Redis could not take it: keep it in the fallback store (begin there; when that leads, complete and report
        /// `fallbackCompleted`), then wake this replica's readers of `digest` with `payload`.
        case keepInFallback(digest: String, payload: [UInt8]?, error: RedisCallError)
    }

    /// Interprets the complete script's reply to `completion`, sent at `sentAt`: a kept response goes to the local
    /// tier, never past the Redis expiry counted from `sentAt`.
    /// A completion is about to be sent at `sentAt`. A kept response goes into the local tier first: Redis announces
    /// the completion to every replica, this one included, and the announcement can overtake the script's reply, so
    /// a reader woken by it must already find the response here rather than ask Redis again. A reply that refuses
    /// the completion takes it out again (`completionReplied`).
    mutating func completing(_ completion: Completion, sentAt: Instant) {
        if completion.isKept, case .success(let response) = completion.result {
            local.put(
                completion.lead.keys.digest, response: response, label: completion.lead.policy.label,
                redisExpiresAt: sentAt + completion.keep, now: sentAt)
        }
    }

    /// A completion sent with `completing` did not take (its claim was declined, or went to the fallback store):
    /// the local tier forgets the response it was given ahead of the reply.
    mutating func completionDropped(_ completion: Completion) {
        local.remove(completion.lead.keys.digest)
    }

    mutating func completionReplied(_ completion: Completion, reply: Reply, sentAt: Instant) -> CompletionStep {
        let digest = completion.lead.keys.digest
        switch reply {
        case .success(.integer(1)):
            return .wake(digest: digest, payload: completion.payload)
        case .success:
            local.remove(digest)
            return .ignoredStale
        case .failure(let error):
            local.remove(digest)
            return .keepInFallback(digest: digest, payload: completion.payload, error: error)
        }
    }

    /// A result for `digest` went to the fallback store at `now`: until its TTL (or negative TTL) passes, a read
    /// Redis knows nothing about is answered from the fallback, even after Redis returns.
    mutating func fallbackCompleted(_ digest: String, policy: StorePolicy, now: Instant) {
        fallbackResults.note(digest, until: now + max(policy.ttl, policy.negativeTTL), now: now)
    }

    // MARK: Abandon

    /// What an `abandon` does.
    enum AbandonStep: Sendable, Hashable {
        /// No such flight here: nothing.
        case ignore
        /// Led in the fallback store: abandon it there.
        case abandonInFallback(FlightToken)
        /// Led in Redis: run this abandon script call (it releases the lock only if still held by this flight).
        case abandonInRedis(ScriptCall)
    }

    mutating func abandon(_ key: StoreKey, token: FlightToken) -> AbandonStep {
        guard let flight = flights.take(token, key: key) else { return .ignore }
        switch flight.mode {
        case .fallback(let fallbackToken):
            return .abandonInFallback(fallbackToken)
        case .redis(let lockValue):
            leads.ended(flight.digest, token: token)
            return .abandonInRedis(calls.abandon(digest: flight.digest, lockValue: lockValue))
        }
    }

    // MARK: Read

    /// One reader's progress through a `read`. The shell keeps it and hands it back with every event; once the read
    /// is over, with `readEnded`.
    struct Reader: Sendable, Hashable {
        let keys: KeySpace.Keys
        let deadline: Instant
        /// Whether it may wait at all (a positive wait, not cancelled at the start). Only then does the shell
        /// register it for wake-ups, before its first look at Redis.
        let canWait: Bool
        /// Whether it found the flight pending: it then counts as joined, and as a waiting reader until `readEnded`.
        fileprivate(set) var joinedFlight = false
    }

    /// What a reader does next.
    enum ReadStep: Sendable, Hashable {
        /// Answer `outcome`, counted by this store's metrics (under `label` when a response was found).
        case finish(ReadOutcome, label: String?)
        /// Answer from the fallback store, which may wait up to `wait` and counts the read itself.
        case readFallback(wait: Duration)
        /// Run this read script call, decode the reply (`Probe(reply:)`) and report with `probed`.
        case probe(ScriptCall)
        /// Wait for a wake-up at most this long (then poll), and report with `woke`.
        case wait(Duration)
    }

    /// What the read script's reply says.
    enum Probe: Sendable, Hashable {
        /// A value, and how many milliseconds Redis keeps it (`PTTL`: negative when it has no expiry).
        case value(StoredValue, pttl: Int64)
        /// The key's lock is held: a flight is under way.
        case pending
        /// No value, and why (`notFound` without a tombstone).
        case absent(AbsentReason)
        /// Redis gave no answer (or an unexpected one).
        case unavailable
        /// Redis holds a value this process cannot decode (the shell logs it); read as `absent(.notFound)`.
        case undecodable

        /// Decodes the read script's reply. Not a decision but the codec's work: a response's `fetchedAt` is mapped
        /// onto this process's clock, so the shell does this.
        init(reply: Reply) {
            guard case .success(.array(let parts)) = reply else {
                self = .unavailable
                return
            }
            switch parts.first {
            case .integer(1):
                guard parts.count == 3, case .string(let bytes) = parts[1], case .integer(let pttl) = parts[2],
                    let value = EntryCodec.decode(bytes)
                else {
                    self = .undecodable
                    return
                }
                self = .value(value, pttl: pttl)
            case .integer(2):
                self = .pending
            case .integer(3):
                let reason = parts.count == 2 ? parts[1].text.flatMap(AbsentReason.init(rawValue:)) : nil
                self = .absent(reason ?? .notFound)
            default:
                self = .unavailable
            }
        }
    }

    /// A read of `key` willing to wait `wait` starts at `now`. The local tier answers first; while this replica
    /// leads the key's flight it is pending without asking Redis; otherwise the reader probes.
    mutating func startRead(_ key: StoreKey, wait: Duration, cancelled: Bool, now: Instant) -> (Reader, ReadStep) {
        startRead(calls.keySpace.keys(for: key), wait: wait, cancelled: cancelled, now: now)
    }

    /// `startRead(_:wait:cancelled:now:)` for a key whose names are `keys`.
    mutating func startRead(_ keys: KeySpace.Keys, wait: Duration, cancelled: Bool, now: Instant) -> (Reader, ReadStep) {
        var reader = Reader(keys: keys, deadline: now + wait, canWait: wait > .zero && !cancelled)
        if let item = local.get(keys.digest, now: now) {
            return (reader, .finish(.ready(item.response, joined: false), label: item.label))
        }
        if leads.isLeading(keys.digest, now: now) {
            let step = probed(&reader, .pending, sentAt: now, cancelled: cancelled, now: now)
            return (reader, step)
        }
        return (reader, .probe(calls.read(keys)))
    }

    /// The reader's probe, sent at `sentAt`, came back at `now` saying `probe`.
    mutating func probed(_ reader: inout Reader, _ probe: Probe, sentAt: Instant, cancelled: Bool, now: Instant) -> ReadStep {
        let digest = reader.keys.digest
        switch probe {
        case .value(.response(let response, let label), let pttl):
            if pttl > 0 {
                local.put(digest, response: response, label: label, redisExpiresAt: sentAt + .milliseconds(pttl), now: sentAt)
            }
            return .finish(.ready(response, joined: reader.joinedFlight), label: label)
        case .value(.failure(let failure, let label), _):
            return .finish(.failed(failure, joined: reader.joinedFlight), label: label)
        case .undecodable:
            return probed(&reader, .absent(.notFound), sentAt: sentAt, cancelled: cancelled, now: now)
        case .absent(let reason):
            if reason == .notFound && !reader.joinedFlight && fallbackResults.contains(digest, now: now) {
                // Redis knows nothing of it, but this replica kept an outage's result for it.
                return .readFallback(wait: .zero)
            }
            // A flight this reader joined was abandoned (or its unkept result was missed): wait for the next leader,
            // as the memory store does.
            if !(reader.joinedFlight && reason == .notFound) { return .finish(.absent(reason), label: nil) }
        case .pending:
            if !reader.joinedFlight {
                reader.joinedFlight = true
                waitingReaders += 1
            }
        case .unavailable:
            // Redis went down under a flight this reader joined: its leader (if on this replica) completes into the
            // fallback and wakes it, so it keeps waiting; otherwise the fallback answers.
            if !reader.joinedFlight || fallbackResults.contains(digest, now: now) {
                return .readFallback(wait: cancelled ? .zero : max(.zero, reader.deadline - now))
            }
        }
        return waitOrGiveUp(reader, cancelled: cancelled, now: now)
    }

    /// The reader's wait ended at `now`: woken (`fired`, with the result when it travelled in the announcement,
    /// already decoded by the shell) or timed out.
    mutating func woke(_ reader: inout Reader, fired: Bool, value: StoredValue?, now: Instant) -> ReadStep {
        switch value {
        case .response(let response, let label):
            return .finish(.ready(response, joined: true), label: label)
        case .failure(let failure, let label):
            return .finish(.failed(failure, joined: true), label: label)
        case nil:
            break
        }
        // A flight completed on this replica put its (kept, not no-store) response in the local tier before the
        // wake-up: serve it from there and spare Redis the second read.
        if fired, let item = local.get(reader.keys.digest, now: now) {
            return .finish(.ready(item.response, joined: reader.joinedFlight), label: item.label)
        }
        return .probe(calls.read(reader.keys))
    }

    /// The read is over, however it ended.
    mutating func readEnded(_ reader: Reader) {
        if reader.joinedFlight { waitingReaders -= 1 }
    }

    private func waitOrGiveUp(_ reader: Reader, cancelled: Bool, now: Instant) -> ReadStep {
        guard reader.canWait, now < reader.deadline, !cancelled else { return .finish(.pending, label: nil) }
        return .wait(min(reader.deadline - now, pollInterval))
    }

    // MARK: Announcements and retain

    /// A completion or drop of `digest` was announced (by any replica): the lead here, if any, may be over.
    mutating func announced(_ digest: String) {
        leads.forget(digest)
    }

    /// The subscriber (re)subscribed: announcements may have been missed, so no lead is trusted.
    mutating func resubscribed() {
        leads.forgetAll()
        subscriptions += 1
    }

    /// How many times this replica's subscriber has (re)subscribed to the announcements: 0 until it first listens.
    private(set) var subscriptions = 0

    /// An invalidation (here, or announced by any replica) dropped the values of `digests` in Redis at `now`: their
    /// local copies go, a reply read before now does not bring them back, and no lead on them is trusted.
    mutating func dropped(_ digests: [String], now: Instant) {
        for digest in digests {
            local.drop(digest, now: now)
            leads.forget(digest)
        }
    }

    /// `retain(labels:)` drops every other label's local copies and leads (the shell drops them in Redis).
    mutating func retain(labels: Set<String>) {
        local.retain(labels: labels)
        leads.retain(labels: labels)
    }
}

extension RedisStoreState {
    /// A begin for one key, ready to send: the token it leads under, the lock value, and the script call.
    struct Claim: Sendable, Hashable {
        let key: StoreKey
        let policy: StorePolicy
        let token: FlightToken
        let lockValue: [UInt8]
        let keys: KeySpace.Keys
        let call: ScriptCall

        /// The index set of the key's identity (nil for the anonymous identity).
        let identityIndex: String?

        /// The flight this claim holds in Redis when it leads.
        var lead: RedisLead { RedisLead(keys: keys, lockValue: lockValue, policy: policy, identityIndex: identityIndex) }
    }

    /// A flight held in Redis: what completing it needs.
    struct RedisLead: Sendable, Hashable {
        let keys: KeySpace.Keys
        let lockValue: [UInt8]
        let policy: StorePolicy
        /// The index set of the key's identity, which the kept result joins (nil for the anonymous identity).
        let identityIndex: String?
    }

    /// A completion of a Redis-led flight, ready to send.
    struct Completion: Sendable, Hashable {
        let lead: RedisLead
        let result: Result<StoredResponse, StoreFailure>
        /// How long Redis keeps the result; zero when it only travels in the announcement.
        let keep: Duration
        /// The encoded result when it travels in the announcement (not kept); nil when Redis keeps it.
        let payload: [UInt8]?
        let call: ScriptCall

        var isKept: Bool { keep > .zero }
    }

    /// Builds the store's script calls. Pure, so the shell builds calls without taking the lock.
    struct Calls: Sendable, Hashable {
        let keySpace: KeySpace
        let lockAge: Duration
        let tombstoneAge: Duration

        /// The begin script call for `key`, to be led under `token` (the shell draws tokens at random).
        func claim(_ key: StoreKey, policy: StorePolicy, token: FlightToken) -> Claim {
            let keys = keySpace.keys(for: key)
            let lockValue = EntryCodec.lock(label: policy.label, token: token)
            let call = ScriptCall(
                Scripts.begin, keys: [keys.entry, keys.lock, keys.tombstone],
                arguments: [lockValue, Array(String(milliseconds(lockAge)).utf8)])
            return Claim(
                key: key, policy: policy, token: token, lockValue: lockValue, keys: keys, call: call,
                identityIndex: keySpace.identityIndex(key.identity, group: keys.group))
        }

        /// How long Redis keeps `result` under `policy`: a response its TTL (a no-store one at least 1 ms, since it
        /// must sit in Redis for its one reader and never travels in a message), a failure its negative TTL.
        static func keep(_ result: Result<StoredResponse, StoreFailure>, policy: StorePolicy) -> Duration {
            switch result {
            case .success(let response): response.noStore ? max(policy.ttl, .milliseconds(1)) : policy.ttl
            case .failure: policy.negativeTTL
            }
        }

        /// The complete script call for `lead` with `result`, given as `encoded` (`EntryCodec.encode`, which the
        /// shell runs: it stamps the response's age from this process's clock). A result that is not kept travels
        /// inside the announcement instead.
        func completion(_ lead: RedisLead, result: Result<StoredResponse, StoreFailure>, encoded: [UInt8]) -> Completion {
            let keep = Self.keep(result, policy: lead.policy)
            let kept = keep > .zero
            let keys = lead.keys
            let announcement = KeySpace.announcement(keys.digest, payload: kept ? nil : encoded)
            let call = ScriptCall(
                Scripts.complete, keys: [keys.entry, keys.lock, keys.tombstone] + indexes(lead, result: result),
                arguments: [
                    lead.lockValue, encoded, Array(String(kept ? milliseconds(keep) : 0).utf8),
                    Array(String(milliseconds(tombstoneAge)).utf8), Array(keySpace.channel(group: keys.group).utf8),
                    announcement, Array(keys.digest.utf8), Array(keySpace.prefix(group: keys.group).utf8),
                ])
            return Completion(lead: lead, result: result, keep: keep, payload: kept ? nil : encoded, call: call)
        }

        /// The index sets a kept `result` of `lead` joins: its identity's (unless anonymous) and, for a response, one
        /// per surrogate key it is tagged with (at most `SurrogateKeys.maximumCount`).
        func indexes(_ lead: RedisLead, result: Result<StoredResponse, StoreFailure>) -> [String] {
            var indexes = lead.identityIndex.map { [$0] } ?? []
            if case .success(let response) = result {
                indexes += SurrogateKeys.keys(in: response.headers).map { keySpace.surrogateIndex($0, group: lead.keys.group) }
            }
            return indexes
        }

        /// The script calls dropping every value an index is kept for: one per group, each on the group's set named
        /// by `set` (`KeySpace.identityIndex` or `KeySpace.surrogateIndex` for that group).
        func invalidateIndexed(set: (_ group: String) -> String) -> [ScriptCall] {
            KeySpace.groups.map { group in
                ScriptCall(
                    Scripts.invalidateIndexed, keys: [set(group)],
                    arguments: [Array(keySpace.prefix(group: group).utf8), Array(String(milliseconds(tombstoneAge)).utf8)])
            }
        }

        /// The script calls dropping, among the values named `valueKeys` (found by a scan), those whose label is
        /// `label`: one per group found, since a script touches one group's keys. Names that are not value keys are
        /// left out.
        func invalidateLabel(_ label: String, valueKeys: [String]) -> [ScriptCall] {
            Self.byGroup(valueKeys.filter { keySpace.kind(of: $0) == .entry }, in: keySpace).map { pairs in
                ScriptCall(
                    Scripts.invalidateLabel, keys: pairs,
                    arguments: [
                        Array(String(milliseconds(tombstoneAge)).utf8), Array(String(KeySpace.digestLength).utf8),
                        Array(label.utf8),
                    ])
            }
        }

        /// The script calls dropping, among the values and locks named `names` (found by a scan), those whose label
        /// is not in `keptLabels`: one per group found.
        func retain(_ keptLabels: Set<String>, names: [String]) -> [ScriptCall] {
            let kept = keptLabels.sorted().map { Array($0.utf8) }
            return Self.byGroup(names, in: keySpace).compactMap { pairs in
                guard let group = keySpace.group(ofName: pairs[0]) else { return nil }
                return ScriptCall(
                    Scripts.retain, keys: pairs,
                    arguments: [
                        Array(String(milliseconds(tombstoneAge)).utf8), Array(keySpace.channel(group: group).utf8),
                        Array(String(KeySpace.digestLength).utf8),
                    ] + kept)
            }
        }

        /// (name, tombstone) pairs of the value and lock names among `names`, one list per group, in group order.
        static func byGroup(_ names: [String], in keySpace: KeySpace) -> [[String]] {
            var groups: [String: [String]] = [:]
            for name in names {
                guard let group = keySpace.group(ofName: name), let tombstone = keySpace.tombstone(forValueOrLock: name)
                else { continue }
                groups[group, default: []] += [name, tombstone]
            }
            return groups.sorted { $0.key < $1.key }.map(\.value)
        }

        /// The read script call for the key named `keys`.
        func read(_ keys: KeySpace.Keys) -> ScriptCall {
            ScriptCall(
                Scripts.read, keys: [keys.entry, keys.lock, keys.tombstone],
                arguments: [Array(String(milliseconds(tombstoneAge)).utf8)])
        }

        /// The abandon script call for the flight on `digest` held under `lockValue`.
        func abandon(digest: String, lockValue: [UInt8]) -> ScriptCall {
            ScriptCall(Scripts.abandon, keys: [keySpace.keys(digest: digest).lock], arguments: [lockValue])
        }
    }
}

extension StoredValue {
    /// The value a completion with `result` stores under `label`.
    init(_ result: Result<StoredResponse, StoreFailure>, label: String) {
        switch result {
        case .success(let response): self = .response(response, label: label)
        case .failure(let failure): self = .failure(failure, label: label)
        }
    }
}

/// A store's `RedisStoreState` behind its lock, shared by the store and by the health monitor its connections
/// report to.
final class SharedStoreState: Sendable {
    private let state: Mutex<RedisStoreState>

    init(_ state: RedisStoreState) {
        self.state = Mutex(state)
    }

    func withLock<Result: Sendable>(_ body: (inout RedisStoreState) -> Result) -> Result {
        state.withLock { body(&$0) }
    }
}
