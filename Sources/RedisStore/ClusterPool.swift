import CoreMetrics
import NIOCore
import Synchronization

/// The store's commands on a Redis Cluster: each command goes to the primary serving its key's slot, through a
/// ``RedisPool`` per primary (so everything `RedisPool` promises, per node: pipelining, bounds, retries, health).
///
/// The slot map (``SlotMap``) starts empty and is filled by `CLUSTER SHARDS`, asked of a known node without a task
/// when a command finds its slot unknown, when a node answers a redirection or fails, and every few seconds by the
/// subscriber's thread. A command whose slot is unknown goes to a seed node, whose `MOVED` then teaches the map.
///
/// A batch is split by node, keeping each node's commands in batch order in one pipeline (the store's scripts for one
/// key, a begin and its complete for instance, share a slot and so a node and a pipeline, in order). The replies:
/// - `MOVED slot node`: the map learns the slot's new primary, a refresh is asked for, and the command goes again,
///   through the map (with the other commands of the batch moved with it, in order).
/// - `ASK slot node`: the command goes once to `node`, preceded by `ASKING`, and the map stays (a slot being
///   migrated: its keys that already moved are served there).
/// - `TRYAGAIN`: the slot is being migrated and the command's keys are not all on one side (a script of the store
///   names a value, its lock and its tombstone, and Redis refuses such a call on a migrating slot until every one of
///   them is on one node); the command goes again, through the map, 25 ms later. So a call on a slot under migration
///   waits for the migration (a reshard tool moves a slot's keys in milliseconds), at most the command timeout.
/// A command follows at most ``maximumRedirections`` `MOVED`/`ASK` in a row (a `TRYAGAIN` starts the count again),
/// and nothing past the command timeout from its first send; then its last error reply stands (the store treats it as
/// a failed call: the key falls back to this replica's memory store).
final class ClusterPool: RedisCommands {
    /// The most `MOVED`/`ASK` one command follows in a row.
    static let maximumRedirections = 5

    private struct Routes {
        var map = SlotMap()
        /// Bumped whenever the map is replaced by a refresh or patched by `MOVED`.
        var generation = 0
        var pools: [ClusterNode: RedisPool] = [:]
    }

    private let cluster: ClusterEndpoints
    private let settings: ConnectionSettings
    private let health: RedisHealthMonitor
    private let connectionsPerNode: Int
    private let eventLoopGroup: any EventLoopGroup
    private let routes = Mutex(Routes())
    private let refreshing = Atomic<Bool>(false)
    private let nextSeed = Atomic<Int>(0)
    /// `prefetch_store_redis_redirections_total{kind}`: redirections followed, by kind (`moved`, `ask`, `tryagain`).
    private let moves: Counter
    private let asks: Counter
    private let retries: Counter

    /// A pool for `cluster`; `settings` gives the timeouts and limits of every node's connections. Connects nothing
    /// until the first command.
    init(
        cluster: ClusterEndpoints, settings: ConnectionSettings, connectionsPerNode: Int, health: RedisHealthMonitor,
        eventLoopGroup: any EventLoopGroup, metricsFactory: any MetricsFactory
    ) {
        let label = "prefetch_store_redis_redirections_total"
        moves = Counter(label: label, dimensions: [("kind", "moved")], factory: metricsFactory)
        asks = Counter(label: label, dimensions: [("kind", "ask")], factory: metricsFactory)
        retries = Counter(label: label, dimensions: [("kind", "tryagain")], factory: metricsFactory)
        self.cluster = cluster
        self.settings = settings
        self.health = health
        self.connectionsPerNode = connectionsPerNode
        self.eventLoopGroup = eventLoopGroup
    }

    /// The slot map now, and its generation (bumped on every change).
    var topology: (map: SlotMap, generation: Int) {
        routes.withLock { ($0.map, $0.generation) }
    }

    /// The node `endpoint` is: with the URL's credentials, for the subscriber's connections.
    func endpoint(of node: ClusterNode) -> RedisEndpoint {
        cluster.node(node)
    }

    func execute(batch commands: [[[UInt8]]]) async -> [Result<RedisValue, RedisCallError>] {
        await withCheckedContinuation { continuation in
            submit(batch: commands) { continuation.resume(returning: $0) }
        }
    }

    func submit(batch commands: [[[UInt8]]], then done: @escaping @Sendable (RedisCall.Results) -> Void) {
        guard !commands.isEmpty else { return done([]) }
        let gather = Gather(count: commands.count, done: done)
        let deadline = NIODeadline.now() + TimeAmount(settings.commandTimeout)
        dispatch(commands.indices.map { Pending(index: $0, command: commands[$0], deadline: deadline) }, gather: gather)
    }

    /// A pool per primary (the seeds' while the map knows none), after refreshing the map when it is incomplete: what
    /// `SCAN` must visit to see every key.
    func everyPrimary() async -> [any RedisCommands] {
        if !routes.withLock({ $0.map.isComplete }) { await refreshNow() }
        return routes.withLock { routes in
            let nodes = routes.map.primaries
            return (nodes.isEmpty ? cluster.seeds.map(ClusterNode.init) : nodes).map { Self.pool(for: $0, in: &routes, self) }
        }
    }

    /// Asks a known node for `CLUSTER SHARDS` and waits for the answer (or for every node to fail): for callers about
    /// to visit every primary.
    func refreshNow() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            refresh(force: true) { continuation.resume() }
        }
    }

    /// Asks for a new slot map without waiting for it: one refresh at a time (`done`, if given, runs when it ends;
    /// a call made while one runs returns at once unless `force`d to wait for a turn of its own).
    func refresh(force: Bool = false, then done: (@Sendable () -> Void)? = nil) {
        guard refreshing.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            done?()
            return
        }
        let candidates = routes.withLock { routes -> [ClusterNode] in
            var seen = Set<ClusterNode>()
            return (routes.map.primaries + cluster.seeds.map(ClusterNode.init)).filter { seen.insert($0).inserted }
        }
        ask(candidates[...], then: done)
    }

    /// Asks the first of `candidates` for the shards; on no usable answer, the next.
    private func ask(_ candidates: ArraySlice<ClusterNode>, then done: (@Sendable () -> Void)?) {
        guard let node = candidates.first else {
            refreshing.store(false, ordering: .releasing)
            done?()
            return
        }
        let pool = routes.withLock { Self.pool(for: node, in: &$0, self) }
        // Not held back by the store's health: after a primary's death the store counts as down, and only the new
        // map lets it come back.
        pool.submit(batch: [[Array("CLUSTER".utf8), Array("SHARDS".utf8)]], gated: false) { [self] results in
            if case .success(let reply) = results[0], let map = SlotMap(shards: reply), !map.primaries.isEmpty {
                routes.withLock { routes in
                    routes.map = map
                    routes.generation += 1
                }
                refreshing.store(false, ordering: .releasing)
                done?()
            } else {
                ask(candidates.dropFirst(), then: done)
            }
        }
    }

    /// A command of a batch on its way: where its result goes, and how often it was redirected.
    private struct Pending: Sendable {
        let index: Int
        let command: [[UInt8]]
        /// When the command stops following redirections: the command timeout after it was first sent.
        let deadline: NIODeadline
        var redirections = 0
    }

    /// Sends each command to its slot's primary (a seed while the slot is unknown), one pipeline per node.
    private func dispatch(_ items: [Pending], gather: Gather) {
        var incomplete = false
        let batches = routes.withLock { routes -> [(RedisPool, [Pending])] in
            incomplete = !routes.map.isComplete
            var order: [ClusterNode] = []
            var byNode: [ClusterNode: [Pending]] = [:]
            for item in items {
                let node =
                    Redirection.routingKey(of: item.command).flatMap { routes.map.owner(of: HashSlot.of($0)) } ?? seed()
                if byNode[node] == nil { order.append(node) }
                byNode[node, default: []].append(item)
            }
            return order.map { (Self.pool(for: $0, in: &routes, self), byNode[$0]!) }
        }
        if incomplete { refresh() }
        for (pool, items) in batches {
            pool.submit(batch: items.map(\.command)) { [self] results in handle(items, results, gather: gather) }
        }
    }

    /// Hands each reply to its caller, or follows the redirection it asks for.
    private func handle(_ items: [Pending], _ results: RedisCall.Results, gather: Gather) {
        var moved: [Pending] = []
        var asked: [ClusterNode: [Pending]] = [:]
        var askedOrder: [ClusterNode] = []
        var later: [Pending] = []
        var stale = false
        let now = NIODeadline.now()
        for (item, result) in zip(items, results) {
            if case .success(.error(let message)) = result, now < item.deadline, let redirection = Redirection(message),
                redirection == .tryAgain || item.redirections < Self.maximumRedirections
            {
                var next = item
                next.redirections = redirection == .tryAgain ? 0 : item.redirections + 1
                switch redirection {
                case .moved(let slot, let node):
                    moves.increment()
                    routes.withLock { routes in
                        routes.map.moved(slot, to: node)
                        routes.generation += 1
                    }
                    stale = true
                    moved.append(next)
                case .ask(_, let node):
                    asks.increment()
                    if asked[node] == nil { askedOrder.append(node) }
                    asked[node, default: []].append(next)
                case .tryAgain:
                    retries.increment()
                    later.append(next)
                }
                continue
            }
            if case .failure = result { stale = true }
            gather.set(item.index, result)
        }
        if stale { refresh() }
        if !moved.isEmpty { dispatch(moved, gather: gather) }
        for node in askedOrder {
            let items = asked[node]!
            let pool = routes.withLock { Self.pool(for: node, in: &$0, self) }
            let asking = [Array("ASKING".utf8)]
            pool.submit(batch: items.flatMap { [asking, $0.command] }) { [self] results in
                // ASKING's own `OK` is dropped; the command's reply may ask for another redirection.
                handle(items, stride(from: 1, to: results.count, by: 2).map { results[$0] }, gather: gather)
            }
        }
        if !later.isEmpty {
            eventLoopGroup.next().scheduleTask(in: .milliseconds(25)) { [self, later] in dispatch(later, gather: gather) }
        }
    }

    /// The next seed, round robin.
    private func seed() -> ClusterNode {
        ClusterNode(cluster.seeds[(nextSeed.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max) % cluster.seeds.count])
    }

    /// The pool of `node`, made on first use.
    private static func pool(for node: ClusterNode, in routes: inout Routes, _ owner: ClusterPool) -> RedisPool {
        if let pool = routes.pools[node] { return pool }
        var settings = owner.settings
        settings.endpoint = owner.cluster.node(node)
        settings.locator = PrimaryLocator(fixed: settings.endpoint)
        let pool = RedisPool(
            size: owner.connectionsPerNode, settings: settings, health: owner.health, eventLoopGroup: owner.eventLoopGroup)
        routes.pools[node] = pool
        return pool
    }
}

/// Collects a batch's results as its parts come back from several nodes, and hands them over, in order, once all
/// are in (on the event loop of the last).
private final class Gather: Sendable {
    private struct State {
        var results: [Result<RedisValue, RedisCallError>?]
        var remaining: Int
    }

    private let state: Mutex<State>
    private let done: @Sendable (RedisCall.Results) -> Void

    init(count: Int, done: @escaping @Sendable (RedisCall.Results) -> Void) {
        state = Mutex(State(results: Array(repeating: nil, count: count), remaining: count))
        self.done = done
    }

    func set(_ index: Int, _ result: Result<RedisValue, RedisCallError>) {
        let finished = state.withLock { state -> RedisCall.Results? in
            guard state.results[index] == nil else { return nil }
            state.results[index] = result
            state.remaining -= 1
            return state.remaining == 0 ? state.results.map { $0! } : nil
        }
        if let finished { done(finished) }
    }
}
