/* The upstream side's floor for the fan-out benchmark: the transfers the service makes for a page open, made by
 * a C program on the same libcurl and nothing else (no listener, no store, no threads).
 *
 * Keeps CONCURRENCY page opens in flight; a page open is one GET per base URL (`BASE&n=ID`, 8 in the benchmark),
 * all added at once to one multi handle on one thread, driven one of two ways (MODE):
 *   poll    curl_multi_perform + curl_multi_poll: the plain multi interface (libcurl 7.x's perform walks every
 *           transfer and polls its socket on each call, so its cost grows with the transfers in flight);
 *   socket  curl_multi_socket_action on the sockets epoll reports ready, with libcurl's socket and timer
 *           callbacks: how the service drives libcurl (Sources/PrefetchFetcher/TransferLoop.swift).
 * Every
 * transfer gets a fresh easy handle and its options (those the service sets: no signals, http/https only, no
 * redirects, HTTP/1.1, timeout, user agent, size cap, no default Accept, a traceparent, body and header
 * callbacks), and is cleaned up when done; connections stay alive in the multi handle's pool, sized as the
 * service's (512). Each body is collected into a buffer and checked for status 200 and a non-empty body.
 *
 * Usage: curl-floor poll|socket BASES CONCURRENCY WARMUP PAGES [RUN_ID] [DELAY_MS]
 *   BASES  comma-separated base URLs with a query (`http://127.0.0.1:PORT/i0?delay=50,...`)
 * The WARMUP pages run first, then PAGES are measured: CPU (getrusage utime+stime of this process) and context
 * switches (ru_nvcsw + ru_nivcsw) over the measured pages, per transfer and per page open, and each page's time
 * from its first transfer's start to its last one's end. Prints one JSON object in the shape of
 * bench/clients/fanout-client.js's, with the process under the name "floor".
 *
 * Build: cc -O2 -o curl-floor curl-floor.c -lcurl
 */
#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_BASES 64

typedef struct Page {
    long id;
    int remaining;
    int failed;
    double started;
} Page;

typedef struct Transfer {
    Page *page;
    char *body;
    size_t length, capacity;
    struct curl_slist *headers;
    char error[CURL_ERROR_SIZE];
} Transfer;

static char *bases[MAX_BASES];
static int baseCount;
static CURLM *multi;
static long nextId, lastId;  /* page ids [nextId, lastId) still to start */
static int inFlight;
static double *samples;
static long sampleCount, errors;
static char firstError[CURL_ERROR_SIZE + 16];
static uint64_t traceCounter;
static int socketMode, epollFD;
static double timerDeadline = -1; /* socket mode: when libcurl wants CURL_SOCKET_TIMEOUT (ms, monotonic); -1: never */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* libcurl's socket callback (socket mode): watch `s` for what it asks, or stop. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)easy;
    (void)userp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(epollFD, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    struct epoll_event event = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0),
                                .data.fd = s};
    if (epoll_ctl(epollFD, socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &event) != 0) {
        /* A descriptor closed and reused behind libcurl's back: the other operation fits. */
        epoll_ctl(epollFD, socketp ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, s, &event);
    }
    curl_multi_assign(multi, s, (void *)1);
    return 0;
}

static int on_timer(CURLM *m, long milliseconds, void *userp) {
    (void)m;
    (void)userp;
    timerDeadline = milliseconds < 0 ? -1 : now_ms() + (double)milliseconds;
    return 0;
}

static size_t on_body(char *data, size_t size, size_t count, void *userp) {
    Transfer *transfer = userp;
    size_t bytes = size * count;
    if (transfer->length + bytes > transfer->capacity) {
        size_t capacity = transfer->capacity ? transfer->capacity * 2 : 1024;
        while (capacity < transfer->length + bytes) capacity *= 2;
        char *grown = realloc(transfer->body, capacity);
        if (!grown) return 0;
        transfer->body = grown;
        transfer->capacity = capacity;
    }
    memcpy(transfer->body + transfer->length, data, bytes);
    transfer->length += bytes;
    return bytes;
}

/* The service keeps each header line (name and value); a floor only looks at it. */
static size_t on_header(char *data, size_t size, size_t count, void *userp) {
    (void)data;
    (void)userp;
    return size * count;
}

static void fail(const char *message) {
    errors++;
    if (!firstError[0]) snprintf(firstError, sizeof firstError, "%s", message);
}

static void start_page(void) {
    Page *page = calloc(1, sizeof *page);
    if (!page) { fprintf(stderr, "out of memory\n"); exit(1); }
    page->id = nextId++;
    page->remaining = baseCount;
    page->started = now_ms();
    inFlight++;
    for (int k = 0; k < baseCount; k++) {
        Transfer *transfer = calloc(1, sizeof *transfer);
        CURL *easy = curl_easy_init();
        if (!transfer || !easy) { fprintf(stderr, "out of memory\n"); exit(1); }
        transfer->page = page;
        char url[2048], traceparent[128];
        snprintf(url, sizeof url, "%s&n=%ld", bases[k], page->id);
        traceCounter++;
        snprintf(traceparent, sizeof traceparent, "traceparent: 00-%016llx%016llx-%016llx-01",
                 (unsigned long long)page->id, (unsigned long long)traceCounter, (unsigned long long)traceCounter);
        transfer->headers = curl_slist_append(transfer->headers, traceparent);
        transfer->headers = curl_slist_append(transfer->headers, "Accept:");
        curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, transfer->error);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 10000L);
        curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(easy, CURLOPT_DNS_CACHE_TIMEOUT, 60L);
        curl_easy_setopt(easy, CURLOPT_USERAGENT, "prefetch/1");
        curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)(1 << 20));
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, transfer->headers);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, transfer);
        curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(easy, CURLOPT_HEADERDATA, transfer);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, transfer);
        CURLMcode added = curl_multi_add_handle(multi, easy);
        if (added != CURLM_OK) { fprintf(stderr, "curl_multi_add_handle: %s\n", curl_multi_strerror(added)); exit(1); }
    }
}

static void finish(CURL *easy, CURLcode code) {
    Transfer *transfer;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&transfer);
    Page *page = transfer->page;
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (code != CURLE_OK) {
        char message[CURL_ERROR_SIZE + 16];
        snprintf(message, sizeof message, "transfer: %s", transfer->error[0] ? transfer->error : curl_easy_strerror(code));
        if (!page->failed) fail(message);
        page->failed = 1;
    } else if (status != 200 || transfer->length == 0) {
        char message[64];
        snprintf(message, sizeof message, "upstream answered %ld with %zu bytes", status, transfer->length);
        if (!page->failed) fail(message);
        page->failed = 1;
    }
    curl_multi_remove_handle(multi, easy);
    curl_easy_cleanup(easy);
    curl_slist_free_all(transfer->headers);
    free(transfer->body);
    free(transfer);
    if (--page->remaining == 0) {
        if (!page->failed && samples) samples[sampleCount++] = now_ms() - page->started;
        free(page);
        inFlight--;
    }
}

/* Runs `count` page opens from `first`, `concurrency` at a time. */
static void run(long first, long count, int concurrency) {
    nextId = first;
    lastId = first + count;
    while (nextId < lastId || inFlight > 0) {
        while (inFlight < concurrency && nextId < lastId) start_page();
        int running = 0;
        if (socketMode) {
            if (timerDeadline >= 0 && timerDeadline <= now_ms()) {
                timerDeadline = -1;
                curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
            }
        } else {
            curl_multi_perform(multi, &running);
        }
        CURLMsg *message;
        int left;
        while ((message = curl_multi_info_read(multi, &left))) {
            if (message->msg == CURLMSG_DONE) finish(message->easy_handle, message->data.result);
        }
        if (inFlight == 0 || (inFlight < concurrency && nextId < lastId)) continue;
        if (!socketMode) {
            curl_multi_poll(multi, NULL, 0, 1000, NULL);
            continue;
        }
        int timeout = 1000;
        if (timerDeadline >= 0) {
            double left = timerDeadline - now_ms();
            timeout = left <= 0 ? 0 : left < 1000 ? (int)left + 1 : 1000;
        }
        struct epoll_event ready[256];
        int count = epoll_wait(epollFD, ready, 256, timeout);
        for (int i = 0; i < count; i++) {
            int flags = (ready[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) | (ready[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (ready[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(multi, ready[i].data.fd, flags, &running);
        }
    }
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *sorted, long n, double q) {
    if (n == 0) return 0;
    long i = (long)(q * (double)n + 0.999999999) - 1;
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return sorted[i];
}

static void print_summary(const char *name, const double *sorted, long n, double minus) {
    printf("\"%s\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f}", name, pct(sorted, n, 0.5) - minus,
           pct(sorted, n, 0.9) - minus, pct(sorted, n, 0.99) - minus, (n ? sorted[n - 1] : 0) - minus);
}

static double cpu_seconds(const struct rusage *u) {
    return (double)(u->ru_utime.tv_sec + u->ru_stime.tv_sec) + (double)(u->ru_utime.tv_usec + u->ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 6 || (strcmp(argv[1], "poll") != 0 && strcmp(argv[1], "socket") != 0)) {
        fprintf(stderr, "usage: %s poll|socket BASES CONCURRENCY WARMUP PAGES [RUN_ID] [DELAY_MS]\n", argv[0]);
        return 2;
    }
    socketMode = strcmp(argv[1], "socket") == 0;
    argv++;
    argc--;
    char *list = strdup(argv[1]);
    for (char *save = NULL, *base = strtok_r(list, ",", &save); base; base = strtok_r(NULL, ",", &save)) {
        if (baseCount == MAX_BASES) { fprintf(stderr, "at most %d bases\n", MAX_BASES); return 2; }
        bases[baseCount++] = base;
    }
    int concurrency = atoi(argv[2]);
    long warmup = atol(argv[3]), pages = atol(argv[4]);
    long runId = argc > 5 ? atol(argv[5]) : 1;
    double delay = argc > 6 ? atof(argv[6]) : 50;
    if (baseCount == 0 || concurrency < 1 || pages < 1 || warmup < 0) { fprintf(stderr, "bad arguments\n"); return 2; }

    curl_global_init(CURL_GLOBAL_DEFAULT);
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 512L);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 512L);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 512L);
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
    if (socketMode) {
        epollFD = epoll_create1(EPOLL_CLOEXEC);
        if (epollFD < 0) { perror("epoll_create1"); return 1; }
        curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    }

    long base = runId * 10000000L;
    run(base, warmup, concurrency);
    if (errors > warmup / 100) {
        fprintf(stderr, "warm-up errors: %ld (%s)\n", errors, firstError);
        return 1;
    }
    errors = 0;
    firstError[0] = 0;
    samples = calloc((size_t)pages, sizeof *samples);
    if (!samples) { fprintf(stderr, "out of memory\n"); return 1; }

    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    double started = now_ms();
    run(base + warmup, pages, concurrency);
    double seconds = (now_ms() - started) / 1e3;
    getrusage(RUSAGE_SELF, &after);

    double cpu = cpu_seconds(&after) - cpu_seconds(&before);
    long switches = (after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw);
    long transfers = sampleCount * baseCount;
    qsort(samples, (size_t)sampleCount, sizeof *samples, compare);

    printf("{\"mode\":\"curl-floor-%s\",\"curl\":\"%s\",\"concurrency\":%d,\"pages\":%ld,\"upstreamRequests\":%ld,",
           socketMode ? "socket" : "poll", curl_version_info(CURLVERSION_NOW)->version, concurrency, sampleCount, transfers);
    printf("\"seconds\":%.2f,\"pagesPerSecond\":%.0f,", seconds, seconds > 0 ? (double)sampleCount / seconds : 0);
    print_summary("totalMs", samples, sampleCount, 0);
    printf(",");
    print_summary("overheadMs", samples, sampleCount, delay);
    printf(",\"serverSettleOverheadMs\":null,\"cpuSeconds\":{\"floor\":%.6f},", cpu);
    printf("\"contextSwitches\":{\"floor\":{\"voluntary\":%ld,\"nonvoluntary\":%ld,\"total\":%ld}},",
           after.ru_nvcsw - before.ru_nvcsw, after.ru_nivcsw - before.ru_nivcsw, switches);
    printf("\"cpuUsPerTransfer\":%.2f,\"contextSwitchesPerPage\":%.2f,",
           transfers ? cpu * 1e6 / (double)transfers : 0, sampleCount ? (double)switches / (double)sampleCount : 0);
    printf("\"errors\":%ld,\"firstError\":", errors);
    if (firstError[0]) {
        putchar('"');
        for (const char *c = firstError; *c; c++) {
            if (*c == '"' || *c == '\\') putchar('\\');
            putchar((unsigned char)*c < 0x20 ? ' ' : *c);
        }
        putchar('"');
    } else {
        printf("null");
    }
    printf("}\n");

    curl_multi_cleanup(multi);
    curl_global_cleanup();
    free(samples);
    free(list);
    return 0;
}
