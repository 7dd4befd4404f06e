import ArgumentParser
import PrefetchCore

#if canImport(Glibc)
import Glibc
#endif

/// The `prefetch` command line. Each subcommand parses its arguments and calls into the libraries.
@main
struct Prefetch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prefetch",
        abstract: "Prefetch orchestrator: fetches an H5 page's API data while the page is still loading.",
        subcommands: [Plan.self, Validate.self]
    )
}

/// Options shared by every subcommand that reads the prefetch config.
struct ConfigOptions: ParsableArguments {
    @Option(name: .long, help: "Path of the prefetch config (default: $PREFETCH_CONFIG or configs/prefetch.json).")
    var config: String?

    var path: String {
        config ?? Environment.value("PREFETCH_CONFIG") ?? "configs/prefetch.json"
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

enum Environment {
    static func value(_ name: String) -> String? {
        guard let raw = getenv(name) else { return nil }
        let value = String(cString: raw)
        return value.isEmpty ? nil : value
    }
}

enum Console {
    static func error(_ line: String) {
        let text = Array((line + "\n").utf8)
        _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}

extension Prefetch {
    struct Plan: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the upstream requests a page open would make (dry run, no network).",
            discussion: "Exit codes: 0 planned; 2 invalid config or page URL; 3 no config entry matches the page."
        )

        @Argument(help: "The page URL being opened, with its query.")
        var page: String

        @OptionGroup var config: ConfigOptions

        @Flag(name: .long, help: "Print the plan as JSON.")
        var json = false

        func run() async throws {
            let loaded = try config.load()
            do {
                let plan = try PrefetchCore.Plan.make(page: page, config: loaded.config)
                print(json ? plan.json.jsonText : plan.humanDescription)
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
            print("config \(config.path) is valid")
            print("name: \(loaded.config.name)")
            print("version: \(loaded.config.version)")
            print("pages: \(loaded.config.pages.count) (\(patterns) patterns)")
            print("interfaces: \(loaded.config.interfaceCount)")
            if !loaded.warnings.isEmpty { print("warnings: \(loaded.warnings.count)") }
        }
    }
}
