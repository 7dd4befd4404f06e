import CoreMetrics
import Crypto
public import PrefetchCore
public import PrefetchStore

/// Which of the served configs a trigger was planned with. The raw values are the `config` label of the
/// per-version metrics (never the version string itself, which is unbounded).
public enum ConfigRole: String, Sendable, Hashable, CaseIterable, Codable {
    /// The active config.
    case active
    /// The canary candidate beside it.
    case candidate
}

/// The stable assignment of callers to the active config or a canary candidate.
///
/// An identified caller's bucket is the first 8 bytes (big-endian) of
/// SHA-256(`prefetch-canary-v1` 0x00 candidate version 0x00 identity digest), modulo 10,000; it gets the candidate
/// when the bucket is below the candidate's share in hundredths of a percent. The identity digest is already an
/// HMAC keyed per deployment, so buckets cannot be computed from credentials outside it; salting by the candidate's
/// version reshuffles who is in each rollout, while the same identity keeps its version for as long as one stands.
///
/// Anonymous callers always get the active config: their responses are shared by every anonymous page open of the
/// same URL, and without credentials there is nothing stable to bucket by (client addresses change on mobile
/// networks and are shared behind proxies and NAT), so splitting them would hand one visitor both versions.
public enum CanaryAssignment {
    /// The number of buckets (one per hundredth of a percent).
    public static let buckets = 10_000

    /// The bucket of `identity` for a rollout of the candidate `candidateVersion`, in `0..<buckets`.
    public static func bucket(identity: Identity, candidateVersion: String) -> Int {
        var hasher = SHA256()
        hasher.update(data: Array("prefetch-canary-v1".utf8) + [0] + Array(candidateVersion.utf8) + [0] + Array(identity.digest.utf8))
        let digest = Array(hasher.finalize())
        let prefix = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Int(prefix % UInt64(buckets))
    }

    /// The config `identity` gets while `canary` stands (the active one without a canary, and for anonymous callers).
    public static func role(identity: Identity, canary: CanaryConfig?) -> ConfigRole {
        guard let canary, canary.basisPoints > 0, identity != .anonymous else { return .active }
        return bucket(identity: identity, candidateVersion: canary.config.version) < canary.basisPoints ? .candidate : .active
    }
}

/// A config chosen for a caller, and which one it is.
public struct SelectedConfig: Sendable {
    /// The config to plan with.
    public var config: PrefetchConfig
    /// Active or candidate.
    public var role: ConfigRole
}

extension Orchestrator {
    /// The config `identity` is served now: the canary candidate for its share of identified callers, else the
    /// active config (see ``CanaryAssignment``).
    public func selectConfig(for identity: Identity) throws(PrefetchError) -> SelectedConfig {
        guard let served = servedConfigs() else { throw .notReady(reason: "no valid prefetch config is loaded") }
        let role = CanaryAssignment.role(identity: identity, canary: served.canary)
        return SelectedConfig(config: role == .candidate ? served.canary!.config : served.active, role: role)
    }

    /// The plan for `page` under the config `identity` is served, and which config that is.
    public func plan(page: String, identity: Identity) throws(PrefetchError) -> (Plan, ConfigRole) {
        let selected = try selectConfig(for: identity)
        return (try plan(page: page, in: selected.config), selected.role)
    }

    /// The plan for `page` under `config`.
    func plan(page: String, in config: PrefetchConfig) throws(PrefetchError) -> Plan {
        let length = page.utf8.count
        guard length <= settings.maximumPageURLBytes else { throw .pageURLTooLong(length: length, limit: settings.maximumPageURLBytes) }
        do {
            return try Plan.make(page: page, config: config)
        } catch {
            switch error {
            case .invalidPageURL: throw .invalidPageURL(message: error.description)
            case .noMatch: throw .noConfig(message: error.description)
            }
        }
    }
}

extension EngineMetrics {
    /// Counts an accepted trigger and its requests under the config it was planned with:
    /// `prefetch_config_triggers_total{config}` and `prefetch_config_requests_total{config}`.
    func configTrigger(_ role: ConfigRole, requests: Int) {
        counter("prefetch_config_triggers_total", ("config", role.rawValue)).increment()
        counter("prefetch_config_requests_total", ("config", role.rawValue)).increment(by: Int64(requests))
    }

    /// Counts a data read of a ticket planned with `role`'s config: `prefetch_config_data_total{config, result}`,
    /// `result` being `hit`, `joined` or `miss` (every answer that is not the response: pending, failed, a miss reason).
    public func configData(_ role: ConfigRole, result: String) {
        let bounded = result == "hit" || result == "joined" ? result : "miss"
        counter("prefetch_config_data_total", ("config", role.rawValue), ("result", bounded)).increment()
    }

    /// Counts the requests of a ticket leaving the registry that were never served to a reader:
    /// `prefetch_config_unread_total{config}`, the wasted prefetches per version.
    public func ticketLeft(_ ticket: Ticket) {
        let unread = ticket.unreadCount
        guard unread > 0 else { return }
        counter("prefetch_config_unread_total", ("config", ticket.role.rawValue)).increment(by: Int64(unread))
    }

    /// Creates the per-version series at zero, so dashboards see both versions before the first event.
    func registerConfigSeries() {
        for role in ConfigRole.allCases {
            _ = counter("prefetch_config_triggers_total", ("config", role.rawValue))
            _ = counter("prefetch_config_requests_total", ("config", role.rawValue))
            _ = counter("prefetch_config_unread_total", ("config", role.rawValue))
            for result in ["hit", "joined", "miss"] {
                _ = counter("prefetch_config_data_total", ("config", role.rawValue), ("result", result))
            }
        }
    }
}
