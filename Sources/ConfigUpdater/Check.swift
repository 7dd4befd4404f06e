import Foundation
import HTTPTypes
import Logging
import PrefetchCore
import PrefetchFetcher
import Synchronization

/// One source's answer to a check.
enum SourceAnswer: Sendable {
    /// A valid config with code 200, and its raw bytes.
    case normal(LoadedConfig, bytes: [UInt8])
    /// Anything else.
    case abnormal(ConfigCheckError)
    /// The asking task was cancelled, or the fetcher is shutting down: the source did not answer.
    case interrupted
}

extension ConfigUpdater {
    /// Performs one check; the caller holds the "check in progress" flag.
    func performCheck(trigger: RefreshTrigger) async -> (CheckOutcome, [ConfigCheckError]) {
        let loadedVersions = box.withLock { $0.map(DocumentVersions.init) }
        var errors: [ConfigCheckError] = []
        var normal: (origin: ActiveSource, config: LoadedConfig, bytes: [UInt8])?

        let primaryAnswer = await ask(primary)
        let next: SourceSelector.Next
        switch primaryAnswer {
        case .interrupted:
            return (.interrupted, [])
        case .normal(let config, let bytes):
            normal = (.primary, config, bytes)
            next = state.withLock { $0.selector.primaryAnswered(normal: true) }
        case .abnormal(let error):
            errors.append(error)
            note(error, role: "primary")
            next = state.withLock { $0.selector.primaryAnswered(normal: false) }
        }

        if next == .askFallback, let fallbackURL = settings.fallbackURL {
            let allowed = state.withLock { state in
                // A URL primary is already bounded by the window; a file primary must not hammer the CDN.
                guard !primary.isRemote else { return true }
                let now = clock.now
                if let until = state.nextAllowedFallback, now < until { return false }
                state.nextAllowedFallback = now.advanced(by: settings.fatigueWindow)
                return true
            }
            if allowed {
                switch await ask(.url(fallbackURL)) {
                case .interrupted:
                    return (.interrupted, errors)
                case .normal(let config, let bytes):
                    normal = (.fallback, config, bytes)
                case .abnormal(let error):
                    errors.append(error)
                    note(error, role: "fallback")
                }
            } else {
                logger.debug("fallback not asked: inside the fatigue window", metadata: ["fallback": "\(ConfigSource.url(fallbackURL))"])
            }
        }

        let outcome: CheckOutcome
        if let normal {
            let incoming = DocumentVersions(normal.config)
            let decided = state.withLock { state in
                // An operator's promote or rollback stands while the source serves the versions it overruled.
                if let decision = state.decision, decision.source.sameVersions(as: incoming) { return true }
                state.decision = nil
                return false
            }
            if decided || incoming == loadedVersions {
                outcome = normal.origin == .primary ? .unchanged : .fallbackUnchanged
                state.withLock { $0.active = normal.origin }
            } else {
                await apply(normal.config, bytes: normal.bytes, origin: normal.origin)
                outcome = normal.origin == .primary ? .applied : .fallbackApplied
            }
        } else if loadedVersions == nil, await loadLastGood(errors: errors) {
            outcome = .lastGood
        } else {
            outcome = .abnormal
        }

        let (active, abnormalCount) = state.withLock { state in
            state.lastCheckAt = Date()
            state.lastCheckOutcome = outcome
            state.lastCheckTrigger = trigger
            if let first = errors.first {
                state.lastError = first
                state.lastErrorAt = Date()
            }
            return (state.active, state.selector.consecutiveAbnormal)
        }
        metrics.state(active: active, consecutiveAbnormal: abnormalCount)
        logger.debug(
            "config check finished",
            metadata: [
                "trigger": "\(trigger.rawValue)", "outcome": "\(outcome.rawValue)", "active": "\(active.rawValue)",
                "consecutive_abnormal": "\(abnormalCount)",
            ])
        return (outcome, errors)
    }

    /// Logs and counts one abnormal answer.
    private func note(_ error: ConfigCheckError, role: String) {
        metrics.error(role: role, error.code)
        logger.warning(
            "abnormal config answer; the loaded config keeps serving",
            metadata: ["source": "\(role)", "reason": "\(error.code.rawValue)", "error": "\(error.message)"])
    }

    /// Asks one source and classifies its answer.
    func ask(_ source: ConfigSource) async -> SourceAnswer {
        switch source {
        case .file(let path):
            switch await files.readContents(path) {
            case .failure(let error): return .abnormal(error)
            case .success(let bytes): return await classify(bytes, source: path)
            }
        case .url(let url):
            // Every message and status names the URL redacted: its query may carry the config server's token.
            let shown = source.description
            guard let fetcher else {
                return .abnormal(ConfigCheckError(code: .transfer, source: shown, message: "\(shown): no fetcher configured"))
            }
            let request = FetchRequest(
                method: "GET", url: url, headers: [.accept: "application/json"],
                timeout: settings.requestTimeout, maxResponseBytes: ConfigLoader.maximumBytes)
            let response: FetchResponse
            do {
                response = try await fetcher.fetch(request)
            } catch {
                if error.code == .cancelled || error.code == .shutdown { return .interrupted }
                return .abnormal(
                    ConfigCheckError(
                        code: .transfer, source: shown, message: "\(shown): fetch failed: \(Redaction.text(error.description))"))
            }
            guard (200..<300).contains(response.status) else {
                return .abnormal(
                    ConfigCheckError(
                        code: .httpStatus, source: shown, message: "\(shown): HTTP status \(response.status), not 2xx"))
            }
            return await classify(response.body, source: shown)
        }
    }

    /// Validates a body in full, off the cooperative pool.
    func classify(_ bytes: [UInt8], source: String) async -> SourceAnswer {
        await files.compute { Self.classifyNow(bytes, source: source) }
    }

    static func classifyNow(_ bytes: [UInt8], source: String) -> SourceAnswer {
        do {
            return .normal(try ConfigLoader.parse(bytes, source: source), bytes: bytes)
        } catch {
            if let codeProblem = error.problems.first(where: { $0.path == "code" }) {
                return .abnormal(
                    ConfigCheckError(code: .remoteCode, source: source, message: "\(source): code \(codeProblem.message)"))
            }
            let shown = error.problems.prefix(5).map(\.description).joined(separator: "; ")
            let more = error.problems.count > 5 ? " (and \(error.problems.count - 5) more)" : ""
            return .abnormal(
                ConfigCheckError(code: .invalid, source: source, message: "\(source): invalid config: \(shown)\(more)"))
        }
    }

    /// Makes `loaded` current, keeps its bytes as the last-good copy (unless it is that copy) and tells `onApply`.
    func apply(_ loaded: LoadedConfig, bytes: [UInt8], origin: ActiveSource) async {
        let appliedAt = Date()
        let previous = state.withLock { state in
            let previous = box.withLock { box in
                let previous = box
                box = ServedConfigs(loaded)
                return previous
            }
            state.sourceVersions = DocumentVersions(loaded)
            state.decision = nil
            state.active = origin
            state.loadedAt = appliedAt
            state.notLoadedReason = nil
            return previous
        }
        metrics.loaded(atEpochSeconds: appliedAt.timeIntervalSince1970)
        metrics.canary(basisPoints: loaded.canary?.basisPoints)
        metrics.versions(active: loaded.config.version, candidate: loaded.canary?.config.version)
        logger.notice(
            "prefetch config applied",
            metadata: [
                "name": "\(loaded.config.name)", "version": "\(loaded.config.version)",
                "previous_version": "\(previous?.active.version ?? "-")", "origin": "\(origin.rawValue)",
                "canary_version": "\(loaded.canary?.config.version ?? "-")", "canary_percent": "\(loaded.canary?.percentText ?? "-")",
                "pages": "\(loaded.config.pages.count)", "interfaces": "\(loaded.config.interfaceCount)",
            ])
        for warning in loaded.warnings.prefix(20) {
            logger.info("config warning", metadata: ["version": "\(loaded.config.version)", "warning": "\(warning)"])
        }
        if origin != .lastGood, let path = settings.lastGoodPath, let directory = settings.stateDirectory {
            if let failure = await files.writeAtomically(bytes, to: path, directory: directory) {
                logger.error("cannot keep the last-good config copy", metadata: ["error": "\(failure)"])
            }
        }
        await onApply?(
            AppliedConfig(
                config: loaded.config, previous: previous?.active, origin: origin, appliedAt: appliedAt,
                warnings: loaded.warnings, canary: loaded.canary))
    }

    /// Loads the last-good copy when nothing is loaded and no source answered; records why not otherwise.
    func loadLastGood(errors: [ConfigCheckError]) async -> Bool {
        let sources = errors.map(\.message).joined(separator: "; ")
        let lastGood: String
        if let path = settings.lastGoodPath {
            switch await files.readContents(path) {
            case .failure:
                lastGood = "no last-good copy at \(path)"
            case .success(let bytes):
                switch await classify(bytes, source: path) {
                case .normal(let config, let bytes):
                    logger.warning(
                        "no config source answered; serving the last-good copy",
                        metadata: ["path": "\(path)", "version": "\(config.config.version)", "errors": "\(sources)"])
                    await apply(config, bytes: bytes, origin: .lastGood)
                    return true
                case .abnormal(let error):
                    metrics.error(role: "last-good", error.code)
                    lastGood = "the last-good copy is unusable: \(error.message)"
                case .interrupted:
                    lastGood = "the last-good copy was not read"
                }
            }
        } else {
            lastGood = "no state directory for a last-good copy"
        }
        let reason = "no config loaded: \(sources.isEmpty ? "no source answered normally" : sources); \(lastGood)"
        state.withLock { $0.notLoadedReason = reason }
        return false
    }
}
