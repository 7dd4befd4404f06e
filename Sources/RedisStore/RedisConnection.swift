import CHiredis
import PrefetchCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One blocking hiredis connection, for the pub/sub subscriber (`RedisSubscriber`), which owns it on its own thread;
/// the pool's connections are non-blocking, on the event loops (`RedisPool`). Not thread-safe: used from that one
/// thread only, never from the cooperative pool or an event loop.
final class RedisConnection {
    private let context: UnsafeMutablePointer<redisContext>
    /// `host:port`, for messages.
    private let address: String

    private init(context: UnsafeMutablePointer<redisContext>, address: String) {
        self.context = context
        self.address = address
    }

    deinit {
        redisFree(context)
    }

    /// Connects (bounded by `connectTimeout`), bounds every later read and write by `commandTimeout`, then sends the
    /// handshake (`RedisHandshake`: `AUTH` with the endpoint's credentials or `PING`, and `SELECT` when the database
    /// is not 0) as one pipeline.
    static func open(
        _ endpoint: RedisEndpoint, connectTimeout: Duration, commandTimeout: Duration
    ) throws(RedisCallError) -> RedisConnection {
        guard let context = prefetch_redis_connect(endpoint.host, Int32(endpoint.port), milliseconds(connectTimeout))
        else { throw RedisCallError(kind: .connect, message: "cannot allocate a Redis connection") }
        if prefetch_redis_error(context) != 0 {
            let message = String(cString: prefetch_redis_error_message(context))
            redisFree(context)
            throw RedisCallError(kind: .connect, message: "cannot connect to \(endpoint): \(message)")
        }
        let connection = RedisConnection(context: context, address: endpoint.address)
        guard prefetch_redis_set_timeout(context, milliseconds(commandTimeout)) == REDIS_OK else {
            throw RedisCallError(kind: .connect, message: "cannot set the command timeout on \(endpoint)")
        }
        let handshake = RedisHandshake.commands(for: endpoint)
        let (replies, error) = connection.pipeline(handshake)
        var results: RedisCall.Results = replies.map { .success($0) }
        if let error { results += Array(repeating: .failure(error), count: handshake.count - replies.count) }
        if let failure = RedisHandshake.failure(results, endpoint: endpoint) { throw failure }
        return connection
    }

    /// The connection's socket, to wait on it together with others (`poll`).
    var descriptor: Int32 { prefetch_redis_fd(context) }

    /// Sends one command and waits (bounded by the command timeout) for its reply.
    func command(_ arguments: [String]) throws(RedisCallError) -> RedisValue {
        try command(arguments.map { Array($0.utf8) })
    }

    /// Sends one binary-safe command and waits (bounded by the command timeout) for its reply.
    func command(_ arguments: [[UInt8]]) throws(RedisCallError) -> RedisValue {
        let (replies, error) = pipeline([arguments])
        if let error { throw error }
        return replies[0]
    }

    /// Sends every command in one write, then reads their replies in order, each read bounded by the command
    /// timeout: one round trip for the lot instead of one per command. Redis runs pipelined commands in order, as
    /// if sent one by one. Returns the replies that arrived, in order; when the connection breaks part-way, `error`
    /// says why and the commands from `replies.count` on have no answer (each may or may not have run, as with a
    /// single command that breaks). The connection is unusable after an error.
    func pipeline(_ commands: [[[UInt8]]]) -> (replies: [RedisValue], error: RedisCallError?) {
        for arguments in commands where !append(arguments) {
            return ([], brokenError())
        }
        var replies: [RedisValue] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            var reply: UnsafeMutablePointer<redisReply>?
            guard prefetch_redis_get_reply(context, &reply) == REDIS_OK, let reply else { return (replies, brokenError()) }
            let value = Self.value(of: reply)
            prefetch_redis_free_reply(reply)
            if let missing = RedisCallError(missingCredentials: value, at: address) { return (replies, missing) }
            replies.append(value)
        }
        return (replies, nil)
    }

    /// Queues one binary-safe command in hiredis's output buffer (no I/O); false only when out of memory.
    private func append(_ arguments: [[UInt8]]) -> Bool {
        // One contiguous buffer for every argument, plus a trailing byte so it is never empty.
        var flat: [UInt8] = []
        flat.reserveCapacity(arguments.reduce(1) { $0 + $1.count })
        var offsets: [Int] = []
        offsets.reserveCapacity(arguments.count)
        for argument in arguments {
            offsets.append(flat.count)
            flat.append(contentsOf: argument)
        }
        flat.append(0)
        let lengths = arguments.map(\.count)
        let status = flat.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!)
            var argv: [UnsafePointer<CChar>?] = offsets.map { (base + $0).assumingMemoryBound(to: CChar.self) }
            return argv.withUnsafeMutableBufferPointer { argvBuffer in
                lengths.withUnsafeBufferPointer { lengthBuffer in
                    prefetch_redis_append_command_argv(
                        context, Int32(arguments.count), argvBuffer.baseAddress, lengthBuffer.baseAddress)
                }
            }
        }
        return status == REDIS_OK
    }

    /// Waits up to `timeoutMilliseconds` for incoming data, then takes every reply that arrived; empty when
    /// nothing arrived in time.
    func receive(timeoutMilliseconds: Int32) throws(RedisCallError) -> [RedisValue] {
        var values = try bufferedReplies()
        guard values.isEmpty else { return values }
        let ready = prefetch_redis_wait_readable(context, timeoutMilliseconds)
        if ready == 0 { return [] }
        if ready < 0 {
            if errno == EINTR { return [] }
            throw RedisCallError(kind: .io, message: "waiting on the Redis connection failed (errno \(errno))")
        }
        guard prefetch_redis_buffer_read(context) == REDIS_OK else { throw brokenError() }
        values = try bufferedReplies()
        return values
    }

    private func bufferedReplies() throws(RedisCallError) -> [RedisValue] {
        var values: [RedisValue] = []
        while true {
            var reply: UnsafeMutablePointer<redisReply>?
            guard prefetch_redis_buffered_reply(context, &reply) == REDIS_OK else { throw brokenError() }
            guard let reply else { return values }
            values.append(Self.value(of: reply))
            prefetch_redis_free_reply(reply)
        }
    }

    private func brokenError() -> RedisCallError {
        let code = prefetch_redis_error(context)
        let message = String(cString: prefetch_redis_error_message(context))
        let savedErrno = errno
        // EOF, a reset or a broken pipe mean the server dropped the connection before our command ran; a timeout
        // means it may have run.
        let closed =
            code == REDIS_ERR_EOF
            || (code == REDIS_ERR_IO && (savedErrno == EPIPE || savedErrno == ECONNRESET))
        return RedisCallError(kind: closed ? .closed : .io, message: "Redis connection broke: \(message)")
    }

    private static func value(of reply: UnsafeMutablePointer<redisReply>) -> RedisValue {
        let node = reply.pointee
        switch node.type {
        case REDIS_REPLY_STRING:
            return .string(bytes(node.str, node.len))
        case REDIS_REPLY_STATUS:
            return .status(String(decoding: bytes(node.str, node.len), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            return .error(String(decoding: bytes(node.str, node.len), as: UTF8.self))
        case REDIS_REPLY_INTEGER:
            return .integer(Int64(node.integer))
        case REDIS_REPLY_ARRAY:
            var elements: [RedisValue] = []
            elements.reserveCapacity(node.elements)
            for index in 0..<node.elements {
                if let element = prefetch_redis_reply_element(reply, index) {
                    elements.append(value(of: element))
                } else {
                    elements.append(.null)
                }
            }
            return .array(elements)
        default:
            return .null
        }
    }

    private static func bytes(_ pointer: UnsafeMutablePointer<CChar>?, _ count: Int) -> [UInt8] {
        guard let pointer, count > 0 else { return [] }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: count) {
            Array(UnsafeBufferPointer(start: $0, count: count))
        }
    }
}
