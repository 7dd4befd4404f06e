import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store's one pub/sub connection, on its own dispatch queue (a thread of its own for as long as it runs).
///
/// It subscribes to the store's completion channel and hands each message to `onMessage`. It also probes Redis:
/// when its connection breaks it reports the failure, and it reconnects on the shared health backoff, so the store
/// notices both an outage and the recovery without any traffic. After every (re)subscription `onResubscribed` runs,
/// because messages published while it was disconnected are lost.
///
/// With Sentinel (`redis-sentinel://`) its thread also finds the primary: before its first subscription and every
/// ``SentinelWatch/interval`` after, it asks the sentinels and verifies the named server's `ROLE`
/// (``SentinelWatch``). When they name another primary (a failover), new connections go there from then on, and the
/// move is reported to the health monitor as a failure, so the store treats it as an outage that ends at once: the
/// pool stops using connections opened before it, the subscription is made again on the new primary, and the store
/// serves from its local tier and fallback until the new primary answers.
final class RedisSubscriber: Sendable {
    private struct State {
        var started = false
        var stopRequested = false
        var finished = false
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let settings: ConnectionSettings
    private let channel: String
    private let health: RedisHealthMonitor
    private let onMessage: @Sendable ([UInt8]) -> Void
    private let onResubscribed: @Sendable () -> Void
    /// Told when the sentinels move the primary.
    private let onPrimaryMoved: @Sendable (_ from: RedisEndpoint, _ to: RedisEndpoint) -> Void
    private let queue = DispatchQueue(label: "prefetch.redis.subscriber")
    private let state = Mutex(State())

    init(
        settings: ConnectionSettings, channel: String, health: RedisHealthMonitor,
        onMessage: @escaping @Sendable ([UInt8]) -> Void, onResubscribed: @escaping @Sendable () -> Void,
        onPrimaryMoved: @escaping @Sendable (_ from: RedisEndpoint, _ to: RedisEndpoint) -> Void = { _, _ in }
    ) {
        self.onPrimaryMoved = onPrimaryMoved
        self.settings = settings
        self.channel = channel
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

    /// Runs on `queue` until stopped; blocking here is fine, this thread does nothing else.
    private func loop() {
        var connection: RedisConnection?
        // The sentinels' watch lives on this thread (nil with `redis://`).
        let watch = settings.sentinels.map { SentinelWatch(sentinels: $0, settings: settings, onMoved: onPrimaryMoved) }
        while !stopRequested {
            if let watch, watch.isDue, let moved = watch.check() {
                // A failover: the subscription is made again on the new primary, and the pool's connections to the
                // old one are given up as in an outage.
                connection = nil
                health.failed(RedisCallError(kind: .connect, message: "the sentinels moved the primary to \(moved.address)"))
            }
            guard let current = connection else {
                if health.isUp || health.claimAttempt() {
                    connection = subscribe()
                }
                if connection == nil { usleep(50_000) }
                continue
            }
            do throws(RedisCallError) {
                for reply in try current.receive(timeoutMilliseconds: 100) {
                    if case .array(let parts) = reply, parts.count == 3, parts[0].text == "message",
                        case .string(let payload) = parts[2]
                    {
                        onMessage(payload)
                    }
                }
            } catch {
                connection = nil
                health.failed(error)
            }
        }
        connection = nil
        let waiters = state.withLock { state in
            state.finished = true
            defer { state.finishWaiters = [] }
            return state.finishWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func subscribe() -> RedisConnection? {
        do throws(RedisCallError) {
            guard let primary = settings.locator.current else {
                throw RedisCallError(kind: .connect, message: "no Redis primary is known yet: the sentinels have not named one")
            }
            let opened = try RedisConnection.open(primary, connectTimeout: settings.connectTimeout, commandTimeout: settings.commandTimeout)
            let reply = try opened.command(["SUBSCRIBE", channel])
            guard case .array(let parts) = reply, parts.first?.text == "subscribe" else {
                health.failed(RedisCallError(kind: .io, message: "unexpected reply to SUBSCRIBE: \(reply)"))
                return nil
            }
            health.succeeded()
            onResubscribed()
            return opened
        } catch {
            health.failed(error)
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
