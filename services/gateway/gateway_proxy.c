/*
 * gateway_proxy — libcurl streaming proxy. See gateway_proxy.h.
 *
 * A transfer's state needs no lock: it belongs to the connection's thread only (the handler,
 * which drives curl itself while it waits, then the server's content reader through the
 * pump); only gateway_proxy_stop's flag comes from elsewhere (atomic).
 *
 *   started ──wait_headers/wait_body (the handler drives curl)──► first byte held (paused)
 *      │                                                              │
 *      │                                          attach ─────────────┤ abandon ──► released
 *      │                                                              ▼
 *      │                   s_inline: unpause, write what is already here (bounded)
 *      │                        │ finished                       │ more to come
 *      └──fail──► finished      ▼                                ▼
 *                  on_done, close fd; the response   pump rounds (s_pump) on the connection's
 *                  settled (sent buffered)           thread; at the end on_done, close fd;
 *                                                    the server's release frees it.
 */
#include "gateway_proxy.h"

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_httpd.h"
#include "ipl_log.h"

#define S_SLICE_MS         100 /* how often blocked waits look at the stop flag */
#define S_MAX_IDLE_HANDLES 64
#define S_MAX_CONNECTS     16 /* idle connections kept per handle pair */
/* Written in one round while nobody reads the pipe (at attach, before the server reads it,
 * and in a pump round): far below the pipe's 64 KiB so that no write can block (what on_write
 * makes of the bytes, and on_done's trailer, fit beside them). */
#define S_INLINE_MAX      (16 * 1024)
#define S_INLINE_PIPE_MAX (40 * 1024)
#define S_INLINE_ROUNDS   8

/* A multi + easy pair; the multi owns the connection cache. */
typedef struct s_handle {
    CURLM *multi;
    CURL *easy;
    struct s_handle *next;
} s_handle_t;

struct gateway_proxy {
    int connect_timeout_ms;
    int stream_idle_timeout_ms; /* 0: none */
    atomic_bool stopping;
    pthread_mutex_t lock; /* guards the fields below */
    int active;           /* transfers alive (started, not yet released) */
    s_handle_t *handles;  /* idle pairs */
    int nhandles;
    ipl_metric_t *err_connect, *err_timeout, *err_transfer, *err_idle, *err_client, *inflight;
};

struct gateway_xfer {
    gateway_proxy_t *proxy;
    /* request (immutable after start) */
    char *url;
    char *shown_url; /* for logs */
    char *body;
    size_t len;
    struct curl_slist *headers;
    char *ca_bundle; /* NULL: the system's */
    int client_fd;   /* polled for a hang-up, or -1 */
    gateway_xfer_cb_t cb;
    s_handle_t *h;
    /* state (the connection thread's) */
    bool headers_done, first_byte, finished, attached, paused, client_gone, aborted;
    bool idle_timeout; /* cut by the stream idle timeout */
    bool inline_phase; /* writing where nobody reads the pipe meanwhile: bounded */
    bool done;         /* on_done ran and the fd is closed */
    CURLcode result;
    int status;
    int fd;
    char content_type[128];
    char error[CURL_ERROR_SIZE];
    uint64_t bytes, inline_bytes;
    uint64_t end_ns;
    uint64_t quiet_since_ms; /* attached: the last byte from upstream, or the last round that
                                did not wait for it (paused), for the stream idle timeout */
};

/* ---- proxy --------------------------------------------------------------------------------- */

gateway_proxy_t *gateway_proxy_new(const gateway_proxy_config_t *config, ipl_metrics_t *metrics)
{
    assert(metrics);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return NULL;
    gateway_proxy_t *self = calloc(1, sizeof(*self));
    if (!self) {
        curl_global_cleanup();
        return NULL;
    }
    self->connect_timeout_ms =
        config && config->connect_timeout_ms > 0 ? config->connect_timeout_ms : 2000;
    self->stream_idle_timeout_ms =
        config && config->stream_idle_timeout_ms > 0 ? config->stream_idle_timeout_ms : 0;
    pthread_mutex_init(&self->lock, NULL);
    const char *name = "inferplane_gateway_upstream_errors_total";
    const char *help = "Upstream (worker) transfers that failed, by kind.";
    self->err_connect = ipl_metrics_counter(metrics, name, help, "kind=\"connect\"");
    self->err_timeout = ipl_metrics_counter(metrics, name, help, "kind=\"timeout\"");
    self->err_transfer = ipl_metrics_counter(metrics, name, help, "kind=\"transfer\"");
    self->err_idle = ipl_metrics_counter(metrics, name, help, "kind=\"stream_idle\"");
    self->err_client = ipl_metrics_counter(metrics, name, help, "kind=\"client_gone\"");
    self->inflight = ipl_metrics_gauge(metrics, "inferplane_gateway_inflight",
                                       "Upstream transfers in progress.", NULL);
    return self;
}

static void s_handle_free(s_handle_t *h)
{
    if (!h) return;
    if (h->easy) curl_easy_cleanup(h->easy);
    if (h->multi) curl_multi_cleanup(h->multi);
    free(h);
}

void gateway_proxy_destroy(gateway_proxy_t **self_p)
{
    assert(self_p);
    gateway_proxy_t *self = *self_p;
    if (!self) return;
    gateway_proxy_stop(self);
    if (!gateway_proxy_wait_idle(self, 2000)) {
        /* Transfers still hold the proxy: leak it rather than free it under them. */
        IPL_ERROR("proxy_not_idle", "active=%d", self->active);
        *self_p = NULL;
        return;
    }
    while (self->handles) {
        s_handle_t *h = self->handles;
        self->handles = h->next;
        s_handle_free(h);
    }
    pthread_mutex_destroy(&self->lock);
    free(self);
    curl_global_cleanup();
    *self_p = NULL;
}

void gateway_proxy_stop(gateway_proxy_t *self)
{
    atomic_store(&self->stopping, true);
}

bool gateway_proxy_wait_idle(gateway_proxy_t *self, int timeout_ms)
{
    uint64_t deadline = ipl_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&self->lock);
    while (self->active > 0 && ipl_mono_ms() < deadline) {
        pthread_mutex_unlock(&self->lock);
        ipl_sleep_ms(10);
        pthread_mutex_lock(&self->lock);
    }
    bool idle = self->active == 0;
    pthread_mutex_unlock(&self->lock);
    return idle;
}

static s_handle_t *s_handle_take(gateway_proxy_t *self)
{
    pthread_mutex_lock(&self->lock);
    s_handle_t *h = self->handles;
    if (h) {
        self->handles = h->next;
        self->nhandles--;
    }
    pthread_mutex_unlock(&self->lock);
    if (h) return h;
    h = calloc(1, sizeof(*h));
    if (!h) return NULL;
    h->multi = curl_multi_init();
    h->easy = curl_easy_init();
    if (!h->multi || !h->easy) {
        s_handle_free(h);
        return NULL;
    }
    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)S_MAX_CONNECTS);
    return h;
}

static void s_handle_give(gateway_proxy_t *self, s_handle_t *h)
{
    curl_easy_reset(h->easy); /* keeps live connections in the multi's cache */
    pthread_mutex_lock(&self->lock);
    if (self->nhandles < S_MAX_IDLE_HANDLES) {
        h->next = self->handles;
        self->handles = h;
        self->nhandles++;
        h = NULL;
    }
    pthread_mutex_unlock(&self->lock);
    s_handle_free(h);
}

/* ---- transfer ------------------------------------------------------------------------------ */

/* Frees the transfer and gives its handle pair back (an unfinished transfer's connection is
 * closed by curl_multi_remove_handle). */
static void s_release(gateway_xfer_t *x)
{
    gateway_proxy_t *proxy = x->proxy;
    if (x->h) {
        curl_multi_remove_handle(x->h->multi, x->h->easy);
        s_handle_give(proxy, x->h);
    }
    if (x->fd >= 0) close(x->fd);
    for (struct curl_slist *h = x->headers; h; h = h->next)
        explicit_bzero(h->data, strlen(h->data)); /* may hold a backend's credentials */
    curl_slist_free_all(x->headers);
    free(x->url);
    free(x->shown_url);
    free(x->ca_bundle);
    free(x->body);
    free(x);
    pthread_mutex_lock(&proxy->lock);
    proxy->active--;
    ipl_metric_set(proxy->inflight, proxy->active);
    pthread_mutex_unlock(&proxy->lock);
}

/* Marks the headers complete with the response code. */
static void s_headers_done(gateway_xfer_t *x)
{
    long code = 0;
    curl_easy_getinfo(x->h->easy, CURLINFO_RESPONSE_CODE, &code);
    x->status = (int)code;
    x->headers_done = true;
}

/* The transfer ended with `result` (first call only). A transfer that ends before its
 * headers is counted here, before the handler answers: a scrape right after the answer
 * must see the count. */
static void s_end(gateway_xfer_t *x, CURLcode result)
{
    if (x->finished) return;
    x->finished = true;
    x->result = result;
    x->end_ns = ipl_mono_ns();
    if (!x->error[0] && result != CURLE_OK)
        snprintf(x->error, sizeof(x->error), "%s", curl_easy_strerror(result));
    if (!x->headers_done)
        ipl_metric_inc(x->client_gone                       ? x->proxy->err_client
                       : result == CURLE_OPERATION_TIMEDOUT ? x->proxy->err_timeout
                                                            : x->proxy->err_connect);
}

static size_t s_on_header(char *line, size_t size, size_t n, void *arg)
{
    gateway_xfer_t *x = arg;
    size_t len = size * n;
    if (atomic_load(&x->proxy->stopping)) return 0;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        x->content_type[0] = '\0'; /* a new response (after 1xx) */
    } else if (len > 13 && strncasecmp(line, "content-type:", 13) == 0) {
        const char *v = line + 13;
        size_t vlen = len - 13;
        while (vlen && (*v == ' ' || *v == '\t')) {
            v++;
            vlen--;
        }
        while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
            vlen--;
        if (vlen >= sizeof(x->content_type)) vlen = sizeof(x->content_type) - 1;
        memcpy(x->content_type, v, vlen);
        x->content_type[vlen] = '\0';
    } else if ((len == 2 && line[0] == '\r' && line[1] == '\n') || (len == 1 && line[0] == '\n')) {
        long code = 0;
        curl_easy_getinfo(x->h->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200 && !x->headers_done) s_headers_done(x);
    }
    return len;
}

/* Whether `len` more bytes may be written in this round, nobody reading the pipe meanwhile
 * (S_INLINE_MAX, and what the pipe already holds). */
static bool s_inline_room(gateway_xfer_t *x, size_t len)
{
    if (x->inline_bytes + len > S_INLINE_MAX) return false;
    int queued = 0;
    if (ioctl(x->fd, FIONREAD, &queued) != 0) return false;
    return (size_t)queued + 2 * len <= S_INLINE_PIPE_MAX;
}

static size_t s_on_write(char *data, size_t size, size_t n, void *arg)
{
    gateway_xfer_t *x = arg;
    size_t len = size * n;
    if (!x->headers_done) s_headers_done(x);
    if (!x->attached || (x->inline_phase && !s_inline_room(x, len))) {
        /* Held by curl, with the rest that comes, until the handler attaches (the first byte
         * of the body), or until the next pump round (this round wrote what it may while
         * nobody reads the pipe). */
        x->first_byte = true;
        x->paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    if (atomic_load(&x->proxy->stopping)) {
        x->aborted = true;
        return 0; /* aborts the transfer */
    }
    int wrc = x->cb.on_write ? x->cb.on_write(x->cb.arg, x->fd, data, len)
                             : ipl_http_write_all(x->fd, data, len);
    if (wrc != 0) {
        x->client_gone = true;
        return 0;
    }
    x->bytes += len;
    x->quiet_since_ms = ipl_mono_ms();
    if (x->inline_phase) x->inline_bytes += len;
    if (x->cb.on_chunk) x->cb.on_chunk(x->cb.arg, data, len, ipl_mono_ns());
    return len;
}

static void s_setup(gateway_xfer_t *x, const gateway_xfer_opts_t *opts, int connect_timeout_ms)
{
    CURL *easy = x->h->easy;
    curl_easy_setopt(easy, CURLOPT_URL, x->url);
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->len);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_timeout_ms);
    if (x->ca_bundle) curl_easy_setopt(easy, CURLOPT_CAINFO, x->ca_bundle);
    if (opts->insecure) {
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, x->error);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, s_on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, s_on_write);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, x);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
}

/* After the client's socket polled readable: whether the client hung up (an end of file, a
 * reset). Data instead (a pipelined request) stops the watch: *fd = -1, EPIPE remains. */
static bool s_client_hung_up(int *fd)
{
    struct pollfd p = {.fd = *fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) return true;
    char c;
    ssize_t n = recv(*fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return true;
    if (n > 0) *fd = -1;
    return false;
}

/* Lets curl work once, and notes the end of the transfer. */
static void s_perform(gateway_xfer_t *x)
{
    if (x->finished) return;
    if (atomic_load(&x->proxy->stopping)) {
        x->aborted = true;
        s_end(x, CURLE_ABORTED_BY_CALLBACK);
        return;
    }
    int running = 1;
    CURLMcode mrc = curl_multi_perform(x->h->multi, &running);
    int queued;
    CURLMsg *m;
    while ((m = curl_multi_info_read(x->h->multi, &queued)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == x->h->easy) s_end(x, m->data.result);
    if (mrc != CURLM_OK)
        s_end(x, CURLE_FAILED_INIT);
    else if (!running)
        s_end(x, CURLE_OK);
    if (x->client_gone) s_end(x, CURLE_ABORTED_BY_CALLBACK); /* a write found it gone */
}

/* Waits at most `ms` for curl's sockets or the client's; a hang-up ends the transfer at once
 * (the worker's slot is freed now, not at a write). Returns how many sockets were ready. */
static int s_poll(gateway_xfer_t *x, int ms)
{
    int client = x->client_fd;
    struct curl_waitfd wfd = {.fd = client, .events = CURL_WAIT_POLLIN};
    int ready = 0;
    curl_multi_poll(x->h->multi, client >= 0 ? &wfd : NULL, client >= 0 ? 1 : 0, ms, &ready);
    if (client >= 0 && (wfd.revents & CURL_WAIT_POLLIN) && s_client_hung_up(&x->client_fd)) {
        x->client_gone = true;
        s_end(x, CURLE_ABORTED_BY_CALLBACK);
    }
    return ready;
}

/* Resumes a transfer held by the write callback; curl delivers what it held right here. */
static void s_unpause(gateway_xfer_t *x)
{
    if (!x->paused || x->finished) return;
    x->paused = false;
    CURLcode rc = curl_easy_pause(x->h->easy, CURLPAUSE_CONT);
    if (rc != CURLE_OK || x->client_gone) s_end(x, rc != CURLE_OK ? rc : CURLE_WRITE_ERROR);
}

/* The end of an attached transfer: counts, on_done, closes the fd. */
static void s_done(gateway_xfer_t *x)
{
    gateway_proxy_t *proxy = x->proxy;
    if (x->done) return;
    x->done = true;
    if (!x->headers_done) {
        /* counted in s_end */
    } else if (x->client_gone) {
        ipl_metric_inc(proxy->err_client);
    } else if (x->idle_timeout) {
        ipl_metric_inc(proxy->err_idle);
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "upstream_stream_idle", "url=%s error=\"%s\"", x->shown_url,
                      x->error);
    } else if (x->result != CURLE_OK && !x->aborted) {
        ipl_metric_inc(proxy->err_transfer);
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "upstream_transfer_failed", "url=%s error=\"%s\"",
                      x->shown_url, x->error);
    }
    gateway_xfer_result_t res = {.status = x->status,
                                 .ok = x->result == CURLE_OK,
                                 .client_gone = x->client_gone,
                                 .aborted = x->aborted,
                                 .idle_timeout = x->idle_timeout,
                                 .bytes = x->bytes,
                                 .end_ns = x->end_ns};
    if (x->result != CURLE_OK) snprintf(res.error, sizeof(res.error), "%s", x->error);
    if (x->cb.on_done) x->cb.on_done(x->cb.arg, &res, x->fd);
    close(x->fd); /* the reader sees the end of the stream */
    x->fd = -1;
}

static void s_complete(gateway_xfer_t *x)
{
    s_done(x);
    s_release(x);
}

/* ---- the API ------------------------------------------------------------------------------- */

int gateway_proxy_start(gateway_proxy_t *self, const char *url, char **body_p, size_t len,
                        const char *const *headers, const gateway_xfer_cb_t *cb,
                        gateway_xfer_t **xfer_p)
{
    gateway_xfer_opts_t opts = {.headers = headers};
    return gateway_proxy_start_with(self, url, body_p, len, &opts, cb, xfer_p);
}

int gateway_proxy_start_with(gateway_proxy_t *self, const char *url, char **body_p, size_t len,
                             const gateway_xfer_opts_t *opts, const gateway_xfer_cb_t *cb,
                             gateway_xfer_t **xfer_p)
{
    static const gateway_xfer_opts_t none = {0};
    if (!opts) opts = &none;
    const char *const *headers = opts->headers;
    assert(self && url && body_p && xfer_p);
    *xfer_p = NULL;
    char *body = *body_p;
    *body_p = NULL;
    if (atomic_load(&self->stopping)) {
        free(body);
        return IPL_E_AGAIN;
    }
    gateway_xfer_t *x = calloc(1, sizeof(*x));
    if (!x) {
        free(body);
        return IPL_E_NOMEM;
    }
    pthread_mutex_lock(&self->lock);
    self->active++;
    ipl_metric_set(self->inflight, self->active);
    pthread_mutex_unlock(&self->lock);
    x->proxy = self;
    x->fd = -1;
    x->body = body;
    x->len = len;
    x->url = strdup(url);
    x->shown_url = strdup(opts->shown_url ? opts->shown_url : url);
    x->ca_bundle = opts->ca_bundle && opts->ca_bundle[0] ? strdup(opts->ca_bundle) : NULL;
    x->client_fd = opts->watch_client ? opts->client_fd : -1;
    if (cb) x->cb = *cb;
    struct curl_slist *list = curl_slist_append(NULL, "Content-Type: application/json");
    /* no "Expect: 100-continue" round trip before large bodies */
    list = list ? curl_slist_append(list, "Expect:") : NULL;
    for (size_t i = 0; list && headers && headers[i]; i++)
        list = curl_slist_append(list, headers[i]);
    x->headers = list;
    if (!x->url || !x->shown_url || !list ||
        (opts->ca_bundle && opts->ca_bundle[0] && !x->ca_bundle)) {
        s_release(x);
        return IPL_E_NOMEM;
    }
    x->h = s_handle_take(self);
    if (!x->h) {
        s_release(x);
        return IPL_E_NOMEM;
    }
    s_setup(x, opts,
            opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : self->connect_timeout_ms);
    if (curl_multi_add_handle(x->h->multi, x->h->easy) != CURLM_OK) {
        s_handle_give(self, x->h);
        x->h = NULL;
        s_release(x);
        errno = EIO;
        return IPL_E_IO;
    }
    s_perform(x); /* connect and send now: the handler's next call waits for the answer */
    *xfer_p = x;
    return 0;
}

/* Drives the transfer on the caller's thread, at most timeout_ms, until the headers came
 * (`body`: and the first body byte, or the end of an empty body). 0, IPL_E_IO (the transfer
 * ended first, or with `body` the client went away), IPL_E_AGAIN (stopping) or IPL_E_TIMEOUT,
 * with `error` filled. */
static int s_wait(gateway_xfer_t *x, int timeout_ms, bool body, char *error, size_t err_size)
{
    uint64_t deadline = ipl_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        if (body && x->client_gone) {
            if (error) snprintf(error, err_size, "the client went away");
            return IPL_E_IO;
        }
        if (x->headers_done && (!body || x->first_byte || x->finished)) return 0;
        if (atomic_load(&x->proxy->stopping) || (x->finished && x->aborted)) return IPL_E_AGAIN;
        if (x->finished) {
            if (error) snprintf(error, err_size, "%s", x->error[0] ? x->error : "no response");
            return IPL_E_IO;
        }
        uint64_t now = ipl_mono_ms();
        if (now >= deadline) break;
        uint64_t left = deadline - now;
        (void)s_poll(x, left < S_SLICE_MS ? (int)left : S_SLICE_MS);
        s_perform(x);
    }
    if (error)
        snprintf(error, err_size, "no response %s within %d ms",
                 body ? "body (first byte)" : "headers", timeout_ms);
    return IPL_E_TIMEOUT;
}

int gateway_xfer_wait_headers(gateway_xfer_t *x, int timeout_ms, int *status, char *content_type,
                              size_t ct_size, char *error, size_t err_size)
{
    assert(x && status && content_type && ct_size);
    int rc = s_wait(x, timeout_ms, false, error, err_size);
    if (rc != 0) return rc;
    *status = x->status;
    snprintf(content_type, ct_size, "%s", x->content_type);
    return 0;
}

int gateway_xfer_wait_body(gateway_xfer_t *x, int timeout_ms, char *error, size_t err_size)
{
    assert(x);
    return s_wait(x, timeout_ms, true, error, err_size);
}

bool gateway_xfer_client_gone(gateway_xfer_t *x)
{
    return x->client_gone;
}

/* Writes what is already here (often the whole answer), bounded by the pipe's capacity, on
 * the calling thread while nobody reads the pipe: the held first byte and whatever follows
 * it at once. */
static void s_inline(gateway_xfer_t *x)
{
    x->inline_phase = true;
    x->inline_bytes = 0;
    s_unpause(x);
    for (int i = 0; i < S_INLINE_ROUNDS && !x->finished && !x->paused; i++) {
        s_perform(x);
        if (x->finished || x->paused || s_poll(x, 0) == 0) break;
    }
    x->inline_phase = false;
}

/* Cuts a transfer whose upstream sent nothing for the stream idle timeout. */
static void s_idle_check(gateway_xfer_t *x)
{
    int limit = x->proxy->stream_idle_timeout_ms;
    uint64_t now = ipl_mono_ms();
    if (!limit || x->finished || now - x->quiet_since_ms < (uint64_t)limit) return;
    x->idle_timeout = true;
    snprintf(x->error, sizeof(x->error),
             "no byte from upstream for %d ms (--stream-idle-timeout-ms)", limit);
    s_end(x, CURLE_OPERATION_TIMEDOUT);
}

/* ipl_http_pump_t.pump: one round on the connection's thread, the pipe being empty. */
static void s_pump(void *arg, int ms)
{
    gateway_xfer_t *x = arg;
    if (x->done) return;
    /* held back while the client read what came before: that time is not the upstream's */
    if (x->paused) x->quiet_since_ms = ipl_mono_ms();
    s_inline(x);
    if (!x->finished && !x->paused && x->inline_bytes == 0) { /* nothing yet: wait for it */
        x->inline_phase = true;
        (void)s_poll(x, ms);
        s_perform(x);
        x->inline_phase = false;
        if (!x->paused && x->inline_bytes == 0) s_idle_check(x);
    }
    if (x->finished) s_done(x);
}

/* ipl_http_pump_t.release: the response is over; a transfer still running lost its client
 * (or the server is stopping). */
static void s_pump_release(void *arg)
{
    gateway_xfer_t *x = arg;
    if (!x->finished) {
        if (atomic_load(&x->proxy->stopping))
            x->aborted = true;
        else
            x->client_gone = true;
        s_end(x, CURLE_ABORTED_BY_CALLBACK);
    }
    s_complete(x);
}

void gateway_xfer_attach_to(gateway_xfer_t **xfer_p, ipl_http_resp_t *resp, int fd)
{
    assert(xfer_p && *xfer_p && resp && fd >= 0);
    gateway_xfer_t *x = *xfer_p;
    *xfer_p = NULL;
    x->fd = fd;
    x->attached = true;
    x->quiet_since_ms = ipl_mono_ms(); /* the stream idle clock starts at the first byte */
    s_inline(x);
    if (x->finished) { /* the whole answer is in the pipe: sent in one go */
        s_complete(x);
        (void)ipl_http_resp_stream_settle(resp);
        return;
    }
    ipl_http_pump_t pump = {.pump = s_pump, .release = s_pump_release, .arg = x};
    ipl_http_resp_stream_pump(resp, &pump); /* the server calls release, even if unsent */
}

void gateway_xfer_abandon(gateway_xfer_t **xfer_p)
{
    assert(xfer_p);
    gateway_xfer_t *x = *xfer_p;
    if (!x) return;
    *xfer_p = NULL;
    s_end(x, CURLE_ABORTED_BY_CALLBACK); /* counted as before, when no headers came */
    s_release(x);
}
