// The scriptable test upstream as a process, plain HTTP/1.1: prints one `listening on HOST:PORT` line once bound,
// then serves until SIGTERM or SIGINT. It answers the offline demo (scripts/run.sh) and the scripts' and
// benchmarks' plain upstreams; HTTPS and HTTP/2 are `prefetch-upstream-tls`'s, so this one builds without BoringSSL.
import ArgumentParser
import Foundation
import PrefetchTestUpstream

@main
struct PrefetchUpstreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prefetch-upstream",
        abstract:
            "A scriptable HTTP/1.1 upstream for tests, benchmarks and the demo (behaviour chosen by query parameters; HTTPS and HTTP/2: prefetch-upstream-tls)."
    )

    @OptionGroup var listen: UpstreamListenOptions

    @Option(
        help: ArgumentHelp(
            "Answer every request 200 with this file's bytes as JSON, through NIO's own HTTP/1 server pipeline and nothing else (the handoff benchmark's floor for a server on NIO).",
            valueName: "file"))
    var answerFile: String?

    func run() async throws {
        let upstream: TestUpstream
        if let answerFile {
            let bytes: [UInt8]
            do {
                bytes = try Array(Data(contentsOf: URL(fileURLWithPath: answerFile)))
            } catch {
                throw ValidationError("--answer-file \(answerFile): cannot be read (\(error.localizedDescription))")
            }
            upstream = try await TestUpstream.startConstant(
                host: listen.host, port: listen.port, threads: listen.threads, body: bytes)
        } else {
            upstream = try await TestUpstream.start(host: listen.host, port: listen.port, threads: listen.threads)
        }
        try await upstream.serveUntilTerminated()
    }
}
