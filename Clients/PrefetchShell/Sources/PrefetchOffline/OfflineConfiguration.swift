public import Foundation

/// How a shell keeps pages' static resources on the device (seed 001's offline package).
public struct OfflineConfiguration: Sendable {
    /// The directory the disk level and the package's state live in (created when missing). Use one under the app's
    /// caches directory: the system may empty it, and the package starts over from the next check.
    public var directory: URL

    /// The provider's base URL: the map is checked with `GET {provider}/v1/resources?version=V`.
    public var provider: URL

    /// The CDN mirror of the latest map (the file `prefetch resources export` writes, in the same envelope), asked
    /// instead of the provider after ``failureThreshold`` consecutive abnormal answers; nil for none.
    public var mirror: URL?

    /// The least time between two checks, whatever triggers them (fatigue control). 30 s.
    public var checkInterval: Duration

    /// Consecutive abnormal answers of the provider (`code != 200`, another HTTP status, no answer) after which the
    /// mirror is asked instead. 5.
    public var failureThreshold: Int

    /// While on the mirror, how long after its last ask the provider is asked again (its first normal answer brings
    /// the checks back to it). 5 minutes.
    public var providerRetryInterval: Duration

    /// The memory level's capacity in bytes, released by ``OfflinePackage/handleMemoryWarning()``. 10 MB.
    public var memoryCapacity: Int

    /// The disk level's capacity in bytes. 100 MB.
    public var diskCapacity: Int

    /// The largest body downloaded; a larger one counts as a failed download. 10 MB.
    public var maxResourceBytes: Int

    /// How many downloads run at once. 1.
    public var maxConcurrentDownloads: Int

    /// How long a check or a download may take before it counts as failed. 15 s.
    public var requestTimeout: Duration

    /// Which hashes make a body trusted.
    public var integrity: Integrity

    /// Which entries are cached.
    public enum Integrity: Sendable, Equatable {
        /// Only entries with a `sha256` (the default); every hash an entry names is checked.
        case sha256Required
        /// Also entries with only an `md5` (seed 001's maps): an MD5 catches a damaged body, not a forged one.
        case md5Accepted
    }

    /// A configuration with the seed's numbers: 30 s between checks, the mirror after 5 abnormal answers, 10 MB of
    /// memory and 100 MB of disk, one download at a time.
    public init(
        directory: URL, provider: URL, mirror: URL? = nil, checkInterval: Duration = .seconds(30), failureThreshold: Int = 5,
        providerRetryInterval: Duration = .seconds(300), memoryCapacity: Int = 10 << 20, diskCapacity: Int = 100 << 20,
        maxResourceBytes: Int = 10 << 20, maxConcurrentDownloads: Int = 1, requestTimeout: Duration = .seconds(15),
        integrity: Integrity = .sha256Required
    ) {
        self.directory = directory
        self.provider = provider
        self.mirror = mirror
        self.checkInterval = checkInterval
        self.failureThreshold = failureThreshold
        self.providerRetryInterval = providerRetryInterval
        self.memoryCapacity = memoryCapacity
        self.diskCapacity = diskCapacity
        self.maxResourceBytes = maxResourceBytes
        self.maxConcurrentDownloads = maxConcurrentDownloads
        self.requestTimeout = requestTimeout
        self.integrity = integrity
    }
}

/// When the shell asks for a check (seed 001: start, opening a webview, foreground, leaving a webview).
public enum OfflineTrigger: String, Sendable, CaseIterable {
    case start
    case pageOpen = "page-open"
    case foreground
    case pageExit = "page-exit"
}

/// A body the offline package answers a request with.
public struct OfflineResource: Sendable, Equatable {
    /// The body, verified against the map's hashes.
    public var bytes: Data
    /// The map entry's `ctype`, for the response's `Content-Type`.
    public var contentType: String
}

/// What a check did.
public enum OfflineCheckResult: Sendable, Equatable {
    /// No check was made: one was made less than the check interval ago, or one is in flight.
    case skipped(reason: String)
    /// The source answered normally and the applied map is current.
    case upToDate(source: String)
    /// A new map was applied: `downloads` entries are to be fetched, `dropped` resources were deleted.
    case updated(version: String, source: String, downloads: Int, dropped: Int)
    /// No source answered normally (`reason`: the last abnormal answer's).
    case failed(reason: String)
}

/// What the offline package has done since it was made.
public struct OfflineCounters: Sendable, Equatable {
    /// Checks made, and by whom they were answered normally.
    public var checks = 0
    public var checksSkipped = 0
    public var providerAnswers = 0
    public var providerFailures = 0
    public var mirrorAnswers = 0
    public var mirrorFailures = 0
    /// Maps applied (a version other than the applied one).
    public var mapsApplied = 0
    /// Entries left out of a map: no hash this configuration trusts, or a download URL that is not http(s).
    public var entriesRefused = 0
    /// Bodies downloaded, verified and stored; downloads that failed (transport, status, size).
    public var downloads = 0
    public var downloadFailures = 0
    /// Bodies refused because they did not hash to the map's values: downloaded ones and ones changed on disk.
    public var tamperedRefused = 0
    /// Lookups answered from memory, from disk, and not answered.
    public var memoryHits = 0
    public var diskHits = 0
    public var misses = 0
    /// Resources deleted because the map dropped them.
    public var dropped = 0
}
