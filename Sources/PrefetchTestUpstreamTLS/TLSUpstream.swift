// The test upstream over TLS and HTTP/2: the scripted handlers of PrefetchTestUpstream behind TLS on the system's
// OpenSSL (`TLSServerHandler`), with HTTP/2 offered by ALPN (or h2c with prior knowledge on a plain port). A target
// of its own so that the plain upstream, which the demo and most scripts run, builds without OpenSSL's libssl and
// NIOHTTP2.
// Design notes: docs/design/test-upstream.md
import NIOCore
import NIOHTTP2
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
    /// ALPN next to HTTP/1.1 over TLS, h2c with prior knowledge only without). Throws ``UpstreamTLSError`` when the
    /// certificate chain or key cannot be loaded.
    public static func start(
        host: String = "127.0.0.1",
        port: Int = 0,
        threads: Int = 1,
        tls: UpstreamTLS?,
        http2: Bool = false
    ) async throws -> TestUpstream {
        let context = try tls.map { try ServerTLSContext($0, http2: http2) }
        return try await start(host: host, port: port, threads: threads) { channel, counters in
            guard let context else {
                if http2 {
                    return addHTTP2Handlers(to: channel, counters: counters, connection: ConnectionInfo(serverName: nil, tls: false))
                }
                return channel.eventLoop.makeCompletedFuture {
                    try addHTTPHandlers(to: channel, counters: counters, serverName: nil, tls: false)
                }
            }
            return channel.eventLoop.makeCompletedFuture {
                let tlsHandler = try TLSServerHandler(context: context)
                try channel.pipeline.syncOperations.addHandler(tlsHandler)
                // After the handshake, with the server name the client presented: HTTP/2 if ALPN chose h2, HTTP/1.1
                // otherwise.
                try channel.pipeline.syncOperations.addHandler(
                    ApplicationProtocolNegotiationHandler { negotiated, channel in
                        let serverName = tlsHandler.serverName
                        if http2, case .negotiated("h2") = negotiated {
                            return addHTTP2Handlers(
                                to: channel, counters: counters, connection: ConnectionInfo(serverName: serverName, tls: true))
                        }
                        return channel.eventLoop.makeCompletedFuture {
                            try addHTTPHandlers(to: channel, counters: counters, serverName: serverName, tls: true)
                        }
                    }
                )
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
