/*
 * gateway_proxy — libcurl streaming proxy. See gateway_proxy.h.
 *
 * Transfer state, guarded by xfer->lock and signalled on xfer->cond:
 *
 *   started ──headers──► headers_done ──attach──► attached ──end──► (on_done, close fd)
 *      │                      │
 *      └──fail──► finished    └──abandon──► abandoned (producer aborts, nothing more)
 *
 * A transfer is referenced by the handler (until attach/abandon) and by its producer (until
 * it ends); the last one to let go frees it.
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_cond.h"
#include "ipl_error.h"
#include "ipl_httpd.h"
#include "ipl_log.h"

#define S_SLICE_MS         100 /* how often blocked waits look at the stop/abandon flags */
#define S_MAX_IDLE_HANDLES 64
#define S_MAX_CONNECTS     16 /* idle connections kept per handle pair */

/* A multi + easy pair; the multi owns the connection cache. */
typedef struct s_handle {
    CURLM *multi;
    CURL *easy;
    struct s_handle *next;
} s_handle_t;

struct gateway_proxy {
    int connect_timeout_ms;
    atomic_bool stopping;
    pthread_mutex_t lock; /* guards the fields below */
    int active;           /* producer threads running */
    s_handle_t *handles;  /* idle pairs */
    int nhandles;
    ipl_metric_t *err_connect, *err_timeout, *err_transfer, *err_client, *inflight;
};

struct gateway_xfer {
    gateway_proxy_t *proxy;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;
    /* request (immutable after start) */
    char *url;
    char *shown_url; /* for logs */
    char *body;
    size_t len;
    struct curl_slist *headers;
    int connect_timeout_ms;
    char *ca_bundle; /* NULL: the system's */
    bool insecure;
    int client_fd; /* polled for a hang-up, or -1 */
    gateway_xfer_cb_t cb;
    /* state */
    bool headers_done, first_byte, finished, attached, abandoned, client_gone;
    int status;
    int fd;
    char content_type[128];
    char error[CURL_ERROR_SIZE];
    uint64_t bytes;
    CURL *easy; /* producer only */
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
    pthread_mutex_init(&self->lock, NULL);
    const char *name = "inferplane_gateway_upstream_errors_total";
    const char *help = "Upstream (worker) transfers that failed, by kind.";
    self->err_connect = ipl_metrics_counter(metrics, name, help, "kind=\"connect\"");
    self->err_timeout = ipl_metrics_counter(metrics, name, help, "kind=\"timeout\"");
    self->err_transfer = ipl_metrics_counter(metrics, name, help, "kind=\"transfer\"");
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
        /* Producers still hold the proxy: leak it rather than free it under them. */
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

static void s_xfer_unref(gateway_xfer_t *x)
{
    pthread_mutex_lock(&x->lock);
    int refs = --x->refs;
    pthread_mutex_unlock(&x->lock);
    if (refs > 0) return;
    if (x->fd >= 0) close(x->fd);
    for (struct curl_slist *h = x->headers; h; h = h->next)
        explicit_bzero(h->data, strlen(h->data)); /* may hold a backend's credentials */
    curl_slist_free_all(x->headers);
    free(x->url);
    free(x->shown_url);
    free(x->ca_bundle);
    free(x->body);
    pthread_cond_destroy(&x->cond);
    pthread_mutex_destroy(&x->lock);
    free(x);
}

static bool s_should_abort(gateway_xfer_t *x)
{
    return x->abandoned || atomic_load(&x->proxy->stopping);
}

/* Marks the headers complete with the response code (xfer->lock held). */
static void s_headers_done(gateway_xfer_t *x)
{
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    x->status = (int)code;
    x->headers_done = true;
    pthread_cond_broadcast(&x->cond);
}

static size_t s_on_header(char *line, size_t size, size_t n, void *arg)
{
    gateway_xfer_t *x = arg;
    size_t len = size * n;
    pthread_mutex_lock(&x->lock);
    if (s_should_abort(x)) {
        pthread_mutex_unlock(&x->lock);
        return 0;
    }
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
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200 && !x->headers_done) s_headers_done(x);
    }
    pthread_mutex_unlock(&x->lock);
    return len;
}

static size_t s_on_write(char *data, size_t size, size_t n, void *arg)
{
    gateway_xfer_t *x = arg;
    size_t len = size * n;
    pthread_mutex_lock(&x->lock);
    if (!x->headers_done) s_headers_done(x);
    if (!x->first_byte) { /* held here, with curl's buffer, until the handler attaches */
        x->first_byte = true;
        pthread_cond_broadcast(&x->cond);
    }
    while (!x->attached && !s_should_abort(x)) {
        (void)ipl_cond_wait_ms(&x->cond, &x->lock, S_SLICE_MS);
    }
    bool go = x->attached && !s_should_abort(x);
    int fd = x->fd;
    pthread_mutex_unlock(&x->lock);
    if (!go) return 0; /* aborts the transfer */
    int wrc = x->cb.on_write ? x->cb.on_write(x->cb.arg, fd, data, len)
                             : ipl_http_write_all(fd, data, len);
    if (wrc != 0) {
        pthread_mutex_lock(&x->lock);
        x->client_gone = true;
        pthread_mutex_unlock(&x->lock);
        return 0;
    }
    x->bytes += len;
    if (x->cb.on_chunk) x->cb.on_chunk(x->cb.arg, data, len, ipl_mono_ns());
    return len;
}

static void s_setup(gateway_xfer_t *x, CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_URL, x->url);
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->len);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)x->connect_timeout_ms);
    if (x->ca_bundle) curl_easy_setopt(easy, CURLOPT_CAINFO, x->ca_bundle);
    if (x->insecure) {
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

/* Runs the transfer to its end; returns curl's result. */
static CURLcode s_run(gateway_xfer_t *x, s_handle_t *h, bool *aborted)
{
    CURLcode result = CURLE_OK;
    if (curl_multi_add_handle(h->multi, h->easy) != CURLM_OK) return CURLE_FAILED_INIT;
    int running = 1;
    int client = x->client_fd;
    while (running) {
        if (curl_multi_perform(h->multi, &running) != CURLM_OK) break;
        if (!running) break;
        pthread_mutex_lock(&x->lock);
        bool stop = s_should_abort(x);
        pthread_mutex_unlock(&x->lock);
        if (stop) {
            *aborted = true;
            result = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        struct curl_waitfd wfd = {.fd = client, .events = CURL_WAIT_POLLIN};
        curl_multi_poll(h->multi, client >= 0 ? &wfd : NULL, client >= 0 ? 1 : 0, S_SLICE_MS, NULL);
        if (client >= 0 && (wfd.revents & CURL_WAIT_POLLIN) && s_client_hung_up(&client)) {
            pthread_mutex_lock(&x->lock); /* the worker's slot is freed now, not at a write */
            x->client_gone = true;
            pthread_mutex_unlock(&x->lock);
            result = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
    }
    int queued;
    CURLMsg *m;
    while ((m = curl_multi_info_read(h->multi, &queued)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == h->easy) result = m->data.result;
    curl_multi_remove_handle(h->multi, h->easy);
    return result;
}

static void *s_producer(void *arg)
{
    gateway_xfer_t *x = arg;
    gateway_proxy_t *proxy = x->proxy;
    bool aborted = false;
    CURLcode result = CURLE_FAILED_INIT;
    s_handle_t *h = s_handle_take(proxy);
    if (h) {
        x->easy = h->easy;
        s_setup(x, h->easy);
        result = s_run(x, h, &aborted);
        x->easy = NULL;
        s_handle_give(proxy, h);
    }
    uint64_t end_ns = ipl_mono_ns();

    pthread_mutex_lock(&x->lock);
    /* Counted before the handler wakes up: it answers at once, and a scrape right after the
     * answer must see the count. */
    if (!x->headers_done)
        ipl_metric_inc(x->client_gone                       ? proxy->err_client
                       : result == CURLE_OPERATION_TIMEDOUT ? proxy->err_timeout
                                                            : proxy->err_connect);
    x->finished = true;
    if (!x->error[0] && result != CURLE_OK)
        snprintf(x->error, sizeof(x->error), "%s", curl_easy_strerror(result));
    pthread_cond_broadcast(&x->cond);
    /* Headers arrived but the handler has not attached yet (empty body): wait for it. */
    while (x->headers_done && !x->attached && !s_should_abort(x)) {
        (void)ipl_cond_wait_ms(&x->cond, &x->lock, S_SLICE_MS);
    }
    bool attached = x->attached;
    bool headers = x->headers_done;
    pthread_mutex_unlock(&x->lock);

    if (!headers) {
        /* counted above */
    } else if (x->client_gone) {
        ipl_metric_inc(proxy->err_client);
    } else if (result != CURLE_OK && !aborted) {
        ipl_metric_inc(proxy->err_transfer);
        IPL_LOG_EVERY(5, IPL_LOG_WARN, "upstream_transfer_failed", "url=%s error=\"%s\"",
                      x->shown_url, x->error);
    }
    if (attached) {
        gateway_xfer_result_t res = {.status = x->status,
                                     .ok = result == CURLE_OK,
                                     .client_gone = x->client_gone,
                                     .aborted = aborted,
                                     .bytes = x->bytes,
                                     .end_ns = end_ns};
        if (result != CURLE_OK) snprintf(res.error, sizeof(res.error), "%s", x->error);
        if (x->cb.on_done) x->cb.on_done(x->cb.arg, &res, x->fd);
        /* s_xfer_unref closes the fd when the last reference goes. */
    }

    s_xfer_unref(x);
    pthread_mutex_lock(&proxy->lock);
    proxy->active--;
    ipl_metric_set(proxy->inflight, proxy->active);
    pthread_mutex_unlock(&proxy->lock);
    return NULL;
}

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
    x->proxy = self;
    x->refs = 2;
    x->fd = -1;
    x->body = body;
    x->len = len;
    x->url = strdup(url);
    x->shown_url = strdup(opts->shown_url ? opts->shown_url : url);
    x->connect_timeout_ms =
        opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : self->connect_timeout_ms;
    x->ca_bundle = opts->ca_bundle && opts->ca_bundle[0] ? strdup(opts->ca_bundle) : NULL;
    x->insecure = opts->insecure;
    x->client_fd = opts->watch_client ? opts->client_fd : -1;
    if (cb) x->cb = *cb;
    pthread_mutex_init(&x->lock, NULL);
    ipl_cond_init_mono(&x->cond);
    struct curl_slist *list = curl_slist_append(NULL, "Content-Type: application/json");
    /* no "Expect: 100-continue" round trip before large bodies */
    list = list ? curl_slist_append(list, "Expect:") : NULL;
    for (size_t i = 0; list && headers && headers[i]; i++)
        list = curl_slist_append(list, headers[i]);
    x->headers = list;
    if (!x->url || !x->shown_url || !list ||
        (opts->ca_bundle && opts->ca_bundle[0] && !x->ca_bundle)) {
        x->refs = 1;
        s_xfer_unref(x);
        return IPL_E_NOMEM;
    }

    pthread_mutex_lock(&self->lock);
    self->active++;
    ipl_metric_set(self->inflight, self->active);
    pthread_mutex_unlock(&self->lock);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 1024 * 1024); /* cJSON recursion under ASan */
    pthread_t tid;
    int rc = pthread_create(&tid, &attr, s_producer, x);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_lock(&self->lock);
        self->active--;
        ipl_metric_set(self->inflight, self->active);
        pthread_mutex_unlock(&self->lock);
        x->refs = 1;
        s_xfer_unref(x);
        errno = rc;
        return IPL_E_IO;
    }
    *xfer_p = x;
    return 0;
}

/* Waits, at most timeout_ms, until the headers came (`body`: and the first body byte, or the
 * end of an empty body). 0 (lock held: the caller reads and unlocks), IPL_E_IO (the transfer
 * ended first, or with `body` the client went away), IPL_E_AGAIN (stopping) or IPL_E_TIMEOUT,
 * with `error` filled; on errors the lock is released. */
static int s_wait(gateway_xfer_t *x, int timeout_ms, bool body, char *error, size_t err_size)
{
    uint64_t deadline = ipl_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int rc = IPL_E_TIMEOUT;
    pthread_mutex_lock(&x->lock);
    for (;;) {
        if (body && x->client_gone) {
            if (error) snprintf(error, err_size, "the client went away");
            rc = IPL_E_IO;
            break;
        }
        if (x->headers_done && (!body || x->first_byte || x->finished)) return 0;
        if (x->finished) {
            if (error) snprintf(error, err_size, "%s", x->error[0] ? x->error : "no response");
            rc = IPL_E_IO;
            break;
        }
        if (atomic_load(&x->proxy->stopping)) {
            rc = IPL_E_AGAIN;
            break;
        }
        uint64_t now = ipl_mono_ms();
        if (now >= deadline) break;
        uint64_t left = deadline - now;
        (void)ipl_cond_wait_ms(&x->cond, &x->lock, left < S_SLICE_MS ? (int)left : S_SLICE_MS);
    }
    pthread_mutex_unlock(&x->lock);
    if (rc == IPL_E_TIMEOUT && error)
        snprintf(error, err_size, "no response %s within %d ms",
                 body ? "body (first byte)" : "headers", timeout_ms);
    return rc;
}

int gateway_xfer_wait_headers(gateway_xfer_t *x, int timeout_ms, int *status, char *content_type,
                              size_t ct_size, char *error, size_t err_size)
{
    assert(x && status && content_type && ct_size);
    int rc = s_wait(x, timeout_ms, false, error, err_size);
    if (rc != 0) return rc;
    *status = x->status;
    snprintf(content_type, ct_size, "%s", x->content_type);
    pthread_mutex_unlock(&x->lock);
    return 0;
}

int gateway_xfer_wait_body(gateway_xfer_t *x, int timeout_ms, char *error, size_t err_size)
{
    assert(x);
    int rc = s_wait(x, timeout_ms, true, error, err_size);
    if (rc == 0) pthread_mutex_unlock(&x->lock);
    return rc;
}

bool gateway_xfer_client_gone(gateway_xfer_t *x)
{
    pthread_mutex_lock(&x->lock);
    bool gone = x->client_gone;
    pthread_mutex_unlock(&x->lock);
    return gone;
}

void gateway_xfer_attach(gateway_xfer_t **xfer_p, int fd)
{
    assert(xfer_p && *xfer_p && fd >= 0);
    gateway_xfer_t *x = *xfer_p;
    *xfer_p = NULL;
    pthread_mutex_lock(&x->lock);
    x->fd = fd;
    x->attached = true;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
    s_xfer_unref(x);
}

void gateway_xfer_abandon(gateway_xfer_t **xfer_p)
{
    assert(xfer_p);
    gateway_xfer_t *x = *xfer_p;
    if (!x) return;
    *xfer_p = NULL;
    pthread_mutex_lock(&x->lock);
    x->abandoned = true;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
    s_xfer_unref(x);
}
