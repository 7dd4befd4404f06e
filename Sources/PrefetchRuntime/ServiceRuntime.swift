// PrefetchRuntime: the composition root. Settings in, every component built and wired, the services handed to
// swift-service-lifecycle. `prefetch serve` and the tests run the same function; nothing else builds components.
import ConfigUpdater
public import Hummingbird
public import Logging
public import Metrics
public import PrefetchCore
import PrefetchDNS
public import PrefetchEngine
import PrefetchFetcher
import PrefetchService
import PrefetchStore
public import Prometheus
import RedisStore
import RendererPool
import ResourceProvider
import ServiceLifecycle
public import Tracing

/// Builds the prefetch service: the very app `prefetch serve` runs, so tests can run it with test settings
/// (port 0, small budgets) instead of a parallel setup.
///
/// The components, in the order they start (and the reverse of the order they stop): the fetcher (libcurl's
/// loop), the DNS resolver, the response store (memory, or Redis shared by replicas), the config (a live source
/// followed by the `ConfigUpdater`, or the fixed `config`), the ticket registry, the orchestrator and its fetch
/// runner, the renderer pools, the offline-package refresher (with `settings.resources`); then the two HTTP surfaces
/// (`PrefetchService.makeApplication`): the page surface on `host:port` and the operator surface on
/// `adminHost:adminPort`. See `SECURITY.md`.
///
/// - Parameters:
///   - settings: listen addresses, budgets and limits.
///   - config: a fixed prefetch config, used when `settings.configSource` is nil (tests); with a config
///     source the service loads and follows it itself.
///   - registry: where metrics are collected; `GET /metrics` renders it.
///   - exportedMetrics: where the same metrics also go (the OTLP exporter's factory, ``OTLPExport``), or nil.
///   - logger: the service logger.
///   - onServerRunning: called with the page surface's bound port once it listens.
///   - onAdminRunning: called with the operator surface's bound port once it listens.
/// - Throws: ``PoolError`` when a renderer profile is invalid, ``DNSError`` when the DNS settings are,
///   ``ConfigSettingsError`` when the config source settings are, ``RedisStoreError`` for a bad store URL.
public func buildApplication(
    settings: ServiceSettings,
    config: ConfigHolder? = nil,
    registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
    exportedMetrics: (any MetricsFactory)? = nil,
    logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onAdminRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    clock: any ServiceClock = ContinuousClock(),
    tracer: any Tracer = InstrumentationSystem.tracer
) throws -> some ApplicationProtocol {
    let prometheus = PrometheusMetricsFactory(registry: registry)
    let factory: any MetricsFactory = exportedMetrics.map { MultiplexMetricsHandler(factories: [prometheus, $0]) } ?? prometheus
    let metrics = EngineMetrics(factory: factory)
    var services: [any Service] = []
    var fetcherConfiguration = settings.fetcher
    fetcherConfiguration.maxBufferedBytes = min(fetcherConfiguration.maxBufferedBytes, settings.engine.inFlightBytes)
    let fetcher = Fetcher(configuration: fetcherConfiguration, logger: logger)
    services.append(fetcher)
    let resolver = try HostResolver(settings: settings.dns, fetcher: fetcher, logger: logger, metricsFactory: factory)
    services.append(resolver)

    let store: any ResponseStore
    // Tickets go where replicas share them (Redis's records), or stay in this process.
    let records: (any RecordStore)?
    if let url = settings.store.url {
        var configuration = RedisStore.Configuration()
        if let connections = settings.store.connections { configuration.connections = connections }
        // Room in a Redis reply for the largest response the fetcher keeps, with its headers (libcurl's cap is far
        // below the 1 MiB allowed for them).
        configuration.maximumValueBytes = max(configuration.maximumValueBytes, settings.engine.maximumResponseBytes + 1024 * 1024)
        let shared = try RedisStore(url: url, configuration: configuration, logger: logger, metricsFactory: factory)
        store = shared
        records = shared
        services.append(shared)
    } else {
        records = nil
        // Response bodies still arriving count against the store's budget: --store-bytes bounds the responses the
        // process holds, kept or in flight (docs/design/response-store.md, "Memory").
        store = MemoryStore(
            budgetBytes: settings.store.bytes, lockAge: settings.store.lockAge, logger: logger, metricsFactory: factory, clock: clock,
            heldElsewhere: { fetcher.bufferedBytes })
    }

    // The config: a live source (file or URL, checked by the updater) or a fixed one given by the caller.
    let updater: ConfigUpdater?
    let configs: any ConfigProvider
    if let source = settings.configSource {
        let live = try ConfigUpdater(settings: source, fetcher: fetcher, logger: logger, metricsFactory: factory, clock: clock) {
            applied in
            resolver.prefetch(hosts: applied.served.apiHosts)
            if applied.previous != nil {
                // Responses of interfaces neither served config has any more are dropped; tickets stay.
                let dropped = await store.retain(labels: applied.served.interfaceNames)
                if dropped > 0 { logger.info("dropped stored responses of removed interfaces", metadata: ["entries": "\(dropped)"]) }
            }
        }
        updater = live
        configs = live
        services.append(live)
    } else {
        updater = nil
        configs = config ?? ConfigHolder(nil)
        if let loaded = config?.current { resolver.prefetch(hosts: loaded.apiHosts) }
    }
    // A ticket leaving the registry counts its unread requests as waste of the config version it was planned with.
    let ticketLeft: @Sendable (Ticket) -> Void = { metrics.ticketLeft($0) }
    let tickets: any TicketRegistry =
        if let records {
            SharedTicketRegistry(
                records: records, capacity: settings.engine.ticketCapacity, budgetBytes: settings.engine.ticketBytes, clock: clock,
                onDrop: ticketLeft)
        } else {
            LocalTicketRegistry(
                capacity: settings.engine.ticketCapacity, budgetBytes: settings.engine.ticketBytes, clock: clock, onDrop: ticketLeft)
        }
    let orchestrator = Orchestrator(
        settings: settings.engine, store: store, fetcher: fetcher, resolver: resolver, tickets: tickets, metrics: metrics, logger: logger,
        clock: clock, tracer: tracer, configs: configs)
    orchestrator.recordBudgetGauges()
    services.append(orchestrator.runner)
    let pools = try RendererPools(profiles: settings.renderers, logger: logger, metricsFactory: factory)
    services.append(pools)
    // The offline-package provider: its refresher fetches through the fetcher, which starts before it.
    let resources = settings.resources.map {
        ResourceProvider(settings: $0, fetcher: fetcher, logger: logger, metricsFactory: factory)
    }
    if let resources { services.append(ResourceRefresher(provider: resources)) }

    // Shutdown runs in reverse: the page server stops first, then the operator server, the resource refresher, the
    // pools, the fetch runner (draining in-flight fetches), the config updater, the store, the resolver and last the
    // fetcher.
    return makeApplication(
        ServiceParts(
            orchestrator: orchestrator, renderers: pools, listeners: settings.listeners,
            configSource: settings.configSource?.source, configPath: settings.configPath, updater: updater,
            registry: registry, logger: logger, resources: resources),
        services: services, onServerRunning: onServerRunning, onAdminRunning: onAdminRunning)
}
