import Foundation
import Logging
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream

/// Threads of this process right now.
func processThreadCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
}
