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
 *
 * Peers: what the other decider replicas routed (ROUTED messages) counts exactly like a local
 * routing — in flight until a load sample newer than it, optimistic blocks for the same TTL —
 * so two replicas never both think a worker is idle. Peer routings arrive on another thread
 * than the decisions: they are posted to the ledger's inbox (thread-safe) and applied, at their
 * own times, by the next decider_ledger_worker or decider_ledger_match on the owner's thread.
 *
 *   peer SUB (loop thread) ──decider_peers──decider_ledger_post──► this ledger's inbox
 *   decision (router, under its mutex) ──decider_ledger_worker / _match──► inbox applied first
 *
 * Ownership: the decider server creates the one ledger and lends it to both its router
 * (decider_router_config_t.ledger) and its peers (decider_peers_config_t.ledger); a router
 * given none keeps a private one (tests, clustersim).
 *
 * Not thread-safe, except the functions marked "any thread" (the router calls the others
 * under its mutex).
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

/* ---- in-flight tokens -------------------------------------------------------------------- */

/* decider_ledger_routed that also remembers the prompt tokens the worker must prefill (not
 * cached there), for decider_ledger_inflight_tokens. decider_ledger_routed records 0. */
void decider_ledger_record(decider_ledger_t *self, int worker, const uint64_t *hashes, size_t n,
                           uint64_t uncached_tokens, uint64_t wall_ms, uint64_t mono_ms);

/* decider_ledger_record after a decider_ledger_match of the same prompt (one decision): it
 * reuses that match instead of matching again, when `hashes` and `n` are the ones matched (the
 * same memory, unchanged since), `mono_ms` is the same, and nothing changed the optimistic
 * blocks in between (a recording, a peer routing applied, a rotation); otherwise it matches as
 * decider_ledger_record does. The result is decider_ledger_record's either way. */
void decider_ledger_record_matched(decider_ledger_t *self, int worker, const uint64_t *hashes,
                                   size_t n, uint64_t uncached_tokens, uint64_t wall_ms,
                                   uint64_t mono_ms);

/* The uncached tokens of the routings decider_ledger_inflight counts. */
uint64_t decider_ledger_inflight_tokens(const decider_ledger_t *self, int worker,
                                        uint64_t since_wall_ms, uint64_t wall_ms);

/* Both in one pass over the ring: returns decider_ledger_inflight, *tokens gets
 * decider_ledger_inflight_tokens. Not const: each worker remembers its last answer (until a
 * routing to it is recorded), since decisions ask most workers the same question again. */
uint32_t decider_ledger_inflight_sum(decider_ledger_t *self, int worker, uint64_t since_wall_ms,
                                     uint64_t wall_ms, uint64_t *tokens);

/* ---- peers ------------------------------------------------------------------------------- */

#define DECIDER_LEDGER_INBOX_MAX        65536      /* peer routings queued per ledger */
#define DECIDER_LEDGER_INBOX_MAX_HASHES (1u << 21) /* block hashes queued per ledger */

/* One routing made by another decider replica. Borrowed by the calls below (copied). */
typedef struct {
    const char *worker;
    const uint64_t *hashes; /* the prompt's leading block hashes (may be fewer than all) */
    size_t nhashes;
    uint64_t uncached_tokens;
    uint64_t wall_ms; /* when the peer routed it (its wall clock) */
} decider_ledger_peer_t;

/* Any thread: queues a peer routing for this ledger. `wall_ms` and `mono_ms` are this
 * process's clocks now: the routing's time is clamped to wall_ms (a peer clock ahead of ours
 * must not keep it in flight longer), and its optimistic blocks age from mono_ms. When the
 * inbox is full the oldest queued routings are dropped (counted). Returns 0, IPL_E_INVAL (no
 * worker name) or IPL_E_NOMEM. */
int decider_ledger_post(decider_ledger_t *self, const decider_ledger_peer_t *routing,
                        uint64_t wall_ms, uint64_t mono_ms);

/* Owner thread: applies the queued peer routings now (decider_ledger_worker and
 * decider_ledger_match do it first anyway). */
void decider_ledger_apply_peers(decider_ledger_t *self);

typedef struct {
    uint64_t posted;  /* peer routings queued */
    uint64_t applied; /* applied to the ledger */
    uint64_t dropped; /* dropped from a full inbox, or beyond IPL_INDEX_MAX_WORKERS workers */
    uint64_t pending; /* queued now */
} decider_ledger_peer_stats_t;

/* Any thread. */
void decider_ledger_peer_stats(decider_ledger_t *self, decider_ledger_peer_stats_t *out);

#endif
