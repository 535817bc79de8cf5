/*
 * gateway_queue — see gateway_queue.h. One fairq per model (a "scope"), all under one mutex;
 * each waiting handler thread blocks on its ticket's own condition, so letting one request go
 * wakes exactly that thread. The timer thread sleeps on `tick` until the earliest pause of a
 * model that has requests waiting and none let go.
 */
#include "gateway_queue.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ipl_clock.h"
#include "ipl_cond.h"
#include "ipl_error.h"
#include "ipl_log.h"

#define S_DEFAULT_REQUESTS 10000
#define S_DEFAULT_RETRY_MS 20
#define S_RETRY_AFTER_MAX  60
#define S_EWMA_ALPHA       0.2

enum { S_NEW = 0, S_QUEUED, S_LETGO, S_OUT, S_DONE };

static const double s_wait_buckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                        1,     2.5,   5,    10,    30,   60,  120};

/* The queue of one model. */
typedef struct {
    char model[sizeof(((gateway_queue_ticket_t *)0)->model)];
    fairq_t *fq;
    uint64_t pause_until_ns;     /* 0: not paused */
    gateway_queue_ticket_t *out; /* the request let go and asking the decider (one at most) */
    double interval_s;           /* EWMA of the time between routed let-go requests (0: unknown) */
    uint64_t last_routed_ns;
} s_scope_t;

struct gateway_queue {
    gateway_queue_config_t cfg;
    ipl_metrics_t *metrics;
    pthread_mutex_t lock;
    pthread_cond_t tick; /* the timer thread's */
    pthread_t timer;
    bool timer_started, stopping;
    s_scope_t *scopes[GATEWAY_QUEUE_MODEL_MAX];
    size_t nscopes;
    size_t len; /* waiting, all scopes (mirrored in `waiting` for lock-free reads) */
    uint64_t tokens;
    atomic_size_t waiting;
    ipl_metric_t *dispatches;
};

/* ---- small helpers ------------------------------------------------------------------------- */

static s_scope_t *s_scope_find(gateway_queue_t *self, const char *model)
{
    for (size_t i = 0; i < self->nscopes; i++)
        if (!strcmp(self->scopes[i]->model, model)) return self->scopes[i];
    return NULL;
}

/* Whether the client on `fd` hung up (or its socket failed). */
static bool s_hung_up(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* The scope of `model`, made on first use; NULL when GATEWAY_QUEUE_MODEL_MAX models have one
 * or out of memory. Every scope's fairq has the gateway's bounds (the totals are checked by
 * the caller across scopes). */
static s_scope_t *s_scope(gateway_queue_t *self, const char *model)
{
    s_scope_t *s = s_scope_find(self, model);
    if (s || self->nscopes >= GATEWAY_QUEUE_MODEL_MAX) return s;
    s = calloc(1, sizeof *s);
    fairq_config_t fc = {.max_entries = self->cfg.max_requests,
                         .max_tokens = self->cfg.max_tokens,
                         .tenant_max_entries = self->cfg.tenant_max_requests};
    if (s) s->fq = fairq_new(&fc);
    if (!s || !s->fq) {
        free(s);
        return NULL;
    }
    snprintf(s->model, sizeof s->model, "%s", model);
    self->scopes[self->nscopes++] = s;
    return s;
}

/* inferplane_gateway_queue_depth{tenant,priority}: the tenant's requests of that class
 * waiting, summed over the models (the one out asking the decider included: it is still
 * waiting for a slot). Under the lock. */
static void s_depth_gauge(gateway_queue_t *self, const char *tenant, fairq_class_t cls)
{
    size_t depth = 0;
    for (size_t i = 0; i < self->nscopes; i++) {
        const s_scope_t *s = self->scopes[i];
        fairq_stats_t st;
        if (fairq_stats(s->fq, tenant, (int)cls, &st)) depth += st.depth;
        if (s->out && s->out->cls == cls && !strcmp(s->out->tenant, tenant)) depth++;
    }
    char esc[2 * FAIRQ_TENANT_MAX + 8], labels[3 * FAIRQ_TENANT_MAX + 64];
    snprintf(labels, sizeof labels, "tenant=\"%s\",priority=\"%s\"",
             ipl_metrics_escape(esc, sizeof esc, tenant), fairq_class_name(cls));
    ipl_metric_set(ipl_metrics_gauge(self->metrics, "inferplane_gateway_queue_depth",
                                     "Requests waiting in the gateway's fair queue.", labels),
                   (double)depth);
}

static void s_dropped(gateway_queue_t *self, const char *tenant, const char *reason)
{
    char esc[2 * FAIRQ_TENANT_MAX + 8], labels[3 * FAIRQ_TENANT_MAX + 64];
    snprintf(labels, sizeof labels, "tenant=\"%s\",reason=\"%s\"",
             ipl_metrics_escape(esc, sizeof esc, tenant), reason);
    ipl_metric_inc(ipl_metrics_counter(
        self->metrics, "inferplane_gateway_queue_dropped_total",
        "Requests that left the queue unserved: deadline, full (refused), shutdown.", labels));
}

static void s_observe_wait(gateway_queue_t *self, const char *tenant, double seconds)
{
    char esc[2 * FAIRQ_TENANT_MAX + 8], labels[3 * FAIRQ_TENANT_MAX + 16];
    snprintf(labels, sizeof labels, "tenant=\"%s\"", ipl_metrics_escape(esc, sizeof esc, tenant));
    ipl_metric_observe(
        ipl_metrics_histogram(self->metrics, "inferplane_gateway_queue_wait_seconds",
                              "Time requests waited in the gateway's queue before being let go "
                              "for the last time.",
                              labels, s_wait_buckets,
                              sizeof s_wait_buckets / sizeof s_wait_buckets[0]),
        seconds);
}

/* Retry-After for a refusal in `s`: the time the requests ahead take at the recent pace. */
static int s_retry_after(const s_scope_t *s)
{
    double est = s && s->interval_s > 0 ? s->interval_s * (double)fairq_len(s->fq) : 0;
    if (!(est >= 1)) return 1;
    return est > S_RETRY_AFTER_MAX ? S_RETRY_AFTER_MAX : (int)ceil(est);
}

/* The totals (the bounds) and the gauge count a request from joining the queue until it
 * leaves it for good (routed or refused after a let-go, deadline, stop): one out asking the
 * decider still counts, so that its coming back can never exceed a bound. */
static void s_uncount(gateway_queue_t *self, const gateway_queue_ticket_t *t)
{
    self->len--;
    self->tokens -= t->entry.cost;
    atomic_store(&self->waiting, self->len);
    s_depth_gauge(self, t->tenant, t->cls);
}

static void s_count(gateway_queue_t *self, const gateway_queue_ticket_t *t)
{
    self->len++;
    self->tokens += t->entry.cost;
    atomic_store(&self->waiting, self->len);
    s_depth_gauge(self, t->tenant, t->cls);
}

/* Lets the next request of `s` go (wakes its thread alone); false when none waits. */
static bool s_let_go(gateway_queue_t *self, s_scope_t *s, uint64_t now)
{
    fairq_entry_t *e = fairq_pop(s->fq, now);
    if (!e) return false;
    gateway_queue_ticket_t *t = e->item;
    t->state = S_LETGO;
    s->out = t;
    ipl_metric_inc(self->dispatches);
    pthread_cond_signal(&t->cond);
    return true;
}

/* ---- the timer thread ---------------------------------------------------------------------- */

/* A model with requests waiting and none let go is retried when its pause ends (at once when
 * it has none); the thread sleeps until the earliest such time, or until told of a change. */
static void *s_timer(void *arg)
{
    gateway_queue_t *self = arg;
    pthread_mutex_lock(&self->lock);
    while (!self->stopping) {
        uint64_t now = ipl_mono_ns(), earliest = 0;
        for (size_t i = 0; i < self->nscopes; i++) {
            s_scope_t *s = self->scopes[i];
            if (!fairq_len(s->fq) || s->out) continue;
            if (s->pause_until_ns <= now) {
                s->pause_until_ns = 0;
                s_let_go(self, s, now);
            } else if (!earliest || s->pause_until_ns < earliest) {
                earliest = s->pause_until_ns;
            }
        }
        if (earliest)
            (void)ipl_cond_wait_until(&self->tick, &self->lock, earliest);
        else
            pthread_cond_wait(&self->tick, &self->lock);
    }
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

/* ---- life cycle ---------------------------------------------------------------------------- */

gateway_queue_t *gateway_queue_new(const gateway_queue_config_t *config, ipl_metrics_t *metrics)
{
    assert(config && metrics);
    gateway_queue_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cfg = *config;
    if (!self->cfg.max_requests) self->cfg.max_requests = S_DEFAULT_REQUESTS;
    if (!self->cfg.tenant_max_requests || self->cfg.tenant_max_requests > self->cfg.max_requests)
        self->cfg.tenant_max_requests = self->cfg.max_requests;
    if (self->cfg.retry_ms <= 0) self->cfg.retry_ms = S_DEFAULT_RETRY_MS;
    if (self->cfg.max_wait_ms < 0) self->cfg.max_wait_ms = 0;
    self->metrics = metrics;
    pthread_mutex_init(&self->lock, NULL);
    ipl_cond_init_mono(&self->tick);
    self->dispatches = ipl_metrics_counter(
        metrics, "inferplane_gateway_queue_dispatches_total",
        "Queued requests let go to ask the decider again (each retry counts).", NULL);
    if (pthread_create(&self->timer, NULL, s_timer, self) != 0) {
        gateway_queue_destroy(&self);
        return NULL;
    }
    self->timer_started = true;
    return self;
}

void gateway_queue_stop(gateway_queue_t *self)
{
    if (!self) return;
    pthread_mutex_lock(&self->lock);
    self->stopping = true;
    pthread_cond_signal(&self->tick);
    /* every waiter is taken out (order no longer matters) and woken: it answers 503 */
    for (size_t i = 0; i < self->nscopes; i++) {
        fairq_entry_t *e;
        while ((e = fairq_pop(self->scopes[i]->fq, 0)) != NULL) {
            gateway_queue_ticket_t *t = e->item;
            t->state = S_OUT;
            s_uncount(self, t);
            s_dropped(self, t->tenant, "shutdown");
            pthread_cond_signal(&t->cond);
        }
    }
    pthread_mutex_unlock(&self->lock);
}

void gateway_queue_destroy(gateway_queue_t **self_p)
{
    assert(self_p);
    gateway_queue_t *self = *self_p;
    if (!self) return;
    gateway_queue_stop(self);
    if (self->timer_started) pthread_join(self->timer, NULL);
    for (size_t i = 0; i < self->nscopes; i++) {
        fairq_destroy(&self->scopes[i]->fq);
        free(self->scopes[i]);
    }
    pthread_cond_destroy(&self->tick);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

/* ---- requests ------------------------------------------------------------------------------ */

bool gateway_queue_enabled(const gateway_queue_t *self)
{
    return self && self->cfg.max_wait_ms > 0;
}

bool gateway_queue_busy(gateway_queue_t *self, const char *model)
{
    if (!gateway_queue_enabled(self) || atomic_load(&self->waiting) == 0) return false;
    pthread_mutex_lock(&self->lock);
    s_scope_t *s = s_scope_find(self, model ? model : "");
    bool busy = s && fairq_len(s->fq) > 0;
    pthread_mutex_unlock(&self->lock);
    return busy;
}

void gateway_queue_hints(const char *priority, const char *deadline_ms, int64_t max_tokens,
                         gateway_queue_hints_t *out)
{
    memset(out, 0, sizeof *out);
    out->priority = fairq_class_parse(priority);
    if (deadline_ms && *deadline_ms >= '0' && *deadline_ms <= '9') {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(deadline_ms, &end, 10);
        if (!errno && end && *end == '\0' && v > 0) out->deadline_ms = v;
    }
    out->output = max_tokens > 0 ? (uint64_t)max_tokens : GATEWAY_QUEUE_OUTPUT_DEFAULT;
    if (out->output > GATEWAY_QUEUE_OUTPUT_CAP) out->output = GATEWAY_QUEUE_OUTPUT_CAP;
}

void gateway_queue_tenant(const ipl_policy_t *policy, const char *tenant, uint32_t *weight,
                          fairq_class_t *cls)
{
    *weight = 1;
    *cls = FAIRQ_STANDARD;
    const ipl_limit_t *hit = NULL;
    for (uint32_t i = 0; policy && i < policy->limits_len; i++) {
        const ipl_limit_t *l = &policy->limits[i];
        if (!l->tenant) continue;
        if (tenant && !strcmp(l->tenant, tenant)) {
            hit = l;
            break;
        }
        if (!hit && !strcmp(l->tenant, "*")) hit = l;
    }
    if (!hit) return;
    if (hit->weight >= 1)
        *weight = hit->weight > FAIRQ_WEIGHT_MAX ? FAIRQ_WEIGHT_MAX : (uint32_t)hit->weight;
    int c = fairq_class_parse(hit->priority);
    if (c >= 0) *cls = (fairq_class_t)c;
}

void gateway_queue_ticket(const gateway_queue_t *self, gateway_queue_ticket_t *t, const char *model,
                          const char *tenant, uint32_t weight, fairq_class_t tenant_cls,
                          const gateway_queue_hints_t *hints, uint64_t prompt_tokens,
                          uint64_t start_ns)
{
    memset(t, 0, sizeof *t);
    snprintf(t->model, sizeof t->model, "%s", model ? model : "");
    snprintf(t->tenant, sizeof t->tenant, "%s", tenant ? tenant : "");
    t->weight = weight;
    t->cls = tenant_cls;
    if (hints && hints->priority > (int)t->cls && hints->priority < FAIRQ_CLASSES)
        t->cls = (fairq_class_t)hints->priority; /* lowered, never raised */
    uint64_t wait_ms = self ? (uint64_t)self->cfg.max_wait_ms : 0;
    if (hints && hints->deadline_ms && hints->deadline_ms < wait_ms) wait_ms = hints->deadline_ms;
    t->deadline_ns = start_ns + wait_ms * 1000000ULL;
    t->client_fd = -1;
    t->entry.item = t;
    t->entry.cost = prompt_tokens + (hints ? hints->output : GATEWAY_QUEUE_OUTPUT_DEFAULT);
    t->entry.deadline_ns = t->deadline_ns;
    ipl_cond_init_mono(&t->cond);
}

/* Fills the refusal of a full queue. */
static int s_full(gateway_queue_t *self, gateway_queue_ticket_t *t, s_scope_t *s, const char *why,
                  gateway_api_error_t *err)
{
    t->state = S_OUT;
    t->retry_after_s = s_retry_after(s);
    s_dropped(self, t->tenant, "full");
    gateway_api_error_set(err, 429, "rate_limit_error", NULL, "queue_full",
                          "the pool of model \"%s\" is saturated and the gateway's queue is full "
                          "(%s: %zu requests, %" PRIu64
                          " tokens waiting; --queue-max-requests %zu, "
                          "--queue-max-tokens %" PRIu64 ", --queue-max-tenant-requests %zu); "
                          "retry after %d s",
                          t->model, why, self->len, self->tokens, self->cfg.max_requests,
                          self->cfg.max_tokens, self->cfg.tenant_max_requests, t->retry_after_s);
    IPL_LOG_EVERY(5, IPL_LOG_WARN, "queue_full", "model=%s tenant=%s reason=%s waiting=%zu",
                  t->model, t->tenant[0] ? t->tenant : "-", why, self->len);
    return IPL_E_RANGE;
}

/* Puts `t` in its scope's queue: at the tail the first time, back at the head after a let-go
 * that met OVERLOADED (then the scope pauses). 0 or the refusal. Under the lock. */
static int s_enter(gateway_queue_t *self, gateway_queue_ticket_t *t, uint64_t now,
                   gateway_api_error_t *err)
{
    s_scope_t *s = t->scope ? t->scope : s_scope(self, t->model);
    if (!s) return s_full(self, t, NULL, "models", err);
    t->scope = s;
    if (t->state == S_LETGO) {
        s->out = NULL;
        if (fairq_unpop(s->fq, &t->entry) != 0) {
            s_uncount(self, t);
            return s_full(self, t, s, "tenants", err);
        }
        s->pause_until_ns = now + (uint64_t)self->cfg.retry_ms * 1000000ULL;
        t->state = S_QUEUED;
    } else {
        const char *why = NULL;
        fairq_reason_t fr = FAIRQ_OK;
        if (self->len >= self->cfg.max_requests)
            why = "requests";
        else if (self->cfg.max_tokens && self->tokens + t->entry.cost > self->cfg.max_tokens)
            why = "tokens";
        else if (fairq_push(s->fq, t->tenant, t->weight, t->cls, &t->entry, now, &fr) != 0)
            why = fr == FAIRQ_OK ? "memory" : fairq_reason_name(fr);
        if (why) return s_full(self, t, s, why, err);
        if (!s->pause_until_ns && !s->out)
            s->pause_until_ns = now + (uint64_t)self->cfg.retry_ms * 1000000ULL;
        t->state = S_QUEUED;
        s_count(self, t);
    }
    pthread_cond_signal(&self->tick);
    return 0;
}

int gateway_queue_wait(gateway_queue_t *self, gateway_queue_ticket_t *t, gateway_api_error_t *err)
{
    assert(self && t);
    pthread_mutex_lock(&self->lock);
    uint64_t now = ipl_mono_ns();
    int rc = 0;
    if (self->stopping) {
        if (t->state == S_LETGO) { /* back from asking while stopping */
            ((s_scope_t *)t->scope)->out = NULL;
            s_uncount(self, t);
        }
        t->state = S_OUT;
        rc = IPL_E_AGAIN;
    } else if (t->state == S_NEW && t->deadline_ns <= now) {
        t->state = S_OUT; /* a deadline of 0 ms: never queued */
        rc = IPL_E_TIMEOUT;
    } else {
        rc = s_enter(self, t, now, err);
    }
    bool gone = false;
    while (rc == 0 && t->state == S_QUEUED && !self->stopping && !gone) {
        uint64_t until = t->deadline_ns, check = ipl_mono_ns() +
                                                 GATEWAY_QUEUE_HANGUP_CHECK_MS * 1000000ULL;
        if (t->client_fd >= 0 && check < until) until = check;
        if (ipl_cond_wait_until(&t->cond, &self->lock, until)) continue;
        if (ipl_mono_ns() >= t->deadline_ns) break;
        gone = t->client_fd >= 0 && s_hung_up(t->client_fd);
    }
    if (rc == 0 && t->state == S_QUEUED) { /* its deadline passed, hang-up, or stopping */
        s_scope_t *s = t->scope;
        fairq_remove(s->fq, &t->entry);
        s_uncount(self, t);
        t->state = S_OUT;
        rc = self->stopping ? IPL_E_AGAIN : gone ? IPL_E_IO : IPL_E_TIMEOUT;
        if (rc == IPL_E_AGAIN) s_dropped(self, t->tenant, "shutdown");
        if (rc == IPL_E_IO) {
            s_dropped(self, t->tenant, "client_gone");
            gateway_api_error_set(err, 499, "invalid_request_error", NULL, "client_gone",
                                  "the client closed the connection while the request waited "
                                  "in the queue");
        }
    } else if (rc == 0 && t->state == S_OUT) { /* answered by gateway_queue_stop */
        rc = IPL_E_AGAIN;
    }
    if (rc == IPL_E_TIMEOUT) {
        s_scope_t *s = t->scope;
        t->retry_after_s = s_retry_after(s);
        s_dropped(self, t->tenant, "deadline");
        uint64_t waited_ms =
            (ipl_mono_ns() - (t->entry.enqueued_ns ? t->entry.enqueued_ns : now)) / 1000000ULL;
        gateway_api_error_set(err, 429, "rate_limit_error", NULL, "queue_timeout",
                              "the request waited %" PRIu64 " ms in the queue of model \"%s\" "
                              "(tenant \"%s\", priority %s) and its deadline passed "
                              "(x-inferplane-deadline-ms, at most --queue-max-wait-ms %d) while "
                              "every worker of its pool stayed saturated; retry after %d s",
                              waited_ms, t->model, t->tenant, fairq_class_name(t->cls),
                              self->cfg.max_wait_ms, t->retry_after_s);
    } else if (rc == IPL_E_AGAIN) {
        gateway_api_error_set(err, 503, "server_error", NULL, "shutting_down",
                              "the gateway is shutting down");
    }
    pthread_mutex_unlock(&self->lock);
    return rc;
}

uint64_t gateway_queue_leave(gateway_queue_t *self, gateway_queue_ticket_t *t, bool routed)
{
    assert(t);
    if (t->state == S_DONE) return 0;
    uint64_t waited = 0;
    if (self && t->state != S_NEW) {
        pthread_mutex_lock(&self->lock);
        s_scope_t *s = t->scope;
        uint64_t now = ipl_mono_ns();
        if (t->state == S_QUEUED) { /* not expected: the waiter leaves only after its wait */
            fairq_remove(s->fq, &t->entry);
            s_uncount(self, t);
        } else if (t->state == S_OUT && t->entry.enqueued_ns) { /* given up after joining */
            waited = now - t->entry.enqueued_ns;
        } else if (t->state == S_LETGO) {
            s->out = NULL;
            s_uncount(self, t);
            waited = t->entry.popped_ns - t->entry.enqueued_ns;
            s_observe_wait(self, t->tenant, (double)waited / 1e9);
            if (routed) {
                if (s->last_routed_ns) {
                    double dt = (double)(now - s->last_routed_ns) / 1e9;
                    s->interval_s = s->interval_s > 0
                                        ? (1 - S_EWMA_ALPHA) * s->interval_s + S_EWMA_ALPHA * dt
                                        : dt;
                }
                s->last_routed_ns = now;
            }
            /* it was not refused for saturation: the next one tries as well */
            if (!self->stopping && fairq_len(s->fq) > 0) {
                s->pause_until_ns = 0;
                s_let_go(self, s, now);
            }
        }
        pthread_mutex_unlock(&self->lock);
    }
    t->state = S_DONE;
    pthread_cond_destroy(&t->cond);
    return waited;
}

void gateway_queue_settle(gateway_queue_t *self, const char *model, const char *tenant,
                          fairq_class_t cls, uint64_t charged, uint64_t actual)
{
    if (!self || !charged) return;
    pthread_mutex_lock(&self->lock);
    s_scope_t *s = s_scope_find(self, model ? model : "");
    if (s) fairq_settle(s->fq, tenant, cls, charged, actual);
    pthread_mutex_unlock(&self->lock);
}

void gateway_queue_freed(gateway_queue_t *self, const char *model)
{
    if (!self || atomic_load(&self->waiting) == 0) return;
    pthread_mutex_lock(&self->lock);
    s_scope_t *s = s_scope_find(self, model ? model : "");
    /* one asks at a time: with two out, the later one could take the slot the earlier one was
     * refused for (the decider's view of the worker lags its completion by a sample), and the
     * earlier one would lose its turn; the one out is routed (and lets the next go) or comes
     * back and retries after the pause */
    if (s && !self->stopping && !s->out && s_let_go(self, s, ipl_mono_ns())) s->pause_until_ns = 0;
    pthread_mutex_unlock(&self->lock);
}

size_t gateway_queue_len(gateway_queue_t *self)
{
    return self ? atomic_load(&self->waiting) : 0;
}

bool gateway_queue_asking(gateway_queue_t *self, const char *model)
{
    if (!self) return false;
    pthread_mutex_lock(&self->lock);
    const s_scope_t *s = s_scope_find(self, model ? model : "");
    bool out = s && s->out;
    pthread_mutex_unlock(&self->lock);
    return out;
}
