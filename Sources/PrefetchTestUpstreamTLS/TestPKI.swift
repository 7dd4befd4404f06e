public import Foundation
import Subprocess

/// A throwaway PKI made with the openssl CLI: a test CA and server certificates for the test names.
public struct TestPKI: Sendable {
    /// The directory holding the CA, keys and certificates.
    public let directory: URL
    /// The test CA's certificate (PEM): give it to the client as its CA bundle.
    public var caPath: String { directory.appendingPathComponent("ca.pem").path }

    /// TLS settings presenting the certificate made for `name`.
    public func tls(for name: String) -> UpstreamTLS {
        UpstreamTLS(
            certificatePath: directory.appendingPathComponent("\(name).pem").path,
            privateKeyPath: directory.appendingPathComponent("\(name).key").path
        )
    }

    /// Creates the CA and one certificate (SAN DNS:<name>) per name in a fresh temporary directory.
    public static func make(names: [String] = ["api.prefetch.test", "other.prefetch.test"]) async throws -> TestPKI {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("prefetch-dns-pki-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func path(_ file: String) -> String { directory.appendingPathComponent(file).path }
        try await openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=Prefetch Test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
        for (index, name) in names.enumerated() {
            let extensions = path("\(name).ext")
            try Data(
                """
                subjectAltName=DNS:\(name)
                basicConstraints=CA:FALSE
                keyUsage=critical,digitalSignature
                extendedKeyUsage=serverAuth

                """.utf8
            ).write(to: URL(fileURLWithPath: extensions))
            try await openssl([
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", "/CN=\(name)",
            ])
            try await openssl([
                "x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-set_serial", "\(1000 + index)", "-days", "2", "-out", path("\(name).pem"), "-extfile", extensions,
            ])
        }
        return TestPKI(directory: directory)
    }

    /// Deletes the directory.
    public func remove() {
        try? FileManager.default.removeItem(at: directory)
    }

    private static func openssl(_ arguments: [String]) async throws {
        let result = try await Subprocess.run(
            .name("openssl"),
            arguments: Arguments(arguments),
            output: .discarded,
            error: .string(limit: 16 * 1024)
        )
        guard result.terminationStatus.isSuccess else {
            throw PKIError(message: "openssl \(arguments.first ?? "") failed: \(result.standardError)")
        }
    }
}

/// openssl failed.
public struct PKIError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }

    public init(message: String) {
        self.message = message
    }
}
