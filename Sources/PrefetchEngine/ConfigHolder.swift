public import PrefetchCore
import Synchronization

/// The loaded prefetch config, swapped atomically; readers get an immutable value.
public final class ConfigHolder: Sendable {
    private let value: Mutex<PrefetchConfig?>

    /// A holder with `config` (or none yet).
    public init(_ config: PrefetchConfig?) {
        value = Mutex(config)
    }

    /// The config in force now.
    public var current: PrefetchConfig? { value.withLock { $0 } }

    /// Replaces the config; triggers already running keep the plan they made.
    public func replace(_ config: PrefetchConfig?) {
        let previous = value.withLock { current in
            let previous = current
            current = config
            return previous
        }
        // Released here, after the lock: a reader never waits for a 10,000-page config's teardown.
        _ = previous
    }
}
