import Foundation
import Hummingbird
import Logging
import Metrics
import NIOCore
import PrefetchCore
import PrefetchDNS
import PrefetchFetcher
import PrefetchStore
import Prometheus
import RendererPool
import Synchronization

/// The loaded prefetch config, swapped atomically; readers get an immutable value.
public final class ConfigHolder: Sendable {
    private let value: Mutex<PrefetchConfig?>

    /// A holder with `config` (or none yet).
    public init(_ config: PrefetchConfig?) {
        value = Mutex(config)
    }

    /// The config in force now.
    public var current: PrefetchConfig? { value.withLock { $0 } }

    /// Replaces the config; triggers already running keep the plan they made.
    public func replace(_ config: PrefetchConfig?) { value.withLock { $0 = config } }
}

/// Builds the prefetch service: the very app `prefetch serve` runs, so tests can run it with test settings
/// (port 0, small budgets) instead of a parallel setup.
///
/// - Parameters:
///   - settings: listen address, budgets and limits.
///   - config: the prefetch config in force.
///   - registry: where metrics are collected; `GET /metrics` renders it.
///   - logger: the service logger.
///   - onServerRunning: called with the bound port once the server listens.
/// - Throws: ``PoolError`` when a renderer profile is invalid, ``DNSError`` when the DNS settings are.
public func buildApplication(
    settings: ServiceSettings,
    config: ConfigHolder,
    registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
    logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) throws -> some ApplicationProtocol {
    let factory = PrometheusMetricsFactory(registry: registry)
    let metrics = ServiceMetrics(factory: factory)
    let store = MemoryStore(budgetBytes: settings.storeBytes, lockAge: settings.lockAge, logger: logger, metricsFactory: factory)
    let fetcher = Fetcher(configuration: settings.fetcher, logger: logger)
    let resolver = try HostResolver(settings: settings.dns, fetcher: fetcher, logger: logger, metricsFactory: factory)
    if let loaded = config.current { resolver.prefetch(hosts: loaded.apiHosts) }
    let currentConfig: @Sendable () -> PrefetchConfig? = { config.current }
    let orchestrator = Orchestrator(settings: settings, store: store, fetcher: fetcher, resolver: resolver, metrics: metrics, logger: logger, currentConfig: currentConfig)

    let router = Router(context: BasicRequestContext.self)
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: UnmatchedRouteMiddleware())
    router.get("/healthz") { _, _ in
        jsonResponse(.ok, JSON.object([("status", .string("ok"))]))
    }
    router.get("/readyz") { _, _ in
        guard let loaded = config.current else {
            return jsonResponse(.serviceUnavailable, JSON.object([("ready", .bool(false)), ("reason", .string("no valid prefetch config is loaded"))]))
        }
        return jsonResponse(.ok, JSON.object([("ready", .bool(true)), ("version", .string(loaded.version))]))
    }
    router.get("/metrics") { _, _ in
        metrics.inFlight.record(fetcher.inFlight)
        metrics.tickets.record(orchestrator.tickets.count)
        _ = await store.snapshot()
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer()))
        )
    }
    router.get("/openapi.yaml") { _, _ in
        Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: ByteBuffer(bytes: OpenAPIDocument.bytes)))
    }
    let prefetchAPI = PrefetchAPI(orchestrator: orchestrator, cors: CORSPolicy(extra: settings.corsOrigins, currentConfig: currentConfig))
    prefetchAPI.addRoutes(to: router)
    let pools = try RendererPools(profiles: settings.renderers, logger: logger, metricsFactory: factory)
    RendererAPI(pools: pools, prefetch: prefetchAPI).addRoutes(to: router)

    return Application(
        router: router,
        configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: nil),
        services: [fetcher, resolver, orchestrator.runner, pools],
        onServerRunning: { channel in
            await onServerRunning(channel.localAddress?.port ?? settings.port)
        },
        logger: logger
    )
}

/// The API description served at `/openapi.yaml` (the same file as `openapi.yaml` at the repository root).
enum OpenAPIDocument {
    static let bytes: [UInt8] = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"),
            let data = try? Data(contentsOf: url)
        else { return Array("openapi: 3.0.3\n".utf8) }
        return Array(data)
    }()
}
