// swift-tools-version:6.2
//
// The prefetch orchestrator. One library target per concern, a thin `prefetch`
// executable on top:
//
//   CCrypto          the C world: the system's libcrypto (OpenSSL 3, which libcurl links too) through pkg-config (only Digests imports it)
//   Digests          SHA-256, HMAC-SHA256 keyed once and copied per use, SHA-1 and MD5 as value types, on libcrypto's EVP API
//   PrefetchCore     config protocol, validation, page matching, request composition, which config a caller gets (no networking)
//   CCurl            the C world: libcurl through pkg-config, with typed shims (only PrefetchFetcher imports it)
//   PrefetchFetcher  libcurl multi interface driven from one loop thread; async fetch API
//   ConfigUpdater    keeps the prefetch config current: polling, fatigue window, fallback source, last-good copy
//   PrefetchStore    TTL response store with single flight and identity isolation
//   CHiredis         the C world: hiredis through pkg-config, with typed shims (only RedisStore imports it)
//   RedisStore       the shared ResponseStore backed by Redis, for several replicas behind a load balancer (RESP on NIO)
//   RendererPool     warm renderer pool (modelled and process renderers)
//   PrefetchEngine   the orchestrator: plans, triggers, tickets, who may read what, the fetch runner (no HTTP types)
//   PageAPI          the page surface's operations, each a function from a parsed request to an answer (no server, no router)
//   PrefetchService  the HTTP layer: the page pipeline (NIO) into PageAPI, the operator surface (Hummingbird's router)
//   PrefetchRuntime  the composition root: settings in, every component built and wired, services to the lifecycle
//   PrefetchDNS      DNS prefetch and HTTPDNS: host answers cached by TTL, handed to the fetcher as address pins
//   ResourceProvider the offline-package provider: the operator's resource manifest, fetched, hashed, stored by hash, published as versioned maps
//   Telemetry        OTLP/HTTP export of traces and metrics: a Tracer, a MetricsFactory, protobuf by hand, sent through PrefetchFetcher
//   PrefetchTestUpstream  a scriptable upstream HTTP/1.1 server for tests, benchmarks and the demo (plain NIO)
//   COpenSSL         the C world: the system's libssl (OpenSSL 3) through pkg-config (only PrefetchTestUpstreamTLS imports it)
//   PrefetchTestUpstreamTLS  the same upstream over TLS (the system's OpenSSL, no BoringSSL) and HTTP/2 (NIOHTTP2), and TestPKI
//   PrefetchTestSupport   the helpers every test target shares: eventually, ManualClock, withUpstream, withFetcher, Echo, CapturedLogs, RedisServer, RedisCluster
//   ServiceTestSupport    (Tests/ServiceTestSupport) the service test targets' helpers: the service in process or on a socket, prefetch serve as a process, replies
//   prefetch         the CLI: plan, validate, fetch, serve
//   prefetch-upstream, prefetch-upstream-tls  the test upstreams as processes (the demo's is the plain one)
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// What each of the service's test targets depends on (below).
let serviceTestDependencies: [Target.Dependency] = [
    "ServiceTestSupport",
    .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
    .product(name: "PropertyBased", package: "swift-property-based"),
    "PrefetchTestSupport",
    "PageAPI",
    "PrefetchCore",
    "PrefetchDNS",
    "PrefetchEngine",
    "PrefetchFetcher",
    "PrefetchRuntime",
    "PrefetchService",
    "PrefetchStore",
    "RendererPool",
    "ResourceProvider",
    "Telemetry",
    "PrefetchTestUpstream",
    "PrefetchTestUpstreamTLS",
    "prefetch",
    "prefetch-upstream",
    .product(name: "Hummingbird", package: "hummingbird"),
    .product(name: "Logging", package: "swift-log"),
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOEmbedded", package: "swift-nio"),
    .product(name: "NIOHTTP1", package: "swift-nio"),
    .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
    .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "Prometheus", package: "swift-prometheus"),
    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
]

let package = Package(
    name: "prefetch",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "prefetch", targets: ["prefetch"]),
        .executable(name: "prefetch-upstream", targets: ["prefetch-upstream"]),
        .executable(name: "prefetch-upstream-tls", targets: ["prefetch-upstream-tls"]),
        .library(name: "PrefetchCore", targets: ["PrefetchCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // Without Hummingbird's default traits: ConfigurationSupport (swift-configuration, which nothing here reads) and
        // FullFoundation (Foundation where FoundationEssentials does: its URL-encoded forms' dates, which nothing here uses).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swiftlang/swift-subprocess.git", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        .target(
            name: "PrefetchCore",
            dependencies: [
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "Digests",
            ],
            swiftSettings: swiftSettings
        ),
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "Digests",
            dependencies: ["CCrypto"],
            swiftSettings: swiftSettings
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(
            name: "PrefetchFetcher",
            dependencies: [
                "PrefetchCore",
                "CCurl",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PrefetchDNS",
            dependencies: [
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "PrefetchCore",
                "PrefetchFetcher",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PrefetchStore",
            dependencies: [
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                "PrefetchCore",
                "Digests",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // No pkg-config: Debian's hiredis.pc adds `-D_FILE_OFFSET_BITS=64`, a flag SwiftPM refuses with a warning on
        // every build, and nothing else the shim needs (it includes <hiredis/hiredis.h> from the default path).
        .systemLibrary(
            name: "CHiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        .target(
            name: "RedisStore",
            dependencies: [
                "CHiredis",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                "PrefetchCore",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "PrefetchStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                "Digests",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RendererPool",
            dependencies: [
                "PrefetchCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ConfigUpdater",
            dependencies: [
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "PrefetchCore",
                "PrefetchFetcher",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PrefetchEngine",
            dependencies: [
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "ConfigUpdater",
                "PrefetchCore",
                "PrefetchDNS",
                "PrefetchFetcher",
                "PrefetchStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The page API: every page operation as a function from a parsed request to an answer, each rule once; no
        // HTTP server or router (the page pipeline and the operator router in PrefetchService call it).
        .target(
            name: "PageAPI",
            dependencies: [
                "PrefetchEngine",
                "PrefetchCore",
                "PrefetchStore",
                "RendererPool",
                "ResourceProvider",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            resources: [.copy("Resources/openapi.yaml"), .copy("Resources/web")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PrefetchService",
            dependencies: [
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                "PageAPI",
                "PrefetchEngine",
                "Digests",
                "ConfigUpdater",
                "PrefetchCore",
                "PrefetchStore",
                "RendererPool",
                "ResourceProvider",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ResourceProvider",
            dependencies: [
                "PrefetchCore",
                "PrefetchFetcher",
                "Digests",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // OTLP export (`prefetch serve --otlp`), in every build: no HTTP client, TLS or protobuf library of its own.
        .target(
            name: "Telemetry",
            dependencies: [
                "PrefetchCore",
                "PrefetchFetcher",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // The demo upstream: plain NIO only, so it adds neither NIOSSL (a BoringSSL of its own) nor NIOHTTP2 to a first run.
        .target(
            name: "PrefetchRuntime",
            dependencies: [
                "ConfigUpdater",
                "PrefetchCore",
                "PrefetchDNS",
                "PrefetchEngine",
                "PrefetchFetcher",
                "PrefetchService",
                "PrefetchStore",
                "RedisStore",
                "RendererPool",
                "ResourceProvider",
                "Telemetry",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PrefetchTestUpstream",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The test upstream's TLS server: the system's libssl (OpenSSL 3, beside the libcrypto Digests uses), so no
        // target builds a BoringSSL of its own.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "PrefetchTestUpstreamTLS",
            dependencies: [
                "COpenSSL",
                "PrefetchTestUpstream",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "Subprocess", package: "swift-subprocess"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PrefetchTestSupport",
            dependencies: [
                "PrefetchCore",
                "PrefetchFetcher",
                "PrefetchTestUpstream",
                "PrefetchTestUpstreamTLS",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // glibc allocator tuning for the serve process (the one C call Foundation's Glibc module lacks).
        .target(name: "CMallocTuning"),
        .executableTarget(
            name: "prefetch",
            dependencies: [
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "CMallocTuning",
                "ConfigUpdater",
                "PrefetchCore",
                "PrefetchDNS",
                "PrefetchEngine",
                "PrefetchFetcher",
                "PrefetchRuntime",
                "PrefetchService",
                "PrefetchStore",
                "RendererPool",
                "ResourceProvider",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "prefetch-upstream",
            dependencies: [
                "PrefetchTestUpstream",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "prefetch-upstream-tls",
            dependencies: [
                "PrefetchTestUpstream",
                "PrefetchTestUpstreamTLS",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DigestsTests",
            dependencies: ["Digests"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PrefetchCoreTests",
            dependencies: [
                "PrefetchTestSupport",
                "PrefetchCore",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PrefetchFetcherTests",
            dependencies: [
                "PrefetchTestSupport",
                "PrefetchFetcher",
                "PrefetchStore",
                .product(name: "NIOCore", package: "swift-nio"),
                "PrefetchTestUpstream",
                "PrefetchTestUpstreamTLS",
                "prefetch-upstream",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PrefetchDNSTests",
            dependencies: [
                "PrefetchTestSupport",
                "PrefetchDNS",
                "PrefetchFetcher",
                "PrefetchTestUpstream",
                "PrefetchTestUpstreamTLS",
                "prefetch-upstream",
                "prefetch-upstream-tls",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PrefetchStoreTests",
            dependencies: [
                "PrefetchTestSupport",
                "PrefetchTestUpstream",
                "PrefetchStore",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RedisStoreTests",
            dependencies: [
                "PrefetchTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                "RedisStore",
                "PrefetchStore",
                "PrefetchTestUpstream",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RendererPoolTests",
            dependencies: [
                "PrefetchTestSupport",
                "PrefetchTestUpstream",
                "RendererPool",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ConfigUpdaterTests",
            dependencies: [
                "PrefetchTestSupport",
                "PrefetchTestUpstream",
                "ConfigUpdater",
                "PrefetchCore",
                "PrefetchFetcher",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TelemetryTests",
            dependencies: [
                "PrefetchTestSupport",
                "PrefetchTestUpstream",
                "PrefetchCore",
                "PrefetchFetcher",
                "Telemetry",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ResourceProviderTests",
            dependencies: [
                "PrefetchTestSupport",
                "PrefetchTestUpstream",
                "PrefetchFetcher",
                "ResourceProvider",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The service's tests, by what they need (docs/testing.md): ServiceUnitTests in process (the router without
        // a socket, pure functions), ServiceSocketTests against one live service (in process on a socket, or one
        // `prefetch serve` or CLI process), DeploymentTests several processes (replicas on Redis deployments),
        // BrowserTests headless Chromium. Their shared helpers are ServiceTestSupport.
        .target(
            name: "ServiceTestSupport",
            dependencies: [
                "PrefetchTestSupport",
                "PageAPI",
                "PrefetchCore",
                "PrefetchEngine",
                "PrefetchRuntime",
                "PrefetchService",
                "PrefetchTestUpstream",
                "PrefetchTestUpstreamTLS",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            path: "Tests/ServiceTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ServiceUnitTests",
            dependencies: serviceTestDependencies,
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ServiceSocketTests",
            dependencies: serviceTestDependencies,
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DeploymentTests",
            dependencies: serviceTestDependencies,
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BrowserTests",
            dependencies: serviceTestDependencies,
            swiftSettings: swiftSettings
        ),
    ]
)
