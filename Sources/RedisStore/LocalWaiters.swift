import PrefetchCore
import PrefetchStore
import Synchronization

/// The readers of this replica waiting on flights, by key digest, so an announcement (from pub/sub or from a
/// completion on this replica) wakes exactly the readers of that key.
final class LocalWaiters: Sendable {
    struct Registration: Sendable {
        let digest: String
        let id: UInt64
        let signal: Wakeup<[UInt8]>
    }

    private let waiters = Mutex<[String: [UInt64: Wakeup<[UInt8]>]]>([:])
    private let nextID = Atomic<UInt64>(0)

    func register(_ digest: String) -> Registration {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let signal = Wakeup<[UInt8]>()
        waiters.withLock { $0[digest, default: [:]][id] = signal }
        return Registration(digest: digest, id: id, signal: signal)
    }

    func unregister(_ registration: Registration) {
        waiters.withLock { waiters in
            waiters[registration.digest]?[registration.id] = nil
            if waiters[registration.digest]?.isEmpty == true { waiters[registration.digest] = nil }
        }
    }

    func notify(_ digest: String, payload: [UInt8]? = nil) {
        let signals = waiters.withLock { $0[digest].map { Array($0.values) } ?? [] }
        for signal in signals { signal.signal(payload) }
    }

    /// Wakes every reader so it checks Redis again (announcements may have been missed).
    func notifyAll() {
        let signals = waiters.withLock { $0.values.flatMap(\.values) }
        for signal in signals { signal.signal() }
    }

    var count: Int { waiters.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
