/*
 * decider_router — candidates, figures, predictions, admission and the commit (see the header);
 * the strategies themselves are in decider_strategies.c (contract: decider_pick.h).
 *
 * A decision runs in four steps:
 *   s_candidates  the pool's workers with load, in-flight and cached figures, whether each is
 *                 healthy (has a sample, not DOWN) and whether its cache term can be trusted,
 *                 and every healthy one's features and predicted TTFT
 *   s_admit       max_queue: candidates above it are out; none left → OVERLOADED
 *   pick          the strategy marks eligibility and picks the winner, with a reason
 *   s_commit      records the routing (ledger, in-flight tokens), learns the request size and
 *                 counts the fallbacks
 *
 * Then, for decisions a gateway reports on: decider_router_remember keeps the winner's features
 * (decider_feedback) and decider_router_feedback feeds the observed TTFT to the predictor.
 */
#include "decider_router.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "decider_feedback.h"
#include "decider_ledger.h"
#include "decider_memory.h"
#include "decider_pick.h"
#include "decider_rules.h"
#include "decider_strategies.h"
#include "decider_targets.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_hash.h"

#define S_EWMA_ALPHA         0.1
#define S_MIN_REQUEST_TOKENS 16.0
#define S_OBSERVE_WINDOW_MS  60000
#define S_OBSERVE_CAPACITY   65536
#define S_SPILL_SLOTS        64     /* pools whose spill state is kept (more: shared slots) */
#define S_NO_TTFT_MS         1e12   /* a pool without a healthy worker "predicts" this */

struct decider_router {
    decider_router_config_t config;
    pthread_mutex_t lock;     // serialises decisions: ledger, EWMA, rng, memory, scratch, counters,
                              // the feedback map
    decider_ledger_t *ledger; // config.ledger, or own_ledger
    decider_ledger_t *own_ledger;   // when none was lent
    decider_feedback_t *feedback;   // created by the first decider_router_remember
    decider_predictor_t *predictor; // its own lock
    decider_memory_t *memory;
    double mean_tokens;
    uint64_t rng;
    uint64_t fallbacks[DECIDER_FALLBACK_NREASONS];
    uint64_t exported[DECIDER_FALLBACK_NREASONS]; // already added to the metric
    ipl_metric_t *m_fallbacks[DECIDER_FALLBACK_NREASONS];
    uint64_t observed[DECIDER_OBSERVED_NRESULTS];
    uint64_t observed_exported[DECIDER_OBSERVED_NRESULTS];
    ipl_metric_t *m_observed[DECIDER_OBSERVED_NRESULTS];
    uint32_t index_prefix[IPL_INDEX_MAX_WORKERS];
    uint32_t ledger_prefix[IPL_INDEX_MAX_WORKERS];
    // The replica's and the ledger's ids of the policy's workers, by position in
    // policy->workers, for the policy (pointer and version) and the replica (its space) they
    // were found in; -1: not known there (yet), looked up again (s_ids).
    struct {
        const ipl_policy_t *policy;
        uint64_t version, space;
        uint32_t cap;
        int32_t *state, *ledger;
    } ids;
    // The policy positions of the last pool's workers, in policy order, for the pool and the
    // policy (pointer and version) they were listed for: most decisions are for the same pool
    // as the one before, and then do not scan the whole policy for its workers (s_members).
    struct {
        const ipl_policy_t *policy;
        uint64_t version;
        const ipl_pool_t *pool;
        uint32_t n, cap;
        uint32_t *at;
    } members;
    // Spill hysteresis per pool (decider_rules_spill_step), by a hash of the pool's name: kept
    // across policy versions, so a reload does not reset a pool that is spilling.
    struct {
        uint64_t key; // 0: free
        decider_rules_spill_state_t st;
    } spill[S_SPILL_SLOTS];
    // What the policy step says about the decision being made (explained decisions only),
    // appended to its detail at the end: the strategy writes the detail in between.
    char policy_note[384];
};

static const char *const s_reasons[] = {
    "cache_hit",   "least_loaded",  "load_gate",    "load_only",   "explore",
    "random",      "round_robin",   "max_score",    "min_cost",    "imbalanced",
    "cache_match", "smallest_tree", "prefix_match", "prefix_miss", "no_pool",
    "no_worker",   "not_ready",     "bad_request",  "overloaded",  "spill",
    "overflow",    "rule_provider", "rejected",     "deferred",    "keep_local",
    "policy_error", "rebalance",   NULL,
};

static const char *const s_fallback_names[DECIDER_FALLBACK_NREASONS] = {
    "stale", "degraded", "health", "block_size", "load_gate", "no_worker", "overloaded",
};

static const char *const s_observed_names[DECIDER_OBSERVED_NRESULTS] = {
    "learned", "outlier", "invalid", "failed", "unstreamed", "mismatch", "unknown", "expired",
};

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
        .base_s = 0.04,
        .observe_window_ms = S_OBSERVE_WINDOW_MS,
        .observe_capacity = S_OBSERVE_CAPACITY,
        .batch_retry_ms = 500,
    };
}

bool decider_router_strategy_known(const char *name)
{
    return ipl_strategy_known(name);
}

const char *decider_router_strategies(void)
{
    return ipl_strategy_list();
}

const char *const *decider_router_reasons(void)
{
    return s_reasons;
}

const char *decider_fallback_name(int reason)
{
    return reason >= 0 && reason < DECIDER_FALLBACK_NREASONS ? s_fallback_names[reason] : NULL;
}

const char *decider_observed_name(int result)
{
    return result >= 0 && result < DECIDER_OBSERVED_NRESULTS ? s_observed_names[result] : NULL;
}

decider_router_t *decider_router_new(const decider_router_config_t *config)
{
    decider_router_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->config = *config;
    decider_router_config_t *c = &self->config;
    if (!(c->prefill_tokens_per_s > 0)) c->prefill_tokens_per_s = 3000;
    if (!(c->running_cost_s >= 0)) c->running_cost_s = 0;
    if (!(c->base_s >= 0)) c->base_s = 0;
    if (!(c->temperature_s >= 0)) c->temperature_s = 0;
    if (!c->default_strategy || !ipl_strategy_known(c->default_strategy))
        c->default_strategy = "ttft";
    pthread_mutex_init(&self->lock, NULL);

    decider_predictor_config_t pc;
    decider_predictor_config_defaults(&pc);
    pc.prior[0] = c->base_s;
    pc.prior[1] = 0;
    pc.prior[2] = 1.0 / c->prefill_tokens_per_s;
    pc.prior[3] = c->running_cost_s;
    pc.prior[4] = 1.0 / c->prefill_tokens_per_s;
    if (c->forgetting > 0) pc.forgetting = c->forgetting;
    if (!c->observe_capacity) c->observe_capacity = S_OBSERVE_CAPACITY;
    self->ledger = c->ledger;
    if (!self->ledger) self->ledger = self->own_ledger = decider_ledger_new(c->optimistic_ttl_ms);
    self->predictor = decider_predictor_new(&pc);
    self->memory = decider_memory_new();
    if (!self->ledger || !self->predictor || !self->memory) {
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
    decider_ledger_destroy(&self->own_ledger);
    decider_feedback_destroy(&self->feedback);
    decider_predictor_destroy(&self->predictor);
    decider_memory_destroy(&self->memory);
    free(self->ids.state);
    free(self->ids.ledger);
    free(self->members.at);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
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

// NO_POOL for `model`, naming the models the policy serves.
static void s_no_pool(decider_decision_t *out, const ipl_policy_t *policy, const char *model)
{
    char known[256] = "";
    size_t off = 0;
    for (uint32_t i = 0; i < policy->pools_len && off < sizeof known; i++)
        off += snprintf(known + off, sizeof known - off, "%s%s", i ? ", " : "",
                        policy->pools[i].model);
    s_fail(out, IPL_ROUTE_NO_POOL, "no_pool", "no pool serves model \"%s\" (known: %s)",
           model ? model : "", policy->pools_len ? known : "none");
}

static const char *s_health_name(uint64_t health)
{
    return health == IPL_HEALTH_UP ? "up" : health == IPL_HEALTH_DOWN ? "down" : "unknown";
}

// ---- step 1: candidates -----------------------------------------------------------------------

typedef struct {
    decider_pick_t pick;
    decider_pick_fn *pickfn; // the strategy's
    uint32_t healthy;        // candidates s_candidates found healthy (s_restrict lowers it)
    bool oracle;         // strategy oracle with an offline hook: cached tokens are the truth
    unsigned fallback;   // bit per decider_fallback_t
    int least_over;      // the least loaded candidate above max_queue, or -1
    bool ledger_matched; // the ledger matched this request's hashes (s_commit reuses it)
    const char *lora;    // the LoRA adapter requested (decider_targets_resolve_lora), or NULL
} s_ctx_t;

static void s_predict(decider_router_t *self, s_ctx_t *ctx)
{
    decider_decision_t *out = ctx->pick.out;
    const char *set = NULL;
    decider_model_t model;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        if (!set || (c->set != set && strcmp(c->set, set))) {
            set = c->set;
            decider_predictor_model(self->predictor, set, &model);
        }
        // Prefill work ahead: the backlog of what this router routed there, drained at the
        // set's calibrated prefill speed (decider_memory.h; a sample counts a request still
        // prefilling as merely "running"),
        // at least the tokens routed since the sample (peers' too); when the backlog is empty
        // while the sample shows requests waiting (traffic from elsewhere), those × the mean.
        double backlog = decider_memory_backlog(self->memory, c->ledger_id, ctx->pick.mono_ms,
                                                1.0 / model.theta[4]);
        double ahead = backlog > c->inflight_tokens ? backlog : c->inflight_tokens;
        if (!(backlog > 0)) ahead += (double)c->c.waiting * self->mean_tokens;
        c->x = (decider_features_t){
            .queued = (double)c->queue,
            .queued_tokens = ahead,
            .running = (double)c->c.running,
            .uncached_tokens = (double)(ctx->pick.prompt_tokens - c->c.cached_tokens),
        };
        c->c.predicted_ttft_s = decider_model_predict(&model, &c->x, &c->terms);
    }
}

// Whether the cache term of a healthy candidate can be trusted; notes and counts why not.
static bool s_cache_usable(s_ctx_t *ctx, decider_candidate_t *c, const decider_worker_t *w,
                           bool fresh, bool sizes_match, uint64_t state_age_ms)
{
    if (!fresh) {
        decider_candidate_note(c, "state stale (%llu ms): load only",
                               (unsigned long long)state_age_ms);
        ctx->fallback |= 1u << DECIDER_FALLBACK_STALE;
        return false;
    }
    if (w->kv_state == IPL_KV_DEGRADED) {
        decider_candidate_note(c, "kv degraded: load only");
        ctx->fallback |= 1u << DECIDER_FALLBACK_DEGRADED;
        return false;
    }
    if (w->health != IPL_HEALTH_UP) {
        decider_candidate_note(c, "health %s: load only", s_health_name(w->health));
        ctx->fallback |= 1u << DECIDER_FALLBACK_HEALTH;
        return false;
    }
    if (!sizes_match) {
        decider_candidate_note(c, "block size %llu != request's %llu: load only",
                               (unsigned long long)ctx->pick.block_size,
                               (unsigned long long)ctx->pick.req->block_size);
        ctx->fallback |= 1u << DECIDER_FALLBACK_BLOCK_SIZE;
        return false;
    }
    if (w->kv_state == IPL_KV_SYNCING) decider_candidate_note(c, "kv syncing");
    return true;
}

// The replica's and the ledger's ids of policy worker i (ids never change within one replica,
// and within the ledger): found once per policy and replica, not by name every decision.
static void s_ids(decider_router_t *self, const ipl_policy_t *policy, const decider_state_t *state,
                  uint32_t i, int *state_id, int *ledger_id)
{
    const char *name = policy->workers[i].name;
    if (!self->ids.state || i >= self->ids.cap) { // no room: by name
        *state_id = decider_state_find(state, name);
        *ledger_id = decider_ledger_worker(self->ledger, name);
        return;
    }
    if (self->ids.state[i] < 0) self->ids.state[i] = decider_state_find(state, name);
    if (self->ids.ledger[i] < 0) self->ids.ledger[i] = decider_ledger_worker(self->ledger, name);
    *state_id = self->ids.state[i];
    *ledger_id = self->ids.ledger[i];
}

// Forgets the ids when the policy or the replica changed.
static void s_ids_check(decider_router_t *self, const ipl_policy_t *policy,
                        const decider_state_t *state)
{
    uint64_t space = decider_state_space(state);
    if (self->ids.policy == policy && self->ids.version == policy->version &&
        self->ids.space == space && self->ids.cap >= policy->workers_len)
        return;
    if (self->ids.cap < policy->workers_len) {
        free(self->ids.state);
        free(self->ids.ledger);
        self->ids.state = malloc(policy->workers_len * sizeof *self->ids.state);
        self->ids.ledger = malloc(policy->workers_len * sizeof *self->ids.ledger);
        self->ids.cap = self->ids.state && self->ids.ledger ? policy->workers_len : 0;
        if (!self->ids.cap) {
            free(self->ids.state);
            free(self->ids.ledger);
            self->ids.state = self->ids.ledger = NULL;
        }
    }
    for (uint32_t i = 0; i < self->ids.cap; i++)
        self->ids.state[i] = self->ids.ledger[i] = -1;
    self->ids.policy = policy;
    self->ids.version = policy->version;
    self->ids.space = space;
}

// Whether policy worker w belongs to `pool` (the same string is often the same pointer: one
// compare instead of a strcmp per worker and decision).
static bool s_in_pool(const ipl_worker_t *w, const ipl_pool_t *pool)
{
    return w->pool == pool->name || !strcmp(w->pool, pool->name);
}

// The policy positions of `pool`'s workers (self->members, listed again for another pool or
// policy): *at gets them, in policy order, *n their number. Returns 0, or IPL_E_NOMEM.
static int s_members(decider_router_t *self, const ipl_policy_t *policy, const ipl_pool_t *pool,
                     const uint32_t **at, uint32_t *n)
{
    if (self->members.policy != policy || self->members.version != policy->version ||
        self->members.pool != pool) {
        if (self->members.cap < policy->workers_len) {
            uint32_t *a = realloc(self->members.at, policy->workers_len * sizeof *a);
            if (!a) return IPL_E_NOMEM;
            self->members.at = a;
            self->members.cap = policy->workers_len;
        }
        self->members.n = 0;
        for (uint32_t i = 0; i < policy->workers_len; i++)
            if (s_in_pool(&policy->workers[i], pool)) self->members.at[self->members.n++] = i;
        self->members.policy = policy;
        self->members.version = policy->version;
        self->members.pool = pool;
    }
    *at = self->members.at;
    *n = self->members.n;
    return IPL_OK;
}

// Whether `name` is one of the request's avoided targets (ROUTE_REQ.avoid: a few names).
static bool s_avoided(const decider_request_t *req, const char *name)
{
    for (size_t i = 0; i < req->navoid; i++)
        if (req->avoid[i] && name && !strcmp(req->avoid[i], name)) return true;
    return false;
}

// The pool's workers with their figures. Returns the number of healthy ones.
static uint32_t s_candidates(decider_router_t *self, s_ctx_t *ctx, const ipl_policy_t *policy,
                             const decider_state_t *state, uint64_t state_age_ms, uint64_t wall_ms,
                             uint64_t mono_ms)
{
    decider_decision_t *out = ctx->pick.out;
    const decider_request_t *req = ctx->pick.req;
    const ipl_pool_t *pool = out->pool;

    // The pool's workers, and its block size (the compiler guarantees one per pool).
    const uint32_t *at;
    uint32_t n;
    if (s_members(self, policy, pool, &at, &n) != IPL_OK) return 0;
    uint64_t bs = n ? policy->workers[at[0]].block_size : 0;
    if (n > out->cap) {
        decider_candidate_t *c = realloc(out->cands, n * sizeof *c);
        if (!c) return 0;
        out->cands = c;
        out->cap = n;
    }
    ctx->pick.block_size = bs;
    ctx->pick.prompt_tokens = req->prompt_tokens ? req->prompt_tokens : (uint64_t)req->nhashes * bs;
    out->prompt_tokens = ctx->pick.prompt_tokens;
    bool sizes_match = !req->block_size || req->block_size == bs;
    bool fresh = state_age_ms <= self->config.stale_ms;

    const ipl_index_t *index = decider_state_index(state);
    int nstate; // the replica's workers, by id
    const decider_worker_t *workers = decider_state_workers(state, &nstate);
    size_t nworkers = (size_t)nstate;
    if (sizes_match && fresh && req->nhashes && !ctx->oracle)
        ipl_index_match(index, req->hashes, req->nhashes, self->index_prefix,
                        IPL_INDEX_MAX_WORKERS);
    else
        memset(self->index_prefix, 0, nworkers * sizeof *self->index_prefix);
    ctx->ledger_matched = sizes_match && req->nhashes && !ctx->oracle;
    if (ctx->ledger_matched)
        decider_ledger_match(self->ledger, req->hashes, req->nhashes, self->ledger_prefix,
                             IPL_INDEX_MAX_WORKERS, mono_ms);
    else
        memset(self->ledger_prefix, 0, sizeof self->ledger_prefix);

    uint32_t healthy = 0;
    out->ncands = 0;
    decider_ledger_apply_peers(self->ledger); // what decider_ledger_worker did per candidate
    s_ids_check(self, policy, state);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = at[k];
        const ipl_worker_t *pw = &policy->workers[i];
        decider_candidate_t *c = &out->cands[out->ncands++];
        memset(c, 0, offsetof(decider_candidate_t, note)); // the 256-byte note is not read
        c->note[0] = '\0';                                 // beyond its terminator
        c->c.worker = pw->name;
        c->c.url = pw->url;
        c->c.note = c->note;
        c->set = pw->worker_set && *pw->worker_set ? pw->worker_set : pw->model;
        s_ids(self, policy, state, i, &c->state_id, &c->ledger_id);
        if (!decider_targets_worker_serves(pw, ctx->lora)) {
            decider_candidate_note(c, "does not serve LoRA adapter %s", ctx->lora);
            continue;
        }
        const decider_worker_t *w =
            c->state_id >= 0 && c->state_id < nstate ? &workers[c->state_id] : NULL;
        if (!w || !w->has_load) {
            decider_candidate_note(c, "no load sample yet");
            continue;
        }
        c->c.running = w->running;
        c->c.waiting = w->waiting;
        c->c.kv_usage = w->kv_usage;
        c->num_blocks = w->num_blocks;
        c->held_blocks = c->state_id >= 0 ? ipl_index_worker_blocks(index, c->state_id) : 0;
        uint64_t inflight_tokens;
        c->c.inflight = decider_ledger_inflight_sum(self->ledger, c->ledger_id, w->ts_ms, wall_ms,
                                                    &inflight_tokens);
        c->inflight_tokens = (double)inflight_tokens;
        c->queue = c->c.waiting + c->c.inflight;
        if (w->health == IPL_HEALTH_DOWN) {
            decider_candidate_note(c, "down");
            continue;
        }
        if (req->navoid && s_avoided(req, pw->name)) { // a retry: this one just failed it
            decider_candidate_note(c, "avoided (the gateway's failed attempt or open breaker)");
            continue;
        }
        c->healthy = true;
        healthy++;
        if (ctx->oracle) {
            uint64_t truth =
                self->config.offline.oracle(self->config.offline.oracle_arg, pw->name, req);
            c->cache_used = true;
            c->c.cached_tokens = truth < ctx->pick.prompt_tokens ? truth : ctx->pick.prompt_tokens;
            decider_candidate_note(c, "oracle: true cache");
            continue;
        }
        c->cache_used = s_cache_usable(ctx, c, w, fresh, sizes_match, state_age_ms);
        if (c->cache_used) {
            uint64_t blocks = 0;
            if (c->state_id >= 0 && (size_t)c->state_id < nworkers)
                blocks = self->index_prefix[c->state_id];
            c->state_blocks = (uint32_t)blocks;
            if (c->ledger_id >= 0 && self->ledger_prefix[c->ledger_id] > blocks)
                blocks = self->ledger_prefix[c->ledger_id];
            uint64_t tokens = blocks * bs;
            c->c.cached_tokens =
                tokens < ctx->pick.prompt_tokens ? tokens : ctx->pick.prompt_tokens;
        }
    }
    s_predict(self, ctx);
    return healthy;
}

// ---- step 2: admission ------------------------------------------------------------------------

// max_queue: a candidate above it is not eligible. Returns the healthy ones left.
static uint32_t s_admit(decider_router_t *self, s_ctx_t *ctx, uint32_t healthy)
{
    uint64_t max = self->config.max_queue;
    decider_decision_t *out = ctx->pick.out;
    if (!max) return healthy;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy || c->queue <= max) continue;
        if (ctx->least_over < 0 || c->queue < out->cands[ctx->least_over].queue)
            ctx->least_over = (int)i;
        c->healthy = false;
        healthy--;
        decider_candidate_note(c, "queue %llu above the max queue %llu",
                               (unsigned long long)c->queue, (unsigned long long)max);
    }
    return healthy;
}

static void s_no_worker(decider_decision_t *out)
{
    char why[512] = "";
    size_t off = 0;
    for (uint32_t i = 0; i < out->ncands && off < sizeof why; i++)
        off += snprintf(why + off, sizeof why - off, "%s%s %s", i ? ", " : "",
                        out->cands[i].c.worker, out->cands[i].note);
    s_fail(out, IPL_ROUTE_NO_WORKER, "no_worker", "no worker of pool \"%s\" can take requests%s%s",
           out->pool->name, out->ncands ? ": " : " (it has no workers)", why);
}

static void s_overloaded(decider_router_t *self, const s_ctx_t *ctx)
{
    decider_decision_t *out = ctx->pick.out;
    const decider_candidate_t *least = &out->cands[ctx->least_over];
    s_fail(out, IPL_ROUTE_OVERLOADED, "overloaded",
           "every worker of pool \"%s\" has more than %llu requests queued (least: %s with %llu, "
           "predicted TTFT %.1f ms); retry later",
           out->pool->name, (unsigned long long)self->config.max_queue, least->c.worker,
           (unsigned long long)least->queue, least->c.predicted_ttft_s * 1000.0);
}

// ---- step 4: commit ---------------------------------------------------------------------------

static void s_commit(decider_router_t *self, s_ctx_t *ctx, uint64_t wall_ms, uint64_t mono_ms)
{
    decider_decision_t *out = ctx->pick.out;
    decider_candidate_t *win = &out->cands[out->winner];
    const decider_request_t *req = ctx->pick.req;
    bool sizes_match = !req->block_size || req->block_size == ctx->pick.block_size;
    uint64_t uncached = ctx->pick.prompt_tokens - win->c.cached_tokens;
    size_t n = sizes_match ? req->nhashes : 0;
    // The ledger assumes blocks the state cannot show yet; when the winner's KV events show
    // the whole prompt, there is nothing to assume (and nothing to add to the ledger's
    // indexes, the costly part of recording): only the routing is recorded.
    if (win->cache_used && win->state_blocks >= n) n = 0;
    if (ctx->ledger_matched) // the candidates' match, unless a peer routing changed it since
        decider_ledger_record_matched(self->ledger, win->ledger_id, req->hashes, n, uncached,
                                      wall_ms, mono_ms);
    else
        decider_ledger_record(self->ledger, win->ledger_id, req->hashes, n, uncached, wall_ms,
                              mono_ms);
    decider_memory_backlog_add(self->memory, win->ledger_id, (double)uncached, mono_ms);
    self->mean_tokens += S_EWMA_ALPHA * ((double)uncached - self->mean_tokens);
    if (self->mean_tokens < S_MIN_REQUEST_TOKENS) self->mean_tokens = S_MIN_REQUEST_TOKENS;
}

static void s_count(decider_router_t *self, unsigned bits)
{
    for (int r = 0; r < DECIDER_FALLBACK_NREASONS; r++)
        if (bits & (1u << r)) self->fallbacks[r]++;
}

// ---- the policy: rules, providers, aliases ----------------------------------------------------

// The strategy for `pool` (the request's, the pool's or the default) into ctx->pickfn, unless
// it is resolved for that pool already. -1: unknown (a BAD_REQUEST decision), else 0.
static int s_strategy(decider_router_t *self, s_ctx_t *ctx, const ipl_pool_t *pool)
{
    decider_decision_t *out = ctx->pick.out;
    const decider_request_t *req = ctx->pick.req;
    if (ctx->pickfn && out->pool == pool) return 0;
    out->pool = pool;
    const char *strategy = req->strategy && *req->strategy ? req->strategy
                           : *pool->strategy               ? pool->strategy
                                                           : self->config.default_strategy;
    ctx->pickfn = decider_strategy_pick(strategy, &out->strategy);
    if (!ctx->pickfn) {
        s_fail(out, IPL_ROUTE_BAD_REQUEST, "bad_request", "unknown strategy \"%s\" (known: %s)",
               strategy, ipl_strategy_list());
        return -1;
    }
    return 0;
}

// Resolves the strategy of `pool` and lists its candidates (step 1). -1: unknown strategy (a
// BAD_REQUEST decision), else 0 with ctx->healthy set.
static int s_prepare(decider_router_t *self, s_ctx_t *ctx, const ipl_policy_t *policy,
                     const ipl_pool_t *pool, const decider_state_t *state, uint64_t state_age_ms,
                     uint64_t wall_ms, uint64_t mono_ms)
{
    if (s_strategy(self, ctx, pool) != 0) return -1;
    ctx->pick.memory = decider_memory_pool(self->memory, pool->name);
    ctx->oracle = self->config.offline.oracle && !strcmp(ctx->pick.out->strategy, "oracle");
    ctx->least_over = -1;
    ctx->healthy = s_candidates(self, ctx, policy, state, state_age_ms, wall_ms, mono_ms);
    return 0;
}

// Steps 2 to 4 over the candidates s_prepare listed: admission, the strategy's pick, the
// commit. Returns the status.
static int s_local(decider_router_t *self, s_ctx_t *ctx, const ipl_policy_t *policy,
                   uint64_t wall_ms, uint64_t mono_ms)
{
    decider_decision_t *out = ctx->pick.out;
    uint32_t admitted = s_admit(self, ctx, ctx->healthy);
    if (ctx->healthy == 0) {
        s_no_worker(out);
        ctx->fallback |= 1u << DECIDER_FALLBACK_NO_WORKER;
    } else if (admitted == 0) {
        s_overloaded(self, ctx);
        ctx->fallback |= 1u << DECIDER_FALLBACK_OVERLOADED;
    } else {
        ctx->pickfn(&ctx->pick);
        s_commit(self, ctx, wall_ms, mono_ms);
        if (!strcmp(out->reason, "load_gate")) ctx->fallback |= 1u << DECIDER_FALLBACK_LOAD_GATE;
        decider_candidate_t *win = &out->cands[out->winner];
        for (uint32_t i = policy->workers_len; i-- > 0 && !out->worker;) // the last of that name
            if (policy->workers[i].name == win->c.worker) out->worker = &policy->workers[i];
        out->predicted_ttft_s = win->c.predicted_ttft_s;
        out->cached_tokens = win->c.cached_tokens;
        out->set = win->set;
        out->features = win->x;
        out->target = DECIDER_TARGET_WORKER;
        out->upstream_model = ctx->lora; // an adapter is sent under its own name, as vLLM serves it
    }
    return out->status;
}

// A uniform draw in [0, 1) from the router's generator (splitmix64).
static double s_unit(uint64_t *rng)
{
    uint64_t z = (*rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

// Appends "; "-separated text to `buf` (cut at its end).
static void s_append(char *buf, size_t size, const char *fmt, va_list ap)
{
    size_t off = strlen(buf);
    if (off + 3 >= size) return;
    if (off) off += (size_t)snprintf(buf + off, size - off, "; ");
    vsnprintf(buf + off, size - off, fmt, ap);
}

// Appends to the decision's detail.
static void s_detail(decider_decision_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_detail(decider_decision_t *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_append(out->detail, sizeof out->detail, fmt, ap);
    va_end(ap);
}

// Appends to the policy step's note (the detail gets it when the decision is made).
static void s_note(decider_router_t *self, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_note(decider_router_t *self, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_append(self->policy_note, sizeof self->policy_note, fmt, ap);
    va_end(ap);
}

// Sends the decision to provider `name` (a target of out->pool): its backend, and the name it
// knows the pool's model by. Returns the status (NO_WORKER when the policy lacks either).
static int s_provider(const ipl_policy_t *policy, const decider_request_t *req,
                      decider_decision_t *out, const char *name, const char *reason)
{
    const ipl_provider_t *p = decider_targets_provider(policy, name);
    const ipl_backend_t *b = p ? decider_targets_backend(policy, p->backend) : NULL;
    if (!b) {
        s_fail(out, IPL_ROUTE_NO_WORKER, "no_worker", "%s \"%s\" of pool \"%s\" does not exist",
               p ? "the backend of provider" : "provider", name, out->pool->name);
        return out->status;
    }
    if (req->navoid && (s_avoided(req, p->name) || s_avoided(req, b->name))) {
        s_fail(out, IPL_ROUTE_NO_WORKER, "no_worker",
               "provider \"%s\" (backend \"%s\") of pool \"%s\" is avoided (the gateway's "
               "failed attempt or open breaker)",
               name, b->name, out->pool->name);
        return out->status;
    }
    const char *remote = decider_targets_remote_model(policy, name, out->pool->model);
    out->status = IPL_ROUTE_OK;
    out->reason = reason;
    out->target = DECIDER_TARGET_PROVIDER;
    out->provider = p;
    out->backend = b;
    out->upstream_model = remote ? remote : out->pool->model;
    out->worker = NULL;
    out->winner = -1;
    out->set = NULL;
    out->cached_tokens = 0;
    out->predicted_ttft_s = (double)p->latency_hint_ms / 1e3;
    s_detail(out, "to provider \"%s\" through backend \"%s\" as model \"%s\" (%s)", name, b->name,
             out->upstream_model, reason);
    return out->status;
}

// The spill state of `pool` (a slot by the hash of its name; pools past S_SPILL_SLOTS share).
static decider_rules_spill_state_t *s_spill_state(decider_router_t *self, const char *pool)
{
    uint64_t key = ipl_hash_bytes(pool, strlen(pool)) | 1;
    for (unsigned i = 0; i < S_SPILL_SLOTS; i++) {
        unsigned at = (unsigned)((key + i) % S_SPILL_SLOTS);
        if (self->spill[at].key == key) return &self->spill[at].st;
        if (!self->spill[at].key) {
            self->spill[at].key = key;
            return &self->spill[at].st;
        }
    }
    return &self->spill[key % S_SPILL_SLOTS].st;
}

// The value of header `name` among the request's "name=value" pairs (decider_rules_header_fn).
static const char *s_header(void *arg, const char *name)
{
    const decider_request_t *req = arg;
    size_t n = strlen(name);
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *h = req->headers[i];
        if (h && !strncasecmp(h, name, n) && h[n] == '=') return h + n + 1;
    }
    return NULL;
}

// The rules' view of a request and of its pool's state (the candidates s_prepare listed:
// requests queued at the healthy ones, their mean KV use, the best predicted TTFT).
static void s_rules_input(const s_ctx_t *ctx, uint64_t wall_ms, decider_rules_input_t *in)
{
    const decider_request_t *req = ctx->pick.req;
    const decider_decision_t *out = ctx->pick.out;
    *in = (decider_rules_input_t){
        .tenant = req->tenant,
        .model = req->model,
        .labels = (const char *const *)req->labels,
        .nlabels = req->nlabels,
        .header_fn = s_header,
        .header_arg = (void *)req,
        .prompt_tokens = req->prompt_tokens ? req->prompt_tokens
                                            : (uint64_t)req->nhashes * req->block_size,
        .predicted_ttft_ms = S_NO_TTFT_MS,
        .ttft_slo_ms = out->pool ? out->pool->ttft_slo_ms : 0,
        .minute_of_week = decider_rules_minute_of_week(wall_ms),
    };
    if (!out->pool) return;
    in->prompt_tokens = out->prompt_tokens;
    double kv = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        const decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        n++;
        in->queue_depth += c->queue;
        kv += c->c.kv_usage;
        if (c->c.predicted_ttft_s * 1e3 < in->predicted_ttft_ms)
            in->predicted_ttft_ms = c->c.predicted_ttft_s * 1e3;
    }
    if (n) in->kv_utilization_percent = (uint64_t)(kv / n * 100.0 + 0.5);
}

// Whether candidate c's worker set is one of names[0..n).
static bool s_set_in(const decider_candidate_t *c, char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (c->set && !strcmp(c->set, names[i])) return true;
    return false;
}

// Leaves only the candidates of worker sets names[0..n) healthy; returns how many are.
static uint32_t s_restrict(s_ctx_t *ctx, char *const *names, size_t n, const char *why)
{
    decider_decision_t *out = ctx->pick.out;
    uint32_t healthy = 0;
    for (uint32_t i = 0; i < out->ncands; i++) {
        decider_candidate_t *c = &out->cands[i];
        if (!c->healthy) continue;
        if (s_set_in(c, names, n)) {
            healthy++;
        } else {
            c->healthy = false;
            decider_candidate_note(c, "%s", why);
        }
    }
    return ctx->healthy = healthy;
}

// The least predicted TTFT among the healthy candidates of worker set `set` (only those that
// hold some of the prompt when `holding`); INFINITY when none.
static double s_best_ttft(const decider_decision_t *out, const char *set, bool holding)
{
    double best = INFINITY;
    for (uint32_t i = 0; i < out->ncands; i++) {
        const decider_candidate_t *c = &out->cands[i];
        if (c->healthy && c->set && !strcmp(c->set, set) && (!holding || c->c.cached_tokens) &&
            c->c.predicted_ttft_s < best)
            best = c->c.predicted_ttft_s;
    }
    return best;
}

// What the matched rule leaves for the rest of the decision.
typedef struct {
    bool local_only;      // keepLocal: never a provider
    const char *provider; // a provider to go to when no local worker can take it (or NULL)
    const char *provider_reason;
    bool to_provider; // go to `provider` now
} s_plan_t;

// Applies rule result `r` to the decision. Returns 1 when the decision is made (rejected,
// deferred, failed), else 0 with `plan` filled and the candidates restricted as the rule says
// (a rule routing to another pool lists that pool's).
static int s_apply(decider_router_t *self, s_ctx_t *ctx, const ipl_policy_t *policy,
                   const decider_rules_result_t *r, const decider_rules_input_t *in,
                   const decider_state_t *state, uint64_t state_age_ms, uint64_t wall_ms,
                   uint64_t mono_ms, s_plan_t *plan)
{
    decider_decision_t *out = ctx->pick.out;
    const ipl_rule_t *rule = &policy->rules[r->rule];
    switch (r->action) {
    case DECIDER_RULES_REJECT:
        s_fail(out, IPL_ROUTE_REJECTED, "rejected", "%s", r->reason ? r->reason : "");
        out->http_status = r->status ? r->status : DECIDER_RULES_REJECT_STATUS;
        return 1;
    case DECIDER_RULES_ADMIT_BATCH:
        if (r->admit) return 0;
        s_fail(out, IPL_ROUTE_DEFERRED, "deferred",
               "batch work waits: pool KV utilization %llu%% is not under %llu%%",
               (unsigned long long)in->kv_utilization_percent,
               (unsigned long long)r->max_utilization_percent);
        out->retry_after_ms = self->config.batch_retry_ms;
        return 1;
    case DECIDER_RULES_KEEP_LOCAL:
        plan->local_only = true;
        return 0;
    case DECIDER_RULES_SPILL: {
        if (!out->pool) return 0; // no pool serves the model: NO_POOL follows
        uint64_t pct = decider_rules_slo_percent(in->predicted_ttft_ms, in->ttft_slo_ms);
        bool spill = !r->spill.while_above_slo ||
                     decider_rules_spill_step(s_spill_state(self, out->pool->name), pct, mono_ms,
                                              &r->spill);
        plan->provider = r->provider;
        plan->provider_reason = "spill";
        plan->to_provider = spill;
        if (ctx->pick.explain)
            s_note(self, "rule %s/%s: %s (predicted TTFT %.0f%% of the %llu ms SLO)",
                     rule->policy, rule->name, spill ? "spilling" : "not spilling",
                     (double)pct, (unsigned long long)in->ttft_slo_ms);
        return 0;
    }
    case DECIDER_RULES_ROUTE:
    case DECIDER_RULES_PREFER: {
        const ipl_pool_t *pool = decider_targets_pool_by_name(policy, r->pool);
        if (!pool) {
            s_fail(out, IPL_ROUTE_NO_POOL, "no_pool", "rule %s/%s routes to pool \"%s\", which "
                   "does not exist", rule->policy, rule->name, r->pool);
            return 1;
        }
        if (pool != out->pool &&
            s_prepare(self, ctx, policy, pool, state, state_age_ms, wall_ms, mono_ms) != 0)
            return 1;
        if (r->action == DECIDER_RULES_ROUTE) {
            bool local = false;
            for (size_t i = 0; i < r->ntargets; i++) {
                const ipl_pool_target_t *t = decider_targets_target(policy, pool, r->targets[i]);
                if (t && !strcmp(t->kind, "provider")) {
                    if (!plan->provider) plan->provider = t->name;
                    plan->provider_reason = "rule_provider";
                } else {
                    local = true;
                }
            }
            if (r->ntargets && !local) plan->to_provider = true;
            else if (r->ntargets) s_restrict(ctx, r->targets, r->ntargets, "not a target of the rule");
            return 0;
        }
        // prefer: the target's workers, unless the holder holds the prefix and predicts less
        char *only = (char *)r->target;
        if (r->unless_holder) {
            double holder = s_best_ttft(out, r->unless_holder, true);
            double preferred = s_best_ttft(out, r->target, false);
            if (holder < preferred) only = (char *)r->unless_holder;
            if (ctx->pick.explain)
                s_note(self, "rule %s/%s: %s (holder \"%s\" %s, preferred \"%s\" %.1f ms)",
                         rule->policy, rule->name, only == r->target ? "preferred" : "holder",
                         r->unless_holder, isinf(holder) ? "holds no prefix" : "predicts",
                         r->target, preferred * 1e3);
        }
        s_restrict(ctx, &only, 1, "not the rule's preferred target");
        return 0;
    }
    case DECIDER_RULES_NONE:
        break;
    }
    return 0;
}

// Names the rule in the decision.
static void s_mark_rule(decider_decision_t *out, const ipl_policy_t *policy, int rule)
{
    if (rule < 0 || (uint32_t)rule >= policy->rules_len) return;
    out->rule = &policy->rules[rule];
}

int decider_router_route_at(decider_router_t *self, const ipl_policy_t *policy,
                            const decider_state_t *state, uint64_t state_age_ms,
                            const decider_request_t *req, decider_decision_t *out, uint64_t wall_ms,
                            uint64_t mono_ms)
{
    decider_decision_reset(out);
    if (!policy) {
        s_fail(out, IPL_ROUTE_NOT_READY, "not_ready",
               "no policy received from the policy service yet");
        return out->status;
    }
    bool rules = policy->rules_len > 0;
    if (rules && !req->rules) {
        s_fail(out, IPL_ROUTE_REJECTED, "policy_error",
               "policy version %llu has rules this decider could not compile (see its log); "
               "requests are refused rather than routed without them",
               (unsigned long long)policy->version);
        out->http_status = 503;
        return out->status;
    }
    pthread_mutex_lock(&self->lock);
    self->policy_note[0] = '\0';
    const ipl_alias_t *alias = NULL;
    const char *lora = NULL;
    const ipl_pool_t *pool =
        decider_targets_any_alias(policy)
            ? decider_targets_resolve_lora(policy, req->model, s_unit(&self->rng), &alias, &lora)
            : decider_targets_resolve_lora(policy, req->model, 0, NULL, &lora);
    s_ctx_t ctx = {
        .pick = {.req = req,
                 .out = out,
                 .rng = &self->rng,
                 .mono_ms = mono_ms,
                 .load_gate = self->config.load_gate,
                 .temperature_s = self->config.temperature_s,
                 .optimistic_ttl_ms = self->config.optimistic_ttl_ms,
                 .explain = !self->config.offline.terse && !req->terse},
        .least_over = -1,
        .lora = lora,
    };
    s_plan_t plan = {0};
    if (!pool && !rules) {
        s_no_pool(out, policy, req->model);
        goto done;
    }
    if (pool && s_strategy(self, &ctx, pool) != 0) goto done;
    if (!state) {
        s_fail(out, IPL_ROUTE_NOT_READY, "not_ready",
               "no state snapshot received from the aggregator yet");
        goto done;
    }
    out->state_seq = decider_state_seq(state);
    if (pool && s_prepare(self, &ctx, policy, pool, state, state_age_ms, wall_ms, mono_ms) != 0)
        goto done;
    if (rules) {
        decider_rules_input_t in;
        decider_rules_result_t r;
        s_rules_input(&ctx, wall_ms, &in);
        if (decider_rules_eval(req->rules, &in, &r) != DECIDER_RULES_NONE) {
            s_mark_rule(out, policy, r.rule);
            if (s_apply(self, &ctx, policy, &r, &in, state, state_age_ms, wall_ms, mono_ms,
                        &plan))
                goto done;
            if (r.action == DECIDER_RULES_KEEP_LOCAL && ctx.pick.explain)
                s_note(self, "rule %s/%s: kept local (%s)", out->rule->policy, out->rule->name,
                       r.reason ? r.reason : "");
        }
        if (!out->pool) {
            s_no_pool(out, policy, req->model);
            goto done;
        }
    }
    if (plan.to_provider && !plan.local_only) {
        if (s_provider(policy, req, out, plan.provider, plan.provider_reason) == IPL_ROUTE_OK ||
            !req->navoid || strcmp(plan.provider_reason, "spill") != 0)
            goto done;
        // a spill to a provider the gateway avoids (it just failed): the pool's own workers
        out->status = IPL_ROUTE_OK;
        out->detail[0] = '\0';
        plan.provider = NULL;
    }
    if (s_local(self, &ctx, policy, wall_ms, mono_ms) == IPL_ROUTE_OK) goto done;
    // No local worker can take it: the pool's overflow provider (or the rule's), unless kept
    // local; then an alias's failover models, in order, each with its own pool's workers.
    if (!plan.local_only && !plan.provider) {
        const ipl_pool_target_t *t = decider_targets_provider_target(policy, out->pool, "overflow");
        if (t) plan.provider = t->name, plan.provider_reason = "overflow";
    }
    if (!plan.local_only && plan.provider) {
        // an avoided provider (a retry) leaves the alias's failover models to try
        if (s_provider(policy, req, out, plan.provider, plan.provider_reason) == IPL_ROUTE_OK ||
            !req->navoid)
            goto done;
    }
    for (uint32_t i = 0; alias && i < alias->failover_len && out->status != IPL_ROUTE_OK; i++) {
        const ipl_pool_t *next = // a model or an alias, or a pool's name
            decider_targets_resolve_lora(policy, alias->failover[i], s_unit(&self->rng), NULL,
                                         &ctx.lora);
        if (!next) next = decider_targets_pool_by_name(policy, alias->failover[i]);
        if (!next || next == out->pool) continue;
        if (s_prepare(self, &ctx, policy, next, state, state_age_ms, wall_ms, mono_ms) != 0) break;
        if (s_local(self, &ctx, policy, wall_ms, mono_ms) == IPL_ROUTE_OK && ctx.pick.explain)
            s_note(self, "alias \"%s\" failed over to \"%s\"", alias->name, alias->failover[i]);
    }
    if (plan.local_only && out->status == IPL_ROUTE_NO_WORKER) {
        char why[sizeof out->detail];
        snprintf(why, sizeof why, "%s", out->detail);
        s_fail(out, IPL_ROUTE_REJECTED, "keep_local", "%s; %s",
               out->rule && out->rule->reason && *out->rule->reason
                   ? out->rule->reason
                   : "kept on local workers by policy",
               why);
        out->http_status = 503;
    }
done:
    if (self->policy_note[0]) s_detail(out, "%s", self->policy_note);
    s_count(self, ctx.fallback);
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

// ---- feedback, figures ------------------------------------------------------------------------

int decider_router_observe(decider_router_t *self, const char *set,
                           const decider_features_t *features, double ttft_s)
{
    return decider_predictor_observe(self->predictor, set, features, ttft_s);
}

int decider_router_remember(decider_router_t *self, uint64_t conn, uint64_t req_id,
                            const decider_decision_t *d, uint64_t mono_ms)
{
    if (d->status != IPL_ROUTE_OK || !d->worker || !d->set || !self->config.observe_window_ms)
        return IPL_E_INVAL;
    int rc = IPL_E_NOMEM;
    pthread_mutex_lock(&self->lock);
    if (!self->feedback)
        self->feedback =
            decider_feedback_new(self->config.observe_capacity, self->config.observe_window_ms);
    if (self->feedback)
        rc = decider_feedback_remember(self->feedback, conn, req_id, d->set, d->worker->name,
                                       &d->features, mono_ms);
    pthread_mutex_unlock(&self->lock);
    return rc;
}

// Why an observation matched with its decision teaches nothing, or -1 when it is a TTFT.
static int s_unlearnable(const ipl_observed_t *obs, const decider_feedback_entry_t *e)
{
    if (!obs->worker || strcmp(obs->worker, e->worker)) return DECIDER_OBSERVED_MISMATCH;
    if (obs->status < 200 || obs->status > 299 || !(obs->ttft_s > 0))
        return DECIDER_OBSERVED_FAILED;
    // A whole JSON body arrives after every token was generated: a TTFT only for one token.
    if (!obs->stream && obs->completion_tokens != 1) return DECIDER_OBSERVED_UNSTREAMED;
    return -1;
}

int decider_router_feedback(decider_router_t *self, uint64_t conn, const ipl_observed_t *obs,
                            uint64_t mono_ms)
{
    decider_feedback_entry_t e;
    pthread_mutex_lock(&self->lock);
    int rc = self->feedback ? decider_feedback_take(self->feedback, conn, obs->req_id, mono_ms, &e)
                            : IPL_E_NOTFOUND;
    pthread_mutex_unlock(&self->lock);
    int result = rc == IPL_E_NOTFOUND ? DECIDER_OBSERVED_UNKNOWN
                 : rc != IPL_OK       ? DECIDER_OBSERVED_EXPIRED
                                      : s_unlearnable(obs, &e);
    if (result < 0) {
        // e.set is interned by the feedback map: valid for the router's life, outside the lock.
        rc = decider_predictor_observe(self->predictor, e.set, &e.x, obs->ttft_s);
        result = rc == IPL_OK        ? DECIDER_OBSERVED_LEARNED
                 : rc == IPL_E_RANGE ? DECIDER_OBSERVED_OUTLIER
                                     : DECIDER_OBSERVED_INVALID;
    }
    pthread_mutex_lock(&self->lock);
    self->observed[result]++;
    pthread_mutex_unlock(&self->lock);
    return result;
}

void decider_router_observed(decider_router_t *self, uint64_t counts[DECIDER_OBSERVED_NRESULTS])
{
    pthread_mutex_lock(&self->lock);
    memcpy(counts, self->observed, sizeof self->observed);
    pthread_mutex_unlock(&self->lock);
}

decider_predictor_t *decider_router_predictor(decider_router_t *self)
{
    return self->predictor;
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

void decider_router_fallbacks(decider_router_t *self, uint64_t counts[DECIDER_FALLBACK_NREASONS])
{
    pthread_mutex_lock(&self->lock);
    memcpy(counts, self->fallbacks, sizeof self->fallbacks);
    pthread_mutex_unlock(&self->lock);
}

// ---- admin ------------------------------------------------------------------------------------

// Raises each counter by what its count gained since the last render (under self->lock).
static void s_export(ipl_metric_t *const *metrics, const uint64_t *counts, uint64_t *exported,
                     int n)
{
    for (int r = 0; r < n; r++) {
        if (metrics[r] && counts[r] > exported[r])
            ipl_metric_add(metrics[r], (double)(counts[r] - exported[r]));
        exported[r] = counts[r];
    }
}

static void s_collect(void *arg, ipl_metrics_t *metrics)
{
    (void)metrics;
    decider_router_t *self = arg;
    pthread_mutex_lock(&self->lock);
    s_export(self->m_fallbacks, self->fallbacks, self->exported, DECIDER_FALLBACK_NREASONS);
    s_export(self->m_observed, self->observed, self->observed_exported, DECIDER_OBSERVED_NRESULTS);
    pthread_mutex_unlock(&self->lock);
}

// The "observations" object of decider_router_model_json.
static void s_observations_json(decider_router_t *self, cJSON *root)
{
    cJSON *o = cJSON_AddObjectToObject(root, "observations");
    cJSON_AddStringToObject(o, "source",
                            "OBSERVED from the gateways: TTFT from starting the upstream request "
                            "to the first content byte, matched with the decision's features");
    cJSON_AddNumberToObject(o, "window_ms", (double)self->config.observe_window_ms);
    decider_feedback_stats_t st = {0};
    uint64_t counts[DECIDER_OBSERVED_NRESULTS];
    pthread_mutex_lock(&self->lock);
    size_t capacity = self->feedback ? decider_feedback_capacity(self->feedback) : 0;
    if (self->feedback) decider_feedback_stats(self->feedback, &st);
    memcpy(counts, self->observed, sizeof counts);
    pthread_mutex_unlock(&self->lock);
    cJSON_AddNumberToObject(o, "capacity", (double)capacity);
    cJSON_AddNumberToObject(o, "remembered", (double)st.remembered);
    cJSON_AddNumberToObject(o, "pending", (double)st.pending);
    cJSON_AddNumberToObject(o, "evicted", (double)st.evicted);
    cJSON_AddNumberToObject(o, "not_remembered", (double)st.dropped);
    cJSON *r = cJSON_AddObjectToObject(o, "results");
    for (int i = 0; i < DECIDER_OBSERVED_NRESULTS; i++)
        cJSON_AddNumberToObject(r, s_observed_names[i], (double)counts[i]);
}

cJSON *decider_router_model_json(decider_router_t *self)
{
    char *pjson = decider_predictor_json(self->predictor);
    cJSON *root = cJSON_CreateObject();
    cJSON *pred = pjson ? cJSON_Parse(pjson) : NULL;
    free(pjson);
    if (!root || !pred) {
        cJSON_Delete(root);
        cJSON_Delete(pred);
        return NULL;
    }
    const decider_router_config_t *c = &self->config;
    cJSON *r = cJSON_AddObjectToObject(root, "router");
    cJSON_AddStringToObject(r, "default_strategy", c->default_strategy);
    cJSON_AddStringToObject(r, "strategies", ipl_strategy_list());
    cJSON_AddNumberToObject(r, "load_gate", (double)c->load_gate);
    cJSON_AddNumberToObject(r, "max_queue", (double)c->max_queue);
    cJSON_AddNumberToObject(r, "temperature_s", c->temperature_s);
    cJSON_AddNumberToObject(r, "stale_ms", (double)c->stale_ms);
    cJSON_AddNumberToObject(r, "optimistic_ttl_ms", (double)c->optimistic_ttl_ms);
    cJSON_AddNumberToObject(r, "mean_request_tokens", decider_router_mean_request_tokens(self));
    cJSON_AddStringToObject(r, "worker_set_key",
                            "the worker's InferenceWorkerSet (its served model with a policy "
                            "service that predates worker_set)");
    s_observations_json(self, root);
    uint64_t counts[DECIDER_FALLBACK_NREASONS];
    decider_router_fallbacks(self, counts);
    cJSON *fb = cJSON_AddObjectToObject(root, "fallbacks");
    for (int i = 0; i < DECIDER_FALLBACK_NREASONS; i++)
        cJSON_AddNumberToObject(fb, s_fallback_names[i], (double)counts[i]);
    cJSON_AddItemToObject(root, "predictor", pred);
    return root;
}

void decider_router_register_metrics(decider_router_t *self, ipl_metrics_t *metrics)
{
    if (!metrics) return;
    char labels[64];
    pthread_mutex_lock(&self->lock);
    for (int r = 0; r < DECIDER_FALLBACK_NREASONS; r++) {
        snprintf(labels, sizeof labels, "reason=\"%s\"", s_fallback_names[r]);
        self->m_fallbacks[r] =
            ipl_metrics_counter(metrics, "inferplane_decider_fallbacks_total",
                                "Decisions that fell back (load-only cache terms, the load gate, "
                                "rejections), by reason.",
                                labels);
        self->exported[r] = 0;
    }
    for (int r = 0; r < DECIDER_OBSERVED_NRESULTS; r++) {
        snprintf(labels, sizeof labels, "result=\"%s\"", s_observed_names[r]);
        self->m_observed[r] =
            ipl_metrics_counter(metrics, "inferplane_decider_observations_total",
                                "OBSERVED messages (TTFTs the gateways measured), by what became "
                                "of them: learned by the predictor, or why not.",
                                labels);
        self->observed_exported[r] = 0;
    }
    pthread_mutex_unlock(&self->lock);
    ipl_metrics_on_collect(metrics, s_collect, self);
}
