import Foundation

/// What applying a new map changes, decided from the maps alone (seed 001: "only the map is diffed, never the
/// files"): the entries to download (new, or changed: version, a hash or the download URL), the resources dropped,
/// and the stored bodies to delete.
struct MapUpdate: Sendable, Equatable {
    /// The resource URLs whose bodies must be downloaded, sorted.
    var downloads: [String]
    /// The resource URLs of the applied map that the new one no longer has, sorted.
    var dropped: [String]
    /// The cache keys (download URLs) whose stored bodies no unchanged entry uses any more, sorted: dropped
    /// resources' and changed resources' old bodies.
    var deletions: [String]

    /// Whether a map answered with `version` replaces the map `applied` at version `appliedVersion`: the versions
    /// differ as text ("10" and "010" differ; "9" is not older than "10", nor newer).
    static func isNewVersion(_ version: String, over applied: String?) -> Bool { version != applied }

    /// The update from `old` (nil: nothing applied yet) to `new`, with `cacheKey` naming each entry's stored body.
    init(from old: ResourceMap?, to new: ResourceMap, cacheKey: (ResourceEntry) -> String?) {
        let oldEntries = old?.entries ?? [:]
        downloads = new.entries.filter { url, entry in
            guard let previous = oldEntries[url] else { return true }
            return previous.needsDownload(replacedBy: entry)
        }.keys.sorted()
        dropped = oldEntries.keys.filter { new.entries[$0] == nil }.sorted()
        let changed = Set(downloads)
        let kept = Set(new.entries.filter { !changed.contains($0.key) }.values.compactMap(cacheKey))
        deletions = Set(oldEntries.values.compactMap(cacheKey)).subtracting(kept).sorted()
    }
}
