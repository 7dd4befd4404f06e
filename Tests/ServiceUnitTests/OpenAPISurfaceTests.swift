import Foundation
import Hummingbird
import Logging
import Metrics
import PrefetchCore
import PrefetchDNS
import PrefetchEngine
import PrefetchFetcher
import PrefetchStore
import Prometheus
import RendererPool
import ServiceTestSupport
import Testing

@testable import PageAPI
@testable import PrefetchService

/// Each listener's `/openapi.yaml` is its part of `openapi.yaml`, and each surface's routes (the page API's table,
/// the operator's router) are exactly the operations its document lists: no route without an operation, no
/// operation without a route.
@Suite struct OpenAPISurfaceTests {
    let source = Array(FileManager.default.contents(atPath: repositoryRoot + "/openapi.yaml") ?? Data())

    /// Each documented endpoint of `surface`, as `METHOD /path` with its parameters written `{}`.
    func documented(_ surface: String) -> Set<String> {
        let document = String(decoding: OpenAPIDocument.surface(surface, of: source), as: UTF8.self)
        var operations: Set<String> = []
        for endpoint in EndpointTable.endpoints(in: document, surface: surface) {
            let path = "/" + endpoint.segments.map { $0 ?? "{}" }.joined(separator: "/")
            for method in endpoint.methods { operations.insert("\(method) \(path)") }
        }
        return operations
    }

    /// Each route of a router, the same way.
    func routed<Context>(_ router: Router<Context>) -> Set<String> {
        Set(
            router.routes.map { route in
                let segments = route.path.description.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map {
                    $0.hasPrefix("{") || $0.hasPrefix(":") ? "{}" : String($0)
                }
                return "\(route.method.rawValue) /" + segments.joined(separator: "/")
            })
    }

    @Test func theBundledDocumentIsTheRepositoryFileAndEachSurfaceServesItsPart() throws {
        #expect(OpenAPIDocument.bytes == source, "the resource bundle's openapi.yaml is the repository's")
        let page = documented("page")
        let operators = documented("operator")
        #expect(page.contains("POST /v1/prefetch") && !page.contains("GET /metrics"))
        #expect(operators.contains("GET /metrics") && !operators.contains("POST /v1/prefetch"))
        // The one operation of both surfaces is the document itself.
        #expect(page.intersection(operators) == ["GET /openapi.yaml"])
    }

    @Test func everyRouteHasAnOperationAndEveryOperationARoute() throws {
        let logger = Logger(label: "openapi-test")
        let fetcher = Fetcher(logger: logger)
        let orchestrator = Orchestrator(
            settings: EngineSettings(), store: MemoryStore(logger: logger), fetcher: fetcher,
            resolver: try HostResolver(fetcher: fetcher, logger: logger), tickets: LocalTicketRegistry(capacity: 10),
            metrics: EngineMetrics(factory: MetricsSystem.factory), logger: logger, configs: ConfigHolder(nil))
        let parts = ServiceParts(
            orchestrator: orchestrator, renderers: try RendererPools(profiles: [:], logger: logger), listeners: ListenerSettings(),
            configSource: nil, configPath: "configs/prefetch.json", updater: nil, registry: .init(), logger: logger)
        let routes = RouteSets(parts, factory: .init(registry: parts.registry))
        // The page surface's table, each operation as its template: every one is matched by the table with a value
        // in each parameter, or is one of the store routes.
        let page = Set(
            PageRoute.operations(demo: false).map { operation in
                operation.replacingOccurrences(of: #"\{[a-z0-9]+\}"#, with: "{}", options: .regularExpression)
            })
        for operation in page {
            let (method, path) = (operation.prefix { $0 != " " }, operation.drop { $0 != " " }.dropFirst())
            let sample = Substring(path.replacingOccurrences(of: "{}", with: "x"))
            let store = FastHandoff.ReadRoute(sample) != nil || sample == "/v1/prefetch" || sample == "/v1/open"
            #expect(store || PageRoute(.init(String(method))!, path: sample, demo: false) != nil, "\(operation) is not matched")
        }
        let operators = routed(operatorRouter(parts, routes: routes))
        #expect(page.subtracting(documented("page")).isEmpty, "page routes without an operation")
        // A CORS preflight (`OPTIONS`) is answered by the page API for any path: its path must be one the table
        // routes.
        let preflights = documented("page").filter { $0.hasPrefix("OPTIONS ") }
        #expect(!preflights.isEmpty)
        #expect(documented("page").subtracting(preflights).subtracting(page).isEmpty, "page operations without a route")
        let routedPaths = Set(page.map { $0.drop { $0 != " " } })
        #expect(preflights.allSatisfy { routedPaths.contains($0.drop { $0 != " " }) }, "a preflight of a path nothing routes")
        #expect(operators.subtracting(documented("operator")).isEmpty, "operator routes without an operation")
        #expect(documented("operator").subtracting(operators).isEmpty, "operator operations without a route")
    }
}
