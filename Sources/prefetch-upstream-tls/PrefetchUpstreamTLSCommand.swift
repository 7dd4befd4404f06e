// The scriptable test upstream as a process, with TLS and HTTP/2: as `prefetch-upstream`, and with
// --tls-cert/--tls-key it serves HTTPS and records each connection's SNI name (readable at GET /__requests). With
// --http2 it serves HTTP/2 (ALPN over TLS, h2c prior knowledge without), and GET /__connections reports the peak of
// concurrent streams.
import ArgumentParser
import PrefetchTestUpstream
import PrefetchTestUpstreamTLS

@main
struct PrefetchUpstreamTLSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prefetch-upstream-tls",
        abstract: "A scriptable HTTPS and HTTP/2 upstream for tests and benchmarks (behaviour chosen by query parameters)."
    )

    @OptionGroup var listen: UpstreamListenOptions

    @Option(help: "PEM certificate chain: serve HTTPS only (requires --tls-key).")
    var tlsCert: String?

    @Option(help: "PEM private key of the --tls-cert certificate.")
    var tlsKey: String?

    @Flag(help: "Serve HTTP/2: offered by ALPN next to HTTP/1.1 with TLS, h2c with prior knowledge only without.")
    var http2 = false

    func validate() throws {
        if (tlsCert == nil) != (tlsKey == nil) {
            throw ValidationError("--tls-cert and --tls-key must be given together")
        }
    }

    func run() async throws {
        let tls = tlsCert.flatMap { cert in tlsKey.map { UpstreamTLS(certificatePath: cert, privateKeyPath: $0) } }
        let upstream = try await TestUpstream.start(
            host: listen.host, port: listen.port, threads: listen.threads, tls: tls, http2: http2)
        try await upstream.serveUntilTerminated()
    }
}
