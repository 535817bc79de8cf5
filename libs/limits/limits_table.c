/*
 * limits_table — per-tenant limits, admission and settling, and the replicas' usage reports
 * (see the header for the design).
 */
#include "limits_table.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "limits_bucket.h"

#define S_NBUCKETS 3 // requests, input tokens, output tokens
#define S_DAY_MS   86400000LL
#define S_EWMA     0.125
#define S_NO_EPOCH INT64_MIN

// What a peer last reported for one tenant (counters of its current incarnation).
typedef struct {
    uint64_t requests, input_tokens, output_tokens, output_refunded, cost_micros, inflight;
} s_seen_t;

// A lease: what this replica may still take from one bucket in the current interval.
typedef struct {
    int64_t epoch;
    double left;
    bool used;
    double granted; // the lease of the last interval it was computed for
} s_lease_t;

typedef struct {
    char *name;
    bool limited;
    uint64_t limit[LIMITS_NDIMS]; // 0: none; cost in micro-USD
    limits_bucket_t bucket[S_NBUCKETS];
    s_lease_t lease[S_NBUCKETS];
    // concurrency: own in flight, and the lease on its net increase in this interval
    uint64_t inflight;
    int64_t conc_epoch;
    uint64_t conc_start, conc_share;
    // cost budget of the current UTC day
    int64_t day;
    uint64_t spent_micros;
    double output_estimate;
    // this replica's cumulative counters (LIMITS_USAGE)
    s_seen_t own;
    s_seen_t seen[LIMITS_MAX_PEERS];
    uint64_t admitted, refused[LIMITS_NDIMS];
} s_tenant_t;

typedef struct {
    char *id; // NULL: a free slot
    uint64_t incarnation;
    int64_t last_ms;
    int64_t epoch; // the latest interval its reports cover everything before
} s_peer_t;

struct limits_table {
    pthread_mutex_t mu;
    limits_options_t opt;
    s_tenant_t **tenants; // sorted by name
    size_t ntenants, cap;
    ipl_limit_t *limits; // the policy's entries (copied), sorted by tenant
    size_t nlimits;
    s_peer_t peers[LIMITS_MAX_PEERS];
    size_t expected; // replicas assumed until expect_until_ms (limits_table_expect)
    int64_t expect_until_ms;
};

static const char *const s_names[LIMITS_NDIMS] = {"requests_per_minute", "input_tokens_per_minute",
                                                  "output_tokens_per_minute", "concurrent_requests",
                                                  "cost_per_day"};
static const char *const s_fields[LIMITS_NDIMS] = {"requestsPerMinute", "inputTokensPerMinute",
                                                   "outputTokensPerMinute", "concurrentRequests",
                                                   "costPerDayUsd"};

const char *limits_dim_name(limits_dim_t dim)
{
    return dim >= 0 && dim < LIMITS_NDIMS ? s_names[dim] : "none";
}

const char *limits_dim_field(limits_dim_t dim)
{
    return dim >= 0 && dim < LIMITS_NDIMS ? s_fields[dim] : "none";
}

static void *s_alloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    return p;
}

static char *s_strdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) abort();
    return d;
}

limits_table_t *limits_table_new(const limits_options_t *options)
{
    limits_table_t *self = s_alloc(sizeof *self);
    if (options) self->opt = *options;
    if (self->opt.interval_ms <= 0) self->opt.interval_ms = 50;
    if (self->opt.peer_timeout_ms <= 0) self->opt.peer_timeout_ms = 20 * self->opt.interval_ms;
    if (self->opt.output_estimate <= 0) self->opt.output_estimate = 256;
    if (!self->opt.max_tenants) self->opt.max_tenants = 4096;
    pthread_mutex_init(&self->mu, NULL);
    return self;
}

static void s_free_limits(limits_table_t *self)
{
    for (size_t i = 0; i < self->nlimits; i++) {
        free(self->limits[i].tenant);
        free(self->limits[i].policy);
        free(self->limits[i].priority);
    }
    free(self->limits);
    self->limits = NULL;
    self->nlimits = 0;
}

void limits_table_destroy(limits_table_t **self_p)
{
    if (!self_p || !*self_p) return;
    limits_table_t *self = *self_p;
    for (size_t i = 0; i < self->ntenants; i++) {
        free(self->tenants[i]->name);
        free(self->tenants[i]);
    }
    free(self->tenants);
    s_free_limits(self);
    for (size_t i = 0; i < LIMITS_MAX_PEERS; i++)
        free(self->peers[i].id);
    pthread_mutex_destroy(&self->mu);
    free(self);
    *self_p = NULL;
}

// ---- tenants ----------------------------------------------------------------------------------

static const ipl_limit_t *s_entry(const limits_table_t *self, const char *tenant)
{
    const ipl_limit_t *star = NULL;
    for (size_t i = 0; i < self->nlimits; i++) {
        if (!strcmp(self->limits[i].tenant, tenant)) return &self->limits[i];
        if (!strcmp(self->limits[i].tenant, "*")) star = &self->limits[i];
    }
    return star;
}

// Applies the policy's entry for t (or none) to its buckets.
static void s_configure(limits_table_t *self, s_tenant_t *t, int64_t now_ms)
{
    const ipl_limit_t *e = s_entry(self, t->name);
    uint64_t want[LIMITS_NDIMS] = {0};
    if (e) {
        want[LIMITS_REQUESTS] = e->requests_per_minute;
        want[LIMITS_INPUT_TOKENS] = e->input_tokens_per_minute;
        want[LIMITS_OUTPUT_TOKENS] = e->output_tokens_per_minute;
        want[LIMITS_CONCURRENT] = e->concurrent_requests;
        want[LIMITS_COST] = e->cost_per_day_micros;
    }
    t->limited = false;
    for (int d = 0; d < LIMITS_NDIMS; d++) {
        if (d < S_NBUCKETS && want[d] && !t->limit[d])
            limits_bucket_init(&t->bucket[d], want[d], now_ms);
        else if (d < S_NBUCKETS && want[d])
            limits_bucket_resize(&t->bucket[d], want[d], now_ms);
        t->limit[d] = want[d];
        t->limited |= want[d] != 0;
    }
}

static int s_find(const limits_table_t *self, const char *name, bool *found)
{
    size_t lo = 0, hi = self->ntenants;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(self->tenants[mid]->name, name);
        if (!c) {
            *found = true;
            return (int)mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return (int)lo;
}

// The state of `name`, created on first sight (past max_tenants: the shared "(other)" state
// for tenants without an own entry, NULL for one with an entry only when even that is full).
static s_tenant_t *s_tenant(limits_table_t *self, const char *name, int64_t now_ms)
{
    bool found;
    int at = s_find(self, name, &found);
    if (found) return self->tenants[at];
    if (self->ntenants >= self->opt.max_tenants && strcmp(name, LIMITS_OTHER_TENANT)) {
        bool own = false;
        for (size_t i = 0; i < self->nlimits && !own; i++)
            own = !strcmp(self->limits[i].tenant, name);
        if (!own) return s_tenant(self, LIMITS_OTHER_TENANT, now_ms);
        if (self->ntenants >= self->opt.max_tenants + 64) return NULL;
    }
    if (self->ntenants == self->cap) {
        self->cap = self->cap ? self->cap * 2 : 16;
        self->tenants = realloc(self->tenants, self->cap * sizeof *self->tenants);
        if (!self->tenants) abort();
    }
    s_tenant_t *t = s_alloc(sizeof *t);
    t->name = s_strdup(name);
    t->conc_epoch = S_NO_EPOCH;
    for (int d = 0; d < S_NBUCKETS; d++)
        t->lease[d].epoch = S_NO_EPOCH;
    t->day = now_ms / S_DAY_MS;
    t->output_estimate = self->opt.output_estimate;
    s_configure(self, t, now_ms);
    memmove(&self->tenants[at + 1], &self->tenants[at],
            (self->ntenants - (size_t)at) * sizeof *self->tenants);
    self->tenants[at] = t;
    self->ntenants++;
    return t;
}

void limits_table_set(limits_table_t *self, const ipl_limit_t *limits, size_t n, int64_t now_ms)
{
    pthread_mutex_lock(&self->mu);
    s_free_limits(self);
    self->limits = s_alloc(n * sizeof *self->limits);
    for (size_t i = 0; i < n; i++) {
        if (!limits[i].tenant) continue; // remote input: a nil tenant names nobody
        ipl_limit_t *l = &self->limits[self->nlimits++];
        *l = limits[i];
        l->tenant = s_strdup(limits[i].tenant);
        l->policy = s_strdup(limits[i].policy);
        l->priority = s_strdup(limits[i].priority);
    }
    for (size_t i = 0; i < self->ntenants; i++)
        s_configure(self, self->tenants[i], now_ms);
    pthread_mutex_unlock(&self->mu);
}

// ---- peers ------------------------------------------------------------------------------------

static bool s_live(const limits_table_t *self, const s_peer_t *p, int64_t now_ms)
{
    return p->id && now_ms - p->last_ms <= self->opt.peer_timeout_ms;
}

static size_t s_replicas(const limits_table_t *self, int64_t now_ms)
{
    size_t n = 1;
    for (size_t i = 0; i < LIMITS_MAX_PEERS; i++)
        n += s_live(self, &self->peers[i], now_ms);
    return now_ms < self->expect_until_ms && self->expected > n ? self->expected : n;
}

void limits_table_expect(limits_table_t *self, size_t replicas, int64_t until_ms)
{
    pthread_mutex_lock(&self->mu);
    self->expected = replicas;
    self->expect_until_ms = until_ms;
    pthread_mutex_unlock(&self->mu);
}

static uint64_t s_peers_inflight(const limits_table_t *self, const s_tenant_t *t, int64_t now_ms)
{
    uint64_t n = 0;
    for (size_t i = 0; i < LIMITS_MAX_PEERS; i++)
        if (s_live(self, &self->peers[i], now_ms)) n += t->seen[i].inflight;
    return n;
}

// Forgets what slot `i` reported (a new peer, or a new incarnation of one): its counters
// start again from zero. What it reported before stays charged.
static void s_reset_slot(limits_table_t *self, size_t i)
{
    for (size_t k = 0; k < self->ntenants; k++)
        self->tenants[k]->seen[i] = (s_seen_t){0};
}

static int s_peer_slot(limits_table_t *self, const char *id, uint64_t incarnation, int64_t now_ms)
{
    int free_slot = -1, oldest = -1;
    for (int i = 0; i < LIMITS_MAX_PEERS; i++) {
        s_peer_t *p = &self->peers[i];
        if (p->id && !strcmp(p->id, id)) {
            if (p->incarnation != incarnation) {
                s_reset_slot(self, (size_t)i);
                p->incarnation = incarnation;
                p->epoch = 0;
            }
            return i;
        }
        if (!p->id && free_slot < 0) free_slot = i;
        // A peer gone for 60 timeouts may give its slot to a newcomer.
        if (p->id && now_ms - p->last_ms > 60 * self->opt.peer_timeout_ms &&
            (oldest < 0 || p->last_ms < self->peers[oldest].last_ms))
            oldest = i;
    }
    int i = free_slot >= 0 ? free_slot : oldest;
    if (i < 0) return -1;
    free(self->peers[i].id);
    self->peers[i] = (s_peer_t){.id = s_strdup(id), .incarnation = incarnation};
    s_reset_slot(self, (size_t)i);
    return i;
}

// A monotonic counter's growth since *last, which it then becomes. A smaller value (a sane
// peer never sends one within an incarnation: a duplicate or a reordered entry) adds
// nothing and is not kept, so applying any report twice charges nothing more.
static uint64_t s_delta(uint64_t now, uint64_t *last)
{
    if (now <= *last) return 0;
    uint64_t d = now - *last;
    *last = now;
    return d;
}

static void s_day(s_tenant_t *t, int64_t now_ms)
{
    int64_t day = now_ms / S_DAY_MS;
    if (day != t->day) {
        t->day = day;
        t->spent_micros = 0;
    }
}

int limits_table_apply(limits_table_t *self, const ipl_limits_usage_t *msg, int64_t now_ms)
{
    if (!msg->replica) return 0;
    pthread_mutex_lock(&self->mu);
    int slot = s_peer_slot(self, msg->replica, msg->incarnation, now_ms);
    if (slot < 0) {
        pthread_mutex_unlock(&self->mu);
        return -1;
    }
    self->peers[slot].last_ms = now_ms;
    if ((int64_t)msg->epoch > self->peers[slot].epoch)
        self->peers[slot].epoch = (int64_t)msg->epoch;
    int applied = 0;
    for (uint32_t i = 0; i < msg->tenants_len; i++) {
        const ipl_tenant_usage_t *u = &msg->tenants[i];
        if (!u->tenant) continue;
        s_tenant_t *t = s_tenant(self, u->tenant, now_ms);
        if (!t) continue;
        s_seen_t *last = &t->seen[slot];
        double charge[S_NBUCKETS] = {(double)s_delta(u->requests, &last->requests),
                                     (double)s_delta(u->input_tokens, &last->input_tokens),
                                     (double)s_delta(u->output_tokens, &last->output_tokens)};
        charge[LIMITS_OUTPUT_TOKENS] -= (double)s_delta(u->output_refunded, &last->output_refunded);
        for (int d = 0; d < S_NBUCKETS; d++)
            if (t->limit[d]) {
                limits_bucket_refill(&t->bucket[d], now_ms);
                limits_bucket_charge(&t->bucket[d], charge[d]);
            }
        s_day(t, now_ms);
        t->spent_micros += s_delta(u->cost_micros, &last->cost_micros);
        last->inflight = u->inflight;
        applied++;
    }
    pthread_mutex_unlock(&self->mu);
    return applied;
}

ipl_tenant_usage_t *limits_table_usage(limits_table_t *self, uint32_t *n)
{
    pthread_mutex_lock(&self->mu);
    ipl_tenant_usage_t *out = s_alloc(self->ntenants * sizeof *out);
    uint32_t k = 0;
    for (size_t i = 0; i < self->ntenants; i++) {
        const s_tenant_t *t = self->tenants[i];
        const s_seen_t *o = &t->own;
        if (!(o->requests | o->input_tokens | o->output_tokens | o->cost_micros | t->inflight))
            continue;
        out[k++] = (ipl_tenant_usage_t){.tenant = t->name,
                                        .requests = o->requests,
                                        .input_tokens = o->input_tokens,
                                        .output_tokens = o->output_tokens,
                                        .output_refunded = o->output_refunded,
                                        .cost_micros = o->cost_micros,
                                        .inflight = t->inflight};
    }
    pthread_mutex_unlock(&self->mu);
    *n = k;
    return out;
}

size_t limits_table_replicas(limits_table_t *self, int64_t now_ms)
{
    pthread_mutex_lock(&self->mu);
    size_t n = s_replicas(self, now_ms);
    pthread_mutex_unlock(&self->mu);
    return n;
}

// ---- admission --------------------------------------------------------------------------------

static int64_t s_epoch(const limits_table_t *self, int64_t now_ms)
{
    return now_ms / self->opt.interval_ms;
}

static int64_t s_to_next_epoch(const limits_table_t *self, int64_t now_ms)
{
    return self->opt.interval_ms - now_ms % self->opt.interval_ms;
}

// The replicas (peers, and expected ones not heard from yet) whose report from the start of
// `epoch` has not arrived.
static size_t s_missing(const limits_table_t *self, int64_t epoch, size_t replicas, int64_t now_ms)
{
    size_t fresh = 0;
    for (size_t i = 0; i < LIMITS_MAX_PEERS; i++)
        fresh += s_live(self, &self->peers[i], now_ms) && self->peers[i].epoch >= epoch;
    return replicas - 1 > fresh ? replicas - 1 - fresh : 0;
}

// Whether bucket d of t admits cost now; else *wait (ms). `missing`: s_missing for now.
static bool s_bucket_admits(const limits_table_t *self, s_tenant_t *t, int d, double cost,
                            size_t replicas, size_t missing, int64_t now_ms, int64_t *wait)
{
    limits_bucket_t *b = &t->bucket[d];
    s_lease_t *l = &t->lease[d];
    limits_bucket_refill(b, now_ms);
    int64_t epoch = s_epoch(self, now_ms);
    int64_t into = now_ms - epoch * self->opt.interval_ms;
    // Every replica reports at the start of each interval. Until those reports are in (or a
    // grace of a fifth of the interval has passed), the last interval's lease goes on; a
    // lease computed without a peer's report assumes that peer spent its whole last lease
    // since: that much of the level is not ours to share.
    bool wait_reports = missing && l->epoch == epoch - 1 && into < self->opt.interval_ms / 5;
    if (l->epoch != epoch && !wait_reports) {
        double unseen = (double)missing * l->granted;
        double share = b->level - unseen > 0 ? (b->level - unseen) / (double)replicas : 0;
        *l = (s_lease_t){.epoch = epoch, .left = share, .granted = share};
    }
    if (!limits_bucket_fits(b, cost)) {
        *wait = limits_bucket_wait_ms(b, cost);
        return false;
    }
    double need = cost < b->capacity ? cost : b->capacity;
    if (replicas > 1 && l->used && l->left + 1e-9 < need) {
        *wait = s_to_next_epoch(self, now_ms); // the bucket holds it, this replica's lease not
        return false;
    }
    return true;
}

static bool s_conc_admits(const limits_table_t *self, s_tenant_t *t, size_t replicas,
                          int64_t now_ms, int64_t *wait)
{
    uint64_t limit = t->limit[LIMITS_CONCURRENT];
    uint64_t total = t->inflight + s_peers_inflight(self, t, now_ms);
    int64_t epoch = s_epoch(self, now_ms);
    if (t->conc_epoch != epoch) {
        uint64_t headroom = total < limit ? limit - total : 0;
        t->conc_epoch = epoch;
        t->conc_start = t->inflight;
        t->conc_share = (headroom + replicas - 1) / replicas;
    }
    if (total >= limit) {
        *wait = 1000; // a slot frees when a request ends: no bucket to say when
        return false;
    }
    uint64_t grown = t->inflight > t->conc_start ? t->inflight - t->conc_start : 0;
    if (grown && grown >= t->conc_share) {
        *wait = s_to_next_epoch(self, now_ms);
        return false;
    }
    return true;
}

static int64_t s_to_midnight(int64_t now_ms)
{
    return S_DAY_MS - now_ms % S_DAY_MS;
}

static void s_headers(const s_tenant_t *t, limits_verdict_t *v)
{
    if (t->limit[LIMITS_REQUESTS]) {
        const limits_bucket_t *b = &t->bucket[LIMITS_REQUESTS];
        v->has_requests = true;
        v->limit_requests = t->limit[LIMITS_REQUESTS];
        v->remaining_requests = limits_bucket_remaining(b);
        v->reset_requests_ms = limits_bucket_reset_ms(b);
    }
    int d = t->limit[LIMITS_INPUT_TOKENS] ? LIMITS_INPUT_TOKENS : LIMITS_OUTPUT_TOKENS;
    if (t->limit[d]) {
        v->has_tokens = true;
        v->limit_tokens = t->limit[d];
        v->remaining_tokens = limits_bucket_remaining(&t->bucket[d]);
        v->reset_tokens_ms = limits_bucket_reset_ms(&t->bucket[d]);
    }
}

// Output tokens to reserve: max_tokens, else the tenant's estimate; at most the capacity.
static double s_reserve(const s_tenant_t *t, uint64_t max_tokens)
{
    double r = max_tokens ? (double)max_tokens : ceil(t->output_estimate);
    double cap = t->bucket[LIMITS_OUTPUT_TOKENS].capacity;
    return !max_tokens && r > cap ? cap : r;
}

bool limits_table_admit(limits_table_t *self, const char *tenant, uint64_t prompt_tokens,
                        uint64_t max_tokens, int64_t now_ms, limits_handle_t *h,
                        limits_verdict_t *v)
{
    *v = (limits_verdict_t){.ok = true, .refused = LIMITS_NONE};
    *h = (limits_handle_t){0};
    pthread_mutex_lock(&self->mu);
    s_tenant_t *t = s_tenant(self, tenant ? tenant : "", now_ms);
    if (!t) {
        pthread_mutex_unlock(&self->mu);
        return true;
    }
    s_day(t, now_ms);
    size_t replicas = s_replicas(self, now_ms);
    size_t missing = replicas > 1 ? s_missing(self, s_epoch(self, now_ms), replicas, now_ms) : 0;
    double reserve = t->limit[LIMITS_OUTPUT_TOKENS] ? s_reserve(t, max_tokens) : 0;
    double cost[S_NBUCKETS] = {1, (double)prompt_tokens, reserve};
    int64_t wait[LIMITS_NDIMS] = {0};
    bool fits[LIMITS_NDIMS];
    for (int d = 0; d < LIMITS_NDIMS; d++)
        fits[d] = true;
    for (int d = 0; d < S_NBUCKETS; d++)
        if (t->limit[d])
            fits[d] = s_bucket_admits(self, t, d, cost[d], replicas, missing, now_ms, &wait[d]);
    if (t->limit[LIMITS_CONCURRENT])
        fits[LIMITS_CONCURRENT] =
            s_conc_admits(self, t, replicas, now_ms, &wait[LIMITS_CONCURRENT]);
    if (t->limit[LIMITS_COST] && t->spent_micros >= t->limit[LIMITS_COST]) {
        fits[LIMITS_COST] = false;
        wait[LIMITS_COST] = s_to_midnight(now_ms);
    }
    for (int d = 0; d < LIMITS_NDIMS; d++)
        if (!fits[d] && (v->ok || wait[d] > v->retry_after_ms)) {
            v->ok = false;
            v->refused = (limits_dim_t)d;
            v->refused_limit = t->limit[d];
            v->retry_after_ms = wait[d] > 0 ? wait[d] : 1;
        }
    if (v->ok) {
        for (int d = 0; d < S_NBUCKETS; d++)
            if (t->limit[d]) {
                limits_bucket_charge(&t->bucket[d], cost[d]);
                t->lease[d].left -= cost[d];
                t->lease[d].used = true;
            }
        t->own.requests++;
        t->own.input_tokens += prompt_tokens;
        t->own.output_tokens += (uint64_t)reserve;
        t->inflight++;
        t->admitted++;
        *h = (limits_handle_t){.tenant = t, .reserved_output = (uint64_t)reserve};
    } else {
        t->refused[v->refused]++;
    }
    s_headers(t, v);
    pthread_mutex_unlock(&self->mu);
    return v->ok;
}

void limits_table_settle(limits_table_t *self, limits_handle_t *h, uint64_t output_tokens,
                         uint64_t cost_micros, int64_t now_ms)
{
    if (!h || !h->tenant) return;
    pthread_mutex_lock(&self->mu);
    s_tenant_t *t = h->tenant;
    if (t->inflight) t->inflight--;
    if (h->reserved_output > output_tokens) {
        uint64_t back = h->reserved_output - output_tokens;
        t->own.output_refunded += back;
        if (t->limit[LIMITS_OUTPUT_TOKENS]) {
            limits_bucket_refill(&t->bucket[LIMITS_OUTPUT_TOKENS], now_ms);
            limits_bucket_charge(&t->bucket[LIMITS_OUTPUT_TOKENS], -(double)back);
            s_lease_t *l = &t->lease[LIMITS_OUTPUT_TOKENS];
            if (l->epoch == s_epoch(self, now_ms)) l->left += (double)back; // ours again
        }
    } else if (output_tokens > h->reserved_output) {
        uint64_t more = output_tokens - h->reserved_output;
        t->own.output_tokens += more;
        if (t->limit[LIMITS_OUTPUT_TOKENS]) {
            limits_bucket_refill(&t->bucket[LIMITS_OUTPUT_TOKENS], now_ms);
            limits_bucket_charge(&t->bucket[LIMITS_OUTPUT_TOKENS], (double)more);
        }
    }
    t->output_estimate += S_EWMA * ((double)output_tokens - t->output_estimate);
    s_day(t, now_ms);
    t->spent_micros += cost_micros;
    t->own.cost_micros += cost_micros;
    pthread_mutex_unlock(&self->mu);
    *h = (limits_handle_t){0};
}

size_t limits_table_stats(limits_table_t *self, int64_t now_ms, limits_tenant_stats_t *out,
                          size_t max)
{
    pthread_mutex_lock(&self->mu);
    size_t n = self->ntenants;
    for (size_t i = 0; i < n && i < max; i++) {
        s_tenant_t *t = self->tenants[i];
        s_day(t, now_ms);
        limits_tenant_stats_t *s = &out[i];
        *s = (limits_tenant_stats_t){.tenant = t->name,
                                     .limited = t->limited,
                                     .admitted = t->admitted,
                                     .inflight = t->inflight,
                                     .peers_inflight = s_peers_inflight(self, t, now_ms),
                                     .spent_micros_today = t->spent_micros,
                                     .output_estimate = t->output_estimate};
        memcpy(s->refused, t->refused, sizeof s->refused);
        for (int d = 0; d < S_NBUCKETS; d++)
            if (t->limit[d]) {
                limits_bucket_refill(&t->bucket[d], now_ms);
                s->level[d] = t->bucket[d].level;
            }
    }
    pthread_mutex_unlock(&self->mu);
    return n;
}
