// swift-tools-version:6.2
//
// libFuzzer targets for the byte parsers that read outsider input (STYLE.md: unsafe byte code is fuzzed with
// AddressSanitizer). Run them with scripts/fuzz.sh; docs/testing.md#fuzzing says how and where crashes land.
//
// The main package exports only `PrefetchCore` as a product, and the parsers' own entry points (`Template`,
// `PathPattern`, `QueryPair`, `EntryCodec`, `RESPParser`) are internal. So this package does not depend on ".." and instead builds
// the very same source files (through symlinks: `MainSources` for whole targets, `Mirror/` for single files; never copies) as its own modules,
// with testability on so each fuzz target can `@testable import` them, and without the modules the parsers do not
// need (curl, NIO, Hummingbird): the build stays small enough for CI.
import PackageDescription

/// Optimised (the parsers' speed is what makes a short run worth something), with debug preconditions kept: an
/// `UnsafeBufferPointer` subscript out of bounds traps even where AddressSanitizer sees no poisoned byte (the spare
/// capacity of an array), and instrumented for libFuzzer coverage and AddressSanitizer.
let instrumented: [SwiftSetting] = [.unsafeFlags(["-enable-testing", "-assert-config", "Debug", "-sanitize=fuzzer,address"])]
let sanitizedLink: [LinkerSetting] = [.unsafeFlags(["-sanitize=fuzzer,address"])]

/// One executable per fuzz target, each with its own `LLVMFuzzerTestOneInput` and `<Module>_main`.
func fuzzTarget(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["FuzzSupport"] + dependencies,
        swiftSettings: instrumented + [.unsafeFlags(["-parse-as-library"])],
        linkerSettings: sanitizedLink
    )
}

let package = Package(
    name: "prefetch-fuzz",
    platforms: [.macOS(.v15)],
    products: ["FuzzJSON", "FuzzConfig", "FuzzTape", "FuzzURL", "FuzzPlan", "FuzzTemplate", "FuzzRedisCodec", "FuzzRESP"].map {
        .executable(name: $0, targets: [$0])
    },
    dependencies: [
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // The main package's modules, from its own sources. The digests (the system's libcrypto) are not fuzzed:
        // no parser of outsider bytes, so Digests is built plain.
        .systemLibrary(name: "CCrypto", path: "MainSources/CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "Digests", dependencies: ["CCrypto"], path: "MainSources/Digests"),
        .target(
            name: "PrefetchCore",
            dependencies: [
                .product(name: "HTTPTypes", package: "swift-http-types"), "Digests",
            ],
            path: "MainSources/PrefetchCore",
            swiftSettings: instrumented
        ),
        .target(
            name: "PrefetchStore",
            dependencies: [
                "PrefetchCore",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "Digests",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "MainSources/PrefetchStore",
            swiftSettings: instrumented
        ),
        // Only the byte parsers of RedisStore: the entry codec and the RESP2 codec (with the reply type it produces).
        // The rest is the pool, the store and the subscriber's hiredis client, which read no bytes of their own.
        .target(
            name: "RedisStore",
            dependencies: [
                "PrefetchCore", "PrefetchStore", .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Mirror/RedisStore",
            swiftSettings: instrumented
        ),
        // The safe reference implementations the byte parsers are held to (the same files the property tests use: the
        // reference parsers, and the tree-based config loader the tape-based one replaced).
        .target(
            name: "FuzzReference",
            dependencies: ["PrefetchCore", .product(name: "HTTPTypes", package: "swift-http-types")],
            path: "Mirror/FuzzReference",
            swiftSettings: instrumented
        ),
        .target(name: "CLibFuzzer"),
        .target(
            name: "FuzzSupport",
            dependencies: ["CLibFuzzer", "PrefetchCore", "FuzzReference", .product(name: "HTTPTypes", package: "swift-http-types")],
            swiftSettings: instrumented
        ),
        fuzzTarget("FuzzJSON", ["PrefetchCore", "FuzzReference"]),
        fuzzTarget("FuzzConfig", ["PrefetchCore"]),
        fuzzTarget("FuzzTape", ["PrefetchCore", "FuzzReference"]),
        fuzzTarget("FuzzURL", ["PrefetchCore", "FuzzReference"]),
        fuzzTarget("FuzzPlan", ["PrefetchCore", "FuzzReference"]),
        fuzzTarget("FuzzTemplate", ["PrefetchCore"]),
        fuzzTarget("FuzzRedisCodec", ["RedisStore", "PrefetchStore", .product(name: "HTTPTypes", package: "swift-http-types")]),
        fuzzTarget("FuzzRESP", ["RedisStore", .product(name: "NIOCore", package: "swift-nio")]),
    ]
)
