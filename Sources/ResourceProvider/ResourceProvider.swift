public import Foundation
import HTTPTypes
public import Logging
public import Metrics
import NIOCore
import NIOPosix
import PrefetchCore
public import PrefetchFetcher
import Synchronization

/// What the provider is told: the manifest, where bodies are kept, how `download` URLs are written.
public struct ResourceSettings: Sendable {
    /// The operator's manifest; nil: the provider publishes the empty map (version "0").
    public var manifest: ResourceManifest?
    /// The manifest's file, read again before each refresh (an edit is picked up by the next one; a file that no
    /// longer validates keeps the manifest in force and is reported in the status). nil: `manifest` stays as given.
    public var manifestPath: String?
    /// Where bodies are stored, content-addressed: `<directory>/resources/blobs/<sha256>`.
    public var directory: String
    /// `download` URLs are `<downloadBase>/<sha256>` (a CDN holding the same bodies); nil: `/v1/resources/blob/<sha256>`,
    /// which the SDK resolves against the URL it checked.
    public var downloadBase: String?
    /// The budget of one resource's fetch. Default 10 s.
    public var timeout: Duration = .seconds(10)
    /// Seconds between refreshes when run as a service. Default 300 s.
    public var refreshInterval: Duration = .seconds(300)
    /// How many past versions' membership is kept to answer `removed`. Default 16.
    public var historyLength = 16
    /// Resources fetched at once during a refresh. Default 4.
    public var concurrency = 4

    /// Settings publishing `manifest`, keeping bodies under `directory`.
    public init(manifest: ResourceManifest?, directory: String, downloadBase: String? = nil) {
        self.manifest = manifest
        self.directory = directory
        self.downloadBase = downloadBase.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
    }
}

/// The offline-package provider: fetches the manifest's resources through the service's fetcher, hashes and stores
/// them, and answers the SDK's checks (`GET /v1/resources?version=V`) and blob reads (`GET /v1/resources/blob/{sha256}`)
/// from memory, without I/O. Refreshes replace the published state at once; reads never wait for one.
public final class ResourceProvider: Sendable {
    /// One published resource: its entry, body and the validators of its last answer.
    struct Item: Sendable {
        var entry: PublishedEntry
        var body: ByteBuffer
        var etag: String?
        var lastModified: String?
    }

    /// A resource's last failure, for the operator.
    public struct Failure: Codable, Sendable, Equatable {
        /// A bounded reason: `status-404`, `too-large`, `over-total`, a fetcher code (`timeout`, `connect`, ...).
        public var reason: String
        /// What happened, naming the URL's host.
        public var message: String
        /// Consecutive failed refreshes of this resource.
        public var count: Int
        /// Whether a previous copy is still published.
        public var previousKept: Bool
    }

    /// Each body once by its sha256, with its content type: the first URL in order that has it.
    static func blobs(of items: [String: Item]) -> [String: (bytes: ByteBuffer, ctype: String)] {
        var blobs: [String: (bytes: ByteBuffer, ctype: String)] = [:]
        for url in items.keys.sorted() {
            guard let item = items[url], blobs[item.entry.sha256] == nil else { continue }
            blobs[item.entry.sha256] = (item.body, item.entry.ctype)
        }
        return blobs
    }

    struct State: Sendable {
        var version = "0"
        var items: [String: Item] = [:]
        var blobs: [String: (bytes: ByteBuffer, ctype: String)] = [:]
        /// Versions (oldest first, the current last) and the URLs each held.
        var history: [(version: String, urls: Set<String>)] = [("0", [])]
        var failures: [String: Failure] = [:]
        var lastRefresh: Date?
        var lastOutcome: RefreshOutcome?
        var refreshes = 0
        var bytes = 0
        var manifestError: String?
        /// The resources each `discover` page named at its last successful load.
        var discovered: [String: [String]] = [:]
    }

    public let settings: ResourceSettings
    private let fetcher: Fetcher?
    let state = Mutex(State())
    private let refreshing = Mutex(false)
    private let manifest: Mutex<ResourceManifest?>
    let metrics: ResourceMetrics
    let logger: Logger

    /// A provider of `settings.manifest`'s resources, fetched with `fetcher` (nil only without a manifest).
    public init(settings: ResourceSettings, fetcher: Fetcher?, logger: Logger, metricsFactory: any MetricsFactory = MetricsSystem.factory) {
        self.settings = settings
        self.manifest = Mutex(settings.manifest)
        self.fetcher = fetcher
        self.logger = logger
        self.metrics = ResourceMetrics(factory: metricsFactory)
    }

    /// Replaces the manifest the next refresh fetches (a manifest whose resources changed: dropped URLs leave the map).
    public func use(_ manifest: ResourceManifest) {
        self.manifest.withLock { $0 = manifest }
    }

    /// The current map's version.
    public var version: String { state.withLock { $0.version } }

    /// The answer to a check from a client that applied `version` (nil: none yet).
    public func check(version: String?) -> ResourceCheckAnswer {
        state.withLock { state in
            if let version, version == state.version {
                return ResourceCheckAnswer(data: .init(version: state.version, update: false))
            }
            var removed: [String]?
            if let version, let known = state.history.last(where: { $0.version == version }) {
                let current = Set(state.items.keys)
                removed = known.urls.subtracting(current).sorted()
            }
            return ResourceCheckAnswer(
                data: .init(
                    version: state.version, update: true, resourcemap: state.items.mapValues(\.entry), removed: removed))
        }
    }

    /// The answer to a blob read of `hash` with the request's `If-None-Match` and `Range`.
    /// `counted` false (a `HEAD`, which sends no byte of it) leaves the read out of `prefetch_resource_blob_reads_total`.
    public func blob(_ hash: String, ifNoneMatch: String? = nil, range: String? = nil, counted: Bool = true) -> BlobAnswer {
        let blob = Digests.isSHA256(hash) ? state.withLock { $0.blobs[hash] } : nil
        let answer = BlobAnswer.decide(hash: hash, blob: blob, ifNoneMatch: ifNoneMatch, range: range)
        if counted { metrics.read(answer.outcome) }
        return answer
    }

    /// What the operator sees: `GET /v1/resources/status`.
    public func status() -> ResourceStatus {
        state.withLock { state in
            ResourceStatus(
                configured: manifest.withLock { $0 != nil }, manifestError: state.manifestError, version: state.version,
                entries: state.items.count, bytes: state.bytes,
                lastRefresh: state.lastRefresh, lastOutcome: state.lastOutcome, refreshes: state.refreshes,
                failures: state.failures, history: state.history.map(\.version))
        }
    }

    /// Fetches every resource of the manifest once and publishes the result. A resource that fails (transport,
    /// a status other than 200 or 304, over a cap) keeps its previous copy, if any. One refresh at a time: a call
    /// while another runs returns `.skipped`.
    @discardableResult
    public func refresh() async -> RefreshOutcome {
        guard
            refreshing.withLock({ running in
                running
                    ? false
                    : {
                        running = true
                        return true
                    }()
            })
        else { return .skipped }
        defer { refreshing.withLock { $0 = false } }
        if let path = settings.manifestPath {
            let loaded = await Self.blocking {
                Result<ResourceManifest, ManifestError> { () throws(ManifestError) in try ResourceManifest.load(path: path) }
            }
            switch loaded {
            case .success(let loaded):
                manifest.withLock { $0 = loaded }
                state.withLock { $0.manifestError = nil }
            case .failure(let error):
                logger.error("resource manifest not reloaded; the one in force stays", metadata: ["error": "\(error)"])
                state.withLock { $0.manifestError = error.description }
            }
        }
        guard let manifest = manifest.withLock({ $0 }), let fetcher else { return .ok }

        let previous = state.withLock { $0.items }
        let failuresBefore = state.withLock { $0.failures }
        let (urls, pageFailures) = await discoverResources(manifest, fetcher: fetcher, failuresBefore: failuresBefore)
        // At most `concurrency` fetches at once: resource bodies share the fetcher's in-flight byte budget with the
        // page opens' prefetches, which must not wait behind a refresh.
        let requests = urls.map {
            ($0, Self.request(url: $0, previous: previous[$0], manifest: manifest, timeout: settings.timeout))
        }
        let width = max(1, settings.concurrency)
        let results = await withTaskGroup(of: (String, FetchResult).self) { group in
            var next = 0
            while next < min(width, requests.count) {
                let (url, request) = requests[next]
                group.addTask { await Self.fetch(url, request, with: fetcher) }
                next += 1
            }
            var results: [String: FetchResult] = [:]
            while let (url, result) = await group.next() {
                results[url] = result
                if next < requests.count {
                    let (url, request) = requests[next]
                    group.addTask { await Self.fetch(url, request, with: fetcher) }
                    next += 1
                }
            }
            return results
        }

        var items: [String: Item] = [:]
        var failures = pageFailures
        var total = 0
        var written: [(String, ByteBuffer)] = []
        for url in urls {
            let old = previous[url]
            var candidate: Item?
            var problem: (String, String)?
            switch results[url] {
            case .answer(let response) where response.status == 200:
                candidate = makeItem(url: url, response: response)
            case .answer(let response) where response.status == 304 && old != nil:
                candidate = old
            case .some(let result):
                problem = Self.problem(of: result, named: Redaction.url(url), maxBytes: manifest.maxResourceBytes)
            case nil:
                problem = ("other", "\(Redaction.url(url)) was not fetched")
            }
            // The total cap, in manifest order: a body that does not fit is refused; the previous copy stays if it fits.
            if let item = candidate, total + item.body.readableBytes > manifest.maxTotalBytes {
                problem = (
                    "over-total",
                    "\(Redaction.url(url)) (\(item.body.readableBytes) bytes) does not fit maxTotalBytes \(manifest.maxTotalBytes)"
                )
                candidate = nil
            }
            if candidate == nil, let old, total + old.body.readableBytes <= manifest.maxTotalBytes { candidate = old }
            if let problem {
                let (reason, message) = problem
                let count = (failuresBefore[url]?.count ?? 0) + 1
                failures[url] = Failure(reason: reason, message: message, count: count, previousKept: candidate != nil)
                logger.warning(
                    "resource refresh failed", metadata: ["reason": "\(reason)", "message": "\(message)", "kept": "\(candidate != nil)"])
            }
            if let item = candidate {
                items[url] = item
                total += item.body.readableBytes
                if item.entry.sha256 != old?.entry.sha256 { written.append((item.entry.sha256, item.body)) }
            }
        }

        // Bodies on disk before they are published, each once.
        let directory = blobDirectory
        let toWrite = written
        let writeFailure: String? = await Self.blocking {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                for (hash, body) in toWrite {
                    let path = directory + "/" + hash
                    if FileManager.default.fileExists(atPath: path) { continue }
                    try Data(body.readableBytesView).write(to: URL(fileURLWithPath: path), options: .atomic)
                }
                return nil
            } catch {
                return "\(error)"
            }
        }
        if let writeFailure {
            logger.error("resource bodies not written; the refresh is not published", metadata: ["error": "\(writeFailure)"])
            state.withLock {
                $0.lastOutcome = .failed
                $0.lastRefresh = Date()
                $0.refreshes += 1
            }
            let (bytes, count, current) = state.withLock { ($0.bytes, $0.items.count, $0.version) }
            metrics.refreshed(.failed, bytes: bytes, entries: count, version: current)
            return .failed
        }

        let outcome: RefreshOutcome =
            failures.isEmpty ? .ok : (failures.count == urls.count + manifest.discoverPages.count ? .failed : .partial)
        let entries = items.mapValues(\.entry)
        let version = MapVersion.of(entries)
        state.withLock { state in
            if version != state.version {
                state.history.append((version, Set(items.keys)))
                if state.history.count > settings.historyLength { state.history.removeFirst(state.history.count - settings.historyLength) }
            }
            state.version = version
            state.items = items
            state.blobs = Self.blobs(of: items)
            state.failures = failures
            state.lastRefresh = Date()
            state.lastOutcome = outcome
            state.refreshes += 1
            state.bytes = total
        }
        metrics.refreshed(outcome, bytes: total, entries: items.count, version: version)
        await save()
        await removeUnpublishedBodies(keeping: Set(entries.values.map(\.sha256)))
        logger.info(
            "resources refreshed",
            metadata: ["outcome": "\(outcome.rawValue)", "version": "\(version)", "entries": "\(items.count)", "bytes": "\(total)"])
        return outcome
    }

    /// The manifest's resources followed by those its `discover` pages name (`PageDiscovery`), each once, and the
    /// pages that could not be loaded. A page that fails keeps the resources it named at its last load.
    private func discoverResources(
        _ manifest: ResourceManifest, fetcher: Fetcher, failuresBefore: [String: Failure]
    ) async -> (
        [String], [String: Failure]
    ) {
        guard !manifest.discoverPages.isEmpty else { return (manifest.urls, [:]) }
        var urls = manifest.urls
        var seen = Set(urls)
        var failures: [String: Failure] = [:]
        var discovered = state.withLock { $0.discovered }.filter { manifest.discoverPages.contains($0.key) }
        for page in manifest.discoverPages {
            let request = FetchRequest(
                method: "GET", url: page, headers: [.accept: "text/html,*/*"], timeout: settings.timeout,
                maxResponseBytes: manifest.maxResourceBytes, group: "resources")
            var problem: (String, String)?
            switch await Self.fetch(page, request, with: fetcher).1 {
            case .answer(let response) where response.status == 200:
                let html = String(decoding: response.bodyBuffer.readableBytesView, as: UTF8.self)
                discovered[page] = PageDiscovery.resources(in: html, page: page, allowHosts: manifest.allowHosts)
            case let result:
                problem = Self.problem(of: result, named: "page \(Redaction.url(page))", maxBytes: manifest.maxResourceBytes)
                    .map { ("page-" + $0.0, $0.1) }
            }
            if let (reason, message) = problem {
                let kept = discovered[page] != nil
                failures[page] = Failure(
                    reason: reason, message: message, count: (failuresBefore[page]?.count ?? 0) + 1, previousKept: kept)
                logger.warning("resource page not loaded", metadata: ["reason": "\(reason)", "message": "\(message)", "kept": "\(kept)"])
            }
            for url in discovered[page] ?? [] where seen.insert(url).inserted { urls.append(url) }
        }
        state.withLock { $0.discovered = discovered }
        return (urls, failures)
    }

    /// Where bodies are kept.
    public var blobDirectory: String { settings.directory + "/resources/blobs" }

    /// The bodies of the current map by SHA-256, and the check answer a client with no map gets (for the export).
    func snapshot() -> (answer: ResourceCheckAnswer, blobs: [String: ByteBuffer]) {
        (check(version: nil), state.withLock { $0.blobs.mapValues(\.bytes) })
    }

    private enum FetchResult: Sendable {
        case answer(FetchResponse)
        case error(FetchError)
    }

    /// Why `result` gives no body to publish (its failure code and a message naming `name`), for a resource and a
    /// `discover` page alike; nil for a `200`. A `304` is the caller's to judge (it needs the previous copy).
    private static func problem(of result: FetchResult, named name: String, maxBytes: Int) -> (String, String)? {
        switch result {
        case .answer(let response) where response.status == 200:
            return nil
        case .answer(let response):
            return ("status-\(response.status)", "\(name) answered \(response.status)")
        case .error(let error) where error.code == .tooLarge:
            return ("too-large", "\(name) is larger than maxResourceBytes \(maxBytes)")
        case .error(let error):
            return (error.code.rawValue, error.message)
        }
    }

    private static func fetch(_ url: String, _ request: FetchRequest, with fetcher: Fetcher) async -> (String, FetchResult) {
        do throws(FetchError) {
            return (url, .answer(try await fetcher.fetch(request)))
        } catch {
            return (url, .error(error))
        }
    }

    /// The request for `url`: no credentials, no cookies, only the validators of the previous answer.
    static func request(url: String, previous: Item?, manifest: ResourceManifest, timeout: Duration) -> FetchRequest {
        var headers: HTTPFields = [.accept: "*/*"]
        if let etag = previous?.etag { headers[.ifNoneMatch] = etag }
        if let lastModified = previous?.lastModified { headers[.ifModifiedSince] = lastModified }
        return FetchRequest(
            method: "GET", url: url, headers: headers, timeout: timeout, maxResponseBytes: manifest.maxResourceBytes, group: "resources")
    }

    private func makeItem(url: String, response: FetchResponse) -> Item {
        let body = response.bodyBuffer
        let sha256 = Digests.sha256(body)
        let entry = self.entry(sha256: sha256, md5: Digests.md5(body), ctype: response.headers[.contentType] ?? "application/octet-stream")
        return Item(entry: entry, body: body, etag: response.headers[.eTag], lastModified: response.headers[.lastModified])
    }

    /// Deletes the stored bodies the published map no longer names (only files named like a SHA-256): bodies are
    /// served from memory, and a restart publishes only what `state.json` names, so nothing reads them again.
    func removeUnpublishedBodies(keeping kept: Set<String>) async {
        let directory = blobDirectory
        let removed = await Self.blocking {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            var removed = 0
            for name in names where Digests.isSHA256(name) && !kept.contains(name) {
                if (try? FileManager.default.removeItem(atPath: directory + "/" + name)) != nil { removed += 1 }
            }
            return removed
        }
        if removed > 0 { logger.debug("unpublished resource bodies removed", metadata: ["count": "\(removed)"]) }
    }

    /// The published entry of a body: its version and `download` follow from its hash and the settings.
    func entry(sha256: String, md5: String, ctype: String) -> PublishedEntry {
        let download = settings.downloadBase.map { "\($0)/\(sha256)" } ?? "/v1/resources/blob/\(sha256)"
        return PublishedEntry(version: String(sha256.prefix(16)), md5: md5, sha256: sha256, download: download, ctype: ctype)
    }

    /// Runs blocking file work on NIO's shared thread pool, never on the cooperative pool.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        (try? await NIOThreadPool.singleton.runIfActive(body)) ?? body()
    }
}

/// `GET /v1/resources/status` on the operator surface.
public struct ResourceStatus: Codable, Sendable {
    /// Whether a manifest is configured (`--resources`).
    public var configured: Bool
    /// Why the manifest's file was not reloaded at the last refresh (the one in force stays), or nil.
    public var manifestError: String?
    /// The published map's version.
    public var version: String
    /// Resources published.
    public var entries: Int
    /// Bytes of the published bodies.
    public var bytes: Int
    /// When the last refresh ended.
    public var lastRefresh: Date?
    /// How it ended.
    public var lastOutcome: RefreshOutcome?
    /// Refreshes since start.
    public var refreshes: Int
    /// The resources whose last refresh failed, by URL (from the operator's own manifest).
    public var failures: [String: ResourceProvider.Failure]
    /// The versions whose membership is kept (oldest first, the current last).
    public var history: [String]
}
