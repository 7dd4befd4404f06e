import Foundation
package import HTTPTypes
import Hummingbird
package import Logging
import PrefetchCore
import PrefetchEngine
package import PrefetchRuntime
package import PrefetchTestSupport
import Testing

@testable import PrefetchService

// The operator surface's router in process (its responder called directly: `RouterClient`), and the page surface of a live
// service: the page listener has no router (one pipeline, `PageChannel`, answers every request).

/// A surface's router running in process, with the shorthand of ``LiveService`` for requests.
package struct RoutedService: Sendable {
    package let client: any TestHTTPClient

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

/// Runs `body` against the page surface of a live service (`withService`): the page listener has no router, its
/// one pipeline (`PageChannel`) answers every request, so its requests go over a socket.
package func withPageSurface<T: Sendable>(
    config: TestConfig, settings: ServiceSettings = testSettings(), _ body: @Sendable (RoutedService) async throws -> T
) async throws -> T {
    try await withService(config: config, settings: settings) { live in try await body(RoutedService(client: live.client)) }
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
    let client = RouterClient(responder: operatorSurface.responder, logger: operatorSurface.logger)
    return try await body(RoutedService(client: client))
}
