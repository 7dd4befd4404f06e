import Foundation
package import HTTPTypes
import Hummingbird
package import HummingbirdTesting
package import Logging
import PrefetchCore
import PrefetchEngine
package import PrefetchRuntime
package import PrefetchTestSupport
import Testing

@testable import PrefetchService

// Handler tests without a socket: the app `buildApplication` builds (the very one `prefetch serve` runs), its
// requests handed to the router in process by HummingbirdTesting's `.router` setup.
//
// What these do not reach: the page listener's NIO channel handlers, which only run on a real connection. The fast
// handoff (`FastHandoffHandler`, answering reads and, with the memory store, triggers on the event loop), the
// connection guards (connection cap, body timeout's 408) and the idle timeout. So a router test checks the routed
// path: middleware, routes and answers. That the fast path answers the same is FastPathDifferentialTests' and
// FastHandoffTests' (live sockets); attacks, isolation and real processes stay on sockets too.

/// A surface's router running in process, with the shorthand of ``LiveService`` for requests.
package struct RoutedService: Sendable {
    package let client: any TestClientProtocol

    package func request(
        _ method: HTTPRequest.Method, _ uri: String, headers: [String: String] = [:], body: String? = nil
    ) async throws -> Reply {
        try await send(client, method, uri, headers: headers, body: body)
    }

    package func get(_ uri: String, headers: [String: String] = [:]) async throws -> Reply {
        try await request(.get, uri, headers: headers)
    }

    package func post(_ uri: String, headers: [String: String] = [:], body: String) async throws -> Reply {
        try await request(.post, uri, headers: headers, body: body)
    }
}

/// A quiet logger for an application under test.
package func testLogger() -> Logger {
    var logger = Logger(label: "prefetch.service.test")
    logger.logLevel = .warning
    return logger
}

/// Runs `body` against the page surface's router, its application's services (the fetcher, the fetch runner, the
/// operator listener on a free port) running as in `prefetch serve`.
package func withPageRouter<T: Sendable>(
    config: TestConfig, settings: ServiceSettings = testSettings(), _ body: @Sendable (RoutedService) async throws -> T
) async throws -> T {
    let app = try buildApplication(settings: settings, config: ConfigHolder(config.loaded()), logger: testLogger())
    return try await app.test(.router) { client in try await body(RoutedService(client: client)) }
}

/// Runs `body` against the operator surface's router: the operator `Application` that `buildApplication` hands to
/// the page application as one of its services, tested on its own. No component runs, so this is for the operator
/// routes that need none (the door, refusals, plans, the fixed config's status, the memory store's invalidation).
package func withOperatorRouter<T: Sendable>(
    config: TestConfig, settings: ServiceSettings = testSettings(), _ body: @Sendable (RoutedService) async throws -> T
) async throws -> T {
    let app = try buildApplication(settings: settings, config: ConfigHolder(config.loaded()), logger: testLogger())
    let operatorSurface = try #require(
        app.services.lazy.compactMap { $0 as? Application<RouterResponder<BasicRequestContext>> }.first,
        "buildApplication has no operator application among its services")
    return try await operatorSurface.test(.router) { client in try await body(RoutedService(client: client)) }
}
