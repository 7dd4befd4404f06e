#ifndef PREFETCH_CHIREDIS_SHIM_H
#define PREFETCH_CHIREDIS_SHIM_H

// Typed wrappers around the parts of hiredis that Swift cannot call directly:
// `void *` replies become `redisReply *`, `struct timeval` arguments become
// milliseconds, and the fixed-size error buffer becomes a C string. Commands
// always go through the argv form (binary safe, no format strings).

#include <hiredis/hiredis.h>
#include <poll.h>
#include <stddef.h>
#include <sys/time.h>

static inline struct timeval prefetch_redis_timeval(long milliseconds) {
    struct timeval tv;
    tv.tv_sec = milliseconds / 1000;
    tv.tv_usec = (milliseconds % 1000) * 1000;
    return tv;
}

/// Connects over TCP, giving up after `timeout_ms`. Returns NULL only when out of memory;
/// otherwise check `prefetch_redis_error`.
static inline redisContext *prefetch_redis_connect(const char *host, int port, long timeout_ms) {
    return redisConnectWithTimeout(host, port, prefetch_redis_timeval(timeout_ms));
}

/// Bounds every later read and write on the connection.
static inline int prefetch_redis_set_timeout(redisContext *context, long timeout_ms) {
    return redisSetTimeout(context, prefetch_redis_timeval(timeout_ms));
}

/// The connection's error code (0 when healthy) and message.
static inline int prefetch_redis_error(const redisContext *context) {
    return context->err;
}

static inline const char *prefetch_redis_error_message(const redisContext *context) {
    return context->errstr;
}

static inline int prefetch_redis_fd(const redisContext *context) {
    return context->fd;
}

/// Queues one command in the connection's output buffer without any I/O (a pipeline's first half); REDIS_ERR only
/// when out of memory.
static inline int prefetch_redis_append_command_argv(
    redisContext *context, int argc, const char **argv, const size_t *lengths) {
    return redisAppendCommandArgv(context, argc, argv, lengths);
}

/// Takes the next reply, first writing whatever is queued and then reading as needed (each read and write bounded by
/// the connection timeout). Returns REDIS_ERR on an I/O or protocol error.
static inline int prefetch_redis_get_reply(redisContext *context, redisReply **reply) {
    void *raw = NULL;
    int status = redisGetReply(context, &raw);
    *reply = (redisReply *)raw;
    return status;
}

/// Takes one already buffered reply without any I/O. Returns REDIS_OK with `*reply` NULL when none is buffered.
static inline int prefetch_redis_buffered_reply(redisContext *context, redisReply **reply) {
    void *raw = NULL;
    int status = redisGetReplyFromReader(context, &raw);
    *reply = (redisReply *)raw;
    return status;
}

/// Reads what the socket has into the reply buffer (blocking up to the connection timeout).
static inline int prefetch_redis_buffer_read(redisContext *context) {
    return redisBufferRead(context);
}

/// Waits up to `timeout_ms` for the connection to become readable: 1 readable (or hung up), 0 timeout, -1 error.
static inline int prefetch_redis_wait_readable(const redisContext *context, int timeout_ms) {
    struct pollfd descriptor;
    descriptor.fd = context->fd;
    descriptor.events = POLLIN;
    descriptor.revents = 0;
    int ready = poll(&descriptor, 1, timeout_ms);
    if (ready > 0) {
        return 1;
    }
    return ready;
}

static inline redisReply *prefetch_redis_reply_element(const redisReply *reply, size_t index) {
    return reply->element[index];
}

static inline void prefetch_redis_free_reply(redisReply *reply) {
    freeReplyObject(reply);
}

#endif
