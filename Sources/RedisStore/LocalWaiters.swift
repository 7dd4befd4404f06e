import Synchronization

/// The readers of this replica waiting on flights, by key digest, so an announcement (from pub/sub or from a
/// completion on this replica) wakes exactly the readers of that key. Every reader is a `PageRead`, called back
/// with the announced value when one travelled with the announcement.
final class LocalWaiters: Sendable {
    typealias Waiter = @Sendable ([UInt8]?) -> Void

    private let waiters = Mutex<[String: [UInt64: Waiter]]>([:])
    private let nextID = Atomic<UInt64>(0)

    /// Registers `call` for wake-ups of `digest`; returns the id ``unregister(_:id:)`` takes. `call` must not block.
    func register(_ digest: String, call: @escaping Waiter) -> UInt64 {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        waiters.withLock { $0[digest, default: [:]][id] = call }
        return id
    }

    func unregister(_ digest: String, id: UInt64) {
        waiters.withLock { waiters in
            waiters[digest]?[id] = nil
            if waiters[digest]?.isEmpty == true { waiters[digest] = nil }
        }
    }

    func notify(_ digest: String, payload: [UInt8]? = nil) {
        let woken = waiters.withLock { $0[digest].map { Array($0.values) } ?? [] }
        for wake in woken { wake(payload) }
    }

    /// Wakes every reader so it checks Redis again (announcements may have been missed).
    func notifyAll() {
        let woken = waiters.withLock { $0.values.flatMap(\.values) }
        for wake in woken { wake(nil) }
    }

    var count: Int { waiters.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
