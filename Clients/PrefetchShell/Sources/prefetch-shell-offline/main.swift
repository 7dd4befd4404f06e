// A shell's offline package as a command, for the browser test harness and the benchmark (scripts/offline-browser.py):
// it plays the part of a web shell's request interceptor on top of the SDK's offline cache.
//
//   prefetch-shell-offline --directory DIR --provider URL [--mirror URL]
//
// It makes one check (the shell's start), downloads what the map asks for, and prints one JSON line: the check's
// result, the applied version and the package's counters. Then, for each line read on standard input (a request
// URL), it prints one JSON line: `{"url":…,"hit":true,"ctype":…,"body":<base64>}` from the offline cache, or
// `{"url":…,"hit":false}`. It never fetches a resource on a lookup. It ends at the end of its input.
import Foundation
import PrefetchOffline

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("prefetch-shell-offline: \(message)\n".utf8))
    exit(2)
}

func emit(_ object: [String: Any]) {
    guard var line = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { fail("unencodable answer") }
    line.append(UInt8(ascii: "\n"))
    FileHandle.standardOutput.write(line)
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst() {
    guard ["--directory", "--provider", "--mirror"].contains(name), let value = arguments.popFirst() else {
        fail("usage: prefetch-shell-offline --directory DIR --provider URL [--mirror URL]")
    }
    options[name] = value
}
guard let directory = options["--directory"], let providerText = options["--provider"], let provider = URL(string: providerText) else {
    fail("usage: prefetch-shell-offline --directory DIR --provider URL [--mirror URL]")
}
let mirror = options["--mirror"].flatMap { URL(string: $0) }

let offline: OfflinePackage
do {
    offline = try OfflinePackage(
        configuration: OfflineConfiguration(directory: URL(fileURLWithPath: directory), provider: provider, mirror: mirror))
} catch {
    fail("cannot open the package in \(directory): \(error)")
}

let result = await offline.check(.start)
// Every download the map asks for, each retried on later passes until it is stored or given up.
var passes = 0
while await offline.pendingDownloads > 0 && passes < 3 {
    await offline.downloadPending()
    passes += 1
}
let counters = await offline.counters
let version: Any = await offline.appliedVersion ?? NSNull()
emit([
    "result": "\(result)", "version": version, "pending": await offline.pendingDownloads,
    "downloads": counters.downloads, "downloadFailures": counters.downloadFailures, "tamperedRefused": counters.tamperedRefused,
])

while let line = readLine() {
    let text = line.trimmingCharacters(in: .whitespaces)
    guard !text.isEmpty else { continue }
    guard let url = URL(string: text), let resource = await offline.lookup(url: url) else {
        emit(["url": text, "hit": false])
        continue
    }
    emit(["url": text, "hit": true, "ctype": resource.contentType, "body": resource.bytes.base64EncodedString()])
}
