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
