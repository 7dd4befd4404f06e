public import ConfigUpdater
import Foundation
public import Hummingbird
import HummingbirdCore
public import Logging
import Metrics
import NIOCore
import PageAPI
import PrefetchCore
public import PrefetchEngine
import PrefetchStore
public import Prometheus
public import RendererPool
public import ResourceProvider
public import ServiceLifecycle

/// What the two HTTP surfaces route to, built by the composition root (`PrefetchRuntime.buildApplication`).
public struct ServiceParts: Sendable {
    public var orchestrator: Orchestrator
    public var renderers: RendererPools
    /// Where the two surfaces listen, and how.
    public var listeners: ListenerSettings
    /// Where a live config comes from (a file's path or a URL); nil for a fixed config.
    public var configSource: String?
    /// The config's path as given (for the debug view when the config is fixed).
    public var configPath: String
    /// The live config's updater (nil with a fixed config): the operator's config routes drive it.
    public var updater: ConfigUpdater?
    /// Where metrics are collected; `GET /metrics` renders it.
    public var registry: PrometheusCollectorRegistry
    public var logger: Logger
    /// The offline-package provider (`--resources`); nil: its routes answer the empty map, version "0".
    public var resources: ResourceProvider?

    public init(
        orchestrator: Orchestrator, renderers: RendererPools, listeners: ListenerSettings, configSource: String?, configPath: String,
        updater: ConfigUpdater?,
        registry: PrometheusCollectorRegistry, logger: Logger, resources: ResourceProvider? = nil
    ) {
        self.resources = resources
        self.orchestrator = orchestrator
        self.renderers = renderers
        self.listeners = listeners
        self.configSource = configSource
        self.configPath = configPath
        self.updater = updater
        self.registry = registry
        self.logger = logger
    }
}

/// The most bytes a request head (request line and header fields) may have on either listener: above the longest
/// request the API accepts with room to spare, so that a parameter just over its own limit (a page URL of 8 KiB of
/// four-byte characters, percent-encoded, is 96 KiB) is refused by the operation with its precise `400`
/// (`url-too-long`), and only a head no valid request comes near gets the transport's `431 too-large`.
public let requestHeadLimit = 128 * 1024

/// The service's two HTTP surfaces as one application running `services` (the components, in start order).
///
/// The returned application serves the **page surface** (what shells and pages call) on `host:port`. The
/// **operator surface** (`/ui`, debug, plan, config, renderer statistics, `/metrics`) is a second server on
/// `adminHost:adminPort`, run as one of the application's services, so it is never reachable where pages are
/// unless an operator binds it there. See `SECURITY.md`.
public func makeApplication(
    _ parts: ServiceParts,
    services: [any Service],
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onAdminRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let (orchestrator, registry, logger) = (parts.orchestrator, parts.registry, parts.logger)
    let settings = parts.listeners
    let factory = PrometheusMetricsFactory(registry: registry)
    let routes = RouteSets(parts, factory: factory)
    var http1 = HTTP1Channel.Configuration(idleTimeout: TimeAmount.nanoseconds(Int64(settings.idleTimeout.milliseconds) * 1_000_000))
    // Each listener's cap on open connections and the body timeout of its every route (ConnectionGuards.swift).
    // An over-long request head is answered `431` in the API's JSON shape on both listeners: by the guard, or on the
    // page surface's fast path by its handler below the codec.
    let headLimit = requestHeadLimit
    http1.httpDecoder = .init(maxHeaderFieldSize: headLimit, maxHeaderListSize: headLimit)
    let pageGuards = ConnectionGuards(
        listener: .page, maximum: settings.maxConnections, bodyTimeout: settings.bodyTimeout, headLimit: nil, factory: factory,
        logger: logger)
    let adminGuards = ConnectionGuards(
        listener: .operator, maximum: settings.adminMaxConnections, bodyTimeout: settings.bodyTimeout, headLimit: headLimit,
        factory: factory, logger: logger)

    // The operator surface, on its own listener, one of the page application's services: it stops right after the
    // page surface.
    let admin = Application(
        router: operatorRouter(parts, routes: routes), server: .http1ClosingUnserved(configuration: http1.guarded(by: adminGuards)),
        configuration: .init(address: .hostname(settings.adminHost, port: settings.adminPort), serverName: nil),
        onServerRunning: { channel in await onAdminRunning(channel.localAddress?.port ?? settings.adminPort) },
        logger: logger)

    // The page surface: one pipeline per connection (`PageChannel`) answers every request; the application runs it
    // with the services, and its router is empty.
    let origins = AllowedOrigins(extra: orchestrator.settings.corsOrigins, servedConfigs: { orchestrator.servedConfigs() })
    let handoff = FastHandoff(
        orchestrator: orchestrator, origins: origins, requestMetrics: FastHandoffMetrics(), renderers: parts.renderers)
    let api = PageAPI(parts, handoff: handoff, routes: routes)
    let page = PageChannel(handoff: handoff, api: api, guards: pageGuards, idleTimeout: http1.idleTimeout, headLimit: headLimit)
    return Application(
        router: Router(context: BasicRequestContext.self),
        server: HTTPServerBuilder { _ in page },
        configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: nil),
        services: services + [admin],
        onServerRunning: { channel in
            await onServerRunning(channel.localAddress?.port ?? settings.port)
        },
        logger: logger
    )
}

extension PageAPI {
    /// The page API of a service's parts, beside its store routes (`handoff`).
    init(_ parts: ServiceParts, handoff: FastHandoff, routes: RouteSets) {
        let orchestrator = parts.orchestrator
        self.init(
            hot: handoff,
            statics: StaticRoutes(
                currentConfig: { orchestrator.currentConfig() }, adminPort: parts.listeners.adminPort, demo: parts.listeners.demo),
            resources: routes.resources, renderers: routes.renderers, invalidation: routes.invalidation,
            document: parts.listeners.demo ? OpenAPIDocument.pageWithDemo : OpenAPIDocument.page,
            endpoints: EndpointTable(surface: "page"))
    }
}

/// The route sets the two surfaces draw on.
struct RouteSets {
    let prefetch: PrefetchRoutes
    let renderers: RendererRoutes
    let invalidation: InvalidationRoutes
    let resources: ResourceRoutes

    init(_ parts: ServiceParts, factory: PrometheusMetricsFactory) {
        resources = ResourceRoutes(
            provider: parts.resources
                ?? ResourceProvider(
                    settings: ResourceSettings(manifest: nil, directory: ""), fetcher: nil, logger: parts.logger, metricsFactory: factory))
        prefetch = PrefetchRoutes(orchestrator: parts.orchestrator, bodyTimeout: parts.listeners.bodyTimeout)
        renderers = RendererRoutes(pools: parts.renderers, prefetch: prefetch)
        invalidation = InvalidationRoutes(prefetch: prefetch, metrics: InvalidationMetrics(factory: factory))
    }
}

/// The operator surface's router: config, debug, renderer statistics, invalidation by label or key, `/metrics`.
func operatorRouter(_ parts: ServiceParts, routes: RouteSets) -> Router<BasicRequestContext> {
    let (orchestrator, registry) = (parts.orchestrator, parts.registry)
    let settings = parts.listeners
    let admin = Router(context: BasicRequestContext.self)
    admin.add(middleware: KnownMethodMiddleware(metrics: FastHandoffMetrics()))
    admin.add(middleware: MetricsMiddleware())
    admin.add(middleware: AdminGuardMiddleware(token: settings.adminToken, adminHost: settings.adminHost, metrics: orchestrator.metrics))
    admin.add(middleware: UnmatchedRouteMiddleware(surface: "operator"))
    // Route groups run their middleware only for routes they hold, so an unknown route stays a 404 or 405.
    let group = admin.group().add(middleware: JSONBodyMiddleware())
    group.addRoutes(
        ConfigRoutes(
            updater: parts.updater, orchestrator: orchestrator, source: parts.configSource.map(Redaction.text) ?? "fixed",
            bodyTimeout: settings.bodyTimeout
        )
        .routes)
    group.addRoutes(
        DebugRoutes(
            orchestrator: orchestrator, renderers: routes.renderers, configPath: Redaction.text(parts.configSource ?? parts.configPath)
        ).routes)
    group.addRoutes(routes.renderers.statisticsRoutes)
    group.addRoutes(routes.invalidation.operatorRoutes)
    group.addRoutes(routes.resources.operatorRoutes)
    admin.get("/metrics") { _, _ in
        await orchestrator.recordGauges()
        orchestrator.recordBudgetGauges()
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer()))
        )
    }
    // The document describes the listener as configured: without a token it asks for no credential, as the server.
    let document = settings.adminToken == nil ? OpenAPIDocument.operatorWithoutToken : OpenAPIDocument.operator
    admin.get("/openapi.yaml") { _, _ in OpenAPIDocument.response(document) }
    return admin
}

extension OpenAPIDocument {
    /// `document` as the operator router serves it.
    static func response(_ document: [UInt8]) -> Response {
        Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: ByteBuffer(bytes: document)))
    }
}
