// Plans composed per second, in process, through PrefetchCore's public API only.
//
// Usage: planning-bench CONFIG PAGES [SECONDS]
//   CONFIG   a prefetch config (the generated 10,000-page one)
//   PAGES    lines of `KIND<TAB>URL` (exact, capture, star, miss)
// Prints `key value` lines: the config parse time (best and median of 5), then plans per second over all pages
// and per kind, each measured for SECONDS (default 2) after a warm-up pass.
import Foundation
import PrefetchCore

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: planning-bench CONFIG PAGES [SECONDS]\n".utf8))
    exit(2)
}
let configBytes = Array(try Data(contentsOf: URL(fileURLWithPath: arguments[1])))
let seconds = arguments.count > 3 ? Double(arguments[3]) ?? 2 : 2
let pages: [(kind: String, url: String)] = try String(contentsOfFile: arguments[2], encoding: .utf8)
    .split(separator: "\n")
    .map { line in
        let parts = line.split(separator: "\t", maxSplits: 1)
        return (String(parts[0]), String(parts[1]))
    }

let clock = ContinuousClock()

func milliseconds(_ duration: Duration) -> Double {
    let (s, atto) = duration.components
    return Double(s) * 1000 + Double(atto) / 1e15
}

// PLANNING_PROFILE=load:N or plan:N only loads the config N times, or plans every page N times, and exits: a steady
// loop to profile (`perf record -g`, `perf stat -e instructions:u`) without the other stages in the samples.
if let profile = ProcessInfo.processInfo.environment["PLANNING_PROFILE"] {
    let parts = profile.split(separator: ":")
    let count = parts.count > 1 ? Int(parts[1]) ?? 20 : 20
    var sink = 0
    if parts[0] == "plan" {
        let loaded = try ConfigLoader.parse(configBytes, source: arguments[1]).config
        for _ in 0..<count {
            for page in pages { sink &+= (try? Plan.make(page: page.url, config: loaded))?.requests.count ?? 0 }
        }
    } else {
        for _ in 0..<count { sink &+= try ConfigLoader.parse(configBytes, source: arguments[1]).config.pages.count }
    }
    print("profile \(profile) done (\(sink))")
    exit(0)
}

// Config parse and validation (what a reload costs).
var parseTimes: [Double] = []
var config: PrefetchConfig?
for _ in 0..<5 {
    let start = clock.now
    config = try ConfigLoader.parse(configBytes, source: arguments[1]).config
    parseTimes.append(milliseconds(clock.now - start))
}
parseTimes.sort()
let loaded = config!

// The JSON parse alone (JSONParser builds the tree the validator then reads), to split the load into its stages.
var jsonTimes: [Double] = []
for _ in 0..<5 {
    let start = clock.now
    let tree = try JSONParser.parse(configBytes)
    jsonTimes.append(milliseconds(clock.now - start))
    if case .null = tree { print("unreachable") }
}
jsonTimes.sort()
print("config_bytes \(configBytes.count)")
print(
    "config_pages \(loaded.pages.count) (\(loaded.pages.filter { $0.pattern != nil }.count) patterns), interfaces \(loaded.interfaceCount)")
print(String(format: "config_parse_ms best %.1f median %.1f", parseTimes[0], parseTimes[2]))
print(
    String(
        format: "config_parse_mb_per_s best %.1f median %.1f", Double(configBytes.count) / parseTimes[0] / 1000,
        Double(configBytes.count) / parseTimes[2] / 1000))
print(String(format: "json_parse_ms best %.1f median %.1f (JSONParser.parse alone, tree built and freed)", jsonTimes[0], jsonTimes[2]))

/// Plans every page of `subset` round-robin for `seconds`; returns plans per second and the requests composed
/// (so the work cannot be optimised away).
func measure(_ subset: [String], seconds: Double) -> (perSecond: Double, requests: Int, misses: Int) {
    var requests = 0
    var misses = 0
    for page in subset {  // warm-up pass
        if let plan = try? Plan.make(page: page, config: loaded) { requests &+= plan.requests.count }
    }
    var plans = 0
    let deadline = Duration.milliseconds(Int64(seconds * 1000))
    let start = clock.now
    var elapsed = Duration.zero
    while elapsed < deadline {
        for page in subset {
            do {
                let plan = try Plan.make(page: page, config: loaded)
                requests &+= plan.requests.count
            } catch {
                misses += 1
            }
        }
        plans += subset.count
        elapsed = clock.now - start
    }
    return (Double(plans) / (milliseconds(elapsed) / 1000), requests, misses)
}

/// The stages of a plan on their own: parsing the page URL, then also matching it (what is left is composing).
func measureStages(_ subset: [String], seconds: Double) -> (parse: Double, parseAndMatch: Double) {
    func perCall(_ body: (String) -> Int) -> Double {
        var sink = 0
        var calls = 0
        let start = clock.now
        let deadline = Duration.milliseconds(Int64(seconds * 1000))
        while clock.now - start < deadline {
            for page in subset { sink &+= body(page) }
            calls += subset.count
        }
        if sink == -1 { print("unreachable") }
        return milliseconds(clock.now - start) * 1000 / Double(calls)
    }
    let parse = perCall { page in (try? HTTPURL(parsing: page))?.path.utf8.count ?? 0 }
    let parseAndMatch = perCall { page in
        guard let url = try? HTTPURL(parsing: page) else { return 0 }
        return loaded.matcher.match(url)?.entry.interfaces.count ?? 0
    }
    return (parse, parseAndMatch)
}

let all = measure(pages.map(\.url), seconds: seconds)
let stages = measureStages(pages.map(\.url), seconds: seconds / 2)
print(String(format: "plans_per_second all %.0f (%.2f us per plan)", all.perSecond, 1e6 / all.perSecond))
print(
    String(
        format: "plan_stages_us parse %.2f, parse+match %.2f, whole plan %.2f (all pages)", stages.parse, stages.parseAndMatch,
        1e6 / all.perSecond))
for kind in ["exact", "capture", "star", "miss"] {
    let subset = pages.filter { $0.kind == kind }.map(\.url)
    guard !subset.isEmpty else { continue }
    let result = measure(subset, seconds: seconds / 2)
    print(
        "plans_per_second \(kind) "
            + String(format: "%.0f (%.2f us per plan, %d pages)", result.perSecond, 1e6 / result.perSecond, subset.count))
}
