/*
 * decider_router — the choice: for one request, every candidate worker of the model's pool
 * with its figures, and the winner under the pool's strategy.
 *
 * Inputs: the compiled policy (which pool serves the model, its workers, its strategy), the
 * state replica (prefix index, last load samples), and the router's own ledger of what it
 * routed (in-flight requests, optimistic blocks; decider_ledger).
 *
 * Per candidate W (strategy "ttft", the default):
 *
 *   cached(W)    = min(prompt_tokens, block_size × max(index prefix, optimistic prefix))
 *                  — 0 when W's cache state cannot be trusted (kv_state DEGRADED, health not
 *                  UP, state stale, block size differs from the request's): load only
 *   queue(W)     = waiting + inflight      (inflight: routed here after W's last sample)
 *   ttft(W)      = queue × mean_request_s + running × running_cost_s
 *                + (prompt_tokens − cached) / prefill_tokens_per_s
 *   mean_request_s = mean uncached tokens of the requests routed so far (EWMA)
 *                    / prefill_tokens_per_s
 *
 *   load gate: W is not eligible when queue(W) > min queue + load_gate, so that a hot prefix
 *   never piles every request onto one worker. The minimum ttft among eligible workers wins;
 *   exact ties go to the shorter queue, then at random.
 *
 * Baselines: "least-loaded" (shortest queue, then fewest running, then random) and "random"
 * (uniform among eligible workers). New strategies are one entry in s_strategies (.c).
 *
 * Not eligible ever: workers with no load sample yet, and health DOWN.
 *
 * Reasons (decision.reason): cache_hit, least_loaded, load_gate, load_only, random, and for
 * failures no_pool (404), no_worker (503), not_ready (503), bad_request (400).
 *
 * Thread-safe: decisions are serialised by an internal mutex (the ledger and the EWMA are
 * shared); the caller holds the state's read lock around a decision.
 */
#ifndef DECIDER_ROUTER_H
#define DECIDER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decider_state.h"
#include "ipl_proto.h"

typedef struct {
    const char *default_strategy;  /* when neither the request nor the pool names one */
    double prefill_tokens_per_s;   /* prefill speed of a worker */
    double running_cost_s;         /* added queue wait per running request */
    double initial_request_tokens; /* mean uncached tokens per request before any was seen */
    uint64_t load_gate;            /* queue excess over the least-loaded that disqualifies */
    uint64_t optimistic_ttl_ms;    /* optimistic blocks last this long (0: off) */
    uint64_t stale_ms;             /* state silent longer than this: cache terms ignored */
    uint64_t seed;                 /* tie-breaks and "random" */
} decider_router_config_t;

/* Fills the defaults: ttft, 3000 tokens/s, 5 ms, 256 tokens, gate 4, TTL 2000, stale 5000. */
void decider_router_config_defaults(decider_router_config_t *config);

/* True when `name` is a strategy this router implements. */
bool decider_router_strategy_known(const char *name);
/* Comma-separated strategy names ("ttft, least-loaded, random"), static. */
const char *decider_router_strategies(void);

typedef struct {
    const char *model;
    const char *tenant;     /* may be NULL */
    const char *strategy;   /* NULL or "": the pool's */
    uint64_t prompt_tokens; /* 0: nhashes × block_size */
    uint64_t block_size;    /* that the hashes were computed with; 0: the pool's */
    const uint64_t *hashes;
    size_t nhashes;
} decider_request_t;

/* One candidate: the wire figures plus room for its note. */
typedef struct {
    ipl_candidate_t c; /* c.worker and c.url borrowed from the policy; c.note → note */
    char note[160];
    uint64_t queue;  /* waiting + inflight */
    bool cache_used; /* cache term trusted */
    bool healthy;    /* eligible before the load gate */
    int state_id, ledger_id;
} decider_candidate_t;

/* A decision. Strings (pool, worker, url, model) are borrowed from the policy snapshot used
 * to decide: keep it referenced while the decision is used. Reusable across decisions. */
typedef struct {
    int status;         /* IPL_ROUTE_* */
    const char *reason; /* static */
    char detail[512];
    const char *strategy;
    const ipl_pool_t *pool;     /* NULL unless a pool was found */
    const ipl_worker_t *worker; /* the winner, or NULL */
    int winner;                 /* index in cands, or -1 */
    double predicted_ttft_s;
    uint64_t cached_tokens;
    uint64_t state_seq;
    decider_candidate_t *cands;
    uint32_t ncands, cap;
} decider_decision_t;

void decider_decision_init(decider_decision_t *d);
void decider_decision_clear(decider_decision_t *d); /* frees the candidate array */

typedef struct decider_router decider_router_t;

/* The config is copied (strings must be literals or outlive the router). */
decider_router_t *decider_router_new(const decider_router_config_t *config);
void decider_router_destroy(decider_router_t **self_p);

/* Decides. `policy` and `state` may be NULL (→ not_ready); `state_age_ms` is the time since
 * the state last heard from the aggregator. Fills `out` (any previous content replaced) and
 * returns out->status. A routed decision is recorded in the ledger. */
int decider_router_route(decider_router_t *self, const ipl_policy_t *policy,
                         const decider_state_t *state, uint64_t state_age_ms,
                         const decider_request_t *req, decider_decision_t *out);
/* The same at given clocks (tests): `wall_ms` compares with load samples' ts_ms. */
int decider_router_route_at(decider_router_t *self, const ipl_policy_t *policy,
                            const decider_state_t *state, uint64_t state_age_ms,
                            const decider_request_t *req, decider_decision_t *out, uint64_t wall_ms,
                            uint64_t mono_ms);

/* The mean uncached tokens per request the predictor uses now. */
double decider_router_mean_request_tokens(decider_router_t *self);
size_t decider_router_optimistic_blocks(decider_router_t *self);

#endif
