import PrefetchCore
import PrefetchStore
import Synchronization

/// The readers of this replica waiting on flights, by key digest, so an announcement (from pub/sub or from a
/// completion on this replica) wakes exactly the readers of that key. A reader in a task waits on a `Wakeup`; a read
/// made without a task (`RedisStore.read(_:canWait:notify:)`) is called back instead.
final class LocalWaiters: Sendable {
    /// How a waiting reader is woken, with the announced value when one travelled with the announcement.
    enum Waiter: Sendable {
        case wakeup(Wakeup<[UInt8]>)
        case callback(@Sendable ([UInt8]?) -> Void)

        func wake(_ payload: [UInt8]?) {
            switch self {
            case .wakeup(let signal): signal.signal(payload)
            case .callback(let call): call(payload)
            }
        }
    }

    struct Registration: Sendable {
        let digest: String
        let id: UInt64
        let signal: Wakeup<[UInt8]>
    }

    private let waiters = Mutex<[String: [UInt64: Waiter]]>([:])
    private let nextID = Atomic<UInt64>(0)

    func register(_ digest: String) -> Registration {
        let signal = Wakeup<[UInt8]>()
        return Registration(digest: digest, id: add(digest, .wakeup(signal)), signal: signal)
    }

    /// Registers `call` for wake-ups of `digest`; returns the id ``unregister(_:id:)`` takes. `call` must not block.
    func register(_ digest: String, call: @escaping @Sendable ([UInt8]?) -> Void) -> UInt64 {
        add(digest, .callback(call))
    }

    private func add(_ digest: String, _ waiter: Waiter) -> UInt64 {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        waiters.withLock { $0[digest, default: [:]][id] = waiter }
        return id
    }

    func unregister(_ registration: Registration) {
        unregister(registration.digest, id: registration.id)
    }

    func unregister(_ digest: String, id: UInt64) {
        waiters.withLock { waiters in
            waiters[digest]?[id] = nil
            if waiters[digest]?.isEmpty == true { waiters[digest] = nil }
        }
    }

    func notify(_ digest: String, payload: [UInt8]? = nil) {
        let woken = waiters.withLock { $0[digest].map { Array($0.values) } ?? [] }
        for waiter in woken { waiter.wake(payload) }
    }

    /// Wakes every reader so it checks Redis again (announcements may have been missed).
    func notifyAll() {
        let woken = waiters.withLock { $0.values.flatMap(\.values) }
        for waiter in woken { waiter.wake(nil) }
    }

    var count: Int { waiters.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
