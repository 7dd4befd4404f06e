import Foundation
package import PrefetchCore
import PrefetchTestSupport

// Helpers a test file wrote for itself that test files of other targets use too (their text as it was, made
// `package`): CommandTestError (CommandTests), SeededRandom.next(_:) (DifferentialKeyingTests), freeLocalPort
// (ServeReplicaTests), repositoryRoot (RendererAPITests) and WebShellBrowser.root (WebShellBrowserTests).

package struct CommandTestError: Error, CustomStringConvertible {
    package var message: String
    package var description: String { message }

    package init(message: String) { self.message = message }
}

extension SeededRandom {
    /// A number in `0..<bound`.
    package mutating func next(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

/// A port nothing listens on right now (`unusedLocalPort`), or the error saying the system refused.
package func freeLocalPort() throws -> Int {
    guard let port = unusedLocalPort() else { throw CommandTestError(message: "cannot bind a socket to 127.0.0.1") }
    return port
}

/// The repository root, found from this file's location.
package let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/")
}()

/// The browser tests' harness (BrowserTests extends it); its root is here because OTLPExportTests runs a script of
/// the repository from it too.
package enum WebShellBrowser {
    package static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()
}
