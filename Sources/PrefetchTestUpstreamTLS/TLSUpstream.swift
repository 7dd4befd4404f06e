// The test upstream over TLS and HTTP/2: the scripted handlers of PrefetchTestUpstream behind an SNI reader and
// NIOSSL, with HTTP/2 offered by ALPN (or h2c with prior knowledge on a plain port). A target of its own so that
// the plain upstream, which the demo and most scripts run, builds without BoringSSL and NIOHTTP2.
// Design notes: docs/design/test-upstream.md
import NIOCore
import NIOHTTP2
import NIOSSL
import NIOTLS
public import PrefetchTestUpstream

/// TLS for the test upstream: a PEM certificate (leaf first, optionally followed by intermediates) and its key.
public struct UpstreamTLS: Sendable {
    /// Path of the PEM certificate chain presented to every client, whatever name it asks for.
    public var certificatePath: String
    /// Path of the PEM private key of the leaf certificate.
    public var privateKeyPath: String

    /// Creates TLS settings from PEM file paths.
    public init(certificatePath: String, privateKeyPath: String) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
    }
}

extension TestUpstream {
    /// Starts a server on `host:port` (port 0 picks a free port) served by `threads` event loops; with `tls` it
    /// speaks HTTPS only, presenting that certificate to every client; with `http2` it serves HTTP/2 (offered by
    /// ALPN next to HTTP/1.1 over TLS, h2c with prior knowledge only without).
    public static func start(
        host: String = "127.0.0.1",
        port: Int = 0,
        threads: Int = 1,
        tls: UpstreamTLS?,
        http2: Bool = false
    ) async throws -> TestUpstream {
        let sslContext: NIOSSLContext?
        if let tls {
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(tls.certificatePath).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: tls.privateKeyPath, format: .pem))
            )
            if http2 { configuration.applicationProtocols = ["h2", "http/1.1"] }
            sslContext = try NIOSSLContext(configuration: configuration)
        } else {
            sslContext = nil
        }
        return try await start(host: host, port: port, threads: threads) { channel, counters in
            guard let sslContext else {
                if http2 {
                    return addHTTP2Handlers(to: channel, counters: counters, connection: ConnectionInfo(serverName: nil, tls: false))
                }
                return channel.eventLoop.makeCompletedFuture {
                    try addHTTPHandlers(to: channel, counters: counters, serverName: nil, tls: false)
                }
            }
            return channel.eventLoop.makeCompletedFuture {
                // The SNI handler removes itself once the callback's future completes, then hands the
                // buffered ClientHello to the TLS handler installed here.
                let sni = SNIHandler { result in
                    channel.eventLoop.makeCompletedFuture {
                        let serverName: String?
                        if case .hostname(let name) = result { serverName = name } else { serverName = nil }
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                        guard http2 else {
                            try addHTTPHandlers(to: channel, counters: counters, serverName: serverName, tls: true)
                            return
                        }
                        // After the handshake: HTTP/2 if the client chose h2 by ALPN, HTTP/1.1 otherwise.
                        let connection = ConnectionInfo(serverName: serverName, tls: true)
                        try channel.pipeline.syncOperations.addHandler(
                            ApplicationProtocolNegotiationHandler { negotiated, channel in
                                if case .negotiated("h2") = negotiated {
                                    return addHTTP2Handlers(to: channel, counters: counters, connection: connection)
                                }
                                return channel.eventLoop.makeCompletedFuture {
                                    try addHTTPHandlers(to: channel, counters: counters, serverName: serverName, tls: true)
                                }
                            }
                        )
                    }
                }
                try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(sni))
            }
        }
    }
}

/// Installs the HTTP/2 connection handlers on `channel`: every stream gets the HTTP/1 codec and a scripted handler.
private func addHTTP2Handlers(to channel: any Channel, counters: UpstreamCounters, connection: ConnectionInfo) -> EventLoopFuture<Void> {
    channel.configureHTTP2Pipeline(mode: .server) { stream in
        stream.eventLoop.makeCompletedFuture {
            try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
            try stream.pipeline.syncOperations.addHandler(HTTP2StreamHandler(counters: counters, connection: connection))
        }
    }.map { _ in }
}
