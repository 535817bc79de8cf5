/*
 * collector_scrape — libcurl multi in socket-action mode: curl tells us (socket callback)
 * which fds to watch and (timer callback) when to call it back; the collector's zmq_poll does
 * the waiting.
 */
#include "collector_scrape.h"

#include <assert.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_prom.h"

#define S_MAX_BODY (8u << 20) /* a vLLM /metrics page is ~100 KB; anything near this is wrong */

typedef struct s_xfer {
    struct s_xfer *next;
    size_t target;
    CURL *easy;
    char *body;
    size_t len, cap;
    bool too_big;
    char errbuf[CURL_ERROR_SIZE];
} s_xfer_t;

typedef struct {
    curl_socket_t fd;
    int what; /* CURL_POLL_IN / OUT / INOUT */
} s_sock_t;

struct collector_scrape {
    CURLM *multi;
    collector_scrape_fn *fn;
    void *arg;
    long timeout_ms;
    s_xfer_t *xfers;
    s_sock_t *socks;
    size_t nsocks, socks_cap;
    int64_t deadline_ms; /* curl's timer, monotonic ms; -1 none */
};

/* ------------------------------------------------------------------------------------------ */
/* parsing */

typedef struct {
    collector_sample_t *out;
    bool any, has_kv;
    double gpu_usage; /* the pre-0.12 name, used only when the new one is absent */
} s_parse_t;

static uint64_t s_label_u64(const char *labels, const char *key)
{
    char buf[32];
    if (ipl_prom_label(labels, key, buf, sizeof buf) != 0) return 0;
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    return (end == buf) ? 0 : (uint64_t)v;
}

/* Counters that only grow while a worker process lives. */
static const char *const s_counters[COLLECTOR_SAMPLE_COUNTERS] = {
    "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:prefix_cache_queries_total"};

static int s_counter(const char *name)
{
    for (int i = 0; i < COLLECTOR_SAMPLE_COUNTERS; i++)
        if (strcmp(name, s_counters[i]) == 0) return i;
    return -1;
}

bool collector_sample_restarted(const collector_sample_t *before, const collector_sample_t *now)
{
    assert(before && now);
    /* a second of slack: start times derived from the boot time can jitter (and no engine
     * restarts within a second) */
    if (before->start_time > 0 && now->start_time > 0 &&
        (now->start_time - before->start_time >= 1.0 ||
         before->start_time - now->start_time >= 1.0))
        return true;
    for (int i = 0; i < COLLECTOR_SAMPLE_COUNTERS; i++)
        if (before->counters[i] >= 0 && now->counters[i] >= 0 &&
            now->counters[i] < before->counters[i])
            return true;
    return false;
}

static void s_sample(void *arg, const char *name, const char *labels, double value)
{
    s_parse_t *p = arg;
    if (value != value) /* NaN */
        return;
    if (strcmp(name, "vllm:num_requests_running") == 0) {
        p->out->running += value;
        p->out->has_running = true;
        p->any = true;
    } else if (strcmp(name, "vllm:num_requests_waiting") == 0) {
        p->out->waiting += value;
        p->any = true;
    } else if (strcmp(name, "vllm:kv_cache_usage_perc") == 0) {
        if (!p->has_kv || value > p->out->kv_usage) p->out->kv_usage = value;
        p->has_kv = p->any = true;
    } else if (strcmp(name, "vllm:gpu_cache_usage_perc") == 0) {
        if (value > p->gpu_usage) p->gpu_usage = value;
        p->any = true;
    } else if (strcmp(name, "process_start_time_seconds") == 0) {
        p->out->start_time = value;
    } else if (s_counter(name) >= 0) {
        double *c = &p->out->counters[s_counter(name)];
        *c = (*c < 0 ? 0 : *c) + value;
    } else if (strcmp(name, "vllm:cache_config_info") == 0) {
        uint64_t bs = s_label_u64(labels, "block_size");
        uint64_t nb = s_label_u64(labels, "num_gpu_blocks");
        if (bs > p->out->block_size) p->out->block_size = bs;
        if (nb > p->out->num_blocks) p->out->num_blocks = nb;
    }
}

int collector_scrape_parse(const char *text, size_t len, collector_sample_t *out)
{
    assert(out);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < COLLECTOR_SAMPLE_COUNTERS; i++)
        out->counters[i] = -1;
    s_parse_t p = {.out = out};
    out->malformed_lines = ipl_prom_parse(text ? text : "", text ? len : 0, s_sample, &p);
    if (!p.has_kv) out->kv_usage = p.gpu_usage;
    if (out->kv_usage < 0) out->kv_usage = 0;
    if (out->kv_usage > 1) out->kv_usage = 1;
    return p.any ? 0 : IPL_E_NOTFOUND;
}

/* ------------------------------------------------------------------------------------------ */
/* curl callbacks */

static size_t s_write(char *data, size_t size, size_t nmemb, void *userp)
{
    s_xfer_t *x = userp;
    size_t n = size * nmemb;
    if (x->len + n + 1 > S_MAX_BODY) {
        x->too_big = true;
        return 0; /* aborts the transfer */
    }
    if (x->len + n + 1 > x->cap) {
        size_t cap = x->cap ? x->cap : 16384;
        while (cap < x->len + n + 1)
            cap *= 2;
        char *body = realloc(x->body, cap);
        if (!body) return 0;
        x->body = body;
        x->cap = cap;
    }
    memcpy(x->body + x->len, data, n);
    x->len += n;
    x->body[x->len] = '\0';
    return n;
}

static int s_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)easy;
    (void)socketp;
    collector_scrape_t *self = userp;
    size_t i = 0;
    while (i < self->nsocks && self->socks[i].fd != fd)
        i++;
    if (what == CURL_POLL_REMOVE) {
        if (i < self->nsocks) self->socks[i] = self->socks[--self->nsocks];
        return 0;
    }
    if (i == self->nsocks) {
        if (self->nsocks == self->socks_cap) {
            size_t cap = self->socks_cap ? self->socks_cap * 2 : 16;
            s_sock_t *socks = realloc(self->socks, cap * sizeof *socks);
            if (!socks) return -1;
            self->socks = socks;
            self->socks_cap = cap;
        }
        self->nsocks++;
    }
    self->socks[i] = (s_sock_t){fd, what};
    return 0;
}

static int s_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    collector_scrape_t *self = userp;
    self->deadline_ms = timeout_ms < 0 ? -1 : (int64_t)(ipl_mono_ms() + (uint64_t)timeout_ms);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

collector_scrape_t *collector_scrape_new(collector_scrape_fn *fn, void *arg, long timeout_ms)
{
    assert(fn);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return NULL;
    collector_scrape_t *self = calloc(1, sizeof *self);
    if (!self) {
        curl_global_cleanup();
        return NULL;
    }
    self->fn = fn;
    self->arg = arg;
    self->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    self->deadline_ms = -1;
    self->multi = curl_multi_init();
    if (!self->multi) {
        free(self);
        curl_global_cleanup();
        return NULL;
    }
    curl_multi_setopt(self->multi, CURLMOPT_SOCKETFUNCTION, s_socket_cb);
    curl_multi_setopt(self->multi, CURLMOPT_SOCKETDATA, self);
    curl_multi_setopt(self->multi, CURLMOPT_TIMERFUNCTION, s_timer_cb);
    curl_multi_setopt(self->multi, CURLMOPT_TIMERDATA, self);
    return self;
}

static void s_xfer_free(collector_scrape_t *self, s_xfer_t *x)
{
    curl_multi_remove_handle(self->multi, x->easy);
    curl_easy_cleanup(x->easy);
    free(x->body);
    free(x);
}

/* Unlinks and frees the transfer of `target` (or the one with `easy`). */
static s_xfer_t **s_find(collector_scrape_t *self, size_t target, CURL *easy)
{
    s_xfer_t **pp = &self->xfers;
    while (*pp && !(easy ? (*pp)->easy == easy : (*pp)->target == target))
        pp = &(*pp)->next;
    return pp;
}

void collector_scrape_destroy(collector_scrape_t **self_p)
{
    if (!self_p || !*self_p) return;
    collector_scrape_t *self = *self_p;
    while (self->xfers) {
        s_xfer_t *x = self->xfers;
        self->xfers = x->next;
        s_xfer_free(self, x);
    }
    curl_multi_cleanup(self->multi);
    free(self->socks);
    free(self);
    curl_global_cleanup();
    *self_p = NULL;
}

bool collector_scrape_busy(const collector_scrape_t *self, size_t target)
{
    for (const s_xfer_t *x = self->xfers; x; x = x->next)
        if (x->target == target) return true;
    return false;
}

int collector_scrape_start(collector_scrape_t *self, size_t target, const char *url)
{
    assert(self && url);
    if (collector_scrape_busy(self, target)) return IPL_E_AGAIN;
    s_xfer_t *x = calloc(1, sizeof *x);
    if (!x || !(x->easy = curl_easy_init())) {
        free(x);
        return IPL_E_NOMEM;
    }
    x->target = target;
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, s_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, self->timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, self->timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* gzip if the server offers it */
    if (curl_multi_add_handle(self->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        free(x);
        return IPL_E_NOMEM;
    }
    x->next = self->xfers;
    self->xfers = x;
    return 0;
}

void collector_scrape_cancel(collector_scrape_t *self, size_t target)
{
    assert(self);
    s_xfer_t **pp = s_find(self, target, NULL);
    if (*pp) {
        s_xfer_t *x = *pp;
        *pp = x->next;
        s_xfer_free(self, x);
    }
}

size_t collector_scrape_pollitems(collector_scrape_t *self, zmq_pollitem_t *items, size_t max)
{
    assert(self);
    size_t n = 0;
    for (size_t i = 0; i < self->nsocks && n < max; i++) {
        short events = 0;
        if (self->socks[i].what & CURL_POLL_IN) events |= ZMQ_POLLIN;
        if (self->socks[i].what & CURL_POLL_OUT) events |= ZMQ_POLLOUT;
        items[n++] = (zmq_pollitem_t){NULL, self->socks[i].fd, events, 0};
    }
    return n;
}

long collector_scrape_timeout(collector_scrape_t *self)
{
    assert(self);
    if (self->deadline_ms < 0) return -1;
    int64_t left = self->deadline_ms - (int64_t)ipl_mono_ms();
    return left > 0 ? (long)left : 0;
}

/* Reports every finished transfer. */
static void s_finish(collector_scrape_t *self)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(self->multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        s_xfer_t **pp = s_find(self, 0, msg->easy_handle);
        if (!*pp) continue;
        s_xfer_t *x = *pp;
        *pp = x->next;
        CURLcode rc = msg->data.result;
        long status = 0;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        char error[CURL_ERROR_SIZE + 64];
        collector_sample_t sample;
        const collector_sample_t *ok = NULL;
        if (rc != CURLE_OK) {
            snprintf(error, sizeof error, "%s",
                     x->too_big     ? "body too large"
                     : x->errbuf[0] ? x->errbuf
                                    : curl_easy_strerror(rc));
        } else if (status < 200 || status > 299) {
            snprintf(error, sizeof error, "HTTP status %ld", status);
        } else if (collector_scrape_parse(x->body, x->len, &sample) != 0) {
            snprintf(error, sizeof error, "no vllm: load gauges in the page");
        } else {
            ok = &sample;
        }
        size_t target = x->target;
        s_xfer_free(self, x); /* before the callback, which may start the next scrape */
        self->fn(self->arg, target, ok, ok ? NULL : error);
    }
}

void collector_scrape_dispatch(collector_scrape_t *self, const zmq_pollitem_t *items, size_t n)
{
    assert(self);
    int running;
    for (size_t i = 0; i < n; i++) {
        if (!items[i].revents) continue;
        int mask = 0;
        if (items[i].revents & ZMQ_POLLIN) mask |= CURL_CSELECT_IN;
        if (items[i].revents & ZMQ_POLLOUT) mask |= CURL_CSELECT_OUT;
        if (items[i].revents & ZMQ_POLLERR) mask |= CURL_CSELECT_ERR;
        curl_multi_socket_action(self->multi, items[i].fd, mask, &running);
    }
    if (self->deadline_ms >= 0 && (int64_t)ipl_mono_ms() >= self->deadline_ms) {
        self->deadline_ms = -1;
        curl_multi_socket_action(self->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    s_finish(self);
}
