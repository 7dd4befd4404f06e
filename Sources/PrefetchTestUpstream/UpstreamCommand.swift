// What the upstream executables (`prefetch-upstream`, `prefetch-upstream-tls`) share: where to listen, and serving
// until a termination signal.
public import ArgumentParser
import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where an upstream executable listens.
public struct UpstreamListenOptions: ParsableArguments {
    @Option(help: "Address to listen on.")
    public var host: String = "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free one.")
    public var port: Int = 0

    @Option(help: "Number of event loop threads.")
    public var threads: Int = 1

    public init() {}
}

extension TestUpstream {
    /// Prints one `listening on HOST:PORT` line, serves until SIGTERM or SIGINT arrives, then shuts down.
    public func serveUntilTerminated() async throws {
        let line = "listening on \(host):\(port)\n"
        // Unbuffered write: a parent process waits for this exact line.
        _ = Array(line.utf8).withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
        await waitForTerminationSignal()
        try await shutdown()
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
