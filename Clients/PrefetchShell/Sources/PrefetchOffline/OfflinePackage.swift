public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A web shell's offline package (seed 001): the static resources of its pages (HTML, scripts, stylesheets, images),
/// kept on the device from the resource map a provider publishes, and answered to the webview's requests from there.
///
/// The shell's part: ``notify(_:)`` at start, page open, foreground and page exit (it returns at once); ``run()``
/// for the app's lifetime, in a task of its own (it makes the checks and the downloads); ``lookup(url:)`` from the
/// request interceptor; ``handleMemoryWarning()`` when the system asks for memory.
///
/// The rules, each in one place: when to check and whom to ask (``CheckSchedule``: 30 s fatigue, the CDN mirror
/// after 5 abnormal answers and back); whether a map is new (its version differs as text) and what it changes
/// (``MapUpdate``: only new or changed entries are downloaded, dropped ones are deleted); how a request matches an
/// entry (its URL without `#fragment`, ``ResourceKey``); what is trusted (``Integrity``: a body is stored and served
/// only when it hashes to the entry's SHA-256, and MD5 when given). Bodies are kept under their download URL in a
/// memory LRU and a disk LRU (``DiskStore``) that survives restarts, as do the applied map and the downloads still
/// to make. Downloads run one at a time at background priority, and never on the lookup path.
public actor OfflinePackage {
    /// The configuration it was made with.
    public nonisolated let configuration: OfflineConfiguration
    /// What the package has done so far.
    public private(set) var counters = OfflineCounters()

    private let http: OfflineHTTP
    private let disk: DiskStore
    private let now: @Sendable () -> Moment
    private var schedule: CheckSchedule<Moment>
    private var applied: ResourceMap?
    private var pending: [PendingDownload]
    private var memory: MemoryLevel
    private var downloading = false
    private var downloadsAllowed = true
    private var running = false
    private let triggers: AsyncStream<OfflineTrigger>
    private let triggerInput: AsyncStream<OfflineTrigger>.Continuation
    private let wakeups: AsyncStream<Void>
    private let wakeInput: AsyncStream<Void>.Continuation

    /// Failed attempts after which a download is given up until a map changes its entry.
    static let maxAttempts = 3
    /// The largest map answer read.
    static let maxMapBytes = 8 << 20

    /// A package on the continuous clock; its state is read from ``OfflineConfiguration/directory``.
    public init(configuration: OfflineConfiguration) throws {
        try self.init(configuration: configuration, clock: ContinuousClock())
    }

    /// A package whose check interval and provider retry run on `clock`; its state is read from
    /// ``OfflineConfiguration/directory`` (created when missing).
    public init<C: Clock>(configuration: OfflineConfiguration, clock: C) throws where C.Duration == Duration {
        self.configuration = configuration
        http = OfflineHTTP(timeout: configuration.requestTimeout)
        disk = try DiskStore(directory: configuration.directory, capacity: configuration.diskCapacity)
        let start = clock.now
        now = { Moment(offset: start.duration(to: clock.now)) }
        schedule = CheckSchedule(
            interval: configuration.checkInterval, failureThreshold: configuration.failureThreshold,
            providerRetry: configuration.providerRetryInterval, hasMirror: configuration.mirror != nil)
        applied = disk.persistedMap
        pending = disk.persistedPending
        memory = MemoryLevel(capacity: configuration.memoryCapacity)
        (triggers, triggerInput) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        (wakeups, wakeInput) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The applied map's version, nil before the first map.
    public var appliedVersion: String? { applied?.version }

    /// The downloads still to make.
    public var pendingDownloads: Int { pending.count }

    /// The bytes the memory level and the disk level hold.
    public func storedBytes() async -> (memory: Int, disk: Int) { (memory.totalBytes, await disk.totalBytes) }

    // MARK: The shell's calls

    /// Asks for a check at one of the seed's moments. Returns at once: ``run()`` makes the check, unless one was made
    /// less than the check interval ago.
    public nonisolated func notify(_ trigger: OfflineTrigger) {
        triggerInput.yield(trigger)
    }

    /// Makes the checks ``notify(_:)`` asks for and the downloads they lead to (and those a previous run left),
    /// downloads at background priority, until the calling task is cancelled. Call it once, in a task that lives as
    /// long as the app; a second call while one runs returns at once.
    public func run() async {
        guard !running else { return }
        running = true
        defer { running = false }
        wake()
        await withDiscardingTaskGroup { group in
            group.addTask(priority: .background) {
                for await _ in self.wakeups { await self.downloadPending() }
            }
            group.addTask {
                for await trigger in self.triggers { await self.check(trigger) }
            }
        }
    }

    /// The body to answer a request for `url` with, from memory or disk; nil when the map has no entry for it (its
    /// `#fragment` ignored) or its verified body is not stored yet. Never touches the network.
    public func lookup(url: URL) async -> OfflineResource? {
        guard let entry = applied?.entry(for: url) else {
            counters.misses += 1
            return nil
        }
        let key = entry.download
        if let bytes = memory.body(key, for: entry) {
            counters.memoryHits += 1
            return OfflineResource(bytes: bytes, contentType: entry.ctype)
        }
        let read = await disk.read(key, for: entry)
        // The map may have changed while the disk read: answer only for the entry that is still current.
        guard applied?.entry(for: url) == entry else {
            counters.misses += 1
            return nil
        }
        switch read {
        case .hit(let bytes):
            counters.diskHits += 1
            memory.insert(key, bytes: bytes, entry: entry)
            return OfflineResource(bytes: bytes, contentType: entry.ctype)
        case .miss:
            counters.misses += 1
            return nil
        case .tampered:
            counters.tamperedRefused += 1
            counters.misses += 1
            await requeue(url: ResourceKey.of(url), entry: entry)
            return nil
        }
    }

    /// Releases the memory level (the disk level stays).
    public func handleMemoryWarning() {
        memory.removeAll()
    }

    /// Lets downloads run or holds them (a shell that downloads only on Wi-Fi or when idle says so here); a held
    /// download already running finishes.
    public func setDownloadsAllowed(_ allowed: Bool) {
        downloadsAllowed = allowed
        if allowed && !pending.isEmpty { wake() }
    }

    // MARK: Checks

    /// Makes a check now, unless the schedule skips it: asks the provider (or the mirror), applies a map of another
    /// version. ``run()`` calls it for each ``notify(_:)``; downloads are left to ``downloadPending()``.
    @discardableResult
    public func check(_ trigger: OfflineTrigger) async -> OfflineCheckResult {
        var step = schedule.admit(at: now())
        if case .skip(let reason) = step {
            counters.checksSkipped += 1
            return .skipped(reason: reason.rawValue)
        }
        counters.checks += 1
        var reason = CheckAnswer.Abnormal.transport
        while case .ask(let source) = step {
            let (answer, base) = await ask(source)
            switch answer {
            case .normal(let version, let map):
                if source == .provider { counters.providerAnswers += 1 } else { counters.mirrorAnswers += 1 }
                _ = schedule.record(normal: true, from: source)
                return await apply(version: version, map: map, base: base, source: source)
            case .abnormal(let abnormal):
                if source == .provider { counters.providerFailures += 1 } else { counters.mirrorFailures += 1 }
                reason = abnormal
                step = schedule.record(normal: false, from: source)
            }
        }
        return .failed(reason: reason.rawValue)
    }

    /// Asks `source` for the map; its answer and the URL it came from (relative download URLs resolve against it).
    private func ask(_ source: CheckSchedule<Moment>.Source) async -> (CheckAnswer, URL?) {
        let url: URL?
        switch source {
        case .provider: url = Self.checkURL(provider: configuration.provider, version: applied?.version)
        case .mirror: url = configuration.mirror
        }
        guard let url else { return (.abnormal(.transport), nil) }
        do {
            let (status, body) = try await http.get(url, limit: Self.maxMapBytes, operation: "checkResources")
            return (CheckAnswer.classify(status: status, body: body), url)
        } catch {
            return (.abnormal(error == .tooLarge ? .badAnswer : .transport), url)
        }
    }

    /// `GET {provider}/v1/resources?version=V` (no `version` before the first map).
    static func checkURL(provider: URL, version: String?) -> URL? {
        guard var components = URLComponents(url: provider, resolvingAgainstBaseURL: true) else { return nil }
        let path = components.percentEncodedPath
        components.percentEncodedPath = (path.hasSuffix("/") ? String(path.dropLast()) : path) + "/v1/resources"
        components.queryItems = version.map { [URLQueryItem(name: "version", value: $0)] }
        return components.url
    }

    private func apply(version: String, map: ResourceMap?, base: URL?, source: CheckSchedule<Moment>.Source) async -> OfflineCheckResult {
        guard let map, MapUpdate.isNewVersion(version, over: applied?.version) else { return .upToDate(source: source.rawValue) }
        let (accepted, refused) = Self.admissible(map, base: base, integrity: configuration.integrity)
        counters.entriesRefused += refused
        let update = MapUpdate(from: applied, to: accepted, cacheKey: { $0.download })
        let changed = Set(update.downloads)
        var next = pending.filter { accepted.entries[$0.url] == $0.entry && !changed.contains($0.url) }
        next += update.downloads.compactMap { url in accepted.entries[url].map { PendingDownload(url: url, entry: $0, attempts: 0) } }
        applied = accepted
        pending = next
        counters.mapsApplied += 1
        counters.dropped += update.dropped.count
        for key in update.deletions { memory.remove(key) }
        // The map and the work list first: a crash before the deletions leaves bodies no entry names, which the next
        // start drops (``DiskStore``), never an entry answered with a body it does not name.
        try? await disk.saveMap(accepted)
        try? await disk.savePending(next)
        await disk.remove(update.deletions)
        if !next.isEmpty { wake() }
        return .updated(
            version: accepted.version, source: source.rawValue, downloads: update.downloads.count, dropped: update.dropped.count)
    }

    /// The entries of `map` the package may cache: an http(s) resource URL, a download URL that resolves (against
    /// `base`) to http(s), and a hash `integrity` trusts; download URLs made absolute. The count left out.
    static func admissible(_ map: ResourceMap, base: URL?, integrity: OfflineConfiguration.Integrity) -> (ResourceMap, Int) {
        var entries: [String: ResourceEntry] = [:]
        var refused = 0
        for (url, entry) in map.entries {
            guard Self.isHTTP(URL(string: url)), let download = URL(string: entry.download, relativeTo: base)?.absoluteURL,
                Self.isHTTP(download), Integrity.isCacheable(entry, policy: integrity)
            else {
                refused += 1
                continue
            }
            var resolved = entry
            resolved.download = download.absoluteString
            entries[url] = resolved
        }
        return (ResourceMap(version: map.version, entries: entries), refused)
    }

    private static func isHTTP(_ url: URL?) -> Bool {
        guard let url, let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else { return false }
        return scheme == "http" || scheme == "https"
    }

    // MARK: Downloads

    /// Makes the pending downloads (``OfflineConfiguration/maxConcurrentDownloads`` at a time, at background
    /// priority), each verified before it is stored; a failed one stays pending for the next pass until it has failed
    /// ``maxAttempts`` times. The number stored. ``run()`` calls it whenever there is work; at most one pass runs.
    @discardableResult
    public func downloadPending() async -> Int {
        guard !downloading, downloadsAllowed else { return 0 }
        downloading = true
        defer { downloading = false }
        let batch = pending
        let width = max(1, configuration.maxConcurrentDownloads)
        let (http, limit) = (http, configuration.maxResourceBytes)
        var stored = 0
        for start in stride(from: 0, to: batch.count, by: width) {
            guard downloadsAllowed, !Task.isCancelled else { break }
            let chunk = batch[start..<min(start + width, batch.count)]
            let results = await withTaskGroup(of: (PendingDownload, Fetched).self) { group in
                for item in chunk {
                    group.addTask(priority: .background) { (item, await Self.fetch(item, http: http, limit: limit)) }
                }
                var results: [(PendingDownload, Fetched)] = []
                for await result in group { results.append(result) }
                return results
            }
            for (item, fetched) in results where await settle(item, fetched) { stored += 1 }
        }
        return stored
    }

    /// What one download gave.
    enum Fetched: Sendable {
        case verified(Data)
        case tampered
        case failed
    }

    /// Downloads `item`'s body and verifies it against its entry, off the actor.
    private static func fetch(_ item: PendingDownload, http: OfflineHTTP, limit: Int) async -> Fetched {
        guard let url = URL(string: item.entry.download) else { return .failed }
        do {
            let (status, body) = try await http.get(url, limit: limit, operation: "downloadResource")
            guard status == 200 else { return .failed }
            return Integrity.verify(body, against: item.entry) ? .verified(body) : .tampered
        } catch {
            return .failed
        }
    }

    /// Stores or counts one download's outcome; whether a body was stored.
    private func settle(_ item: PendingDownload, _ fetched: Fetched) async -> Bool {
        // A map applied during the download may have dropped or changed the entry: its outcome no longer counts.
        guard pending.contains(item) else { return false }
        if case .verified(let bytes) = fetched {
            if (try? await disk.write(item.entry.download, data: bytes)) != nil {
                pending.removeAll { $0.url == item.url && $0.entry == item.entry }
                counters.downloads += 1
                // A map applied during the write may have deleted this key already; delete again what it no longer names.
                if applied?.entries.values.contains(item.entry) != true { await disk.remove([item.entry.download]) }
                try? await disk.savePending(pending)
                return true
            }
            counters.downloadFailures += 1
        } else if case .tampered = fetched {
            counters.tamperedRefused += 1
        } else {
            counters.downloadFailures += 1
        }
        if let index = pending.firstIndex(of: item) {
            pending[index].attempts += 1
            if pending[index].attempts >= Self.maxAttempts { pending.remove(at: index) }
        }
        try? await disk.savePending(pending)
        return false
    }

    /// Puts a resource whose stored body was refused back on the work list.
    private func requeue(url: String, entry: ResourceEntry) async {
        guard applied?.entries[url] == entry, !pending.contains(where: { $0.url == url }) else { return }
        pending.append(PendingDownload(url: url, entry: entry, attempts: 0))
        try? await disk.savePending(pending)
        wake()
    }

    private func wake() {
        wakeInput.yield()
    }
}

/// The memory level: verified bodies by cache key, within a byte capacity, least recently used evicted first.
struct MemoryLevel: Sendable {
    private var lru: LRUIndex<String>
    private var bodies: [String: (bytes: Data, entry: ResourceEntry)] = [:]

    init(capacity: Int) {
        lru = LRUIndex(capacity: capacity)
    }

    var totalBytes: Int { lru.totalBytes }

    /// The body kept under `key` when it was verified for the same hashes as `entry`.
    mutating func body(_ key: String, for entry: ResourceEntry) -> Data? {
        guard let kept = bodies[key], kept.entry.sha256 == entry.sha256, kept.entry.md5 == entry.md5 else { return nil }
        lru.touch(key)
        return kept.bytes
    }

    mutating func insert(_ key: String, bytes: Data, entry: ResourceEntry) {
        bodies[key] = (bytes, entry)
        for evicted in lru.insert(key, bytes: bytes.count) { bodies[evicted] = nil }
    }

    mutating func remove(_ key: String) {
        lru.remove(key)
        bodies[key] = nil
    }

    mutating func removeAll() {
        lru.removeAll()
        bodies = [:]
    }
}

/// A reading of the package's clock: the time since the package was made.
struct Moment: InstantProtocol {
    var offset: Duration

    func advanced(by duration: Duration) -> Moment { Moment(offset: offset + duration) }
    func duration(to other: Moment) -> Duration { other.offset - offset }
    static func < (lhs: Moment, rhs: Moment) -> Bool { lhs.offset < rhs.offset }
}
