import ConfigUpdater
import Foundation
public import Hummingbird
import HummingbirdCore
public import Logging
import Metrics
import NIOCore
public import PrefetchCore
import PrefetchDNS
public import PrefetchEngine
import PrefetchFetcher
import PrefetchStore
public import Prometheus
import RedisStore
import RendererPool
import ServiceLifecycle
public import Tracing

/// Builds the prefetch service: the very app `prefetch serve` runs, so tests can run it with test settings
/// (port 0, small budgets) instead of a parallel setup.
///
/// The returned application serves the **page surface** (what shells and pages call) on `host:port`. The
/// **operator surface** (`/ui`, debug, plan, config, renderer statistics, `/metrics`) is a second server on
/// `adminHost:adminPort`, run as one of the application's services, so it is never reachable where pages are
/// unless an operator binds it there. See `SECURITY.md`.
///
/// - Parameters:
///   - settings: listen addresses, budgets and limits.
///   - config: a fixed prefetch config, used when `settings.configSource` is nil (tests); with a config
///     source the service loads and follows it itself.
///   - registry: where metrics are collected; `GET /metrics` renders it.
///   - logger: the service logger.
///   - onServerRunning: called with the page surface's bound port once it listens.
///   - onAdminRunning: called with the operator surface's bound port once it listens.
/// - Throws: ``PoolError`` when a renderer profile is invalid, ``DNSError`` when the DNS settings are,
///   ``ConfigSettingsError`` when the config source settings are, ``RedisStoreError`` for a bad store URL.
public func buildApplication(
    settings: ServiceSettings,
    config: ConfigHolder? = nil,
    registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
    logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onAdminRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    clock: any ServiceClock = ContinuousClock(),
    tracer: any Tracer = InstrumentationSystem.tracer
) throws -> some ApplicationProtocol {
    let factory = PrometheusMetricsFactory(registry: registry)
    let metrics = EngineMetrics(factory: factory)
    var services: [any Service] = []
    var fetcherConfiguration = settings.fetcher
    fetcherConfiguration.maxBufferedBytes = min(fetcherConfiguration.maxBufferedBytes, settings.inFlightBytes)
    let fetcher = Fetcher(configuration: fetcherConfiguration, logger: logger)
    services.append(fetcher)
    let resolver = try HostResolver(settings: settings.dns, fetcher: fetcher, logger: logger, metricsFactory: factory)
    services.append(resolver)

    let store: any ResponseStore
    let redis: RedisStore?
    if let url = settings.storeURL {
        var configuration = RedisStore.Configuration()
        if let connections = settings.storeConnections { configuration.connections = connections }
        // Room in a Redis reply for the largest response the fetcher keeps, with its headers (libcurl's cap is far
        // below the 1 MiB allowed for them).
        configuration.maximumValueBytes = max(configuration.maximumValueBytes, settings.maximumResponseBytes + 1024 * 1024)
        let shared = try RedisStore(url: url, configuration: configuration, logger: logger, metricsFactory: factory)
        redis = shared
        store = shared
        services.append(shared)
    } else {
        redis = nil
        // Response bodies still arriving count against the store's budget: --store-bytes bounds the responses the
        // process holds, kept or in flight (docs/design/response-store.md, "Memory").
        store = MemoryStore(
            budgetBytes: settings.storeBytes, lockAge: settings.lockAge, logger: logger, metricsFactory: factory, clock: clock,
            heldElsewhere: { fetcher.bufferedBytes })
    }

    // The config: a live source (file or URL, checked by the updater) or a fixed one given by the caller.
    let updater: ConfigUpdater?
    let currentConfig: @Sendable () -> PrefetchConfig?
    let servedConfigs: @Sendable () -> ServedConfigs?
    if let source = settings.configSource {
        let live = try ConfigUpdater(settings: source, fetcher: fetcher, logger: logger, metricsFactory: factory, clock: clock) {
            applied in
            resolver.prefetch(hosts: applied.served.apiHosts)
            if applied.previous != nil {
                // Responses of interfaces neither served config has any more are dropped; tickets stay.
                let dropped = await store.retain(labels: applied.served.interfaceNames.union([Ticket.storeLabel]))
                if dropped > 0 { logger.info("dropped stored responses of removed interfaces", metadata: ["entries": "\(dropped)"]) }
            }
        }
        updater = live
        currentConfig = { live.current }
        servedConfigs = { live.served }
        services.append(live)
    } else {
        updater = nil
        currentConfig = { config?.current }
        servedConfigs = { config?.current.map { ServedConfigs(active: $0) } }
        if let loaded = config?.current { resolver.prefetch(hosts: loaded.apiHosts) }
    }
    // A ticket leaving the registry counts its unread requests as waste of the config version it was planned with.
    let ticketLeft: @Sendable (Ticket) -> Void = { metrics.ticketLeft($0) }
    let tickets: any TicketRegistry =
        redis == nil
        ? LocalTicketRegistry(capacity: settings.ticketCapacity, budgetBytes: settings.ticketBytes, clock: clock, onDrop: ticketLeft)
        : SharedTicketRegistry(
            store: store, capacity: settings.ticketCapacity, budgetBytes: settings.ticketBytes, clock: clock, onDrop: ticketLeft)
    let orchestrator = Orchestrator(
        settings: settings, store: store, fetcher: fetcher, resolver: resolver, tickets: tickets, metrics: metrics, logger: logger,
        clock: clock, tracer: tracer, servedConfigs: servedConfigs, currentConfig: currentConfig)
    services.append(orchestrator.runner)
    let pools = try RendererPools(profiles: settings.renderers, logger: logger, metricsFactory: factory)
    services.append(pools)

    let prefetch = PrefetchRoutes(orchestrator: orchestrator)
    let renderers = RendererRoutes(pools: pools, prefetch: prefetch)
    let invalidation = InvalidationRoutes(prefetch: prefetch, metrics: InvalidationMetrics(factory: factory))
    let http1 = HTTP1Channel.Configuration(idleTimeout: TimeAmount.nanoseconds(Int64(settings.idleTimeout.milliseconds) * 1_000_000))
    // Each listener's cap on open connections and the body timeout of its every route (ConnectionGuards.swift).
    let pageGuards = ConnectionGuards(
        listener: .page, maximum: settings.maxConnections, bodyTimeout: settings.bodyTimeout, factory: factory, logger: logger)
    let adminGuards = ConnectionGuards(
        listener: .operator, maximum: settings.adminMaxConnections, bodyTimeout: settings.bodyTimeout, factory: factory, logger: logger)

    // The operator surface, on its own listener; it stops right after the page surface.
    let admin = Router(context: BasicRequestContext.self)
    admin.add(middleware: MetricsMiddleware())
    admin.add(middleware: AdminGuardMiddleware(token: settings.adminToken, adminHost: settings.adminHost, metrics: metrics))
    admin.add(middleware: UnmatchedRouteMiddleware(surface: "operator"))
    // Route groups run their middleware only for routes they hold, so an unknown route stays a 404 or 405.
    let adminRoutes = admin.group().add(middleware: JSONBodyMiddleware())
    adminRoutes.addRoutes(
        ConfigRoutes(updater: updater, orchestrator: orchestrator, source: settings.configSource?.source ?? "fixed").routes)
    adminRoutes.addRoutes(
        DebugRoutes(orchestrator: orchestrator, renderers: renderers, configPath: settings.configSource?.source ?? settings.configPath)
            .routes)
    adminRoutes.addRoutes(renderers.statisticsRoutes)
    adminRoutes.addRoutes(invalidation.operatorRoutes)
    admin.get("/metrics") { _, _ in
        metrics.inFlight.record(fetcher.inFlight)
        metrics.tickets.record(orchestrator.tickets.count)
        metrics.ticketBytes.record(orchestrator.tickets.bytes)
        _ = await store.snapshot()
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer()))
        )
    }
    admin.get("/openapi.yaml") { _, _ in OpenAPIDocument.response() }
    services.append(
        Application(
            router: admin, server: .http1(configuration: http1.guarded(by: adminGuards)),
            configuration: .init(address: .hostname(settings.adminHost, port: settings.adminPort), serverName: nil),
            onServerRunning: { channel in await onAdminRunning(channel.localAddress?.port ?? settings.adminPort) },
            logger: logger))

    // The page surface.
    let router = Router(context: PageContext.self)
    let origins = AllowedOrigins(extra: settings.corsOrigins, servedConfigs: servedConfigs)
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: PageGuardMiddleware(origins: origins, metrics: metrics))
    router.add(middleware: UnmatchedRouteMiddleware(surface: "page"))
    let routes = router.group().add(middleware: JSONBodyMiddleware())
    router.get("/healthz") { _, _ in HealthAnswer() }
    router.get("/readyz") { _, _ in
        var answer = ReadinessAnswer(ready: false)
        if let loaded = currentConfig() {
            answer.ready = true
            answer.version = loaded.version
        } else {
            answer.reason = updater?.status().notReadyReason ?? "no valid prefetch config is loaded"
        }
        if let redis { answer.store = redis.isDegraded ? "degraded" : "ok" }
        return Answer(status: answer.ready ? .ok : .serviceUnavailable, value: answer)
    }
    router.get("/openapi.yaml") { _, _ in OpenAPIDocument.response() }
    routes.addRoutes(prefetch.routes)
    routes.addRoutes(renderers.routes)
    routes.addRoutes(invalidation.pageRoutes)
    router.addRoutes(StaticRoutes(currentConfig: currentConfig, adminPort: settings.adminPort).routes)

    // Shutdown runs in reverse: the page server stops first, then the operator server, the pools, the fetch
    // runner (draining in-flight fetches), the config updater, the store, the resolver and last the fetcher.
    var pageHTTP1 = http1
    if settings.fastHandoff {
        let handoff = FastHandoff(orchestrator: orchestrator, origins: origins, requestMetrics: FastHandoffMetrics(), renderers: pools)
        // The fast path keeps the connection's idle timeout itself (it answers requests the state handler never sees).
        let idleTimeout = pageHTTP1.idleTimeout
        pageHTTP1.idleTimeout = nil
        pageHTTP1.additionalChannelHandlers = {
            [FastHandoffInstaller(handoff: handoff, guards: pageGuards, idleTimeout: idleTimeout)]
        }
    }
    return Application(
        router: router,
        server: .http1(configuration: pageHTTP1.guarded(by: pageGuards)),
        configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: nil),
        services: services,
        onServerRunning: { channel in
            await onServerRunning(channel.localAddress?.port ?? settings.port)
        },
        logger: logger
    )
}

/// The API description served at `/openapi.yaml` on both surfaces (the same file as `openapi.yaml` at the
/// repository root; its tags say which surface serves each operation).
enum OpenAPIDocument {
    static let bytes: [UInt8] = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"),
            let data = try? Data(contentsOf: url)
        else { return Array("# openapi.yaml is missing from the resource bundle next to the prefetch binary\n".utf8) }
        return Array(data)
    }()

    static func response() -> Response {
        Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
