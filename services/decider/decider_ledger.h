/*
 * decider_ledger — what this decider routed recently, for the two effects the aggregator's
 * state cannot show yet:
 *
 *   in flight   requests routed to a worker after its last load sample (the sample cannot
 *               count them yet): inflight(w, sample_ts)
 *   optimistic  after routing a prompt to W, W is assumed to hold the prompt's blocks for a
 *               TTL, so a burst of identical prefixes does not scatter before W's KV events
 *               arrive. An assumption is never extended by later routings: when the KV events
 *               do not confirm it (W evicted, or never cached), it expires and W stops
 *               attracting the prefix — decisions come from KV events, not request history.
 *
 * Optimistic blocks live in GENERATIONS prefix indexes (ipl_index) rotated every TTL/2: new
 * blocks go into the newest, the oldest is dropped, so an assumption lasts between TTL and
 * 1.5 × TTL with no per-entry timers.
 *
 *     gen[0] newest ◄── routed blocks          match = max over generations of the prefix
 *     gen[1]                                   each worker holds
 *     gen[2] oldest ──► dropped every TTL/2
 *
 * Worker ids are the ledger's own (decider_ledger_worker), stable for its lifetime.
 * Not thread-safe (the router calls it under its mutex).
 */
#ifndef DECIDER_LEDGER_H
#define DECIDER_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#define DECIDER_LEDGER_GENERATIONS         3
#define DECIDER_LEDGER_RING                256   /* routings remembered per worker */
#define DECIDER_LEDGER_INFLIGHT_HORIZON_MS 10000 /* routings older than this never count */

typedef struct decider_ledger decider_ledger_t;

/* `ttl_ms` 0 disables optimistic blocks. */
decider_ledger_t *decider_ledger_new(uint64_t ttl_ms);
void decider_ledger_destroy(decider_ledger_t **self_p);

/* The ledger id of worker `name` (created on first use), or -1 beyond IPL_INDEX_MAX_WORKERS. */
int decider_ledger_worker(decider_ledger_t *self, const char *name);

/* Records that a prompt with these block hashes was routed to `worker`. `wall_ms` is the
 * wall clock (compared with load samples' ts_ms), `mono_ms` the monotonic clock. */
void decider_ledger_routed(decider_ledger_t *self, int worker, const uint64_t *hashes, size_t n,
                           uint64_t wall_ms, uint64_t mono_ms);

/* Requests routed to `worker` after `since_wall_ms` and within the horizon. */
uint32_t decider_ledger_inflight(const decider_ledger_t *self, int worker, uint64_t since_wall_ms,
                                 uint64_t wall_ms);

/* Like ipl_index_match over the optimistic blocks: prefix[w] (ledger ids, capacity `max`)
 * gets how many leading blocks w is assumed to hold; returns the largest. */
size_t decider_ledger_match(decider_ledger_t *self, const uint64_t *hashes, size_t n,
                            uint32_t *prefix, size_t max, uint64_t mono_ms);

/* Optimistic block memberships currently held (all generations). */
size_t decider_ledger_memberships(const decider_ledger_t *self);

#endif
