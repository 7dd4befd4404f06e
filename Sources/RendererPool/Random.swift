import PrefetchCore
import Synchronization

/// A small seedable random number generator (SplitMix64), so tests can replay the modelled failures, deaths
/// and lifetime jitter exactly.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator; the same seed yields the same sequence.
    public init(seed: UInt64) {
        self.state = seed
    }

    /// Returns the next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

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
