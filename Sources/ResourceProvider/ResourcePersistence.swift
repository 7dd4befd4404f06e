import Foundation
import Logging
import NIOCore
import Synchronization

/// The published map kept across restarts: `<directory>/resources/state.json` (the entries, their validators and the
/// versions' membership for `removed`), written atomically after each refresh, next to the bodies it names. A
/// restarted provider publishes it again before its first refresh, each body read back only when it still hashes to
/// its name, so replicas and restarts answer the same version at once.
extension ResourceProvider {
    struct SavedState: Codable, Sendable {
        struct Item: Codable, Sendable {
            var sha256: String
            var md5: String
            var ctype: String
            var etag: String?
            var lastModified: String?
        }

        struct Version: Codable, Sendable {
            var version: String
            var urls: [String]
        }

        var version: String
        var items: [String: Item]
        var history: [Version]
    }

    /// Where the published map is saved.
    public var statePath: String { settings.directory + "/resources/state.json" }

    /// Writes the published map (a failure is logged; the map in memory stays published).
    func save() async {
        let saved = state.withLock { state in
            SavedState(
                version: state.version,
                items: state.items.mapValues {
                    SavedState.Item(
                        sha256: $0.entry.sha256, md5: $0.entry.md5, ctype: $0.entry.ctype, etag: $0.etag, lastModified: $0.lastModified)
                },
                history: state.history.map { SavedState.Version(version: $0.version, urls: $0.urls.sorted()) })
        }
        let path = statePath
        let failure: String? = await Self.blocking {
            do {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                try encoder.encode(saved).write(to: URL(fileURLWithPath: path), options: .atomic)
                return nil
            } catch {
                return "\(error)"
            }
        }
        if let failure { logger.warning("resource map not saved", metadata: ["error": "\(failure)"]) }
    }

    /// Publishes the map saved by an earlier run, when nothing was refreshed yet. Entries whose body is missing or
    /// no longer hashes to its name are left out (the next refresh fetches them). Returns whether a map was restored.
    @discardableResult
    public func restore() async -> Bool {
        guard state.withLock({ $0.refreshes == 0 }) else { return false }
        let (path, directory) = (statePath, blobDirectory)
        let loaded: (SavedState, [String: ByteBuffer])? = await Self.blocking {
            guard let data = FileManager.default.contents(atPath: path),
                let saved = try? JSONDecoder().decode(SavedState.self, from: data)
            else { return nil }
            var bodies: [String: ByteBuffer] = [:]
            for item in saved.items.values where bodies[item.sha256] == nil && Digests.isSHA256(item.sha256) {
                guard let data = FileManager.default.contents(atPath: directory + "/" + item.sha256) else { continue }
                let body = ByteBuffer(bytes: data)
                if Digests.sha256(body) == item.sha256 { bodies[item.sha256] = body }
            }
            return (saved, bodies)
        }
        guard let (saved, bodies) = loaded else { return false }
        var items: [String: Item] = [:]
        for (url, item) in saved.items {
            guard let body = bodies[item.sha256] else { continue }
            items[url] = Item(
                entry: entry(sha256: item.sha256, md5: item.md5, ctype: item.ctype), body: body, etag: item.etag,
                lastModified: item.lastModified)
        }
        let version = MapVersion.of(items.mapValues(\.entry))
        var history = saved.history.suffix(settings.historyLength).map { (version: $0.version, urls: Set($0.urls)) }
        if history.last?.version != version { history.append((version, Set(items.keys))) }
        let total = items.values.reduce(0) { $0 + $1.body.readableBytes }
        let restored = state.withLock { state -> Bool in
            guard state.refreshes == 0 else { return false }
            state.version = version
            state.items = items
            state.blobs = Self.blobs(of: items)
            state.history = history
            state.bytes = total
            return true
        }
        if restored {
            logger.info("resource map restored", metadata: ["version": "\(version)", "entries": "\(items.count)", "bytes": "\(total)"])
        }
        return restored
    }
}
