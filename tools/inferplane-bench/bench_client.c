/*
 * bench_client — libcurl multi transfers. See bench_client.h.
 */
#include "bench_client.h"

#include <assert.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_body.h"
#include "ipl_clock.h"
#include "ipl_error.h"

typedef struct s_xfer {
    CURL *easy;
    bench_stream_t *stream;
    char *body;
    void *user;
    uint64_t start_ns;
    bool got_data;
    bool streamed;
    bool busy;
    struct s_xfer *next_free;
    char err[CURL_ERROR_SIZE];
} s_xfer_t;

struct bench_client {
    CURLM *multi;
    char *url;
    struct curl_slist *headers;
    bench_client_config_t cfg;
    bench_client_done_fn *done;
    void *arg;
    s_xfer_t **all; /* every transfer object, busy or free */
    size_t nall, cap;
    s_xfer_t *free_list;
    size_t inflight;
    uint64_t connects;
};

static bool s_curl_ready;

bench_client_t *bench_client_new(const bench_client_config_t *cfg, bench_client_done_fn *done,
                                 void *arg, char *err, size_t errlen)
{
    if (!s_curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            ipl_errf(err, errlen, "libcurl failed to initialise");
            return NULL;
        }
        s_curl_ready = true;
    }
    bench_client_t *self = calloc(1, sizeof *self);
    if (!self) goto nomem;
    self->cfg = *cfg;
    self->done = done;
    self->arg = arg;
    const char *path = bench_body_path(cfg->api);
    size_t blen = strlen(cfg->base_url);
    while (blen && cfg->base_url[blen - 1] == '/')
        blen--;
    self->url = malloc(blen + strlen(path) + 1);
    if (!self->url) goto nomem;
    memcpy(self->url, cfg->base_url, blen);
    strcpy(self->url + blen, path);
    self->headers = curl_slist_append(NULL, "Content-Type: application/json");
    self->headers = curl_slist_append(self->headers, "Expect:");
    if (cfg->api == BENCH_API_MESSAGES)
        self->headers = curl_slist_append(self->headers, "anthropic-version: 2023-06-01");
    if (cfg->api_key && cfg->api_key[0]) {
        char h[1024];
        snprintf(h, sizeof h,
                 cfg->api == BENCH_API_MESSAGES ? "x-api-key: %s" : "Authorization: Bearer %s",
                 cfg->api_key);
        self->headers = curl_slist_append(self->headers, h);
    }
    self->cfg.base_url = NULL;
    self->cfg.api_key = NULL;
    self->multi = curl_multi_init();
    if (!self->multi || !self->headers) goto nomem;
    curl_multi_setopt(self->multi, CURLMOPT_MAXCONNECTS,
                      (long)(cfg->max_connections ? cfg->max_connections : 64));
    return self;
nomem:
    ipl_errf(err, errlen, "out of memory");
    bench_client_destroy(&self);
    return NULL;
}

void bench_client_destroy(bench_client_t **self_p)
{
    assert(self_p);
    bench_client_t *self = *self_p;
    if (!self) return;
    for (size_t i = 0; i < self->nall; i++) {
        s_xfer_t *x = self->all[i];
        if (x->busy && self->multi) curl_multi_remove_handle(self->multi, x->easy);
        curl_easy_cleanup(x->easy);
        bench_stream_destroy(&x->stream);
        free(x->body);
        free(x);
    }
    free(self->all);
    if (self->multi) curl_multi_cleanup(self->multi);
    curl_slist_free_all(self->headers);
    free(self->url);
    free(self);
    *self_p = NULL;
}

void bench_client_set_done(bench_client_t *self, bench_client_done_fn *done, void *arg)
{
    assert(self->inflight == 0);
    self->done = done;
    self->arg = arg;
}

static size_t s_on_data(char *data, size_t size, size_t nmemb, void *arg)
{
    s_xfer_t *x = arg;
    size_t n = size * nmemb;
    if (n && !x->got_data) {
        x->got_data = true;
        /* a stream asked for but a body answered (an error): parse it as one */
        char *type = NULL;
        curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &type);
        if (x->streamed && type && !strstr(type, "text/event-stream"))
            bench_stream_as_body(x->stream);
    }
    bench_stream_feed(x->stream, data, n, ipl_mono_ns());
    return n;
}

static s_xfer_t *s_get(bench_client_t *self)
{
    if (self->free_list) {
        s_xfer_t *x = self->free_list;
        self->free_list = x->next_free;
        return x;
    }
    if (self->nall == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 64;
        s_xfer_t **g = realloc(self->all, cap * sizeof *g);
        if (!g) return NULL;
        self->all = g;
        self->cap = cap;
    }
    s_xfer_t *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->easy = curl_easy_init();
    x->stream = bench_stream_new(0);
    if (!x->easy || !x->stream) {
        curl_easy_cleanup(x->easy);
        bench_stream_destroy(&x->stream);
        free(x);
        return NULL;
    }
    self->all[self->nall++] = x;
    return x;
}

int bench_client_start(bench_client_t *self, char **body, size_t len, bool streamed, bool keep_text,
                       void *user)
{
    s_xfer_t *x = s_get(self);
    if (!x) return IPL_E_NOMEM;
    free(x->body);
    x->body = *body;
    *body = NULL;
    x->user = user;
    x->got_data = false;
    x->streamed = streamed;
    x->err[0] = '\0';
    bench_stream_start(x->stream, self->cfg.api, streamed, keep_text);
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, self->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, self->headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, s_on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->err);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(self->cfg.timeout_s * 1000));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    x->start_ns = ipl_mono_ns();
    if (curl_multi_add_handle(self->multi, e) != CURLM_OK) {
        x->next_free = self->free_list;
        self->free_list = x;
        return IPL_E_IO;
    }
    x->busy = true;
    self->inflight++;
    return 0;
}

static void s_finish(bench_client_t *self, s_xfer_t *x, CURLcode code, bool cancelled)
{
    uint64_t now = ipl_mono_ns();
    curl_multi_remove_handle(self->multi, x->easy);
    bench_stream_finish(x->stream, now);
    bench_xfer_info_t info = {.user = x->user,
                              .start_ns = x->start_ns,
                              .end_ns = now,
                              .curl_code = (int)code,
                              .got_data = x->got_data,
                              .cancelled = cancelled,
                              .stream = x->stream};
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &info.http_status);
    long opened = 0;
    if (curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK && opened > 0)
        self->connects += (uint64_t)opened;
    info.curl_error = code == CURLE_OK ? "" : x->err[0] ? x->err : curl_easy_strerror(code);
    x->busy = false;
    self->inflight--;
    self->done(self->arg, &info);
    x->next_free = self->free_list;
    self->free_list = x;
}

/* Hands every finished transfer to its callback; returns how many. */
static size_t s_drain(bench_client_t *self)
{
    CURLMsg *m;
    int left;
    size_t n = 0;
    while ((m = curl_multi_info_read(self->multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        s_xfer_t *x = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        if (x) {
            s_finish(self, x, m->data.result, false);
            n++;
        }
    }
    return n;
}

size_t bench_client_run(bench_client_t *self, int timeout_ms)
{
    int running = 0;
    /* transfers added since the last call start now, before the wait: else their first
     * bytes would wait for some other socket's activity */
    curl_multi_perform(self->multi, &running);
    /* something finished: return without waiting, the caller may have the next request to
     * send (a closed-loop stream) */
    if (s_drain(self)) return self->inflight;
    if (timeout_ms > 0) curl_multi_poll(self->multi, NULL, 0, timeout_ms, NULL);
    curl_multi_perform(self->multi, &running);
    s_drain(self);
    return self->inflight;
}

size_t bench_client_inflight(const bench_client_t *self)
{
    return self->inflight;
}

uint64_t bench_client_connects(const bench_client_t *self)
{
    return self->connects;
}

void bench_client_cancel_all(bench_client_t *self)
{
    for (size_t i = 0; i < self->nall; i++)
        if (self->all[i]->busy) s_finish(self, self->all[i], CURLE_ABORTED_BY_CALLBACK, true);
}
