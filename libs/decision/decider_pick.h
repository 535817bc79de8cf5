/*
 * decider_pick — the contract between decider_router and the strategies of
 * decider_strategies.c (internal to the decider; the public face is decider_router.h).
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
    decider_memory_t *owner;   /* the router's memory this pool's belongs to */
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

/* Whether this decision writes explanations (candidates' notes, the detail): not when the
 * router (config.terse) or the request (req->terse) is terse. */
bool decider_pick_explains(const decider_pick_t *ctx);

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

/* Prefill backlog of a worker (by ledger id, < IPL_INDEX_MAX_WORKERS): the uncached prompt
 * tokens routed to it that it has not prefilled yet, as a fluid queue — each routing adds its
 * uncached tokens, and the backlog drains at the worker's prefill speed since then:
 *
 *   backlog(t) = max(0, backlog(t0) − (t − t0) × tokens_per_s) + tokens routed at t
 *
 * It is what a load sample cannot show: a request that counts as "running" may still have
 * seconds of prefill ahead of it (vLLM runs an 8k-token prefill as one 2.8 s step on an L40S,
 * and everything that reaches the worker meanwhile waits for it).
 * decider_memory_backlog drains to `mono_ms` at `tokens_per_s` (remembered for the next add)
 * and returns the tokens left; decider_memory_backlog_add drains at the remembered speed and
 * adds `tokens`. Out-of-range ids read 0 and are ignored. */
double decider_memory_backlog(decider_memory_t *self, int worker, uint64_t mono_ms,
                              double tokens_per_s);
void decider_memory_backlog_add(decider_memory_t *self, int worker, double tokens,
                                uint64_t mono_ms);
/* How many routings the backlog of `worker` still holds: each one with tokens adds one, and
 * they drain first come, first served (vLLM's scheduler order). */
double decider_memory_backlog_requests(decider_memory_t *self, int worker, uint64_t mono_ms);

/* Pending prefixes of a worker (ledger id): the blocks of prompts routed to it that it had to
 * compute, from `start` (the blocks it was known to hold then) to the prompt's end, kept
 * until `until_ms` — when the prefill should be done (the routing's predicted TTFT) plus the
 * time KV events are given to confirm it (the optimistic TTL). Until then neither the index
 * nor, once the worker's queue outlasts the optimistic TTL, the ledger shows them: without
 * this, a prefix routed to a busy worker is placed again elsewhere. Like the ledger's
 * assumptions they are never extended: a later routing of the same prompt finds them pending
 * (nothing new to compute) and adds nothing; and they count only while the worker still
 * holds the `start` blocks they build on. At most DECIDER_MEMORY_PENDING per worker (the
 * oldest is replaced). */
#define DECIDER_MEMORY_PENDING 16
void decider_memory_pending_add(decider_memory_t *self, int worker, const uint64_t *hashes,
                                size_t start, size_t n, uint64_t until_ms);
/* The leading blocks of `hashes` worker holds counting its pending prefixes, given that it
 * holds `held` of them otherwise (index, ledger): max(held, start + the blocks an unexpired
 * entry shares with the prompt from its start, for entries with start <= held). */
size_t decider_memory_pending_match(decider_memory_t *self, int worker, const uint64_t *hashes,
                                    size_t n, size_t held, uint64_t mono_ms);

/* The requests decider_memory_backlog_add recorded for `worker`, each decaying as
 * exp(−age / 60 s): what the worker attracts lately (the prefixes it holds). */
double decider_memory_recent(decider_memory_t *self, int worker, uint64_t mono_ms);

#endif
