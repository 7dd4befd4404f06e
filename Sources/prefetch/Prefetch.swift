import ArgumentParser
import CMallocTuning
import ConfigUpdater
import Foundation
import HTTPTypes
import Logging
import Metrics
import PrefetchCore
import PrefetchDNS
import PrefetchEngine
import PrefetchFetcher
import PrefetchRuntime
import PrefetchService
import PrefetchStore
import Prometheus
import RendererPool
import ResourceProvider
import ServiceLifecycle
import Tracing
import UnixSignals

/// The `prefetch` command line. Each subcommand parses its arguments and calls into the libraries.
@main
struct Prefetch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prefetch",
        abstract: "Prefetch orchestrator: fetches an H5 page's API data while the page is still loading.",
        subcommands: [Serve.self, Plan.self, Fetch.self, Validate.self, HealthCheck.self, Resources.self]
    )

    /// The entry point. A synchronous subcommand (`plan`) runs here, on the process's main thread, so its config load
    /// allocates from glibc's main arena: an async `main` runs on the main queue, which libdispatch drains from a worker
    /// thread on Linux, where the load grew a secondary arena. Every other subcommand (and a command line that does not
    /// parse, for its message) goes to ArgumentParser's async `main` on a task, with the main thread parked in
    /// `dispatchMain()` as an async `main` parks it; the process exits 0 when that returns, as it did.
    static func main() {
        if var command = try? parseAsRoot(), !(command is any AsyncParsableCommand) {
            do { try command.run() } catch { exit(withError: error) }
            exit(withError: nil)
        }
        Task {
            await Self.main(nil)
            Foundation.exit(0)
        }
        dispatchMain()
    }
}

/// Options shared by every subcommand that reads the prefetch config.
struct ConfigOptions: ParsableArguments {
    @Option(name: .long, help: "Path of the prefetch config (default: $PREFETCH_CONFIG or configs/prefetch.json).")
    var config: String?

    var path: String {
        config ?? Environment.process.value("PREFETCH_CONFIG") ?? "configs/prefetch.json"
    }

    /// Loads the config (printing its warnings when asked); on failure prints every problem and exits 2.
    func load(showWarnings: Bool = false) throws -> LoadedConfig {
        do {
            let loaded = try ConfigLoader.load(path: path)
            if showWarnings {
                for warning in loaded.warnings { Console.error("warning: \(path): \(warning)") }
            }
            return loaded
        } catch {
            for warning in error.warnings { Console.error("warning: \(path): \(warning)") }
            Console.error("error: invalid config \(path):")
            for problem in error.problems { Console.error("  \(problem)") }
            throw ExitCode(2)
        }
    }
}

/// The environment variables a command reads (the process's, or a test's own): an empty value counts as unset.
struct Environment: Sendable {
    var variables: [String: String]

    /// The process's environment.
    static var process: Environment { Environment(variables: ProcessInfo.processInfo.environment) }

    func value(_ name: String) -> String? {
        guard let value = variables[name], !value.isEmpty else { return nil }
        return value
    }
}

/// Unbuffered output: lines appear at once even when stdout is a pipe.
enum Console {
    static func out(_ line: String) {
        let text = Array((line + "\n").utf8)
        _ = text.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }

    static func error(_ line: String) {
        let text = Array((line + "\n").utf8)
        _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}

extension Prefetch {
    /// Synchronous, so ``Prefetch/main()`` runs it on the main thread (glibc's main arena: no secondary arena grown
    /// for a 4 MB config, which was a tenth of the process's time), and it ends the process as soon as the plan is out
    /// instead of releasing the config first.
    struct Plan: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the upstream requests a page open would make (dry run, no network).",
            discussion: "Exit codes: 0 planned; 2 invalid config or page URL; 3 no config entry matches the page."
        )

        @Argument(help: "The page URL being opened, with its query.")
        var page: String

        @OptionGroup var config: ConfigOptions

        @Flag(name: .long, help: "Print the plan as JSON.")
        var json = false

        func run() throws {
            let loaded = try config.load()
            do {
                let plan = try PrefetchCore.Plan.make(page: page, config: loaded.config)
                Console.out(json ? plan.json.jsonText : plan.humanDescription)
                // Nothing is left to do: exit without tearing the config down (the kernel takes the memory back).
                withExtendedLifetime(loaded) { Foundation.exit(0) }
            } catch {
                Console.error("error: \(error)")
                switch error {
                case .invalidPageURL: throw ExitCode(2)
                case .noMatch: throw ExitCode(3)
                }
            }
        }
    }

    struct Validate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a prefetch config and list every problem.",
            discussion: "Exit codes: 0 valid; 2 invalid (every problem is listed on stderr)."
        )

        @OptionGroup var config: ConfigOptions

        func run() async throws {
            let loaded = try config.load(showWarnings: true)
            let patterns = loaded.config.pages.filter { $0.pattern != nil }.count
            Console.out("config \(config.path) is valid")
            Console.out("name: \(loaded.config.name)")
            Console.out("version: \(loaded.config.version)")
            Console.out("pages: \(loaded.config.pages.count) (\(patterns) patterns)")
            Console.out("interfaces: \(loaded.config.interfaceCount)")
            if !loaded.warnings.isEmpty { Console.out("warnings: \(loaded.warnings.count)") }
        }
    }
}

/// Parses `--header 'Name: value'` options.
func parseHeaders(_ raw: [String]) throws -> HTTPFields {
    var fields = HTTPFields()
    for line in raw {
        guard let colon = line.firstIndex(of: ":"), let name = HTTPField.Name(String(line[..<colon])) else {
            throw ValidationError("--header \"\(line)\" must look like 'Name: value' with a valid header name")
        }
        let value = line[line.index(after: colon)...].drop { $0 == " " }
        fields.append(HTTPField(name: name, value: String(value)))
    }
    return fields
}

extension Prefetch {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the prefetch service (HTTP API) until SIGTERM or SIGINT.",
            discussion: """
                Two listeners: the page surface (--host/--port) for shells and pages, and the operator surface \
                (--admin-host/--admin-port, loopback by default) for /ui, /v1/debug, /v1/plan, /v1/config, /v1/renderers, /v1/resources/status and /metrics. \
                Every option has an environment variable: PREFETCH_CONFIG, PREFETCH_HOST, PREFETCH_PORT, PREFETCH_ADMIN_HOST, \
                PREFETCH_ADMIN_PORT, PREFETCH_ADMIN_TOKEN, PREFETCH_IDENTITY_KEY, PREFETCH_STORE_BYTES, PREFETCH_CORS_ORIGINS \
                (comma-separated), PREFETCH_RENDERERS, PREFETCH_HTTPDNS, PREFETCH_CA_BUNDLE, PREFETCH_CONFIG_FALLBACK, \
                PREFETCH_CONFIG_INTERVAL, PREFETCH_CONFIG_FATIGUE, PREFETCH_STATE_DIR, PREFETCH_STORE, PREFETCH_TRIGGER_RATE, \
                PREFETCH_TRIGGER_BURST, PREFETCH_TICKET_BYTES, PREFETCH_IN_FLIGHT_BYTES, PREFETCH_MAX_TRANSFERS, PREFETCH_MAX_CONNECTIONS_PER_HOST, PREFETCH_IDLE_TIMEOUT, PREFETCH_HTTPDNS_ALLOW_PRIVATE, PREFETCH_THIRD_PARTY_COOKIES, PREFETCH_OTLP, PREFETCH_LOG_LEVEL, PREFETCH_RESOURCES, PREFETCH_RESOURCES_REFRESH, PREFETCH_RESOURCE_DOWNLOAD_BASE. Secrets (the identity key, the admin token, a Redis password) belong in \
                the environment, not on the command line. \
                --config may be a file or an http(s) URL; the service follows it (interval, SIGHUP, POST /v1/config/refresh). \
                Exit codes: 0 after a graceful shutdown; 2 invalid config or option.
                """
        )

        @OptionGroup var config: ConfigOptions

        @OptionGroup(title: "Config updates") var follow: ConfigFollowOptions

        @OptionGroup(title: "Listeners") var listeners: ListenerOptions

        @OptionGroup(title: "Prefetching") var engine: EngineOptions

        @OptionGroup(title: "Upstreams") var upstream: UpstreamOptions

        @OptionGroup(title: "Response store") var store: StoreOptions

        @Option(
            name: .customLong("identity-key"),
            help:
                "Secret (32+ bytes) identities and read keys are keyed with; replicas share it (env PREFETCH_IDENTITY_KEY; default: kept in --state-dir, else per process)."
        )
        var identityKey: String?

        @Option(
            help:
                "Renderer profiles file (default: $PREFETCH_RENDERERS, or configs/renderers.json when it exists, else built-in main and plain)."
        )
        var renderers: String?

        @Flag(
            name: .customLong("otlp"),
            help:
                "Also export traces and metrics over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318; env PREFETCH_OTLP=1), configured by the standard OTEL_* variables."
        )
        var otlp = false

        @OptionGroup var resources: ResourceOptions

        @Option(
            name: .customLong("resources-refresh"),
            help: "Seconds between refreshes of the offline-package resources (default 300, env PREFETCH_RESOURCES_REFRESH).")
        var resourcesRefresh: Int?

        @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (default info).")
        var logLevel: String?

        /// The settings these arguments and `environment` give, every value checked (a `ValidationError` naming the
        /// option or variable otherwise).
        func settings(environment: Environment = .process) throws -> ServiceSettings {
            var settings = ServiceSettings()
            settings.configPath = config.path
            let source = try follow.settings(source: config.path, environment: environment)
            settings.configSource = source
            try listeners.apply(to: &settings.listeners, environment: environment)
            try engine.apply(to: &settings.engine, environment: environment)
            try upstream.apply(to: &settings.fetcher, &settings.dns, environment: environment)
            try store.apply(to: &settings.store, environment: environment)
            if let path = renderers ?? environment.value("PREFETCH_RENDERERS")
                ?? (FileManager.default.fileExists(atPath: "configs/renderers.json") ? "configs/renderers.json" : nil)
            {
                do {
                    settings.renderers = try RendererSettings.load(path: path)
                } catch {
                    Console.error("error: \(error)")
                    throw ExitCode(2)
                }
            }
            for warning in Self.ignoredVariables(environment) { Console.error(warning) }
            if otlp || environment.value("PREFETCH_OTLP") == "1" {
                do {
                    settings.otlp = try OTLPExport.configuration(environment: environment.variables)
                } catch {
                    throw ValidationError("--otlp: \(error)")
                }
            }
            settings.engine.identityKey = try IdentityKeySource.load(
                given: identityKey ?? environment.value("PREFETCH_IDENTITY_KEY"), stateDirectory: source.stateDirectory,
                shared: settings.store.url != nil)
            if var resourceSettings = try resources.settings(environment: environment, stateDirectory: source.stateDirectory) {
                if let seconds = try environment.integer(
                    resourcesRefresh, "PREFETCH_RESOURCES_REFRESH", flag: "--resources-refresh", in: 1...Int.max, unit: "second")
                {
                    resourceSettings.refreshInterval = .seconds(seconds)
                }
                settings.resources = resourceSettings
            }
            return settings
        }

        func run() async throws {
            let settings = try settings()
            let levelText = logLevel ?? Environment.process.value("PREFETCH_LOG_LEVEL") ?? "info"
            guard let level = Logger.Level(rawValue: levelText) else {
                throw ValidationError("log level \"\(levelText)\" is not one of trace, debug, info, notice, warning, error, critical")
            }
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
            // Response bodies come and go by the megabyte; glibc's adaptive mmap threshold would otherwise move
            // them onto the heap after the first large free and fragment it, so RSS would outgrow the store's
            // budget (BENCHMARKS.md, memory). 128 KiB keeps large bodies in their own mappings, which the store
            // accounts as whole pages (BodyAllocation.footprint).
            if prefetch_set_mmap_threshold(Int32(BodyAllocation.mmapThreshold)) != 1 {
                Console.error("warning: could not set the allocator's mmap threshold; RSS may grow past the store budget")
            }
            let registry = PrometheusCollectorRegistry()
            // With --otlp every metric goes to both: /metrics and the OTLP exporter; the page open's spans go to the
            // exporter's tracer (the engine takes the bootstrapped one).
            let otlp = settings.otlp.map { OTLPExport.make(configuration: $0, logger: Logger(label: "prefetch.otlp")) }
            if let otlp {
                MetricsSystem.bootstrap(MultiplexMetricsHandler(factories: [PrometheusMetricsFactory(registry: registry), otlp.metrics]))
                InstrumentationSystem.bootstrap(otlp.tracer)
            } else {
                MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
            }
            let logger = Logger(label: "prefetch")
            if settings.listeners.demo {
                logger.warning(
                    "--demo: the page listener serves the demo pages (/demo/*); never run a production page surface with it")
            }
            if let source = settings.configSource, !source.source.contains("://") {
                // A local file that does not validate is an operator's mistake: refuse to start (exit 2, every
                // problem listed) unless a last-good copy can serve meanwhile.
                let hasLastGood = source.lastGoodPath.map { FileManager.default.fileExists(atPath: $0) } ?? false
                if !hasLastGood { _ = try config.load() }
            }
            let app = try buildApplication(
                settings: settings, registry: registry, exportedMetrics: otlp?.metrics, logger: logger,
                onServerRunning: { port in
                    Console.out(
                        "prefetch listening on http://\(settings.listeners.host):\(port) (config \(Redaction.text(settings.configPath)))")
                },
                onAdminRunning: { port in
                    Console.out(
                        "prefetch operator surface on http://\(settings.listeners.adminHost):\(port)\(settings.listeners.adminToken == nil ? "" : " (bearer token required)")"
                    )
                })
            // A group stops its services in reverse order: the exporters after the app, so they flush its last spans.
            var configuration = ServiceGroupConfiguration(
                services: (otlp?.services ?? []) + [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            // Past the grace period, in-flight work is cancelled rather than holding shutdown forever.
            configuration.maximumGracefulShutdownDuration = settings.shutdownGrace
            try await ServiceGroup(configuration: configuration).run()
        }
    }

    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a page's plan for real and print a line per interface as it completes.",
            discussion: "Exit codes: 0 all requests answered; 1 some failed; 2 invalid config or page URL; 3 no config matches."
        )

        @Argument(help: "The page URL being opened, with its query.")
        var page: String

        @OptionGroup var config: ConfigOptions

        @Option(name: .customLong("header"), help: "A request header of the user, e.g. 'Cookie: sid=1'; repeatable.")
        var headers: [String] = []

        func run() async throws {
            let loaded = try config.load()
            let headers = try parseHeaders(headers)
            let plan: PrefetchCore.Plan
            do {
                plan = try PrefetchCore.Plan.make(page: page, config: loaded.config)
            } catch {
                Console.error("error: \(error)")
                throw ExitCode(error.code == .noConfig ? 3 : 2)
            }
            let start = ContinuousClock.now
            let results = try await fetchPage(plan, headers: headers, settings: EngineSettings(), logger: Logger(label: "prefetch")) {
                result in
                Console.out(result.line)
            }
            let failed = results.filter(\.failed).count
            let bytes = results.reduce(0) { $0 + $1.bytes }
            let elapsed = ContinuousClock.now - start
            Console.out(
                "\(results.count) requests, \(results.count - failed) answered, \(failed) failed, \(bytes) bytes in \((elapsed / .milliseconds(1)).rounded()) ms"
            )
            if failed > 0 { throw ExitCode(1) }
        }
    }
}

/// The offline-package provider's options, shared by `serve` and `resources export`.
struct ResourceOptions: ParsableArguments {
    @Option(
        name: .customLong("resources"),
        help:
            "The offline-package resource manifest (e.g. configs/resources.json), re-read at each refresh (env PREFETCH_RESOURCES; default none: an empty map)."
    )
    var path: String?

    @Option(
        name: .customLong("resource-download-base"),
        help: "Write each map entry's download URL as <URL>/<sha256> (a CDN holding the bodies; env PREFETCH_RESOURCE_DOWNLOAD_BASE).")
    var downloadBase: String?

    /// The provider's settings, or nil without a manifest; the manifest is validated now (its problems, each naming
    /// its field, end the command). Bodies go under the state directory, else a directory of this process.
    func settings(environment: Environment = .process, stateDirectory: String?) throws -> ResourceSettings? {
        guard let path = path ?? environment.value("PREFETCH_RESOURCES") else { return nil }
        let manifest: ResourceManifest
        do {
            manifest = try ResourceManifest.load(path: path)
        } catch {
            throw ValidationError("--resources: \(error)")
        }
        let base = downloadBase ?? environment.value("PREFETCH_RESOURCE_DOWNLOAD_BASE")
        if let base {
            guard let url = try? HTTPURL(parsing: base), url.query == nil, url.fragment == nil else {
                throw ValidationError("--resource-download-base \"\(base)\" must be an http(s) URL without query or fragment")
            }
        }
        let directory =
            stateDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-\(getpid())").path
        var settings = ResourceSettings(manifest: manifest, directory: directory, downloadBase: base)
        settings.manifestPath = path
        return settings
    }
}

extension Prefetch {
    struct Resources: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The offline-package provider's tools.", subcommands: [Export.self])

        struct Export: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Fetch the manifest's resources once and write the CDN mirror: DIR/resources.json and DIR/<sha256>.",
                discussion:
                    "Download URLs are relative to resources.json (or <base>/<sha256> with --resource-download-base). Nothing is written unless every resource was fetched. Exit codes: 0 written; 1 a resource failed; 2 invalid manifest."
            )

            @Argument(help: "The directory to write (created when missing).")
            var directory: String

            @OptionGroup var resources: ResourceOptions

            func run() async throws {
                let settings: ResourceSettings
                do {
                    guard let loaded = try resources.settings(stateDirectory: nil) else {
                        throw ValidationError("--resources PATH (or PREFETCH_RESOURCES) is required")
                    }
                    settings = loaded
                } catch let error as ValidationError {
                    Console.error("error: \(error.message)")
                    throw ExitCode(2)
                }
                let logger = Logger(label: "prefetch.resources")
                let fetcher = Fetcher(logger: logger)
                let written: ResourceExport.Written? = try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await fetcher.run() }
                    defer { group.cancelAll() }
                    let provider = ResourceProvider(settings: settings, fetcher: fetcher, logger: logger)
                    let outcome = await provider.refresh()
                    for (url, failure) in provider.status().failures.sorted(by: { $0.key < $1.key }) {
                        Console.error("error: \(Redaction.url(url)): \(failure.reason): \(failure.message)")
                    }
                    guard outcome == .ok else { return nil }
                    return try await ResourceExport.write(provider, to: directory)
                }
                guard let written else {
                    Console.error("error: nothing written to \(directory): not every resource was fetched")
                    throw ExitCode(1)
                }
                Console.out("version \(written.version): \(written.entries) resources, \(written.blobs) bodies written to \(directory)")
            }
        }
    }
}

extension Environment {
    func integer(_ name: String) throws -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text) else { throw ValidationError("\(name)=\(text) is not a whole number") }
        return number
    }

    func double(_ name: String) throws -> Double? {
        guard let text = value(name) else { return nil }
        guard let number = Double(text), number.isFinite else { throw ValidationError("\(name)=\(text) is not a number") }
        return number
    }
}

/// Where the identity key comes from: given (flag or environment), kept in the state directory (created on
/// first start, mode 0600), or, for a lone replica without a state directory, made for this process only.
enum IdentityKeySource {
    static let fileName = "identity.key"

    static func load(given: String?, stateDirectory: String?, shared: Bool) throws -> IdentityKey {
        if let given {
            do {
                return try IdentityKey(secret: Array(given.utf8))
            } catch {
                throw ValidationError("--identity-key: \(error)")
            }
        }
        if shared {
            throw ValidationError(
                "--store redis:// needs --identity-key (or PREFETCH_IDENTITY_KEY), the same secret on every replica, so that a user has one identity everywhere"
            )
        }
        guard let stateDirectory else { return .random() }
        let path = stateDirectory + "/" + fileName
        if let data = FileManager.default.contents(atPath: path) {
            do {
                return try IdentityKey(secret: Array(data))
            } catch {
                throw ValidationError("\(path): \(error)")
            }
        }
        let key = SecureRandom.bytes(32)
        let hex = Array(Hex.encode(key).utf8)
        do {
            try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: path, contents: Data(hex), attributes: [.posixPermissions: 0o600]) else {
                throw ValidationError("cannot write \(path)")
            }
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("cannot write the identity key to \(path): \(error)")
        }
        return try IdentityKey(secret: hex)
    }
}

extension Prefetch {
    struct HealthCheck: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "healthcheck",
            abstract: "Ask a running service whether it is alive (for container health checks).",
            discussion: "Exit codes: 0 healthy; 1 not answering 200."
        )

        @Option(help: "The health URL.")
        var url = "http://127.0.0.1:8080/healthz"

        func run() async throws {
            let healthy = await checkHealth(url: url, logger: Logger(label: "prefetch"))
            Console.out(healthy ? "healthy" : "unhealthy: \(Redaction.url(url)) did not answer 200")
            if !healthy { throw ExitCode(1) }
        }
    }
}

/// Asks a running service's `/healthz` (the container health check): `true` on a 200 answer.
func checkHealth(url: String, timeout: Duration = .seconds(2), logger: Logger) async -> Bool {
    let fetcher = Fetcher(logger: logger)
    return await withTaskGroup(of: Bool?.self) { group in
        group.addTask {
            try? await fetcher.run()
            return nil
        }
        group.addTask {
            let response = try? await fetcher.fetch(FetchRequest(method: "GET", url: url, body: nil, timeout: timeout))
            return response?.status == 200
        }
        var healthy = false
        while let next = await group.next() {
            if let result = next {
                healthy = result
                break
            }
        }
        group.cancelAll()
        return healthy
    }
}

extension Prefetch.Serve {
    /// A warning for each variable an earlier version read and nothing reads now, so a deployment that still sets
    /// one is told so instead of silently ignored: `PREFETCH_FAST_HANDOFF` turned the page listener's fast path off,
    /// and the listener now has one pipeline.
    static func ignoredVariables(_ environment: Environment) -> [String] {
        guard let value = environment.value("PREFETCH_FAST_HANDOFF") else { return [] }
        return [
            "warning: PREFETCH_FAST_HANDOFF=\(value) is ignored: the page listener answers every request through one pipeline (remove the variable)"
        ]
    }
}
