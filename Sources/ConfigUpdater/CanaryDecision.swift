import Foundation
import Logging
public import PrefetchCore
import Synchronization

// Canary configs: a candidate served beside the active config to a share of users (`canary` in the source
// document, see ``CanaryConfig``), promoted or rolled back by the source's next document or by an operator. Which
// caller gets which, and what a promote or rollback serves, is ``ServedConfigs`` (PrefetchCore); this file keeps
// the operator's decisions and how they show in the status.
// Design notes: docs/design/config-updater.md ("Canary configs").

/// What makes two documents the same for a check: the active version, the candidate's version and its share.
/// A check applies a document only when these differ from what is served, so ramping a canary's percent is
/// applied like a new version.
struct DocumentVersions: Sendable, Hashable {
    var active: String
    var candidate: String?
    var basisPoints: Int

    init(_ loaded: LoadedConfig) {
        active = loaded.config.version
        candidate = loaded.canary?.config.version
        basisPoints = loaded.canary?.basisPoints ?? 0
    }

    init(_ served: ServedConfigs) {
        active = served.active.version
        candidate = served.canary?.config.version
        basisPoints = served.canary?.basisPoints ?? 0
    }

    /// Whether `other` carries the same versions (its share may differ).
    func sameVersions(as other: DocumentVersions) -> Bool {
        active == other.active && candidate == other.candidate
    }
}

/// An operator's decision about a canary.
public enum CanaryAction: String, Sendable, Codable, CaseIterable {
    /// The candidate became the active config.
    case promote
    /// The candidate was dropped.
    case rollback
}

/// An operator's decision, and the source document it overruled: it stands until the source serves other versions.
struct CanaryDecision: Sendable {
    var action: CanaryAction
    var source: DocumentVersions
    var at: Date
}

/// Why a promote or rollback was refused. `code` is stable (an API error code).
public struct CanaryActionError: Error, Sendable, CustomStringConvertible {
    /// `no-canary` (nothing to promote or roll back) or `not-ready` (no config loaded).
    public var code: FailureCode
    /// What was wrong.
    public var message: String

    public var description: String { message }
}

/// The candidate in ``ConfigStatus``.
public struct CanaryStatus: Sendable, Hashable, Codable {
    /// `canary.data.name`.
    public var name: String
    /// `canary.data.version`.
    public var version: String
    /// The share of identified callers served the candidate, 0-100.
    public var percent: Double
    /// The number of pages in the candidate.
    public var pageCount: Int

    init(_ canary: CanaryConfig) {
        name = canary.config.name
        version = canary.config.version
        percent = canary.percent
        pageCount = canary.config.pages.count
    }
}

/// An operator's standing decision in ``ConfigStatus``.
public struct CanaryDecisionStatus: Sendable, Hashable, Codable {
    /// `promote` or `rollback`.
    public var action: CanaryAction
    /// When it was taken, ISO 8601.
    public var at: String
    /// The source document's `data.version` it overruled; a source document with other versions ends it.
    public var sourceVersion: String
    /// The source document's `canary.data.version` it overruled.
    public var sourceCanaryVersion: String?

    init(_ decision: CanaryDecision) {
        action = decision.action
        at = ConfigStatus.dateStyle.format(decision.at)
        sourceVersion = decision.source.active
        sourceCanaryVersion = decision.source.candidate
    }
}

extension ConfigUpdater {
    /// Makes the candidate the active config and ends the rollout, then tells `onApply`. The decision stands
    /// while the source serves the document it overruled (same `data.version` and `canary.data.version`); a
    /// source document with other versions is applied as usual and ends it. Kept in memory only: a restart
    /// follows the source (or the last-good copy) again.
    ///
    /// - Throws: ``CanaryActionError`` `no-canary` when no candidate is served, `not-ready` without a config.
    public func promoteCanary() async throws(CanaryActionError) -> ConfigStatus {
        try await decide(.promote)
    }

    /// Drops the candidate: every caller gets the active config again. Stands like ``promoteCanary()``.
    ///
    /// - Throws: ``CanaryActionError`` `no-canary` when no candidate is served, `not-ready` without a config.
    public func rollbackCanary() async throws(CanaryActionError) -> ConfigStatus {
        try await decide(.rollback)
    }

    private func decide(_ action: CanaryAction) async throws(CanaryActionError) -> ConfigStatus {
        let now = Date()
        let outcome = state.withLock { state -> Result<(previous: ServedConfigs, next: ServedConfigs), CanaryActionError> in
            guard let served = box.withLock({ $0 }) else {
                return .failure(CanaryActionError(code: .notReady, message: "no config is loaded"))
            }
            guard let next = action == .promote ? served.promoted : served.rolledBack else {
                return .failure(
                    CanaryActionError(
                        code: .noCanary,
                        message: "no candidate config is served beside version \(served.active.version): nothing to \(action.rawValue)"))
            }
            box.withLock { $0 = next }
            state.decision = CanaryDecision(action: action, source: state.sourceVersions ?? DocumentVersions(served), at: now)
            state.loadedAt = now
            return .success((served, next))
        }
        let (previous, next) = try outcome.get()
        metrics.canary(basisPoints: nil)
        metrics.loaded(atEpochSeconds: now.timeIntervalSince1970)
        metrics.versions(active: next.active.version, candidate: next.canary?.config.version)
        logger.notice(
            "canary \(action == .promote ? "promoted" : "rolled back")",
            metadata: [
                "version": "\(next.active.version)", "previous_version": "\(previous.active.version)",
                "canary_version": "\(previous.canary?.config.version ?? "-")",
            ])
        let origin = state.withLock { $0.active }
        await onApply?(
            AppliedConfig(config: next.active, previous: previous.active, origin: origin, appliedAt: now, warnings: []))
        return status()
    }
}
