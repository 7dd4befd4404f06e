#ifndef PREFETCH_CCURL_SHIM_H
#define PREFETCH_CCURL_SHIM_H

// Typed, non-variadic wrappers around libcurl's variadic option and info
// functions: Swift cannot call C variadic functions, so each argument type
// gets its own small inline function.

#include <curl/curl.h>
#include <stddef.h>
#include <sys/types.h>

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
