import Foundation
import NIOCore

/// The CDN mirror of the provider's current map (`prefetch resources export DIR`): `DIR/resources.json`, the check
/// envelope with the whole map (`update: true`), and each body once as `DIR/<sha256>`. Each file is written
/// atomically; `download` URLs are `<sha256>`, relative to `resources.json`'s URL, unless the provider's settings
/// give a download base.
public enum ResourceExport {
    /// What was written.
    public struct Written: Sendable, Equatable {
        public var version: String
        public var entries: Int
        public var blobs: Int
    }

    /// Writes the mirror of `provider`'s current map into `directory` (created when missing).
    public static func write(_ provider: ResourceProvider, to directory: String) async throws -> Written {
        let snapshot = provider.snapshot()
        var answer = snapshot.answer
        if provider.settings.downloadBase == nil, var map = answer.data.resourcemap {
            for (url, entry) in map { map[url]?.download = entry.sha256 }
            answer.data.resourcemap = map
        }
        answer.data.removed = nil
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let envelope = try encoder.encode(answer)
        let files = snapshot.blobs.map { ($0.key, Data($0.value.readableBytesView)) }
        try await ResourceProvider.blocking {
            Result {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                for (hash, body) in files {
                    try body.write(to: URL(fileURLWithPath: directory + "/" + hash), options: .atomic)
                }
                try envelope.write(to: URL(fileURLWithPath: directory + "/resources.json"), options: .atomic)
            }
        }.get()
        return Written(version: answer.data.version, entries: answer.data.resourcemap?.count ?? 0, blobs: files.count)
    }
}
