import PrefetchCore

/// Where the prefetch config comes from and how often it is checked.
///
/// Every duration is configurable so tests can use sub-second windows; the defaults are the mobile clients'
/// rules (check at most once per 30 s, fall back after 5 consecutive abnormal answers).
public struct ConfigSourceSettings: Sendable {
    /// The primary source: a file path (optionally `file://`-prefixed) or an `http://` / `https://` URL.
    public var source: String
    /// The CDN copy asked after ``abnormalThreshold`` consecutive abnormal answers from the primary; an
    /// `http://` or `https://` URL, or `nil` for none.
    public var fallbackURL: String?
    /// How often `run()` checks on its own.
    public var interval: Duration
    /// No two checks of a URL primary start within this window, whatever triggers them (fatigue control).
    public var fatigueWindow: Duration
    /// Consecutive abnormal answers from the primary after which the fallback is engaged.
    public var abnormalThreshold: Int
    /// Where `last-good-config.json` is kept; `nil` keeps no copy.
    public var stateDirectory: String?
    /// How often `run()` stats a file source to notice changes.
    public var fileWatchInterval: Duration
    /// The whole budget of one remote fetch (connect, transfer, queueing).
    public var requestTimeout: Duration
    /// Whether `run()` checks when the process receives SIGHUP. Only one component of a process should trap it.
    public var checksOnHangup: Bool

    /// Creates settings; only the source is required.
    public init(
        source: String,
        fallbackURL: String? = nil,
        interval: Duration = .seconds(60),
        fatigueWindow: Duration = .seconds(30),
        abnormalThreshold: Int = 5,
        stateDirectory: String? = nil,
        fileWatchInterval: Duration = .seconds(2),
        requestTimeout: Duration = .seconds(5),
        checksOnHangup: Bool = true
    ) {
        self.source = source
        self.fallbackURL = fallbackURL
        self.interval = interval
        self.fatigueWindow = fatigueWindow
        self.abnormalThreshold = abnormalThreshold
        self.stateDirectory = stateDirectory
        self.fileWatchInterval = fileWatchInterval
        self.requestTimeout = requestTimeout
        self.checksOnHangup = checksOnHangup
    }

    /// The file name of the last-good copy inside ``stateDirectory``.
    public static let lastGoodFileName = "last-good-config.json"

    /// `<stateDirectory>/last-good-config.json`, or `nil` without a state directory.
    public var lastGoodPath: String? {
        guard let stateDirectory else { return nil }
        return stateDirectory.hasSuffix("/")
            ? stateDirectory + Self.lastGoodFileName : stateDirectory + "/" + Self.lastGoodFileName
    }
}

/// Where one config is read from.
public enum ConfigSource: Sendable, Hashable, CustomStringConvertible {
    /// A local file.
    case file(path: String)
    /// An `http://` or `https://` URL fetched with GET.
    case url(String)

    /// Classifies `text`: `http://` and `https://` are URLs, `file://` and everything else a file path.
    public init(_ text: String) {
        let lowered = text.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
            self = .url(text)
        } else if lowered.hasPrefix("file://") {
            self = .file(path: String(text.dropFirst("file://".count)))
        } else {
            self = .file(path: text)
        }
    }

    /// Whether checking this source contacts the network.
    public var isRemote: Bool {
        if case .url = self { return true }
        return false
    }

    /// The path, or the URL redacted (``Redaction/url(_:)``): how messages, logs and views name the source.
    public var description: String {
        switch self {
        case .file(let path): path
        case .url(let url): Redaction.url(url)
        }
    }
}

/// Settings that cannot work, found when a ``ConfigUpdater`` is created.
public struct ConfigSettingsError: Error, Sendable, CustomStringConvertible {
    /// A stable category, safe as a metric label.
    public enum Code: String, Sendable, CaseIterable {
        /// `source` is empty.
        case emptySource = "empty_source"
        /// `fallbackURL` is not an http(s) URL.
        case fallbackNotURL = "fallback_not_url"
        /// A duration is zero or negative, or the threshold is below 1.
        case outOfRange = "out_of_range"
        /// A URL source was given without a fetcher.
        case missingFetcher = "missing_fetcher"
    }

    /// What kind of mistake.
    public var code: Code
    /// A message naming the offending setting and value.
    public var message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

extension ConfigSourceSettings {
    /// Every problem that would make an updater misbehave, first one thrown.
    func validate(hasFetcher: Bool) throws(ConfigSettingsError) {
        if source.isEmpty {
            throw ConfigSettingsError(code: .emptySource, message: "the config source is empty")
        }
        if let fallbackURL, !ConfigSource(fallbackURL).isRemote {
            throw ConfigSettingsError(
                code: .fallbackNotURL, message: "the fallback \"\(Redaction.text(fallbackURL))\" is not an http(s) URL")
        }
        let durations: [(String, Duration)] = [
            ("interval", interval), ("fatigueWindow", fatigueWindow), ("fileWatchInterval", fileWatchInterval),
            ("requestTimeout", requestTimeout),
        ]
        for (name, value) in durations where value <= .zero {
            throw ConfigSettingsError(code: .outOfRange, message: "\(name) must be positive, got \(value)")
        }
        if abnormalThreshold < 1 {
            throw ConfigSettingsError(
                code: .outOfRange, message: "abnormalThreshold must be at least 1, got \(abnormalThreshold)")
        }
        if !hasFetcher && (ConfigSource(source).isRemote || fallbackURL != nil) {
            throw ConfigSettingsError(
                code: .missingFetcher,
                message: "the config source \(ConfigSource(source)) or its fallback is a URL but no fetcher was given")
        }
    }
}
