public import Foundation
public import PrefetchCore

/// Why a check was made. Logged and reported in the status; not a metric label.
public enum RefreshTrigger: String, Sendable, Codable, CaseIterable {
    /// The initial load (`loadInitial()` or the start of `run()`).
    case start
    /// The periodic check of `run()`.
    case interval
    /// SIGHUP.
    case signal
    /// A file source changed on disk.
    case fileChanged = "file_changed"
    /// A shell reported an app start.
    case appStart = "app_start"
    /// A shell reported the app came to the foreground.
    case foreground
    /// A shell reported a page open.
    case pageOpen = "page_open"
    /// A shell reported a page exit.
    case pageExit = "page_exit"
    /// An operator asked (e.g. `POST /v1/config/refresh`).
    case manual
}

/// What one refresh did. The raw values are the `outcome` label of `prefetch_config_checks_total`.
public enum CheckOutcome: String, Sendable, Codable, CaseIterable {
    /// The primary served a new version, which is now current.
    case applied
    /// The primary answered normally with the version already loaded.
    case unchanged
    /// The fallback served a new version, which is now current.
    case fallbackApplied = "fallback-applied"
    /// The fallback answered normally with the version already loaded.
    case fallbackUnchanged = "fallback-unchanged"
    /// Nothing was loaded and no source answered normally; the last-good copy was loaded instead.
    case lastGood = "last-good"
    /// No source answered normally; whatever was loaded keeps serving.
    case abnormal
    /// Inside the fatigue window: nothing was asked.
    case throttled
    /// The task performing the check was cancelled before an answer arrived; nothing changed.
    case interrupted
}

/// Where the config being served came from. The raw values appear in the status and as the `source` label of
/// `prefetch_config_active_source`.
public enum ActiveSource: String, Sendable, Codable, CaseIterable {
    /// The configured source.
    case primary
    /// The fallback URL.
    case fallback
    /// The last-good copy in the state directory (loaded at startup while no source answered).
    case lastGood = "last-good"
    /// Nothing is loaded.
    case none
}

/// Why an answer was abnormal. Raw values are safe as metric labels.
public enum ConfigCheckErrorCode: String, Sendable, Codable, CaseIterable {
    /// The transfer failed (connect, timeout, reset, too large, ...).
    case transfer
    /// The HTTP status was not 2xx.
    case httpStatus = "http-status"
    /// The envelope's `code` was not 200.
    case remoteCode = "remote-code"
    /// The body is not a valid config.
    case invalid
    /// A file source (or the last-good copy) could not be read.
    case unreadable
}

/// One abnormal answer: what was asked and what was wrong with the answer.
public struct ConfigCheckError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The category.
    public var code: ConfigCheckErrorCode
    /// The file path or URL asked.
    public var source: String
    /// `<source>: <what was wrong>`, e.g. `https://cfg.example/prefetch.json: code is 500, not 200`.
    public var message: String

    /// Creates an error.
    public init(code: ConfigCheckErrorCode, source: String, message: String) {
        self.code = code
        self.source = source
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

/// A config that was just made current, handed to `onApply`.
public struct AppliedConfig: Sendable {
    /// The config now returned by `current`.
    public var config: PrefetchConfig
    /// The config it replaced (`nil` for the first one).
    public var previous: PrefetchConfig?
    /// Where it came from.
    public var origin: ActiveSource
    /// Wall-clock time of the swap.
    public var appliedAt: Date
    /// Validation warnings of the new config (unknown keys and the like).
    public var warnings: [ConfigProblem]
    /// The candidate served beside ``config`` now, if any.
    public var canary: CanaryConfig? = nil

    /// Both configs now served.
    public var served: ServedConfigs { ServedConfigs(active: config, canary: canary) }
}

/// A snapshot of the updater, for `GET /v1/config` and for logs. Dates encode as ISO 8601 strings.
public struct ConfigStatus: Sendable, Hashable, Codable {
    /// `data.name` of the loaded config.
    public var name: String?
    /// `data.version` of the loaded config.
    public var version: String?
    /// The number of pages in the loaded config.
    public var pageCount: Int?
    /// The configured primary source.
    public var source: String
    /// The configured fallback URL.
    public var fallbackSource: String?
    /// Where the loaded config came from (the source that last answered normally with it).
    public var active: ActiveSource
    /// Whether checks currently also ask the fallback (the primary has been abnormal often enough).
    public var fallbackEngaged: Bool
    /// When the loaded config was applied.
    public var loadedAt: Date?
    /// When the last check (not a throttled refresh) finished.
    public var lastCheckAt: Date?
    /// What the last check did.
    public var lastCheckOutcome: CheckOutcome?
    /// What triggered the last check.
    public var lastCheckTrigger: RefreshTrigger?
    /// Consecutive abnormal answers from the primary.
    public var consecutiveAbnormal: Int
    /// The most recent abnormal answer, kept after recovery (compare ``lastErrorAt`` with ``lastCheckAt``).
    public var lastError: String?
    /// The category of ``lastError``.
    public var lastErrorCode: ConfigCheckErrorCode?
    /// When ``lastError`` happened.
    public var lastErrorAt: Date?
    /// The earliest time a refresh will contact a URL primary again; `nil` when a check may start now or the
    /// primary is a file.
    public var nextAllowedCheckAt: Date?
    /// Whether a config is loaded.
    public var ready: Bool
    /// Why not, when ``ready`` is false.
    public var notReadyReason: String?
    /// The candidate served beside the loaded config, during a rollout.
    public var canary: CanaryStatus?
    /// An operator's promote or rollback that stands until the source's versions change.
    public var canaryDecision: CanaryDecisionStatus?

    enum CodingKeys: String, CodingKey {
        case name, version, pageCount, source, fallbackSource, active, fallbackEngaged, loadedAt, lastCheckAt
        case lastCheckOutcome, lastCheckTrigger, consecutiveAbnormal, lastError, lastErrorCode, lastErrorAt
        case nextAllowedCheckAt, ready, notReadyReason, canary, canaryDecision
    }

    /// Creates a status value.
    public init(
        name: String? = nil, version: String? = nil, pageCount: Int? = nil, source: String,
        fallbackSource: String? = nil, active: ActiveSource = .none, fallbackEngaged: Bool = false,
        loadedAt: Date? = nil, lastCheckAt: Date? = nil, lastCheckOutcome: CheckOutcome? = nil,
        lastCheckTrigger: RefreshTrigger? = nil, consecutiveAbnormal: Int = 0, lastError: String? = nil,
        lastErrorCode: ConfigCheckErrorCode? = nil, lastErrorAt: Date? = nil, nextAllowedCheckAt: Date? = nil,
        ready: Bool = false, notReadyReason: String? = nil, canary: CanaryStatus? = nil,
        canaryDecision: CanaryDecisionStatus? = nil
    ) {
        self.name = name
        self.version = version
        self.pageCount = pageCount
        self.source = source
        self.fallbackSource = fallbackSource
        self.active = active
        self.fallbackEngaged = fallbackEngaged
        self.loadedAt = loadedAt
        self.lastCheckAt = lastCheckAt
        self.lastCheckOutcome = lastCheckOutcome
        self.lastCheckTrigger = lastCheckTrigger
        self.consecutiveAbnormal = consecutiveAbnormal
        self.lastError = lastError
        self.lastErrorCode = lastErrorCode
        self.lastErrorAt = lastErrorAt
        self.nextAllowedCheckAt = nextAllowedCheckAt
        self.ready = ready
        self.notReadyReason = notReadyReason
        self.canary = canary
        self.canaryDecision = canaryDecision
    }

    /// Decodes a status, dates as ISO 8601 strings.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func date(_ key: CodingKeys) throws -> Date? {
            guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return nil }
            do {
                return try Self.dateStyle.parse(text)
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: container, debugDescription: "\"\(text)\" is not an ISO 8601 date")
            }
        }
        name = try container.decodeIfPresent(String.self, forKey: .name)
        version = try container.decodeIfPresent(String.self, forKey: .version)
        pageCount = try container.decodeIfPresent(Int.self, forKey: .pageCount)
        source = try container.decode(String.self, forKey: .source)
        fallbackSource = try container.decodeIfPresent(String.self, forKey: .fallbackSource)
        active = try container.decode(ActiveSource.self, forKey: .active)
        fallbackEngaged = try container.decode(Bool.self, forKey: .fallbackEngaged)
        loadedAt = try date(.loadedAt)
        lastCheckAt = try date(.lastCheckAt)
        lastCheckOutcome = try container.decodeIfPresent(CheckOutcome.self, forKey: .lastCheckOutcome)
        lastCheckTrigger = try container.decodeIfPresent(RefreshTrigger.self, forKey: .lastCheckTrigger)
        consecutiveAbnormal = try container.decode(Int.self, forKey: .consecutiveAbnormal)
        lastError = try container.decodeIfPresent(String.self, forKey: .lastError)
        lastErrorCode = try container.decodeIfPresent(ConfigCheckErrorCode.self, forKey: .lastErrorCode)
        lastErrorAt = try date(.lastErrorAt)
        nextAllowedCheckAt = try date(.nextAllowedCheckAt)
        ready = try container.decode(Bool.self, forKey: .ready)
        notReadyReason = try container.decodeIfPresent(String.self, forKey: .notReadyReason)
        canary = try container.decodeIfPresent(CanaryStatus.self, forKey: .canary)
        canaryDecision = try container.decodeIfPresent(CanaryDecisionStatus.self, forKey: .canaryDecision)
    }

    /// Encodes the status, dates as ISO 8601 strings with milliseconds; absent values are left out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        func date(_ value: Date?, _ key: CodingKeys) throws {
            try container.encodeIfPresent(value.map { Self.dateStyle.format($0) }, forKey: key)
        }
        try container.encodeIfPresent(name, forKey: .name)
        try container.encodeIfPresent(version, forKey: .version)
        try container.encodeIfPresent(pageCount, forKey: .pageCount)
        try container.encode(source, forKey: .source)
        try container.encodeIfPresent(fallbackSource, forKey: .fallbackSource)
        try container.encode(active, forKey: .active)
        try container.encode(fallbackEngaged, forKey: .fallbackEngaged)
        try date(loadedAt, .loadedAt)
        try date(lastCheckAt, .lastCheckAt)
        try container.encodeIfPresent(lastCheckOutcome, forKey: .lastCheckOutcome)
        try container.encodeIfPresent(lastCheckTrigger, forKey: .lastCheckTrigger)
        try container.encode(consecutiveAbnormal, forKey: .consecutiveAbnormal)
        try container.encodeIfPresent(lastError, forKey: .lastError)
        try container.encodeIfPresent(lastErrorCode, forKey: .lastErrorCode)
        try date(lastErrorAt, .lastErrorAt)
        try date(nextAllowedCheckAt, .nextAllowedCheckAt)
        try container.encode(ready, forKey: .ready)
        try container.encodeIfPresent(notReadyReason, forKey: .notReadyReason)
        try container.encodeIfPresent(canary, forKey: .canary)
        try container.encodeIfPresent(canaryDecision, forKey: .canaryDecision)
    }

    static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}

/// The answer to a refresh.
public struct ConfigRefreshResult: Sendable {
    /// What the check did (``CheckOutcome/throttled`` when none was made).
    public var outcome: CheckOutcome
    /// Whether this caller joined a check another caller had already started.
    public var coalesced: Bool
    /// The abnormal answers met by this check (primary first), empty when every source asked was normal.
    public var errors: [ConfigCheckError]
    /// The state after the check (for a throttled refresh: what is loaded and ``ConfigStatus/nextAllowedCheckAt``).
    public var status: ConfigStatus

    /// Creates a result.
    public init(outcome: CheckOutcome, coalesced: Bool, errors: [ConfigCheckError], status: ConfigStatus) {
        self.outcome = outcome
        self.coalesced = coalesced
        self.errors = errors
        self.status = status
    }
}
