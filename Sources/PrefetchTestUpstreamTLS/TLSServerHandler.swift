// TLS for the test upstream on the system's OpenSSL 3 (libssl through COpenSSL), so no target builds a BoringSSL of
// its own. One `ServerTLSContext` (an SSL_CTX: the certificate chain, its key, the ALPN choice) per upstream; one
// `TLSServerHandler` (an SSL over two memory BIOs) per connection.
//
// Design
// - Memory BIOs, not the socket: ciphertext the channel reads goes into the read BIO, whatever OpenSSL writes is
//   drained from the write BIO into the channel. No OpenSSL call ever waits, so everything runs on the connection's
//   event loop, in the handler's callbacks.
// - After the handshake the handler knows the server name the client presented (SNI, `SSL_get_servername`) and the
//   protocol ALPN chose, and fires NIOTLS's `TLSUserEvent.handshakeCompleted(negotiatedProtocol:)`, the event
//   `ApplicationProtocolNegotiationHandler` waits for.
// - Close sends close_notify (without waiting for the client's); any TLS error closes the connection.
// - The server side only. The clients under test (libcurl) verify this server against TestPKI's CA; nothing here
//   turns any verification off.
import COpenSSL
import NIOCore
import NIOTLS

/// A TLS failure of the test upstream: its certificate or key could not be loaded, or a connection failed.
public struct UpstreamTLSError: Error, Sendable, CustomStringConvertible {
    /// What failed, with OpenSSL's reasons.
    public var message: String
    /// The message.
    public var description: String { message }

    /// An error for `operation`, with the reasons OpenSSL's error queue (of this thread) holds, which it empties.
    init(_ operation: String) {
        var reasons: [String] = []
        var code = ERR_get_error()
        while code != 0 {
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &text, text.count)
            reasons.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            code = ERR_get_error()
        }
        message = reasons.isEmpty ? "\(operation) failed" : "\(operation) failed: \(reasons.joined(separator: "; "))"
    }
}

/// The server side of TLS shared by an upstream's connections: the PEM certificate chain and key of `UpstreamTLS`,
/// TLS 1.2 or later, and ALPN choosing `h2` (when HTTP/2 is served) or `http/1.1`.
final class ServerTLSContext: @unchecked Sendable {
    // Unchecked: the SSL_CTX is configured in `init` and only read afterwards (SSL_new, from any event loop), which
    // OpenSSL allows from several threads at once.
    fileprivate let context: OpaquePointer

    init(_ tls: UpstreamTLS, http2: Bool) throws {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw UpstreamTLSError("SSL_CTX_new") }
        do {
            guard prefetch_ssl_ctx_set_min_proto_version(context, TLS1_2_VERSION) == 1 else {
                throw UpstreamTLSError("setting TLS 1.2 as the lowest version")
            }
            guard SSL_CTX_use_certificate_chain_file(context, tls.certificatePath) == 1 else {
                throw UpstreamTLSError("loading the certificate chain \(tls.certificatePath)")
            }
            guard SSL_CTX_use_PrivateKey_file(context, tls.privateKeyPath, SSL_FILETYPE_PEM) == 1 else {
                throw UpstreamTLSError("loading the private key \(tls.privateKeyPath)")
            }
            guard SSL_CTX_check_private_key(context) == 1 else {
                throw UpstreamTLSError("matching the private key \(tls.privateKeyPath) to the certificate")
            }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        // The callbacks are C functions: they capture nothing, so each protocol list is its own function.
        if http2 {
            SSL_CTX_set_alpn_select_cb(
                context,
                { _, selected, selectedLength, offered, offeredLength, _ in
                    selectProtocol(["h2", "http/1.1"], offered: offered, offeredLength, selected: selected, selectedLength)
                }, nil)
        } else {
            SSL_CTX_set_alpn_select_cb(
                context,
                { _, selected, selectedLength, offered, offeredLength, _ in
                    selectProtocol(["http/1.1"], offered: offered, offeredLength, selected: selected, selectedLength)
                }, nil)
        }
        self.context = context
    }

    deinit {
        SSL_CTX_free(context)
    }
}

/// ALPN on the server: the first of `preferred` that the client's list (`offered`, in the wire format of one length
/// byte before each name) holds, pointed to inside that list; no ALPN at all when the client offers none of them.
private func selectProtocol(
    _ preferred: [String], offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32,
    selected: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, _ selectedLength: UnsafeMutablePointer<UInt8>?
) -> Int32 {
    guard let offered, let selected, let selectedLength else { return SSL_TLSEXT_ERR_NOACK }
    let list = UnsafeBufferPointer(start: offered, count: Int(offeredLength))
    for name in preferred {
        let wanted = Array(name.utf8)
        var index = 0
        while index < list.count {
            let length = Int(list[index])
            let start = index + 1
            guard start + length <= list.count else { return SSL_TLSEXT_ERR_NOACK }
            if length == wanted.count, list[start..<(start + length)].elementsEqual(wanted) {
                selected.pointee = offered + start
                selectedLength.pointee = UInt8(length)
                return SSL_TLSEXT_ERR_OK
            }
            index = start + length
        }
    }
    return SSL_TLSEXT_ERR_NOACK
}

/// TLS on one accepted connection: ciphertext from the socket in, plaintext `ByteBuffer`s on to the next handler
/// once the handshake is done; plaintext written by the handlers after it goes out encrypted.
///
/// Writes made before the handshake completes wait for it. Runs on the channel's event loop only.
final class TLSServerHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case handshaking
        case open
        /// close_notify sent after a half-close (`CloseMode.output`): reads go on, writes fail.
        case outputClosed
        case closed
    }

    private let ssl: OpaquePointer
    /// Ciphertext from the client, read by OpenSSL (owned by `ssl`).
    private let readBIO: OpaquePointer
    /// Ciphertext OpenSSL wrote for the client (owned by `ssl`).
    private let writeBIO: OpaquePointer
    private var state = State.handshaking
    private var waitingWrites: [(ByteBuffer, EventLoopPromise<Void>?)] = []

    /// The server name the client presented (SNI), known once the handshake is done; nil when it sent none.
    private(set) var serverName: String?

    init(context tls: ServerTLSContext) throws {
        ERR_clear_error()
        guard let ssl = SSL_new(tls.context) else { throw UpstreamTLSError("SSL_new") }
        guard let readBIO = BIO_new(BIO_s_mem()), let writeBIO = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw UpstreamTLSError("BIO_new")
        }
        SSL_set_bio(ssl, readBIO, writeBIO)
        SSL_set_accept_state(ssl)
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
    }

    deinit {
        // Frees both BIOs too, and drops the reference to the SSL_CTX that SSL_new took.
        SSL_free(ssl)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let ciphertext = unwrapInboundIn(data)
        guard state != .closed, ciphertext.readableBytes > 0 else { return }
        let taken = ciphertext.withUnsafeReadableBytes { BIO_write(readBIO, $0.baseAddress, Int32($0.count)) }
        guard taken == ciphertext.readableBytes else {
            fail(context, UpstreamTLSError("BIO_write"))
            return
        }
        if state == .handshaking { handshake(context) }
        if state == .open || state == .outputClosed { readPlaintext(context) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        state = .closed
        failWaitingWrites(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        failWaitingWrites(ChannelError.ioOnClosedChannel)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let plaintext = unwrapOutboundIn(data)
        switch state {
        case .handshaking:
            waitingWrites.append((plaintext, promise))
        case .open:
            encrypt(plaintext, promise: promise, context: context)
        case .outputClosed:
            promise?.fail(ChannelError.outputClosed)
        case .closed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    func flush(context: ChannelHandlerContext) {
        // During the handshake the waiting writes are flushed when it completes.
        if state != .handshaking { context.flush() }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode != .input else {
            context.close(mode: mode, promise: promise)
            return
        }
        let notify = state == .open
        switch (state, mode) {
        case (.open, .output): state = .outputClosed
        case (_, .all): state = .closed
        default: break
        }
        failWaitingWrites(ChannelError.ioOnClosedChannel)
        guard notify else {
            context.close(mode: mode, promise: promise)
            return
        }
        // close_notify first, then the close it announces (not waiting for the client's own close_notify).
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        guard let alert = takeCiphertext(context) else {
            context.close(mode: mode, promise: promise)
            return
        }
        context.writeAndFlush(wrapOutboundOut(alert)).assumeIsolated().whenComplete { _ in
            context.close(mode: mode, promise: promise)
        }
    }

    // MARK: OpenSSL

    /// Advances the handshake with the bytes in the read BIO; once it is done, tells the pipeline and sends the
    /// writes that waited for it.
    private func handshake(_ context: ChannelHandlerContext) {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        guard result == 1 else {
            let reason = SSL_get_error(ssl, result)
            // The next flight (or the alert that explains a failure) goes out either way.
            sendCiphertext(context)
            if reason != SSL_ERROR_WANT_READ && reason != SSL_ERROR_WANT_WRITE {
                fail(context, UpstreamTLSError("TLS handshake"))
            }
            return
        }
        state = .open
        serverName = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) }
        var chosen: UnsafePointer<UInt8>?
        var chosenLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &chosen, &chosenLength)
        let negotiated = chosen.flatMap { name in
            chosenLength > 0 ? String(decoding: UnsafeBufferPointer(start: name, count: Int(chosenLength)), as: UTF8.self) : nil
        }
        sendCiphertext(context)
        context.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: negotiated))
        let waiting = waitingWrites
        waitingWrites = []
        for (plaintext, promise) in waiting {
            if state == .open {
                encrypt(plaintext, promise: promise, context: context)
            } else {
                promise?.fail(ChannelError.ioOnClosedChannel)
            }
        }
        if !waiting.isEmpty, state == .open { context.flush() }
    }

    /// Decrypts what the read BIO holds and passes each piece of plaintext on, until OpenSSL needs more bytes.
    private func readPlaintext(_ context: ChannelHandlerContext) {
        let chunk = 16 * 1024
        while state == .open || state == .outputClosed {
            var plaintext = context.channel.allocator.buffer(capacity: chunk)
            var result: Int32 = 0
            ERR_clear_error()
            plaintext.writeWithUnsafeMutableBytes(minimumWritableBytes: chunk) { space in
                var count = 0
                result = SSL_read_ex(ssl, space.baseAddress, space.count, &count)
                return result == 1 ? count : 0
            }
            if result == 1 {
                context.fireChannelRead(wrapInboundOut(plaintext))
                continue
            }
            let reason = SSL_get_error(ssl, result)
            if reason == SSL_ERROR_WANT_READ || reason == SSL_ERROR_WANT_WRITE {
                // What OpenSSL wrote while reading (a key update's answer, say).
                sendCiphertext(context)
            } else if reason == SSL_ERROR_ZERO_RETURN {
                // The client's close_notify: answer it and close.
                close(context: context, mode: .all, promise: nil)
            } else {
                fail(context, UpstreamTLSError("TLS read"))
            }
            return
        }
    }

    /// Encrypts `plaintext` and writes the records, completing `promise` with that write.
    private func encrypt(_ plaintext: ByteBuffer, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        var rest = plaintext
        ERR_clear_error()
        while rest.readableBytes > 0 {
            var written = 0
            let result = rest.withUnsafeReadableBytes { SSL_write_ex(ssl, $0.baseAddress, $0.count, &written) }
            guard result == 1 else {
                let error = UpstreamTLSError("TLS write")
                promise?.fail(error)
                fail(context, error)
                return
            }
            rest.moveReaderIndex(forwardBy: written)
        }
        context.write(wrapOutboundOut(takeCiphertext(context) ?? context.channel.allocator.buffer(capacity: 0)), promise: promise)
    }

    /// Writes and flushes whatever OpenSSL wrote for the client.
    private func sendCiphertext(_ context: ChannelHandlerContext) {
        if let ciphertext = takeCiphertext(context) {
            context.writeAndFlush(wrapOutboundOut(ciphertext), promise: nil)
        }
    }

    /// Empties the write BIO into one buffer (nil when it is empty).
    private func takeCiphertext(_ context: ChannelHandlerContext) -> ByteBuffer? {
        let pending = BIO_ctrl_pending(writeBIO)
        guard pending > 0 else { return nil }
        var buffer = context.channel.allocator.buffer(capacity: pending)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { space in
            Int(max(0, BIO_read(writeBIO, space.baseAddress, Int32(pending))))
        }
        return buffer
    }

    /// A TLS failure: sends what OpenSSL wrote (the alert), tells the pipeline and closes the connection.
    private func fail(_ context: ChannelHandlerContext, _ error: UpstreamTLSError) {
        guard state != .closed else { return }
        state = .closed
        failWaitingWrites(error)
        sendCiphertext(context)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    private func failWaitingWrites(_ error: any Error) {
        let waiting = waitingWrites
        waitingWrites = []
        for (_, promise) in waiting { promise?.fail(error) }
    }
}

@available(*, unavailable)
extension TLSServerHandler: Sendable {}
