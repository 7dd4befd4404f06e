// swift-tools-version:6.2
import PackageDescription

// What a native web shell links to talk to the prefetch service's page surface. The HTTP client is generated from the
// page operations of the service's OpenAPI document (Sources/PrefetchShellAPI: the document, the generator's config
// and the generated sources, committed by scripts/generate-shell-api.sh, whose --check in the service's lint fails
// when any of them changed since the last generation; a live test fails when the service serves another document). An app linking this package builds
// no generator and trusts no build plugin. The library's public surface is Foundation only.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    // Imports are internal unless marked public: the compiler refuses a public API that shows a generated or
    // runtime type, which keeps the library's surface Foundation only.
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "PrefetchShell",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "PrefetchShell", targets: ["PrefetchShell"]),
        // The offline package (seed 001's web-container offline cache): a product of its own, so a shell that does
        // not keep pages' static resources on the device links neither it nor its hashing.
        .library(name: "PrefetchOffline", targets: ["PrefetchOffline"]),
        // The document-start script as a command, for the service's browser test harness.
        .executable(name: "prefetch-shell-script", targets: ["prefetch-shell-script"]),
        // A shell's request interceptor on the offline package, as a command: the browser test and the benchmark
        // hand it each request the page makes (scripts/offline-browser.py).
        .executable(name: "prefetch-shell-offline", targets: ["prefetch-shell-offline"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        .target(
            name: "PrefetchShellAPI",
            dependencies: [.product(name: "OpenAPIRuntime", package: "swift-openapi-runtime")],
            // The generator's input, kept beside its output (Generated/).
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PrefetchShell",
            dependencies: [
                "PrefetchShellAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            // The Public Suffix List snapshot the cookie rules read (scripts/update-public-suffixes.sh refreshes it).
            resources: [.copy("Resources/public_suffix_list.dat")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PrefetchOffline",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            // SHA-256 and MD5 are plain Swift (Sources/PrefetchOffline/Digest.swift): no crypto library, so no
            // BoringSSL to compile.
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "prefetch-shell-script",
            dependencies: ["PrefetchShell"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "prefetch-shell-offline",
            dependencies: ["PrefetchOffline"],
            swiftSettings: swiftSettings
        ),
        // The child processes of the live tests (the service, its test upstream, file servers), for both test targets.
        .target(
            name: "ShellTestSupport",
            path: "Tests/ShellTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PrefetchShellTests",
            dependencies: ["PrefetchShell", "ShellTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PrefetchOfflineTests",
            dependencies: ["PrefetchOffline", "ShellTestSupport"],
            swiftSettings: swiftSettings
        ),
    ]
)
