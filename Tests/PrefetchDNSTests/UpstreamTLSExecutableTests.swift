import Foundation
import PrefetchFetcher
import PrefetchTestSupport
import PrefetchTestUpstream
import PrefetchTestUpstreamTLS
import Subprocess
import SystemPackage
import Testing

/// The `prefetch-upstream-tls` executable's HTTPS mode.
@Suite(.timeLimit(.minutes(1)))
struct UpstreamTLSExecutableTests {
    /// The built executable: it sits next to the test bundle in the build products directory.
    static func executablePath() throws -> String {
        let selfPath = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var directory = URL(fileURLWithPath: selfPath).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("prefetch-upstream-tls").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw PKIError(message: "prefetch-upstream-tls executable not found next to the test bundle")
    }

    @Test func servesHTTPSAndReportsSNIAndHost() async throws {
        let executable = try Self.executablePath()
        try await withPKI { pki in
            let tls = pki.tls(for: "api.prefetch.test")
            let configuration = Configuration(
                executable: .path(FilePath(executable)),
                arguments: ["--port", "0", "--tls-cert", tls.certificatePath, "--tls-key", tls.privateKeyPath]
            )
            let result = try await Subprocess.run(configuration, input: .none, output: .sequence, error: .discarded) {
                execution in
                var port: Int?
                for try await line in execution.standardOutput.strings() {
                    port = line.hasPrefix("listening on 127.0.0.1:") ? Int(line.dropFirst("listening on 127.0.0.1:".count)) : nil
                    break
                }
                defer { try? execution.send(signal: .terminate) }
                let bound = try #require(port)
                return try await withFetcher(FetcherConfiguration(caBundlePath: pki.caPath)) { fetcher in
                    let pin = StaticPins([AddressPin(host: "api.prefetch.test", port: bound, address: "127.0.0.1")])
                    let page = try await fetcher.fetch(FetchRequest(url: "https://api.prefetch.test:\(bound)/page", pinning: pin))
                    let log = try await fetcher.fetch(
                        FetchRequest(url: "https://api.prefetch.test:\(bound)/__requests", pinning: pin)
                    )
                    return (page.status, bound, String(decoding: log.body, as: UTF8.self))
                }
            }
            let (status, port, log) = result.closureResult
            #expect(status == 200)
            #expect(log == #"{"requests":[{"path":"/page","host":"api.prefetch.test:\#(port)","sni":"api.prefetch.test","tls":true}]}"#)
        }
    }

    @Test func tlsCertificateWithoutKeyIsRejected() async throws {
        let result = try await Subprocess.run(
            .path(FilePath(try Self.executablePath())),
            arguments: ["--port", "0", "--tls-cert", "/nonexistent.pem"],
            output: .discarded,
            error: .string(limit: 16 * 1024)
        )
        #expect(!result.terminationStatus.isSuccess)
        #expect(result.standardError.contains("--tls-key"))
    }
}
