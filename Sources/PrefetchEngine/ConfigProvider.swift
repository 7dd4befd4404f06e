public import ConfigUpdater
public import PrefetchCore

/// Where the engine gets its config: the one place a caller's config comes from. A live service reads the
/// `ConfigUpdater` (which follows a file or URL, with its canary); a fixed config (tests, `prefetch plan`) is a
/// ``ConfigHolder``. Which of the served configs a caller gets is decided by `ServedConfigs.config(forIdentityDigest:)`.
public protocol ConfigProvider: Sendable {
    /// The active config, nil until a valid one is loaded.
    var current: PrefetchConfig? { get }
    /// The active config and a canary candidate beside it, nil until a valid one is loaded.
    var served: ServedConfigs? { get }
}

extension ConfigUpdater: ConfigProvider {}

extension ConfigHolder: ConfigProvider {
    /// The held config alone: a fixed config has no canary.
    public var served: ServedConfigs? { current.map { ServedConfigs(active: $0) } }
}
