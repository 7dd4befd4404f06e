import Testing

@testable import PrefetchCore

/// Builds a config from a list of page entries written as JSON text.
func makeConfig(pages: [String], version: String = "1") throws -> PrefetchConfig {
    let text = #"{"code":200,"data":{"name":"test","version":"\#(version)","config":[\#(pages.joined(separator: ","))]}}"#
    return try ConfigLoader.parse(Array(text.utf8), source: "test").config
}

/// A one-page config whose single interface is `interface` (JSON object text).
func singleInterfaceConfig(page: String = "https://m.example.com/help/new", _ interface: String) throws -> PrefetchConfig {
    try makeConfig(pages: [#"{"url":"\#(page)","interfaces":[\#(interface)]}"#])
}

/// The problems reported for `text`, as `path: message` strings.
func problems(_ text: String) -> [String] {
    do {
        _ = try ConfigLoader.parse(Array(text.utf8), source: "test")
        return []
    } catch {
        return error.problems.map(\.description)
    }
}

/// The first request planned for `page`.
func firstRequest(_ page: String, _ config: PrefetchConfig) throws -> PlannedRequest {
    let plan = try Plan.make(page: page, config: config)
    return try #require(plan.requests.first)
}

/// The repository root, found from this file's location.
let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/")
}()
