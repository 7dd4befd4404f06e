// swift-tools-version:6.2
//
// The planning benchmark's in-process harness, kept out of the main package so the product build does not
// grow: it depends on the root package by path and uses only PrefetchCore's public API.
import PackageDescription

let package = Package(
    name: "planning-bench",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "prefetch", path: "../..")
    ],
    targets: [
        .executableTarget(
            name: "planning-bench",
            dependencies: [.product(name: "PrefetchCore", package: "prefetch")],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ]
        )
    ]
)
