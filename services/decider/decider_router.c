/*
 * decider_router — candidates, figures, strategies and the explanation (see the header).
 *
 * A decision runs in three steps:
 *   s_candidates  the pool's workers with load, in-flight and cached figures, and whether each
 *                 is healthy (has a sample, not DOWN) and its cache term can be trusted
 *   strategy      marks eligibility (the ttft load gate) and picks the winner, with a reason
 *   s_commit      records the routing in the ledger and updates the request-size average
 */
#include "decider_router.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decider_ledger.h"
#include "ipl_clock.h"
#include "ipl_error.h"

#define S_EWMA_ALPHA         0.1
#define S_MIN_REQUEST_TOKENS 16.0
#define S_TIE_EPSILON_S      1e-9

struct decider_router {
    decider_router_config_t config;
    pthread_mutex_t lock; // serialises decisions: ledger, EWMA, rng, scratch
    decider_ledger_t *ledger;
    double mean_tokens;
    uint64_t rng;
    uint32_t index_prefix[IPL_INDEX_MAX_WORKERS];
    uint32_t ledger_prefix[IPL_INDEX_MAX_WORKERS];
};

// Working data of one decision.
typedef struct {
    decider_router_t *self;
    const decider_request_t *req;
    decider_decision_t *out;
    uint64_t prompt_tokens;
    uint64_t block_size; // the pool's
    double mean_request_s;
} s_ctx_t;

typedef void(s_pick_fn)(s_ctx_t *ctx);

static s_pick_fn s_pick_ttft, s_pick_least_loaded, s_pick_random;

static const struct {
    const char *name;
    s_pick_fn *pick;
} s_strategies[] = {
    {"ttft", s_pick_ttft},
    {"least-loaded", s_pick_least_loaded},
    {"random", s_pick_random},
};
#define S_NSTRATEGIES (sizeof s_strategies / sizeof s_strategies[0])

void decider_router_config_defaults(decider_router_config_t *config)
{
    *config = (decider_router_config_t){
        .default_strategy = "ttft",
        .prefill_tokens_per_s = 3000,
        .running_cost_s = 0.005,
        .initial_request_tokens = 256,
        .load_gate = 4,
        .optimistic_ttl_ms = 2000,
        .stale_ms = 5000,
        .seed = 0,
    };
}

bool decider_router_strategy_known(const char *name)
{
    for (size_t i = 0; name && i < S_NSTRATEGIES; i++)
        if (!strcmp(s_strategies[i].name, name)) return true;
    return false;
}

const char *decider_router_strategies(void)
{
    return "ttft, least-loaded, random";
}

void decider_decision_init(decider_decision_t *d)
{
    memset(d, 0, sizeof *d);
    d->winner = -1;
}

void decider_decision_clear(decider_decision_t *d)
{
    free(d->cands);
    decider_decision_init(d);
}

// Keeps the candidate array, resets everything else.
static void s_reset(decider_decision_t *d)
{
    decider_candidate_t *cands = d->cands;
    uint32_t cap = d->cap;
    memset(d, 0, sizeof *d);
    d->cands = cands;
    d->cap = cap;
    d->winner = -1;
}

decider_router_t *decider_router_new(const decider_router_config_t *config)
{
    decider_router_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->config = *config;
    if (!(self->config.prefill_tokens_per_s > 0)) self->config.prefill_tokens_per_s = 3000;
    pthread_mutex_init(&self->lock, NULL);
    self->ledger = decider_ledger_new(config->optimistic_ttl_ms);
    if (!self->ledger) {
        decider_router_destroy(&self);
        return NULL;
    }
    self->mean_tokens = config->initial_request_tokens > S_MIN_REQUEST_TOKENS
                            ? config->initial_request_tokens
                            : S_MIN_REQUEST_TOKENS;
    self->rng = config->seed ? config->seed : (ipl_mono_ns() ^ 0x9e3779b97f4a7c15ULL) | 1;
    return self;
}

void decider_router_destroy(decider_router_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_router_t *self = *self_p;
    decider_ledger_destroy(&self->ledger);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

// xorshift64*: a uniform integer in [0, n).
static uint32_t s_random(decider_router_t *self, uint32_t n)
{
    uint64_t x = self->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    self->rng = x;
    return n ? (uint32_t)(((x * 0x2545F4914F6CDD1DULL) >> 32) % n) : 0;
}

static void s_fail(decider_decision_t *out, int status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_fail(decider_decision_t *out, int status, const char *reason, const char *fmt, ...)
{
    out->status = status;
    out->reason = reason;
    out->winner = -1;
    out->worker = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->detail, sizeof out->detail, fmt, ap);
    va_end(ap);
}

static const ipl_pool_t *s_find_pool(const ipl_policy_t *p, const char *model)
{
    for (uint32_t i = 0; i < p->pools_len; i++)
        if (model && !strcmp(p->pools[i].model, model)) return &p->pools[i];
    return NULL;
}

static void s_note(decider_candidate_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_note(decider_candidate_t *c, const char *fmt, ...)
{
    size_t len = strlen(c->note);
    if (len + 3 >= sizeof c->note) return;
    if (len) {
        strcpy(c->note + len, "; ");
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->note + len, sizeof c->note - len, fmt, ap);
    va_end(ap);
}

static const char *s_health_name(uint64_t health)
{
    return health == IPL_HEALTH_UP ? "up" : health == IPL_HEALTH_DOWN ? "down" : "unknown";
}

// Step 1: the pool's workers with their figures. Returns the number of healthy ones.
static uint32_t s_candidates(s_ctx_t *ctx, const ipl_policy_t *policy, const decider_state_t *state,
                             uint64_t state_age_ms, uint64_t wall_ms, uint64_t mono_ms)
{
    decider_router_t *self = ctx->self;
    decider_decision_t *out = ctx->out;
    const decider_request_t *req = ctx->req;
    const ipl_pool_t *pool = out->pool;

    uint32_t n = 0;
    for (uint32_t i = 0; i < policy->workers_len; i++)
        n += !strcmp(policy->workers[i].pool, pool->name);
    if (n > out->cap) {
        decider_candidate_t *c = realloc(out->cands, n * sizeof *c);
        if (!c) return 0;
        out->cands = c;
        out->cap = n;
    }
    // Block size: the pool's (the compiler guarantees one per pool).
    ctx->block_size = 0;
    for (uint32_t i = 0; i < policy->workers_len && !ctx->block_size; i++)
        if (!strcmp(policy->workers[i].pool, pool->name))
            ctx->block_size = policy->workers[i].block_size;
    ctx->prompt_tokens =
        req->prompt_tokens ? req->prompt_tokens : (uint64_t)req->nhashes * ctx->block_size;
    bool sizes_match = !req->block_size || req->block_size == ctx->block_size;
    bool fresh = state_age_ms <= self->config.stale_ms;

    const ipl_index_t *index = decider_state_index(state);
    size_t nworkers = (size_t)ipl_index_nworkers(index);
    if (sizes_match && fresh && req->nhashes)
        ipl_index_match(index, req->hashes, req->nhashes, self->index_prefix,
                        IPL_INDEX_MAX_WORKERS);
    else
        memset(self->index_prefix, 0, nworkers * sizeof *self->index_prefix);
    if (sizes_match && req->nhashes)
        decider_ledger_match(self->ledger, req->hashes, req->nhashes, self->ledger_prefix,
                             IPL_INDEX_MAX_WORKERS, mono_ms);
    else
        memset(self->ledger_prefix, 0, sizeof self->ledger_prefix);

    uint32_t healthy = 0;
    out->ncands = 0;
    for (uint32_t i = 0; i < policy->workers_len; i++) {
        const ipl_worker_t *pw = &policy->workers[i];
        if (strcmp(pw->pool, pool->name)) continue;
        decider_candidate_t *c = &out->cands[out->ncands++];
        memset(c, 0, sizeof *c);
        c->c.worker = pw->name;
        c->c.url = pw->url;
        c->c.note = c->note;
        c->state_id = decider_state_find(state, pw->name);
        c->ledger_id = decider_ledger_worker(self->ledger, pw->name);
        const decider_worker_t *w = decider_state_worker(state, c->state_id);
        if (!w || !w->has_load) {
            s_note(c, "no load sample yet");
            continue;
        }
        c->c.running = w->running;
        c->c.waiting = w->waiting;
        c->c.kv_usage = w->kv_usage;
        c->c.inflight = decider_ledger_inflight(self->ledger, c->ledger_id, w->ts_ms, wall_ms);
        c->queue = c->c.waiting + c->c.inflight;
        if (w->health == IPL_HEALTH_DOWN) {
            s_note(c, "down");
            continue;
        }
        c->healthy = true;
        healthy++;
        c->cache_used = true;
        if (!fresh) {
            s_note(c, "state stale (%llu ms): load only", (unsigned long long)state_age_ms);
            c->cache_used = false;
        } else if (w->kv_state == IPL_KV_DEGRADED) {
            s_note(c, "kv degraded: load only");
            c->cache_used = false;
        } else if (w->health != IPL_HEALTH_UP) {
            s_note(c, "health %s: load only", s_health_name(w->health));
            c->cache_used = false;
        } else if (!sizes_match) {
            s_note(c, "block size %llu != request's %llu: load only",
                   (unsigned long long)ctx->block_size, (unsigned long long)req->block_size);
            c->cache_used = false;
        } else if (w->kv_state == IPL_KV_SYNCING) {
            s_note(c, "kv syncing");
        }
        if (c->cache_used) {
            uint64_t blocks = 0;
            if (c->state_id >= 0 && (size_t)c->state_id < nworkers)
                blocks = self->index_prefix[c->state_id];
            if (c->ledger_id >= 0 && self->ledger_prefix[c->ledger_id] > blocks)
                blocks = self->ledger_prefix[c->ledger_id];
            uint64_t tokens = blocks * ctx->block_size;
            c->c.cached_tokens = tokens < ctx->prompt_tokens ? tokens : ctx->prompt_tokens;
        }
    }
    // Everyone's predicted TTFT, whatever the strategy, so explanations compare like with like.
    ctx->mean_request_s = self->mean_tokens / self->config.prefill_tokens_per_s;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        c->c.predicted_ttft_s =
            (double)c->queue * ctx->mean_request_s +
            (double)c->c.running * self->config.running_cost_s +
            (double)(ctx->prompt_tokens - c->c.cached_tokens) / self->config.prefill_tokens_per_s;
    }
    return healthy;
}

static void s_win(s_ctx_t *ctx, int winner, const char *reason)
{
    decider_decision_t *out = ctx->out;
    out->winner = winner;
    out->reason = reason;
    out->status = IPL_ROUTE_OK;
    out->cands[winner].c.eligible = true;
}

// Marks every healthy candidate eligible (baselines without a gate).
static void s_all_healthy_eligible(s_ctx_t *ctx)
{
    for (uint32_t i = 0; i < ctx->out->ncands; i++)
        ctx->out->cands[i].c.eligible = ctx->out->cands[i].healthy;
}

// Picks uniformly among the eligible candidates for which better(i, best) is 0 (ties).
typedef int(s_cmp_fn)(const decider_candidate_t *a, const decider_candidate_t *b);

static int s_best(s_ctx_t *ctx, s_cmp_fn *cmp)
{
    decider_decision_t *out = ctx->out;
    int best = -1;
    uint32_t ties = 0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        if (!out->cands[i].c.eligible) continue;
        int order = best < 0 ? -1 : cmp(&out->cands[i], &out->cands[best]);
        if (order < 0) {
            best = (int)i;
            ties = 1;
        } else if (order == 0 && s_random(ctx->self, ++ties) == 0) {
            best = (int)i; // reservoir sampling: each tie equally likely
        }
    }
    return best;
}

static int s_cmp_ttft(const decider_candidate_t *a, const decider_candidate_t *b)
{
    double d = a->c.predicted_ttft_s - b->c.predicted_ttft_s;
    if (d < -S_TIE_EPSILON_S) return -1;
    if (d > S_TIE_EPSILON_S) return 1;
    return (a->queue > b->queue) - (a->queue < b->queue);
}

static int s_cmp_load(const decider_candidate_t *a, const decider_candidate_t *b)
{
    if (a->queue != b->queue) return a->queue < b->queue ? -1 : 1;
    return (a->c.running > b->c.running) - (a->c.running < b->c.running);
}

static double s_ms(double s)
{
    return s * 1000.0;
}

static void s_pick_ttft(s_ctx_t *ctx)
{
    decider_decision_t *out = ctx->out;
    uint64_t gate = ctx->self->config.load_gate;
    uint64_t least = UINT64_MAX;
    for (uint32_t i = 0; i < out->ncands; i++)
        if (out->cands[i].healthy && out->cands[i].queue < least) least = out->cands[i].queue;
    // The best prediction before the gate, to tell whether the gate changed the outcome.
    int ungated = -1;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        if (ungated < 0 || s_cmp_ttft(c, &out->cands[ungated]) < 0) ungated = (int)i;
        c->c.eligible = c->queue <= least + gate;
        if (!c->c.eligible)
            s_note(c, "load gate: queue %llu > least loaded %llu + %llu",
                   (unsigned long long)c->queue, (unsigned long long)least,
                   (unsigned long long)gate);
    }
    int w = s_best(ctx, s_cmp_ttft);
    const decider_candidate_t *win = &out->cands[w];
    int runner = -1; // best other eligible, for the explanation
    for (uint32_t i = 0; i < out->ncands; i++)
        if ((int)i != w && out->cands[i].c.eligible &&
            (runner < 0 || s_cmp_ttft(&out->cands[i], &out->cands[runner]) < 0))
            runner = (int)i;
    char next[160] = "";
    if (runner >= 0)
        snprintf(next, sizeof next, "; next best %s %.1f ms%s", out->cands[runner].c.worker,
                 s_ms(out->cands[runner].c.predicted_ttft_s),
                 s_cmp_ttft(&out->cands[runner], win) == 0 ? " (a tie, broken at random)" : "");

    const decider_candidate_t *best = &out->cands[ungated];
    if (!best->c.eligible && best->c.cached_tokens > win->c.cached_tokens) {
        s_win(ctx, w, "load_gate");
        snprintf(out->detail, sizeof out->detail,
                 "%s holds %llu cached tokens but its queue %llu exceeds the least loaded (%llu) "
                 "by more than %llu; chose %s: predicted TTFT %.1f ms, %llu cached tokens%s",
                 best->c.worker, (unsigned long long)best->c.cached_tokens,
                 (unsigned long long)best->queue, (unsigned long long)least,
                 (unsigned long long)gate, win->c.worker, s_ms(win->c.predicted_ttft_s),
                 (unsigned long long)win->c.cached_tokens, next);
    } else if (win->c.cached_tokens > 0) {
        s_win(ctx, w, "cache_hit");
        snprintf(out->detail, sizeof out->detail,
                 "%s has %llu of %llu prompt tokens cached, queue %llu: predicted TTFT %.1f ms%s",
                 win->c.worker, (unsigned long long)win->c.cached_tokens,
                 (unsigned long long)ctx->prompt_tokens, (unsigned long long)win->queue,
                 s_ms(win->c.predicted_ttft_s), next);
    } else if (!win->cache_used) {
        s_win(ctx, w, "load_only");
        snprintf(out->detail, sizeof out->detail,
                 "cache state of %s not usable (%s); by load: queue %llu, predicted TTFT %.1f ms%s",
                 win->c.worker, win->note, (unsigned long long)win->queue,
                 s_ms(win->c.predicted_ttft_s), next);
    } else {
        s_win(ctx, w, "least_loaded");
        snprintf(out->detail, sizeof out->detail,
                 "no worker holds a prefix of the prompt; %s has the shortest predicted wait "
                 "(queue %llu, running %llu): predicted TTFT %.1f ms%s",
                 win->c.worker, (unsigned long long)win->queue, (unsigned long long)win->c.running,
                 s_ms(win->c.predicted_ttft_s), next);
    }
}

static void s_pick_least_loaded(s_ctx_t *ctx)
{
    decider_decision_t *out = ctx->out;
    s_all_healthy_eligible(ctx);
    int w = s_best(ctx, s_cmp_load);
    s_win(ctx, w, "least_loaded");
    snprintf(out->detail, sizeof out->detail,
             "strategy least-loaded: %s has the shortest queue (%llu waiting + in flight, %llu "
             "running)",
             out->cands[w].c.worker, (unsigned long long)out->cands[w].queue,
             (unsigned long long)out->cands[w].c.running);
}

static void s_pick_random(s_ctx_t *ctx)
{
    decider_decision_t *out = ctx->out;
    s_all_healthy_eligible(ctx);
    uint32_t n = 0;
    for (uint32_t i = 0; i < out->ncands; i++)
        n += out->cands[i].c.eligible;
    uint32_t k = s_random(ctx->self, n);
    for (uint32_t i = 0; i < out->ncands; i++)
        if (out->cands[i].c.eligible && k-- == 0) {
            s_win(ctx, (int)i, "random");
            snprintf(out->detail, sizeof out->detail,
                     "strategy random: %s drawn uniformly from %u eligible workers",
                     out->cands[i].c.worker, n);
            return;
        }
}

// Step 3: remember the routing (in flight, optimistic blocks) and learn the request size.
static void s_commit(s_ctx_t *ctx, uint64_t wall_ms, uint64_t mono_ms)
{
    decider_router_t *self = ctx->self;
    decider_decision_t *out = ctx->out;
    decider_candidate_t *win = &out->cands[out->winner];
    const decider_request_t *req = ctx->req;
    bool sizes_match = !req->block_size || req->block_size == ctx->block_size;
    decider_ledger_routed(self->ledger, win->ledger_id, req->hashes, sizes_match ? req->nhashes : 0,
                          wall_ms, mono_ms);
    double uncached = (double)(ctx->prompt_tokens - win->c.cached_tokens);
    self->mean_tokens += S_EWMA_ALPHA * (uncached - self->mean_tokens);
    if (self->mean_tokens < S_MIN_REQUEST_TOKENS) self->mean_tokens = S_MIN_REQUEST_TOKENS;
}

static void s_no_worker(s_ctx_t *ctx)
{
    decider_decision_t *out = ctx->out;
    char why[384] = "";
    size_t off = 0;
    for (uint32_t i = 0; i < out->ncands && off < sizeof why; i++)
        off += snprintf(why + off, sizeof why - off, "%s%s %s", i ? ", " : "",
                        out->cands[i].c.worker, out->cands[i].note);
    s_fail(out, IPL_ROUTE_NO_WORKER, "no_worker", "no worker of pool \"%s\" can take requests%s%s",
           out->pool->name, out->ncands ? ": " : " (it has no workers)", why);
}

int decider_router_route_at(decider_router_t *self, const ipl_policy_t *policy,
                            const decider_state_t *state, uint64_t state_age_ms,
                            const decider_request_t *req, decider_decision_t *out, uint64_t wall_ms,
                            uint64_t mono_ms)
{
    s_reset(out);
    if (!policy) {
        s_fail(out, IPL_ROUTE_NOT_READY, "not_ready",
               "no policy received from the policy service yet");
        return out->status;
    }
    out->pool = s_find_pool(policy, req->model);
    if (!out->pool) {
        char known[256] = "";
        size_t off = 0;
        for (uint32_t i = 0; i < policy->pools_len && off < sizeof known; i++)
            off += snprintf(known + off, sizeof known - off, "%s%s", i ? ", " : "",
                            policy->pools[i].model);
        s_fail(out, IPL_ROUTE_NO_POOL, "no_pool", "no pool serves model \"%s\" (known: %s)",
               req->model ? req->model : "", policy->pools_len ? known : "none");
        return out->status;
    }
    const char *strategy = req->strategy && *req->strategy ? req->strategy
                           : *out->pool->strategy          ? out->pool->strategy
                                                           : self->config.default_strategy;
    s_pick_fn *pick = NULL;
    for (size_t i = 0; i < S_NSTRATEGIES; i++)
        if (!strcmp(s_strategies[i].name, strategy)) {
            pick = s_strategies[i].pick;
            out->strategy = s_strategies[i].name;
        }
    if (!pick) {
        s_fail(out, IPL_ROUTE_BAD_REQUEST, "bad_request", "unknown strategy \"%s\" (known: %s)",
               strategy, decider_router_strategies());
        return out->status;
    }
    if (!state) {
        s_fail(out, IPL_ROUTE_NOT_READY, "not_ready",
               "no state snapshot received from the aggregator yet");
        return out->status;
    }
    out->state_seq = decider_state_seq(state);

    pthread_mutex_lock(&self->lock);
    s_ctx_t ctx = {.self = self, .req = req, .out = out};
    uint32_t healthy = s_candidates(&ctx, policy, state, state_age_ms, wall_ms, mono_ms);
    if (healthy == 0) {
        s_no_worker(&ctx);
    } else {
        pick(&ctx);
        s_commit(&ctx, wall_ms, mono_ms);
        decider_candidate_t *win = &out->cands[out->winner];
        for (uint32_t i = 0; i < policy->workers_len; i++)
            if (policy->workers[i].name == win->c.worker) out->worker = &policy->workers[i];
        out->predicted_ttft_s = win->c.predicted_ttft_s;
        out->cached_tokens = win->c.cached_tokens;
    }
    pthread_mutex_unlock(&self->lock);
    return out->status;
}

int decider_router_route(decider_router_t *self, const ipl_policy_t *policy,
                         const decider_state_t *state, uint64_t state_age_ms,
                         const decider_request_t *req, decider_decision_t *out)
{
    return decider_router_route_at(self, policy, state, state_age_ms, req, out, ipl_wall_ms(),
                                   ipl_mono_ms());
}

double decider_router_mean_request_tokens(decider_router_t *self)
{
    pthread_mutex_lock(&self->lock);
    double v = self->mean_tokens;
    pthread_mutex_unlock(&self->lock);
    return v;
}

size_t decider_router_optimistic_blocks(decider_router_t *self)
{
    pthread_mutex_lock(&self->lock);
    size_t n = decider_ledger_memberships(self->ledger);
    pthread_mutex_unlock(&self->lock);
    return n;
}
