import Digests

/// What a config source serves at one moment: the active config and, during a rollout, a candidate beside it; and
/// which of the two each caller gets.
///
/// Where a caller gets its config:
/// 1. A source publishes one `ServedConfigs` at a time, which the engine reads through its `ConfigProvider`:
///    `ConfigUpdater.served` (a file or URL followed live, a document's `canary` member as ``canary``), or a
///    `ConfigHolder`'s fixed config with no candidate. The value is swapped whole, so a reader never sees the
///    active config of one document with another's candidate; an operator's promote or rollback publishes
///    ``promoted`` or ``rolledBack``.
/// 2. Each trigger reads the value once and asks ``config(forIdentityDigest:)`` with the caller's keyed identity
///    (`Orchestrator.selectConfig(for:)` in the engine). The answer is an immutable config and its ``ConfigRole``:
///    the page is planned with it, and its ticket keeps the role for the per-version metrics.
/// 3. Callers with nothing to assign (readiness, `/v1/plan`, the landing page) use ``active``.
///
/// Assignment: an identified caller's bucket is the first 8 bytes (big-endian) of
/// SHA-256(`prefetch-canary-v1` 0x00 candidate version 0x00 identity digest), modulo ``buckets``; it gets the
/// candidate when the bucket is below the candidate's share in hundredths of a percent. The identity digest is
/// already an HMAC keyed per deployment, so buckets cannot be computed from credentials outside it; salting by the
/// candidate's version reshuffles who is in each rollout, while the same identity keeps its version for as long as
/// one stands, and raising the share keeps everyone already in it.
///
/// Anonymous callers always get the active config: their responses are shared by every anonymous page open of the
/// same URL, and without credentials there is nothing stable to bucket by (client addresses change on mobile
/// networks and are shared behind proxies and NAT), so splitting them would hand one visitor both versions.
public struct ServedConfigs: Sendable {
    /// The config every caller not assigned to the candidate gets.
    public var active: PrefetchConfig
    /// The candidate and its share, when a rollout is under way.
    public var canary: CanaryConfig?

    /// The active config and an optional candidate.
    public init(active: PrefetchConfig, canary: CanaryConfig? = nil) {
        self.active = active
        self.canary = canary
    }

    /// A loaded document's configs.
    public init(_ loaded: LoadedConfig) {
        self.init(active: loaded.config, canary: loaded.canary)
    }

    /// The number of buckets (one per hundredth of a percent).
    public static let buckets = 10_000

    /// The config a caller is served now, and which one it is. `identityDigest` is the caller's keyed identity
    /// digest, nil for an anonymous caller (who always gets the active config).
    public func config(forIdentityDigest identityDigest: String?) -> SelectedConfig {
        guard let canary, role(forIdentityDigest: identityDigest) == .candidate else {
            return SelectedConfig(config: active, role: .active)
        }
        return SelectedConfig(config: canary.config, role: .candidate)
    }

    /// Which of the served configs a caller with `identityDigest` (nil: anonymous) gets.
    public func role(forIdentityDigest identityDigest: String?) -> ConfigRole {
        guard let canary, canary.basisPoints > 0, let identityDigest else { return .active }
        return Self.bucket(identityDigest: identityDigest, candidateVersion: canary.config.version) < canary.basisPoints
            ? .candidate : .active
    }

    /// The bucket of an identity for a rollout of the candidate `candidateVersion`, in `0..<buckets`.
    public static func bucket(identityDigest: String, candidateVersion: String) -> Int {
        var hasher = SHA256()
        hasher.update(data: Array("prefetch-canary-v1".utf8) + [0] + Array(candidateVersion.utf8) + [0] + Array(identityDigest.utf8))
        let digest = hasher.finalize()
        let prefix = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Int(prefix % UInt64(buckets))
    }

    /// The candidate made the active config, the rollout over; nil when no candidate is served.
    public var promoted: ServedConfigs? {
        canary.map { ServedConfigs(active: $0.config) }
    }

    /// The candidate dropped, every caller back on the active config; nil when no candidate is served.
    public var rolledBack: ServedConfigs? {
        canary == nil ? nil : ServedConfigs(active: active)
    }

    /// Every interface name of both configs (the store keeps their responses across a swap).
    public var interfaceNames: Set<String> {
        active.interfaceNames.union(canary?.config.interfaceNames ?? [])
    }

    /// The api hosts of both configs.
    public var apiHosts: Set<String> {
        active.apiHosts.union(canary?.config.apiHosts ?? [])
    }
}

/// Which of the served configs a caller was planned with. The raw values are the `config` label of the
/// per-version metrics (never the version string itself, which is unbounded).
public enum ConfigRole: String, Sendable, Hashable, CaseIterable, Codable {
    /// The active config.
    case active
    /// The canary candidate beside it.
    case candidate
}

/// A config chosen for a caller, and which one it is.
public struct SelectedConfig: Sendable {
    /// The config to plan with.
    public var config: PrefetchConfig
    /// Active or candidate.
    public var role: ConfigRole
}
