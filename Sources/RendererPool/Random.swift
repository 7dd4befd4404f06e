import PrefetchCore
import Synchronization

/// A generator shared between tasks; seeded when a seed is given, otherwise from the system generator.
final class SharedRandom: Sendable {
    private let generator: Mutex<SeededRandom>

    init(seed: UInt64?) {
        var system = SystemRandomNumberGenerator()
        generator = Mutex(SeededRandom(seed: seed ?? system.next()))
    }

    /// A uniform value in `0..<1`.
    func unit() -> Double {
        generator.withLock { Double.random(in: 0..<1, using: &$0) }
    }

    /// `true` with the given probability.
    func chance(_ probability: Double) -> Bool {
        probability > 0 && unit() < probability
    }
}

/// Lease ids: the capability to release or destroy a leased renderer, so drawn from the system generator.
enum LeaseID {
    /// 128 random bits as unpadded base64url: 22 characters of `A-Za-z0-9-_` (`RandomID`).
    static func random() -> String {
        RandomID.make()
    }
}
