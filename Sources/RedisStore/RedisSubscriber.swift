import CHiredis
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store's pub/sub connections, on their own dispatch queue (a thread of its own for as long as it runs).
///
/// Completions and drops are announced on shard channels, one per key group (`KeySpace.channel(group:)`), so every
/// announcement stays on the node serving its keys. The subscriber listens to all 256: on one server, one connection
/// that `SSUBSCRIBE`s to every group; on a cluster, one connection per primary, each subscribed to the groups whose
/// slots that primary serves (``SlotMap/groupsByPrimary(namespace:)``), followed as the map changes (a node that
/// gives a slot away unsubscribes its channels, and the map is refreshed). It hands each message to `onMessage`,
/// waiting on every connection at once (`poll`).
///
/// It also probes Redis: when a connection breaks it reports the failure, and it reconnects on the shared health
/// backoff, so the store notices both an outage and the recovery without any traffic. Once every group is listened
/// to again after a connection was (re)made, `onResubscribed` runs, because messages published meanwhile are lost.
///
/// With Sentinel (`redis-sentinel://`) its thread also finds the primary: before its first subscription and every
/// ``SentinelWatch/interval`` after, it asks the sentinels and verifies the named server's `ROLE`
/// (``SentinelWatch``). When they name another primary (a failover), new connections go there from then on, and the
/// move is reported to the health monitor as a failure, so the store treats it as an outage that ends at once: the
/// pool stops using connections opened before it, the subscription is made again on the new primary, and the store
/// serves from its local tier and fallback until the new primary answers. With a cluster its thread asks for a fresh
/// slot map every ``clusterRefreshInterval``.
final class RedisSubscriber: Sendable {
    /// How often, on a cluster, the slot map is asked for even when nothing suggests it changed.
    static let clusterRefreshInterval = Duration.seconds(2)

    private struct State {
        var started = false
        var stopRequested = false
        var finished = false
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// One subscribed connection: to a server, for some groups.
    private struct Link {
        let connection: RedisConnection
        let groups: [String]
    }

    private let settings: ConnectionSettings
    private let keySpace: KeySpace
    /// The cluster whose primaries are listened to (nil on one server).
    private let cluster: ClusterPool?
    private let health: RedisHealthMonitor
    private let onMessage: @Sendable ([UInt8]) -> Void
    private let onResubscribed: @Sendable () -> Void
    /// Told when the sentinels move the primary.
    private let onPrimaryMoved: @Sendable (_ from: RedisEndpoint, _ to: RedisEndpoint) -> Void
    private let queue = DispatchQueue(label: "prefetch.redis.subscriber")
    private let state = Mutex(State())

    init(
        settings: ConnectionSettings, keySpace: KeySpace, cluster: ClusterPool? = nil, health: RedisHealthMonitor,
        onMessage: @escaping @Sendable ([UInt8]) -> Void, onResubscribed: @escaping @Sendable () -> Void,
        onPrimaryMoved: @escaping @Sendable (_ from: RedisEndpoint, _ to: RedisEndpoint) -> Void = { _, _ in }
    ) {
        self.onPrimaryMoved = onPrimaryMoved
        self.settings = settings
        self.keySpace = keySpace
        self.cluster = cluster
        self.health = health
        self.onMessage = onMessage
        self.onResubscribed = onResubscribed
    }

    /// Starts the loop once; later calls do nothing.
    func start() {
        let first = state.withLock { state in
            defer { state.started = true }
            return !state.started
        }
        guard first else { return }
        queue.async { self.loop() }
    }

    /// Asks the loop to end; it notices within about 100 ms.
    func stop() {
        state.withLock { $0.stopRequested = true }
    }

    /// Returns once the loop has ended (at once if it never started).
    func waitUntilFinished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state in
                if state.finished || !state.started { return true }
                state.finishWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    private var stopRequested: Bool { state.withLock { $0.stopRequested } }

    /// The groups to listen to, by the server that announces them: on one server all of them there (none while the
    /// sentinels name no primary); on a cluster, each primary's own. `complete` is false while some group has no
    /// known server.
    private func wanted() -> (servers: [RedisEndpoint: [String]], complete: Bool) {
        guard let cluster else {
            guard let primary = settings.locator.current else { return ([:], false) }
            return ([primary: KeySpace.groups], true)
        }
        var servers: [RedisEndpoint: [String]] = [:]
        var listened = 0
        for (node, groups) in cluster.topology.map.groupsByPrimary(namespace: keySpace.namespace) {
            servers[cluster.endpoint(of: node)] = groups
            listened += groups.count
        }
        return (servers, listened == KeySpace.groups.count)
    }

    /// Runs on `queue` until stopped; blocking here is fine, this thread does nothing else.
    private func loop() {
        var links: [RedisEndpoint: Link] = [:]
        // Messages may have been missed since a connection was (re)made: told once every group is listened to.
        var missedMessages = false
        var nextRefresh = ContinuousClock.now
        // The sentinels' watch lives on this thread (nil with `redis://` and `redis-cluster://`).
        let watch = settings.sentinels.map { SentinelWatch(sentinels: $0, settings: settings, onMoved: onPrimaryMoved) }
        while !stopRequested {
            if let watch, watch.isDue, let moved = watch.check() {
                // A failover: the subscription is made again on the new primary, and the pool's connections to the
                // old one are given up as in an outage.
                links = [:]
                health.failed(RedisCallError(kind: .connect, message: "the sentinels moved the primary to \(moved.address)"))
            }
            if let cluster, ContinuousClock.now >= nextRefresh {
                nextRefresh = ContinuousClock.now + Self.clusterRefreshInterval
                cluster.refresh()
            }
            let (servers, complete) = wanted()
            for (server, link) in links where servers[server] != link.groups {
                // A slot moved: its channels are listened to where it went.
                links[server] = nil
            }
            for (server, groups) in servers where links[server] == nil {
                guard health.isUp || health.claimAttempt() else { break }
                guard let connection = subscribe(server, groups: groups) else { break }
                links[server] = Link(connection: connection, groups: groups)
                missedMessages = true
            }
            if missedMessages, complete, links.count == servers.count {
                missedMessages = false
                onResubscribed()
            }
            if links.isEmpty || !complete || links.count < servers.count {
                if !complete { cluster?.refresh() }
                if links.isEmpty {
                    usleep(50_000)
                    continue
                }
            }
            var heard = false
            for (server, link) in links {
                do throws(RedisCallError) {
                    for reply in try link.connection.receive(timeoutMilliseconds: 0) {
                        heard = true
                        guard case .array(let parts) = reply, parts.count == 3 else { continue }
                        switch parts[0].text {
                        case "smessage":
                            if case .string(let payload) = parts[2] { onMessage(payload) }
                        case "sunsubscribe":
                            // The server gave the slot of this channel away (a reshard): listen where it went.
                            links[server] = nil
                            cluster?.refresh()
                        default:
                            break
                        }
                    }
                } catch {
                    links[server] = nil
                    health.failed(error)
                    cluster?.refresh()
                }
            }
            if !heard { Self.waitForAny(links.values.map(\.connection), milliseconds: 100) }
        }
        links = [:]
        let waiters = state.withLock { state in
            state.finished = true
            defer { state.finishWaiters = [] }
            return state.finishWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until one of `connections` has something to read, at most `milliseconds`.
    private static func waitForAny(_ connections: [RedisConnection], milliseconds: Int32) {
        var descriptors = connections.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
        guard !descriptors.isEmpty else { return }
        _ = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
    }

    /// A connection to `server` subscribed to the shard channels of `groups` (one `SSUBSCRIBE` each, pipelined: on a
    /// cluster one command may only name channels of one slot); nil when it cannot be made.
    private func subscribe(_ server: RedisEndpoint, groups: [String]) -> RedisConnection? {
        do throws(RedisCallError) {
            let opened = try RedisConnection.open(server, connectTimeout: settings.connectTimeout, commandTimeout: settings.commandTimeout)
            let commands = groups.map { group in [Array("SSUBSCRIBE".utf8), Array(keySpace.channel(group: group).utf8)] }
            let (replies, error) = opened.pipeline(commands)
            if let error { throw error }
            for reply in replies {
                guard case .array(let parts) = reply, parts.first?.text == "ssubscribe" else {
                    if case .error(let message) = reply, Redirection(message) != nil {
                        // The map is stale: not an outage.
                        cluster?.refresh()
                        return nil
                    }
                    health.failed(RedisCallError(kind: .io, message: "unexpected reply to SSUBSCRIBE from \(server.address): \(reply)"))
                    return nil
                }
            }
            health.succeeded()
            return opened
        } catch {
            health.failed(error)
            cluster?.refresh()
            return nil
        }
    }
}

/// The subscriber thread's view of the sentinels (Sentinel client guidelines): ask every one for the primary's
/// address (`SENTINEL get-master-addr-by-name`); ask the address a majority names its `ROLE` when it is not the
/// current primary; hand both to ``PrimaryDiscovery``, which decides; point the ``PrimaryLocator`` where it says.
/// Blocking calls, bounded by short timeouts, on the subscriber's own thread only.
final class SentinelWatch {
    /// How often the sentinels are asked.
    static let interval = Duration.milliseconds(500)

    private let sentinels: SentinelEndpoints
    private let settings: ConnectionSettings
    private let onMoved: @Sendable (RedisEndpoint, RedisEndpoint) -> Void
    private var discovery: PrimaryDiscovery
    private var next = ContinuousClock.now

    init(sentinels: SentinelEndpoints, settings: ConnectionSettings, onMoved: @escaping @Sendable (RedisEndpoint, RedisEndpoint) -> Void) {
        self.sentinels = sentinels
        self.settings = settings
        self.onMoved = onMoved
        self.discovery = PrimaryDiscovery()
    }

    var isDue: Bool { ContinuousClock.now >= next }

    /// Asks the sentinels once. Returns the new primary when they moved it from a known one (a failover); the first
    /// primary found, or no change, returns nil.
    func check() -> RedisEndpoint? {
        next = ContinuousClock.now + Self.interval
        let timeout = min(settings.connectTimeout, .milliseconds(500))
        let reports = sentinels.sentinels.map { sentinel -> SentinelEndpoints.Address? in
            let asked = RedisEndpoint(host: sentinel.host, port: sentinel.port)
            guard let connection = try? RedisConnection.open(asked, connectTimeout: timeout, commandTimeout: timeout),
                let reply = try? connection.command(["SENTINEL", "get-master-addr-by-name", sentinels.primaryName]),
                case .array(let parts) = reply, parts.count == 2, let host = parts[0].text,
                let port = parts[1].text.flatMap({ Int($0) }), (1...65535).contains(port)
            else { return nil }
            return SentinelEndpoints.Address(host: host, port: port)
        }
        let named = PrimaryDiscovery.majority(reports, of: sentinels.sentinels.count)
        // The credentials go only to a server most of the sentinels name, and only once it is a new one.
        let role: PrimaryDiscovery.Role =
            if let named, named != discovery.current { self.role(of: sentinels.primary(at: named), timeout: timeout) } else { .unknown }
        let previous = settings.locator.current
        guard case .switchTo(let address) = discovery.observed(named: named, role: role) else { return nil }
        let primary = sentinels.primary(at: address)
        settings.locator.set(primary)
        guard let previous else { return nil }
        onMoved(previous, primary)
        return primary
    }

    /// What `endpoint` says it is (`ROLE`), asked with the data nodes' credentials.
    private func role(of endpoint: RedisEndpoint, timeout: Duration) -> PrimaryDiscovery.Role {
        guard let connection = try? RedisConnection.open(endpoint, connectTimeout: timeout, commandTimeout: timeout),
            let reply = try? connection.command(["ROLE"]), case .array(let parts) = reply, let kind = parts.first?.text
        else { return .unknown }
        switch kind {
        case "master": return .primary
        case "slave", "replica": return .replica
        default: return .unknown
        }
    }
}
