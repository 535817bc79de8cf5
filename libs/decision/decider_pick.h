/*
 * decider_pick — the contract between decider_router and the strategies of
 * decider_strategies.c (internal to the decision core; the public face is decider_router.h).
 *
 * The router fills a decision's candidates (figures, features, predicted TTFT, whether each is
 * healthy and whether its cache term can be trusted) and hands a decider_pick_t to the
 * strategy's pick function, which must:
 *   - set c.eligible on the candidates it could have chosen,
 *   - choose one healthy candidate with decider_pick_win() (reason + detail),
 *   - optionally write its own figure into each candidate's `score` and note;
 *   - may raise a healthy candidate's cached tokens (with x.uncached_tokens, terms and the
 *     prediction to match) by what only the strategy knows (ttft: pending prefixes).
 * The router then commits the routing (ledger, in-flight tokens) and copies the winner out.
 * A pick function is called only when at least one candidate is healthy.
 *
 * Memory between decisions (round-robin position, the history trees of the history-based
 * baselines, the backlog and pending prefixes) lives in a decider_memory_t, one per router,
 * keyed by pool name (decider_memory.h).
 *
 * Not thread-safe: the router calls a pick function under its lock (the generator and the
 * memory are the router's).
 */
#ifndef DECIDER_PICK_H
#define DECIDER_PICK_H

#include <stdbool.h>
#include <stdint.h>

#include "decider_decision.h"
#include "decider_memory.h"

typedef struct {
    const decider_request_t *req;
    decider_decision_t *out;
    uint64_t prompt_tokens;        /* the request's, or nhashes × block_size */
    uint64_t block_size;           /* the pool's */
    uint64_t *rng;                 /* the router's generator (xorshift64*) */
    decider_pool_memory_t *memory; /* the pool's; NULL when it could not be allocated */
    uint64_t mono_ms;
    /* The router's settings a strategy reads (decider_router_config_t). */
    uint64_t load_gate;         /* ttft: queue excess over the least loaded that may exclude */
    double temperature_s;       /* ttft: softmax sampling over −cost/T; 0: argmin */
    uint64_t optimistic_ttl_ms; /* ttft: pending prefixes last this beyond the prefill (0: off) */
    bool explain;               /* write explanations (decider_pick_explains) */
} decider_pick_t;

typedef void(decider_pick_fn)(decider_pick_t *ctx);

/* A uniform integer in [0, n) from the router's generator (0 when n is 0, and the generator
 * does not advance). */
uint32_t decider_pick_random(decider_pick_t *ctx, uint32_t n);
/* A uniform double in [0, 1). */
double decider_pick_uniform(decider_pick_t *ctx);

/* Whether this decision writes explanations (candidates' notes, the detail): not when the
 * router is terse (decider_router_offline_t.terse) or the request is (req->terse). */
bool decider_pick_explains(const decider_pick_t *ctx);

/* Declares candidate `winner` the choice with `reason` (static) and a printf detail (left
 * empty when the decision does not explain): marks it eligible, status IPL_ROUTE_OK. */
void decider_pick_win(decider_pick_t *ctx, int winner, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
