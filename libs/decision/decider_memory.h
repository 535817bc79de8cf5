/*
 * decider_memory — what the strategies remember between decisions: one per router, used
 * under the router's lock (not thread-safe by itself).
 *
 *   per pool (by name, decider_memory_pool)   round-robin position, the routing-history trees
 *                                             of the history-based baselines (decider_history)
 *   per worker (by ledger id)                 the prefill backlog this router routed there, the
 *                                             requests routed there lately, ttft's placements,
 *                                             and the pending prefixes
 *
 * Clocks: every `mono_ms` is the router's monotonic clock of the decision. The backlog, the
 * recent requests and the placements never go back in time: read at a time before the last
 * read or add, they are what they were then. A pending prefix counts from its add to its
 * expiry, whatever the order in which the clock is read.
 * Worker ids are the ledger's, in [0, IPL_INDEX_MAX_WORKERS): an out-of-range id reads 0 (or
 * `held`) and is ignored by the adds.
 */
#ifndef DECIDER_MEMORY_H
#define DECIDER_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decider_history.h"
#include "ipl_index.h"

typedef struct decider_memory decider_memory_t;

/* private: a worker's backlog record (below). Declared here only so that the strategies'
 * per-candidate reads (decider_pool_recent, decider_pool_backlog_requests) inline into the
 * decision's loop; read it through those functions. */
#define DECIDER_MEMORY_BACKLOG_FIFO 64 /* routings remembered one by one; more are merged */
typedef struct {
    double tokens;                            /* left at t_ms */
    double tokens_per_s;                      /* drain speed (the last decider_memory_backlog's) */
    double part[DECIDER_MEMORY_BACKLOG_FIFO]; /* the routings' tokens left, FIFO from `head` */
    uint32_t head, n;                         /* (`n` of them) */
    double recent; /* routings, decayed with DECIDER_MEMORY_RECENT_TAU_S, at t_ms */
    double placed; /* decider_memory_place's, decayed with DECIDER_MEMORY_PLACED_TAU_S, at t_ms */
    uint64_t rebalanced_ms; /* decider_memory_rebalance's last grant (0: never) */
    uint8_t seen, warm, newcomer; /* decider_memory_newcomer's */
    uint64_t t_ms;
} decider_backlog_t;

/* What a pool's strategies remember. */
typedef struct {
    uint64_t next;              /* round-robin position */
    decider_history_t *sglang;  /* created on first use (by the strategy), destroyed with it */
    decider_history_t *prefix;  /* created on first use (by the strategy), destroyed with it */
    uint32_t *scratch;          /* IPL_INDEX_MAX_WORKERS entries, shared by every pool */
    decider_memory_t *owner;    /* the router's memory this pool's belongs to */
    decider_backlog_t *backlog; /* private: the owner's records, IPL_INDEX_MAX_WORKERS */
} decider_pool_memory_t;

/* NULL on allocation failure. */
decider_memory_t *decider_memory_new(void);
/* Destroys the memory, every pool's history trees with it, and NULLs *self_p. */
void decider_memory_destroy(decider_memory_t **self_p);

/* The memory of pool `name` (created on first use; the least recently used pool is forgotten
 * beyond DECIDER_MEMORY_MAX_POOLS), or NULL on allocation failure. Borrowed: valid until the
 * pool is forgotten or the memory destroyed. */
decider_pool_memory_t *decider_memory_pool(decider_memory_t *self, const char *name);
#define DECIDER_MEMORY_MAX_POOLS 256

/* Prefill backlog of a worker: the uncached prompt tokens routed to it that it has not
 * prefilled yet, as a fluid queue — each routing adds its uncached tokens, and the backlog
 * drains at the worker's prefill speed since then:
 *
 *   backlog(t) = max(0, backlog(t0) − (t − t0) × tokens_per_s) + tokens routed at t
 *
 * It is what a load sample cannot show: a request that counts as "running" may still have
 * seconds of prefill ahead of it (vLLM runs an 8k-token prefill as one 2.8 s step on an L40S,
 * and everything that reaches the worker meanwhile waits for it).
 * decider_memory_backlog drains to `mono_ms` at `tokens_per_s` (remembered for the next add;
 * <= 0 keeps the remembered one) and returns the tokens left; decider_memory_backlog_add
 * drains at the remembered speed and adds `tokens` (and one recent request). */
double decider_memory_backlog(decider_memory_t *self, int worker, uint64_t mono_ms,
                              double tokens_per_s);
void decider_memory_backlog_add(decider_memory_t *self, int worker, double tokens,
                                uint64_t mono_ms);
/* decider_pool_backlog_requests (below): how many routings the backlog of `worker` still
 * holds — each one with tokens adds one, and they drain first come, first served (vLLM's
 * scheduler order); beyond 64 at once, more are merged into the newest.
 * decider_pool_recent (below): the requests decider_memory_backlog_add recorded for `worker`,
 * each decaying as exp(−age / DECIDER_MEMORY_RECENT_TAU_S): what the worker attracts lately
 * (the prefixes it holds). */
#define DECIDER_MEMORY_RECENT_TAU_S 60.0

/* ttft's placements on `worker` (prompts routed to it holding none of them: the prefixes it
 * was given to compute), each decaying as exp(−age / DECIDER_MEMORY_PLACED_TAU_S); and
 * recording one at `mono_ms`. */
#define DECIDER_MEMORY_PLACED_TAU_S 600.0
double decider_memory_placed(decider_memory_t *self, int worker, uint64_t mono_ms);
void decider_memory_place(decider_memory_t *self, int worker, uint64_t mono_ms);

/* ttft's rebalancing toward `worker` (decider_strategies.c): whether one may be made at
 * `mono_ms` — none was granted in the `interval_ms` before — and, if so, granting it (the
 * caller makes it). False for an out-of-range id. */
bool decider_memory_rebalance(decider_memory_t *self, int worker, uint64_t mono_ms,
                              uint64_t interval_ms);

/* ttft's rebalancing: records what a decision saw of `worker` — whether it is cold now (holds
 * under a share of its pool's mean blocks), empty (a much smaller share: nothing, for a restart)
 * and whether its pool is warm — and returns whether it is a newcomer: cold since it was found
 * empty after being warm (it lost its cache: a restart) or first seen empty in a warm pool (a
 * worker added). A worker that was always cold (a pool's few prefixes went elsewhere from the
 * start) is not one, nor one whose cache evictions shrank. False for an out-of-range id. */
bool decider_memory_newcomer(decider_memory_t *self, int worker, bool cold, bool empty,
                             bool pool_warm);

/* How often a prefix was asked for lately: the decisions recorded for `key` (a block hash
 * standing for the prefix) before this one, each decaying as exp(−age /
 * DECIDER_MEMORY_HEAT_TAU_S), and records this one. A table of DECIDER_MEMORY_HEAT_SLOTS
 * entries, one per slot: a key that collides with another replaces it (starts again from 0),
 * so a count is never more than the truth. */
#define DECIDER_MEMORY_HEAT_TAU_S 10.0
#define DECIDER_MEMORY_HEAT_SLOTS 4096
double decider_memory_heat(decider_memory_t *self, uint64_t key, uint64_t mono_ms);

/* private: drains `b` from b->t_ms to mono_ms (> b->t_ms), the decay factors shared by the
 * candidates of one decision. */
void decider_memory_drain(decider_memory_t *self, decider_backlog_t *b, uint64_t mono_ms);

/* private: the record of `worker` among `records` (the owner's IPL_INDEX_MAX_WORKERS), drained
 * to mono_ms; NULL when `worker` is out of range. Every read of a backlog goes through it. */
static inline decider_backlog_t *decider_memory_backlog_at(decider_memory_t *owner,
                                                           decider_backlog_t *records, int worker,
                                                           uint64_t mono_ms)
{
    if (worker < 0 || worker >= IPL_INDEX_MAX_WORKERS) return NULL;
    decider_backlog_t *b = &records[worker];
    if (mono_ms > b->t_ms) decider_memory_drain(owner, b, mono_ms);
    return b;
}

/* The reads of a worker's recent routings and backlog requests (above), through a pool's
 * memory; inline: the strategies read them for every candidate of a decision. */
static inline decider_backlog_t *decider_pool_backlog_at(decider_pool_memory_t *m, int worker,
                                                         uint64_t mono_ms)
{
    return decider_memory_backlog_at(m->owner, m->backlog, worker, mono_ms);
}

static inline double decider_pool_recent(decider_pool_memory_t *m, int worker, uint64_t mono_ms)
{
    decider_backlog_t *b = decider_pool_backlog_at(m, worker, mono_ms);
    return b ? b->recent : 0;
}

static inline double decider_pool_backlog_requests(decider_pool_memory_t *m, int worker,
                                                   uint64_t mono_ms)
{
    decider_backlog_t *b = decider_pool_backlog_at(m, worker, mono_ms);
    return b ? (double)b->n : 0;
}

/* Pending prefixes of a worker: the blocks of prompts routed to it that it had to compute,
 * from `start` (the blocks it was known to hold then) to the prompt's end (at most 1024
 * blocks), kept until `until_ms` — when the prefill should be done (the routing's predicted
 * TTFT) plus the time KV events are given to confirm it (the optimistic TTL). Until then
 * neither the index nor, once the worker's queue outlasts the optimistic TTL, the ledger shows
 * them: without this, a prefix routed to a busy worker is placed again elsewhere. Like the
 * ledger's assumptions they are never extended: a later routing of the same prompt finds them
 * pending (nothing new to compute) and adds nothing; and they count only while the worker
 * still holds the `start` blocks they build on. At most DECIDER_MEMORY_PENDING per worker (the
 * oldest is replaced); `hashes` is copied (chained hashes: equal blocks mean equal prefixes). */
#define DECIDER_MEMORY_PENDING 16
void decider_memory_pending_add(decider_memory_t *self, int worker, const uint64_t *hashes,
                                size_t start, size_t n, uint64_t until_ms);
/* The leading blocks of `hashes` worker holds counting its pending prefixes, given that it
 * holds `held` of them otherwise (index, ledger): max(held, start + the blocks an unexpired
 * entry shares with the prompt from its start, for entries with start <= held). */
size_t decider_memory_pending_match(decider_memory_t *self, int worker, const uint64_t *hashes,
                                    size_t n, size_t held, uint64_t mono_ms);

#endif
