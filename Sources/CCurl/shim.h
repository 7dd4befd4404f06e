#ifndef PREFETCH_CCURL_SHIM_H
#define PREFETCH_CCURL_SHIM_H

// Typed, non-variadic wrappers around libcurl's variadic option and info
// functions: Swift cannot call C variadic functions, so each argument type
// gets its own small inline function.

#include <curl/curl.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

typedef size_t (*prefetch_data_callback)(char *data, size_t size, size_t count, void *userdata);

static inline CURLcode prefetch_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode prefetch_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode prefetch_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode prefetch_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode prefetch_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode prefetch_easy_setopt_write_function(CURL *handle, prefetch_data_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

static inline CURLcode prefetch_easy_setopt_header_function(CURL *handle, prefetch_data_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

static inline CURLcode prefetch_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode prefetch_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode prefetch_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

typedef int (*prefetch_socket_callback)(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp);
typedef int (*prefetch_timer_callback)(CURLM *multi, long timeout_ms, void *userp);

static inline CURLMcode prefetch_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode prefetch_multi_setopt_socket_function(CURLM *multi, prefetch_socket_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback);
}

static inline CURLMcode prefetch_multi_setopt_timer_function(CURLM *multi, prefetch_timer_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback);
}

static inline CURLMcode prefetch_multi_socket_action(CURLM *multi, curl_socket_t socket, int events, int *running) {
    return curl_multi_socket_action(multi, socket, events, running);
}

static inline int prefetch_poll_in(void) { return CURL_POLL_IN; }
static inline int prefetch_poll_out(void) { return CURL_POLL_OUT; }
static inline int prefetch_poll_remove(void) { return CURL_POLL_REMOVE; }
static inline int prefetch_cselect_in(void) { return CURL_CSELECT_IN; }
static inline int prefetch_cselect_out(void) { return CURL_CSELECT_OUT; }
static inline int prefetch_cselect_err(void) { return CURL_CSELECT_ERR; }
static inline curl_socket_t prefetch_socket_timeout(void) { return CURL_SOCKET_TIMEOUT; }

// The fetcher loop's epoll set (struct epoll_event is packed on x86-64: kept on this side).

static inline int prefetch_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
static inline int prefetch_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

/* Names the calling thread in the kernel (at most 15 bytes are kept): the loop thread's name for top -H and perf. */
static inline int prefetch_name_this_thread(const char *name) { return prctl(PR_SET_NAME, name, 0, 0, 0); }

/// Watches `fd` for reading and/or writing: adds it (`add`) or changes what it is watched for.
static inline int prefetch_epoll_watch(int epfd, int fd, int readable, int writable, int add) {
    struct epoll_event event = {0};
    event.events = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0);
    event.data.fd = fd;
    return epoll_ctl(epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event);
}

static inline int prefetch_epoll_unwatch(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

/// Waits up to `timeout_ms`; writes each ready descriptor and its CURL_CSELECT_* flags; returns how many (at most
/// `capacity`, at most 256), or -1.
static inline int prefetch_epoll_wait(int epfd, int *fds, int *flags, int capacity, int timeout_ms) {
    struct epoll_event ready[256];
    if (capacity > 256) capacity = 256;
    int count = epoll_wait(epfd, ready, capacity, timeout_ms);
    for (int i = 0; i < count; i++) {
        int f = 0;
        if (ready[i].events & EPOLLIN) f |= CURL_CSELECT_IN;
        if (ready[i].events & EPOLLOUT) f |= CURL_CSELECT_OUT;
        if (ready[i].events & (EPOLLERR | EPOLLHUP)) f |= CURL_CSELECT_ERR;
        fds[i] = ready[i].data.fd;
        flags[i] = f;
    }
    return count;
}

/// The CURLcode of a finished transfer reported by curl_multi_info_read.
static inline CURLcode prefetch_msg_result(const CURLMsg *message) {
    return message->data.result;
}

static inline long prefetch_global_all(void) { return CURL_GLOBAL_ALL; }
static inline long prefetch_pipe_multiplex(void) { return CURLPIPE_MULTIPLEX; }
static inline long prefetch_pipe_nothing(void) { return CURLPIPE_NOTHING; }
static inline long prefetch_http_version_1_1(void) { return CURL_HTTP_VERSION_1_1; }
static inline long prefetch_http_version_2tls(void) { return CURL_HTTP_VERSION_2TLS; }
static inline size_t prefetch_error_size(void) { return CURL_ERROR_SIZE; }

#endif
