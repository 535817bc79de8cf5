/*
 * decider_feedback — the decisions that await their observed TTFT: a bounded, time-limited map
 * (connection, req_id) → (worker set, worker, features), so that the gateway's OBSERVED can be
 * matched with what the predictor saw when it decided (decider_router_feedback).
 *
 *   ring of `capacity` slots, in decision order            index: chained hash over the slots
 *   ┌──────┬──────┬──────┬──────┬──────┐                   bucket[h(conn, req_id)]
 *   │ old  │ (taken)     │ new  │      │                        → slot → slot → ...
 *   └──────┴──────┴──────┴──────┴──────┘
 *      ▲ the next decision reuses the oldest slot
 *
 * Remembering takes the next ring slot, so the oldest entry is always the next to go and
 * nothing ever grows: a slot still awaiting its OBSERVED when it is reused is counted as
 * evicted (more decisions within the window than the capacity). Taking an entry frees it; one
 * older than `window_ms` is counted as expired and not returned. Memory is fixed at creation:
 * capacity × ~80 bytes plus the interned names.
 *
 * Names (worker sets, workers) are interned, at most DECIDER_FEEDBACK_MAX_NAMES distinct over
 * the object's life (a policy names at most IPL_INDEX_MAX_WORKERS workers and their sets):
 * beyond, decisions are not remembered (counted as dropped). Interned names stay valid until
 * the object is destroyed.
 *
 * `conn` is the caller's name for the connection the decision was asked on (the decider
 * hashes the ROUTER identity): req_ids are only unique per gateway, and only the connection
 * that asked reports on it.
 *
 * Not thread-safe: the router calls it under its mutex.
 */
#ifndef DECIDER_FEEDBACK_H
#define DECIDER_FEEDBACK_H

#include <stddef.h>
#include <stdint.h>

#include "decider_predictor.h"

#define DECIDER_FEEDBACK_MAX_NAMES 4096

typedef struct decider_feedback decider_feedback_t;

/* What a decision left for its observation. */
typedef struct {
    const char *set, *worker; /* interned (see above) */
    decider_features_t x;     /* the winner's features at decision time */
    uint64_t age_ms;          /* since the decision */
} decider_feedback_entry_t;

typedef struct {
    uint64_t remembered; /* decisions remembered */
    uint64_t taken;      /* returned by decider_feedback_take within the window */
    uint64_t unknown;    /* take: no such (conn, req_id) (never remembered, taken or evicted) */
    uint64_t expired;    /* take: found, but older than the window */
    uint64_t evicted;    /* slots reused while still within the window, never taken */
    uint64_t dropped;    /* not remembered: too many distinct names, empty names */
    uint64_t pending;    /* entries remembered and not taken now (some may have expired) */
} decider_feedback_stats_t;

/* `capacity` entries (rounded up to a power of two, at least 16), kept `window_ms`. NULL on
 * allocation failure. */
decider_feedback_t *decider_feedback_new(size_t capacity, uint64_t window_ms);
void decider_feedback_destroy(decider_feedback_t **self_p);

/* Remembers a decision. `set` and `worker` are copied (interned); `mono_ms` is the monotonic
 * clock. A second decision under the same (conn, req_id) replaces the first. Returns 0,
 * IPL_E_INVAL (empty name) or IPL_E_RANGE (too many distinct names); both counted as dropped. */
int decider_feedback_remember(decider_feedback_t *self, uint64_t conn, uint64_t req_id,
                              const char *set, const char *worker, const decider_features_t *x,
                              uint64_t mono_ms);

/* Takes (and forgets) the decision remembered under (conn, req_id). Returns 0 with *out
 * filled, IPL_E_NOTFOUND (unknown) or IPL_E_TIMEOUT (expired; forgotten too). */
int decider_feedback_take(decider_feedback_t *self, uint64_t conn, uint64_t req_id,
                          uint64_t mono_ms, decider_feedback_entry_t *out);

void decider_feedback_stats(const decider_feedback_t *self, decider_feedback_stats_t *out);
size_t decider_feedback_capacity(const decider_feedback_t *self);
uint64_t decider_feedback_window_ms(const decider_feedback_t *self);

#endif
