/// A small seedable random number generator (SplitMix64), so a run can be replayed from its seed: the modelled
/// renderers' failures, deaths and lifetime jitter, and the tests' randomized inputs. Never for anything an outsider
/// must not guess (`RandomID` draws from the system generator).
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
