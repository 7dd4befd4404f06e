// The scriptable test upstream as a process: prints one `listening on HOST:PORT` line once bound, then serves
// until SIGTERM or SIGINT. With --tls-cert/--tls-key it serves HTTPS and records each connection's SNI name
// (readable at GET /__requests). With --http2 it serves HTTP/2 (ALPN over TLS, h2c prior knowledge without), and
// GET /__connections reports the peak of concurrent streams.
import ArgumentParser
import Dispatch
import PrefetchTestUpstream

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
struct PrefetchUpstreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prefetch-upstream",
        abstract: "A scriptable HTTP/1.1 and HTTP/2 upstream for tests and benchmarks (behaviour chosen by query parameters)."
    )

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free one.")
    var port: Int = 0

    @Option(help: "Number of event loop threads.")
    var threads: Int = 1

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
        let upstream = try await TestUpstream.start(host: host, port: port, threads: threads, tls: tls, http2: http2)
        let line = "listening on \(upstream.host):\(upstream.port)\n"
        // Unbuffered write: a parent process waits for this exact line.
        _ = Array(line.utf8).withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
        await waitForTerminationSignal()
        try await upstream.shutdown()
    }
}

/// Suspends until SIGTERM or SIGINT arrives.
private func waitForTerminationSignal() async {
    let queue = DispatchQueue(label: "prefetch-upstream.signals")
    let (signals, continuation) = AsyncStream.makeStream(of: Int32.self)
    var sources: [any DispatchSourceSignal] = []
    for signalNumber in [SIGTERM, SIGINT] {
        // Dispatch sees the signal only if the default action (terminate) is disabled.
        signal(signalNumber, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
        source.setEventHandler { continuation.yield(signalNumber) }
        source.resume()
        sources.append(source)
    }
    for await _ in signals { break }
    for source in sources { source.cancel() }
}
