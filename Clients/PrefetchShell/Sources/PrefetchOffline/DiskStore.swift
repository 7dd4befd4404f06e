import Dispatch
import Foundation

/// The disk level and the package's persisted state, in one directory that survives restarts:
///
/// - `blobs/<sha256 of the cache key>`: one body per cache key (the resource's download URL);
/// - `index.json`: the bodies kept, least recently used first, each with its size and SHA-256 (the LRU);
/// - `map.json`: the applied map; `pending.json`: the downloads still to make, so they resume after a restart.
///
/// An actor on a serial dispatch queue of its own: file I/O blocks, and must not block the cooperative pool. Every
/// write is atomic (a temporary file renamed). A read's recency is written with the next write of the index, so a
/// crash loses at most the order of reads since then, never a body or the index's consistency.
actor DiskStore {
    /// What a read found.
    enum Read: Sendable, Equatable {
        /// The body, verified against the entry asked for.
        case hit(Data)
        /// No body for the key, or one of another entry's bytes (an older version not yet replaced).
        case miss
        /// A body whose bytes no longer hash to what was stored: deleted, never served.
        case tampered
    }

    /// One kept body.
    struct Record: Codable, Sendable {
        var key: String
        var file: String
        var bytes: Int
        var sha256: String
    }

    private let executor: QueueExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    let directory: URL
    private let blobs: URL
    private var lru: LRUIndex<String>
    private var records: [String: Record] = [:]

    /// The map and pending downloads persisted by an earlier run (nil and empty on the first).
    nonisolated let persistedMap: ResourceMap?
    nonisolated let persistedPending: [PendingDownload]

    /// Opens (creating it when needed) the store in `directory`, keeping at most `capacity` bytes of bodies. Bodies
    /// neither the index nor the applied map names, and index records whose file is gone, are dropped.
    init(directory: URL, capacity: Int) throws {
        executor = QueueExecutor(label: "PrefetchOffline.disk")
        self.directory = directory
        blobs = directory.appendingPathComponent("blobs", isDirectory: true)
        try FileManager.default.createDirectory(at: blobs, withIntermediateDirectories: true)
        let decoder = JSONDecoder()
        persistedMap = (try? Data(contentsOf: directory.appendingPathComponent("map.json"))).flatMap {
            try? decoder.decode(ResourceMap.self, from: $0)
        }
        persistedPending =
            (try? Data(contentsOf: directory.appendingPathComponent("pending.json"))).flatMap {
                try? decoder.decode([PendingDownload].self, from: $0)
            } ?? []
        let saved =
            (try? Data(contentsOf: directory.appendingPathComponent("index.json"))).flatMap {
                try? decoder.decode([Record].self, from: $0)
            } ?? []
        var lru = LRUIndex<String>(capacity: capacity)
        var records: [String: Record] = [:]
        let files = Set((try? FileManager.default.contentsOfDirectory(atPath: blobs.path)) ?? [])
        // Bodies the applied map no longer names (a crash between saving a map and deleting them) go too.
        let named = Set(persistedMap?.entries.values.map(\.download) ?? [])
        for record in saved where files.contains(record.file) && record.file == Self.fileName(for: record.key) && named.contains(record.key)
        {
            records[record.key] = record
            for evicted in lru.insert(record.key, bytes: record.bytes) { records[evicted] = nil }
        }
        let kept = Set(records.values.map(\.file))
        for file in files.subtracting(kept) { try? FileManager.default.removeItem(at: blobs.appendingPathComponent(file)) }
        self.lru = lru
        self.records = records
    }

    /// The bytes the kept bodies add up to.
    var totalBytes: Int { lru.totalBytes }

    /// The cache keys of the kept bodies.
    var keys: Set<String> { Set(records.keys) }

    /// The body stored under `key` if it is `entry`'s: its recorded SHA-256 is the entry's, and its bytes still hash
    /// to every hash the entry names (a body changed on disk is deleted and reported, never returned).
    func read(_ key: String, for entry: ResourceEntry) -> Read {
        guard let record = records[key] else { return .miss }
        if let sha256 = entry.sha256, sha256 != record.sha256 { return .miss }
        guard let data = try? Data(contentsOf: blobs.appendingPathComponent(record.file)) else {
            drop(key)
            writeIndex()
            return .miss
        }
        guard data.count == record.bytes, Digests.sha256(data) == record.sha256, Integrity.verify(data, against: entry) else {
            drop(key)
            writeIndex()
            return .tampered
        }
        lru.touch(key)
        return .hit(data)
    }

    /// Keeps `data` (already verified) under `key`; the keys evicted to stay within the capacity (`key` itself when
    /// the body is larger than the whole capacity).
    func write(_ key: String, data: Data) throws -> [String] {
        let file = Self.fileName(for: key)
        var evicted = lru.insert(key, bytes: data.count)
        defer {
            for old in evicted { deleteFile(of: old) }
            writeIndex()
        }
        guard !evicted.contains(key) else { return evicted }
        do {
            try data.write(to: blobs.appendingPathComponent(file), options: .atomic)
        } catch {
            lru.remove(key)
            evicted.append(key)
            throw error
        }
        records[key] = Record(key: key, file: file, bytes: data.count, sha256: Digests.sha256(data))
        return evicted
    }

    /// Deletes the bodies of `keys`.
    func remove(_ keys: some Sequence<String>) {
        var changed = false
        for key in keys where records[key] != nil {
            drop(key)
            changed = true
        }
        if changed { writeIndex() }
    }

    /// Persists the applied map.
    func saveMap(_ map: ResourceMap) throws {
        try JSONEncoder().encode(map).write(to: directory.appendingPathComponent("map.json"), options: .atomic)
    }

    /// Persists the downloads still to make.
    func savePending(_ pending: [PendingDownload]) throws {
        try JSONEncoder().encode(pending).write(to: directory.appendingPathComponent("pending.json"), options: .atomic)
    }

    private func drop(_ key: String) {
        lru.remove(key)
        deleteFile(of: key)
    }

    private func deleteFile(of key: String) {
        guard let record = records.removeValue(forKey: key) else { return }
        try? FileManager.default.removeItem(at: blobs.appendingPathComponent(record.file))
    }

    private func writeIndex() {
        let ordered = lru.byRecency.compactMap { records[$0] }
        try? JSONEncoder().encode(ordered).write(to: directory.appendingPathComponent("index.json"), options: .atomic)
    }

    /// A file name for a cache key: its SHA-256 (a URL is no file name, and its length is unbounded).
    static func fileName(for key: String) -> String { Digests.sha256(Data(key.utf8)) }
}

/// A download still to make: the resource URL, the entry it is for, and how many attempts failed.
struct PendingDownload: Codable, Sendable, Equatable {
    var url: String
    var entry: ResourceEntry
    var attempts: Int
}

/// Runs an actor's jobs on a serial dispatch queue of its own.
final class QueueExecutor: SerialExecutor {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}
