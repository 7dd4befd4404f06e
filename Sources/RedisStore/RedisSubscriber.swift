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
    private let queue = DispatchQueue(label: "prefetch.redis.subscriber")
    private let state = Mutex(State())

    init(
        settings: ConnectionSettings, channel: String, health: RedisHealthMonitor,
        onMessage: @escaping @Sendable ([UInt8]) -> Void, onResubscribed: @escaping @Sendable () -> Void
    ) {
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
        while !stopRequested {
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
            let opened = try RedisConnection.open(
                settings.endpoint, connectTimeout: settings.connectTimeout, commandTimeout: settings.commandTimeout)
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
