// swift-tools-version:6.2
// swift-openapi-generator, for scripts/generate-shell-api.sh alone. The shell SDK's HTTP client is generated ahead of
// time and committed (../Sources/PrefetchShellAPI/Generated), so an app that links the SDK builds neither the
// generator nor its dependencies, and Xcode asks it to trust no build plugin; this package is never one of the SDK's
// dependencies.
import PackageDescription

let package = Package(
    name: "PrefetchShellGenerator",
    dependencies: [
        // Exact: the committed sources are this version's output (another would regenerate them differently).
        .package(url: "https://github.com/apple/swift-openapi-generator", exact: "1.14.3")
    ],
    targets: []
)
