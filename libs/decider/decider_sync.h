/*
 * decider_sync — keeps a decider_state replica in step with the aggregator, by the ZeroMQ
 * Guide's Clone pattern. Pure protocol logic: the caller owns the sockets and feeds decoded
 * messages in; the return values say when to (re)request a snapshot.
 *
 *   SUB deltas ──► decider_sync_delta ──► LIVE: seq == last + 1 → apply to the live replica
 *                                     │         seq >  last + 1 → gap ─────────────┐
 *                                     │         seq <= last     → regressed ───────┤ RESYNC
 *                                     └─► SYNCING: buffer (bounded) ───────────────┤
 *   DEALER snapshot ──► decider_sync_snapshot ──► staging replica                   │
 *        KV_EVENT/LOAD... SNAPSHOT_END{seq} ──► staging + buffered deltas with       │
 *                                               seq > snapshot seq (contiguous)       │
 *                                               ──► swapped in as the live replica    │
 *   caller: on RESYNC, fresh DEALER + SNAPSHOT_REQ + decider_sync_requested ◄─────────┘
 *
 * Subscribe first, then request: a delta published while the snapshot is being built is in
 * the buffer, so nothing falls between the two. While a resync runs, the old replica keeps
 * serving reads (stale but consistent); the swap takes the write lock for one pointer move.
 *
 * Several aggregators (active-active, fed by the same collectors): the decider follows one,
 * source i of n (decider_sync_source). When it fails — silent for `silence_ms` although the
 * replica knows workers (an aggregator with workers publishes a LOAD heartbeat per worker
 * every second), disconnected, or a snapshot that times out — DECIDER_SYNC_SWITCH says to
 * follow the next one (i + 1 mod n): fresh SUB and DEALER, then a snapshot as for a resync.
 *
 * Incarnation: every message from an aggregator carries its incarnation (random per process
 * start). A delta whose incarnation differs from the snapshot's comes from a restarted
 * aggregator, whose seq may happen to continue ours: resync.
 *
 * Threads: every function except the read lock pair is called from one thread (the
 * decider's loop). Readers (route decisions on any thread) hold decider_sync_rdlock while
 * they use decider_sync_state().
 */
#ifndef DECIDER_SYNC_H
#define DECIDER_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decider_state.h"
#include "ipl_proto.h"

/* DECIDER_SYNC_SWITCH: follow aggregator decider_sync_source() with a fresh SUB and DEALER,
 * then request a snapshot and call decider_sync_requested. */
#define DECIDER_SYNC_OK     0
#define DECIDER_SYNC_RESYNC 1 /* request a snapshot (fresh DEALER), then decider_sync_requested */
#define DECIDER_SYNC_SWITCH 2

/* Why a resync was needed; indexes decider_sync_stats_t.resyncs. */
typedef enum {
    DECIDER_RESYNC_START,        /* the first snapshot (not counted as a resync) */
    DECIDER_RESYNC_GAP,          /* a delta's seq skipped ahead */
    DECIDER_RESYNC_REGRESSED,    /* a delta's seq went back (the aggregator restarted) */
    DECIDER_RESYNC_OVERFLOW,     /* too many deltas buffered while the snapshot was built */
    DECIDER_RESYNC_TIMEOUT,      /* the snapshot stopped arriving */
    DECIDER_RESYNC_RECONNECT,    /* the SUB (re)connected: deltas may have been lost, or the
                                    aggregator restarted (its seq may continue by coincidence) */
    DECIDER_RESYNC_INCARNATION,  /* a delta from another aggregator incarnation (restart) */
    DECIDER_RESYNC_SILENT,       /* no delta for silence_ms: switched aggregator */
    DECIDER_RESYNC_DISCONNECTED, /* the aggregator followed went away: switched aggregator */
    DECIDER_RESYNC_NREASONS
} decider_resync_reason_t;

typedef struct {
    bool synced;              /* a snapshot was applied: the replica exists */
    bool syncing;             /* a snapshot is being received */
    uint64_t seq;             /* of the live replica */
    uint64_t last_delta_ms;   /* monotonic time of the last delta or snapshot message (0: none) */
    uint64_t last_applied_ms; /* monotonic time the live replica was last brought up to date
                                 (a delta applied, a snapshot swapped in; 0: never) */
    uint64_t incarnation;     /* of the aggregator the live replica comes from */
    uint64_t source;          /* index of the aggregator followed (0 .. nsources - 1) */
    uint64_t switches;        /* times another aggregator was followed */
    uint64_t snapshots;       /* applied */
    uint64_t deltas;          /* applied */
    uint64_t buffered;        /* now */
    uint64_t apply_errors;    /* messages the replica rejected (e.g. too many workers) */
    uint64_t stray;           /* snapshot messages with no snapshot in progress */
    uint64_t resyncs[DECIDER_RESYNC_NREASONS];
} decider_sync_stats_t;

typedef struct decider_sync decider_sync_t;

/* `max_buffered`: deltas kept while a snapshot is built (beyond: resync). `timeout_ms`: a
 * snapshot with no message for this long is abandoned. */
decider_sync_t *decider_sync_new(size_t max_buffered, uint64_t timeout_ms);
void decider_sync_destroy(decider_sync_t **self_p);

/* Call after sending SNAPSHOT_REQ: starts a fresh staging replica; keeps buffered deltas. */
void decider_sync_requested(decider_sync_t *self, uint64_t now_ms);

/* A KV_EVENT or LOAD from the SUB socket. Takes the message: *msg is cleared on return.
 * Returns DECIDER_SYNC_OK or DECIDER_SYNC_RESYNC. */
int decider_sync_delta(decider_sync_t *self, ipl_msg_t *msg, uint64_t now_ms);

/* A KV_EVENT, LOAD or SNAPSHOT_END from the snapshot DEALER. Takes the message. Returns
 * DECIDER_SYNC_OK or DECIDER_SYNC_RESYNC (the buffered deltas do not continue the snapshot). */
int decider_sync_snapshot(decider_sync_t *self, ipl_msg_t *msg, uint64_t now_ms);

/* Forces a resync (e.g. DECIDER_RESYNC_RECONNECT); returns DECIDER_SYNC_RESYNC. Buffered
 * deltas are dropped: they may come from before the event. */
int decider_sync_reset(decider_sync_t *self, decider_resync_reason_t reason);

/* Periodic: DECIDER_SYNC_RESYNC when a first snapshot must be requested or the one in
 * progress timed out (with several sources: DECIDER_SYNC_SWITCH to the next one instead);
 * DECIDER_SYNC_SWITCH when the live stream went silent (see decider_sync_set_sources). */
int decider_sync_tick(decider_sync_t *self, uint64_t now_ms);

/* Follows one of `nsources` aggregators (default 1), starting with source 0. `silence_ms`
 * (0: never) is how long a synced replica that knows at least one worker may go without a
 * delta before its aggregator counts as failed. */
void decider_sync_set_sources(decider_sync_t *self, size_t nsources, uint64_t silence_ms);
/* The aggregator followed now (0 .. nsources - 1). */
size_t decider_sync_source(const decider_sync_t *self);

/* The aggregator followed failed for `reason` (e.g. DECIDER_RESYNC_DISCONNECTED): moves to
 * the next source (the same one when there is only one), drops the buffered deltas and
 * returns DECIDER_SYNC_SWITCH. */
int decider_sync_fail(decider_sync_t *self, decider_resync_reason_t reason);

/* The reason of the last DECIDER_SYNC_RESYNC returned, for logs. */
const char *decider_sync_reason_name(decider_resync_reason_t reason);
decider_resync_reason_t decider_sync_last_reason(const decider_sync_t *self);

/* Readers: the live replica (NULL before the first snapshot) under the read lock. */
void decider_sync_rdlock(decider_sync_t *self);
const decider_state_t *decider_sync_state(const decider_sync_t *self);
void decider_sync_unlock(decider_sync_t *self);

/* A copy of the counters (any thread). */
void decider_sync_stats(decider_sync_t *self, decider_sync_stats_t *out);

#endif
