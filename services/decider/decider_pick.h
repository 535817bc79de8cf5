/*
 * decider_pick — the contract between decider_router and the strategies of
 * decider_strategies.c (internal to the decider; the public face is decider_router.h).
 *
 * The router fills a decision's candidates (figures, features, predicted TTFT, whether each is
 * healthy and whether its cache term can be trusted) and hands a decider_pick_t to the
 * strategy's pick function, which must:
 *   - set c.eligible on the candidates it could have chosen,
 *   - choose one healthy candidate with decider_pick_win() (reason + detail),
 *   - optionally write its own figure into each candidate's `score` and note.
 * The router then commits the routing (ledger, in-flight tokens) and copies the winner out.
 * A pick function is called only when at least one candidate is healthy.
 *
 * Memory between decisions (round-robin position, the history trees of the history-based
 * baselines) lives in a decider_memory_t, one per router, keyed by pool name.
 */
#ifndef DECIDER_PICK_H
#define DECIDER_PICK_H

#include <stdarg.h>
#include <stdint.h>

#include "decider_history.h"
#include "decider_router.h"

typedef struct decider_memory decider_memory_t;

/* What a pool's strategies remember. */
typedef struct {
    uint64_t next;             /* round-robin position */
    decider_history_t *sglang; /* created on first use */
    decider_history_t *prefix; /* created on first use */
    uint32_t *scratch;         /* IPL_INDEX_MAX_WORKERS entries, shared by every pool */
} decider_pool_memory_t;

typedef struct {
    const decider_router_config_t *config;
    const decider_request_t *req;
    decider_decision_t *out;
    uint64_t prompt_tokens;        /* the request's, or nhashes × block_size */
    uint64_t block_size;           /* the pool's */
    uint64_t *rng;                 /* the router's generator (xorshift64*) */
    decider_pool_memory_t *memory; /* the pool's; NULL when it could not be allocated */
    uint64_t mono_ms;
} decider_pick_t;

typedef void(decider_pick_fn)(decider_pick_t *ctx);

/* The pick function of strategy `name` and its canonical (static) name, or NULL. */
decider_pick_fn *decider_strategy_pick(const char *name, const char **canonical);

/* A uniform integer in [0, n) from the router's generator (0 when n is 0). */
uint32_t decider_pick_random(decider_pick_t *ctx, uint32_t n);
/* A uniform double in [0, 1). */
double decider_pick_uniform(decider_pick_t *ctx);

/* Declares candidate `winner` the choice with `reason` (static) and a printf detail. */
void decider_pick_win(decider_pick_t *ctx, int winner, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Appends "; "-separated text to a candidate's note (truncated at its capacity). */
void decider_candidate_note(decider_candidate_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Per-router strategy memory. */
decider_memory_t *decider_memory_new(void);
void decider_memory_destroy(decider_memory_t **self_p);
/* The memory of pool `name` (created on first use; the least recently used pool is forgotten
 * beyond DECIDER_MEMORY_MAX_POOLS), or NULL on allocation failure. */
decider_pool_memory_t *decider_memory_pool(decider_memory_t *self, const char *name);
#define DECIDER_MEMORY_MAX_POOLS 256

#endif
