import Foundation
import Hummingbird
import Logging
import Metrics
import NIOCore
import ConfigUpdater
import PrefetchCore
import PrefetchDNS
import PrefetchFetcher
import PrefetchStore
import Prometheus
import RedisStore
import ServiceLifecycle
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
///   - config: a fixed prefetch config, used when `settings.configSource` is nil (tests); with a config
///     source the service loads and follows it itself.
///   - registry: where metrics are collected; `GET /metrics` renders it.
///   - logger: the service logger.
///   - onServerRunning: called with the bound port once the server listens.
/// - Throws: ``PoolError`` when a renderer profile is invalid, ``DNSError`` when the DNS settings are,
///   ``ConfigSettingsError`` when the config source settings are, ``RedisStoreError`` for a bad store URL.
public func buildApplication(
    settings: ServiceSettings,
    config: ConfigHolder? = nil,
    registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
    logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) throws -> some ApplicationProtocol {
    let factory = PrometheusMetricsFactory(registry: registry)
    let metrics = ServiceMetrics(factory: factory)
    var services: [any Service] = []
    let fetcher = Fetcher(configuration: settings.fetcher, logger: logger)
    services.append(fetcher)
    let resolver = try HostResolver(settings: settings.dns, fetcher: fetcher, logger: logger, metricsFactory: factory)
    services.append(resolver)

    let store: any ResponseStore
    let redis: RedisStore?
    if let url = settings.storeURL {
        let shared = try RedisStore(url: url, logger: logger, metricsFactory: factory)
        redis = shared
        store = shared
        services.append(shared)
    } else {
        redis = nil
        store = MemoryStore(budgetBytes: settings.storeBytes, lockAge: settings.lockAge, logger: logger, metricsFactory: factory)
    }

    // The config: a live source (file or URL, checked by the updater) or a fixed one given by the caller.
    let updater: ConfigUpdater?
    let currentConfig: @Sendable () -> PrefetchConfig?
    if let source = settings.configSource {
        let live = try ConfigUpdater(settings: source, fetcher: fetcher, logger: logger, metricsFactory: factory) { applied in
            resolver.prefetch(hosts: applied.config.apiHosts)
            if applied.previous != nil {
                // Responses of interfaces the new config no longer has are dropped; tickets stay.
                let dropped = await store.retain(labels: applied.config.interfaceNames.union([TicketRecord.storeLabel]))
                if dropped > 0 { logger.info("dropped stored responses of removed interfaces", metadata: ["entries": "\(dropped)"]) }
            }
        }
        updater = live
        currentConfig = { live.current }
        services.append(live)
    } else {
        updater = nil
        currentConfig = { config?.current }
        if let loaded = config?.current { resolver.prefetch(hosts: loaded.apiHosts) }
    }
    let tickets: any TicketRegistry = redis == nil ? LocalTicketRegistry(capacity: settings.ticketCapacity) : SharedTicketRegistry(store: store, capacity: settings.ticketCapacity)
    let orchestrator = Orchestrator(
        settings: settings, store: store, fetcher: fetcher, resolver: resolver, tickets: tickets, metrics: metrics, logger: logger,
        currentConfig: currentConfig)
    services.append(orchestrator.runner)

    let router = Router(context: BasicRequestContext.self)
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: UnmatchedRouteMiddleware())
    router.get("/healthz") { _, _ in
        jsonResponse(.ok, JSON.object([("status", .string("ok"))]))
    }
    router.get("/readyz") { _, _ in
        var members: [(String, JSONValue)]
        var ready = false
        if let loaded = currentConfig() {
            ready = true
            members = [("ready", .bool(true)), ("version", .string(loaded.version))]
        } else {
            let reason = updater?.status().notReadyReason ?? "no valid prefetch config is loaded"
            members = [("ready", .bool(false)), ("reason", .string(reason))]
        }
        if let redis {
            members.append(("store", .string(redis.isDegraded ? "degraded" : "ok")))
        }
        return jsonResponse(ready ? .ok : .serviceUnavailable, JSON.object(members))
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
    ConfigAPI(updater: updater, currentConfig: currentConfig, source: settings.configSource?.source ?? "fixed").addRoutes(to: router)
    let pools = try RendererPools(profiles: settings.renderers, logger: logger, metricsFactory: factory)
    RendererAPI(pools: pools, prefetch: prefetchAPI).addRoutes(to: router)
    services.append(pools)
    WebShell(prefetch: prefetchAPI, renderers: RendererAPI(pools: pools, prefetch: prefetchAPI), currentConfig: currentConfig, configPath: settings.configSource?.source ?? settings.configPath).addRoutes(to: router)

    // Shutdown runs in reverse: the server stops first, then the pools, the fetch runner (draining in-flight
    // fetches), the config updater, the store, the resolver and last the fetcher they all use.
    return Application(
        router: router,
        configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: nil),
        services: services,
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
        else { return Array("# openapi.yaml is missing from the resource bundle next to the prefetch binary\n".utf8) }
        return Array(data)
    }()
}
