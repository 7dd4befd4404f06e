// The scriptable test upstream as a process, plain HTTP/1.1: prints one `listening on HOST:PORT` line once bound,
// then serves until SIGTERM or SIGINT. It answers the offline demo (scripts/run.sh) and the scripts' and
// benchmarks' plain upstreams; HTTPS and HTTP/2 are `prefetch-upstream-tls`'s, so this one builds without BoringSSL.
import ArgumentParser
import PrefetchTestUpstream

@main
struct PrefetchUpstreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prefetch-upstream",
        abstract:
            "A scriptable HTTP/1.1 upstream for tests, benchmarks and the demo (behaviour chosen by query parameters; HTTPS and HTTP/2: prefetch-upstream-tls)."
    )

    @OptionGroup var listen: UpstreamListenOptions

    func run() async throws {
        let upstream = try await TestUpstream.start(host: listen.host, port: listen.port, threads: listen.threads)
        try await upstream.serveUntilTerminated()
    }
}
