// ConfigUpdater keeps the prefetch config current without restarts, and never lets a bad push or a flapping config
// server take prefetching down: a file or URL primary, a fallback URL, a fatigue window, coalesced checks, an
// atomic swap and a last-good copy on disk.
// Design notes: docs/design/config-updater.md
public import CoreMetrics
import Foundation
public import Logging
public import PrefetchCore
public import PrefetchFetcher
public import ServiceLifecycle
import Synchronization
import UnixSignals

/// Loads the prefetch config, keeps it current, and serves it to readers.
///
/// See the design notes at the top of this file. Metric names: `prefetch_config_checks_total{outcome}` (outcome
/// from ``CheckOutcome``), `prefetch_config_errors_total{source,reason}` (reason from ``ConfigCheckErrorCode``),
/// `prefetch_config_loaded_timestamp_seconds`, `prefetch_config_consecutive_abnormal`,
/// `prefetch_config_active_source{source="primary|fallback|last-good"}` and `prefetch_config_ready`.
public final class ConfigUpdater: Service, Sendable {
    /// The settings this updater was created with.
    public let settings: ConfigSourceSettings
    /// The primary source, classified.
    public let primary: ConfigSource

    let fetcher: Fetcher?
    let logger: Logger
    let onApply: (@Sendable (AppliedConfig) async -> Void)?
    let metrics: ConfigMetrics
    let files = BlockingFileIO()
    /// The fatigue window and the polling interval are measured on this clock.
    let clock: any ServiceClock
    /// The served configs (the active one, and a candidate during a rollout). Only written while `state` is
    /// locked (lock order: `state`, then `box`).
    let box = Mutex<ServedConfigs?>(nil)
    let state: Mutex<UpdaterState>

    /// Creates an updater. Nothing is read or fetched until `loadInitial()`, `refresh(trigger:)` or `run()`.
    ///
    /// - Parameters:
    ///   - fetcher: required when the source or the fallback is a URL; its `run()` must be running for checks
    ///     of URLs to finish.
    ///   - onApply: called after each swap (also for the initial load and a last-good load), before the check
    ///     that applied it returns. It must not call `refresh(trigger:)` or `loadInitial()` (that check is still
    ///     in progress, so it would wait for itself).
    /// - Throws: ``ConfigSettingsError`` for settings that cannot work.
    public init(
        settings: ConfigSourceSettings,
        fetcher: Fetcher? = nil,
        logger: Logger,
        metricsFactory: any MetricsFactory = MetricsSystem.factory,
        clock: any ServiceClock = ContinuousClock(),
        onApply: (@Sendable (AppliedConfig) async -> Void)? = nil
    ) throws(ConfigSettingsError) {
        try settings.validate(hasFetcher: fetcher != nil)
        self.settings = settings
        self.clock = clock
        self.primary = ConfigSource(settings.source)
        self.fetcher = fetcher
        self.logger = logger
        self.onApply = onApply
        self.metrics = ConfigMetrics(factory: metricsFactory)
        self.state = Mutex(
            UpdaterState(
                selector: SourceSelector(threshold: settings.abnormalThreshold, hasFallback: settings.fallbackURL != nil)
            ))
    }

    /// The config being served, or `nil` before the first successful load. Cheap (one short lock, no copying); safe
    /// from any thread or task. The value never changes under the caller: a later swap publishes a new value.
    public var current: PrefetchConfig? {
        box.withLock { $0?.active }
    }

    /// The active config and the candidate beside it, read together (see ``ServedConfigs``); `nil` before the
    /// first successful load.
    public var served: ServedConfigs? {
        box.withLock { $0 }
    }

    /// A snapshot of what is loaded and how the checks are going.
    public func status() -> ConfigStatus {
        state.withLock { makeStatus($0) }
    }

    /// The initial load: checks the sources (falling back to the last-good copy) unless a check has already
    /// finished, and returns the status. Concurrent calls, and a concurrent `run()`, share one check.
    public func loadInitial() async -> ConfigStatus {
        if state.withLock({ $0.checksFinished > 0 }) {
            return status()
        }
        return await refresh(trigger: .start).status
    }

    /// Checks the sources now, unless a URL primary was checked less than `fatigueWindow` ago (then answers
    /// `throttled` without asking anything). Joins a check already in progress instead of starting another.
    public func refresh(trigger: RefreshTrigger) async -> ConfigRefreshResult {
        let entry: ConfigRefreshResult? = await withCheckedContinuation { continuation in
            state.withLock { state in
                if state.checkInProgress {
                    state.waiters.append(continuation)
                    return
                }
                let now = clock.now
                if primary.isRemote, let next = state.nextAllowedCheck, now < next {
                    continuation.resume(
                        returning: ConfigRefreshResult(
                            outcome: .throttled, coalesced: false, errors: [], status: makeStatus(state)))
                    return
                }
                state.checkInProgress = true
                state.windowBeforeCheck = state.nextAllowedCheck
                if primary.isRemote {
                    state.nextAllowedCheck = now.advanced(by: settings.fatigueWindow)
                }
                continuation.resume(returning: nil)
            }
        }
        if let entry {
            if entry.outcome == .throttled {
                metrics.check(.throttled)
                logger.debug(
                    "config refresh throttled",
                    metadata: ["trigger": "\(trigger.rawValue)", "version": "\(entry.status.version ?? "-")"])
            }
            return entry
        }

        let (outcome, errors) = await performCheck(trigger: trigger)
        metrics.check(outcome)
        let (result, waiters) = state.withLock { state in
            state.checkInProgress = false
            if outcome == .interrupted {
                state.nextAllowedCheck = state.windowBeforeCheck
            } else {
                state.checksFinished += 1
            }
            let result = ConfigRefreshResult(
                outcome: outcome, coalesced: false, errors: errors, status: makeStatus(state))
            let waiters = state.waiters
            state.waiters = []
            return (result, waiters)
        }
        var joined = result
        joined.coalesced = true
        for waiter in waiters {
            waiter.resume(returning: joined)
        }
        return result
    }

    /// Runs the initial load, then checks every `interval`, on SIGHUP (when `checksOnHangup`) and on changes of a
    /// file source, until graceful shutdown or cancellation. Never throws for a bad source. Call it once.
    ///
    /// The SIGHUP handler is installed before the initial load, so a SIGHUP never takes its default action (exit)
    /// while `run()` is running; one that arrives during the initial load is answered after it.
    public func run() async throws {
        for source in [settings.source, settings.fallbackURL].compactMap({ $0 }) where source.lowercased().hasPrefix("http://") {
            logger.warning(
                "config source is plain http://: anyone on the path can change the config the service follows; prefer https://",
                metadata: ["source": "\(ConfigSource(source))"])
        }
        let watchedPath: String? = if case .file(let path) = primary { path } else { nil }
        // Snapshot before the initial load, so a change made during it is noticed at the first poll.
        let initialSignature: FileSignature? = if let watchedPath { await files.signature(of: watchedPath) } else { nil }
        let hangups: UnixSignalsSequence? = settings.checksOnHangup ? await UnixSignalsSequence(trapping: .sighup) : nil
        let initial = await loadInitial()
        if !initial.ready {
            logger.error(
                "no prefetch config loaded; serving nothing until a source answers",
                metadata: ["reason": "\(initial.notReadyReason ?? "-")"])
        }
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.intervalLoop() }
                if let watchedPath {
                    group.addTask { await self.watchLoop(path: watchedPath, signature: initialSignature) }
                }
                if let hangups {
                    group.addTask { await self.hangupLoop(hangups) }
                }
                await group.waitForAll()
            }
        }
    }

    private func intervalLoop() async {
        while !Task.isCancelled {
            do {
                try await clock.sleep(until: clock.now.advanced(by: settings.interval), tolerance: nil)
            } catch {
                return
            }
            _ = await refresh(trigger: .interval)
        }
    }

    private func watchLoop(path: String, signature initial: FileSignature?) async {
        var signature = initial
        while !Task.isCancelled {
            do {
                try await clock.sleep(until: clock.now.advanced(by: settings.fileWatchInterval), tolerance: nil)
            } catch {
                return
            }
            let now = await files.signature(of: path)
            if now != signature {
                signature = now
                logger.debug("config file changed", metadata: ["path": "\(path)"])
                _ = await refresh(trigger: .fileChanged)
            }
        }
    }

    private func hangupLoop(_ signals: UnixSignalsSequence) async {
        for await _ in signals {
            logger.info("SIGHUP: checking the prefetch config")
            _ = await refresh(trigger: .signal)
        }
    }
}

/// Everything the updater tracks besides the served config; guarded by `ConfigUpdater.state`.
struct UpdaterState {
    var selector: SourceSelector
    var checkInProgress = false
    var waiters: [CheckedContinuation<ConfigRefreshResult?, Never>] = []
    var checksFinished = 0
    /// A URL primary is not checked again before this instant.
    var nextAllowedCheck: ContinuousClock.Instant?
    /// Restored when a check is interrupted, so a cancelled caller does not use up the window.
    var windowBeforeCheck: ContinuousClock.Instant?
    /// With a file primary, the fallback URL is not asked again before this instant.
    var nextAllowedFallback: ContinuousClock.Instant?
    var active = ActiveSource.none
    var loadedAt: Date?
    var lastCheckAt: Date?
    var lastCheckOutcome: CheckOutcome?
    var lastCheckTrigger: RefreshTrigger?
    var lastError: ConfigCheckError?
    var lastErrorAt: Date?
    var notLoadedReason: String?
    /// The versions of the last document applied from a source (or the last-good copy).
    var sourceVersions: DocumentVersions?
    /// An operator's promote or rollback, standing until the source's versions change.
    var decision: CanaryDecision?
}

extension ConfigUpdater {
    /// Builds the status; call with `state` locked.
    func makeStatus(_ state: UpdaterState) -> ConfigStatus {
        let served = box.withLock { $0 }
        let config = served?.active
        var nextAllowed: Date?
        if let next = state.nextAllowedCheck {
            let remaining = clock.now.duration(to: next)
            if remaining > .zero {
                nextAllowed = Date().addingTimeInterval(remaining.seconds)
            }
        }
        let notReadyReason: String? =
            if config != nil { nil } else if state.checksFinished == 0 && state.notLoadedReason == nil {
                "the initial config load has not finished"
            } else { state.notLoadedReason ?? "no config loaded" }
        return ConfigStatus(
            name: config?.name, version: config?.version, pageCount: config?.pages.count, source: primary.description,
            fallbackSource: settings.fallbackURL.map { ConfigSource.url($0).description }, active: state.active,
            fallbackEngaged: state.selector.fallbackEngaged, loadedAt: state.loadedAt,
            lastCheckAt: state.lastCheckAt, lastCheckOutcome: state.lastCheckOutcome,
            lastCheckTrigger: state.lastCheckTrigger, consecutiveAbnormal: state.selector.consecutiveAbnormal,
            lastError: state.lastError?.message, lastErrorCode: state.lastError?.code, lastErrorAt: state.lastErrorAt,
            nextAllowedCheckAt: nextAllowed, ready: config != nil, notReadyReason: notReadyReason,
            canary: served?.canary.map(CanaryStatus.init), canaryDecision: state.decision.map(CanaryDecisionStatus.init))
    }
}

extension Duration {
    /// The duration in seconds as a floating-point number.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
