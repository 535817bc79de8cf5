/*
 * decider_follow — the decider's following of the cluster state: the sockets
 * and events around decider_sync (the ZeroMQ Guide's Clone pattern,
 * https://zguide.zeromq.org/docs/chapter5/), which keeps the replica.
 *
 *   aggregator i PUB ──► SUB (state_sub[i]) ─────────► decider_sync_delta ──┐
 *        its connect/disconnect events ──► PAIR monitor ─► reconnect: resync │
 *   aggregator i ROUTER ◄─ DEALER (state_snapshot[i]) ◄─ SNAPSHOT_REQ ◄──────┤
 * RESYNC KV_EVENT/LOAD... SNAPSHOT_END ──► decider_sync_snapshot ────────────┤
 *   decider_follow_tick: first snapshot, timeouts, silence ──────────────────┘
 * SWITCH: follow aggregator i + 1 mod n
 *
 * Source i pairs state_sub[i] with state_snapshot[i]: the follower listens to
 * one aggregator and moves to the next when it goes silent (silence_ms),
 * disconnects, or does not answer a snapshot request (decider_sync.h says
 * when).
 *
 * The snapshot DEALER is recreated for every snapshot request, so replies to an
 * abandoned request can never mix into the next snapshot, and the state SUB is
 * recreated whenever another aggregator (or the same one, after silence) is
 * followed, so nothing queued from the old one mixes into the new stream.
 * Snapshot requests wait until the SUB is connected (plus 100 ms for its
 * subscription to reach the aggregator): subscribe first, then request.
 *
 * A state frame that does not decode, is multipart, or has a type its socket
 * does not carry is dropped and reported to `on_drop` (socket "state_sub" or
 * "state_snapshot").
 *
 * Threads: one thread (the decider's loop) calls everything but
 * decider_follow_sync's read lock pair (decider_sync.h) and
 * decider_follow_lag_ms; it owns the three sockets.
 */
#ifndef DECIDER_FOLLOW_H
#define DECIDER_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decider_sync.h"

/* The follower's sockets, for the loop's poll (decider_follow_socket). */
enum { DECIDER_FOLLOW_SUB, DECIDER_FOLLOW_MONITOR, DECIDER_FOLLOW_DEALER, DECIDER_FOLLOW_NSOCKETS };

typedef void(decider_follow_drop_fn)(void *arg, const char *socket, const char *reason);

typedef struct {
    const char *const *subs;         /* the aggregators' PUB endpoints (borrowed: must outlive) */
    const char *const *snaps;        /* their ROUTER endpoints, paired with subs by position */
    size_t nsources;                 /* >= 1 */
    size_t max_buffered;             /* deltas kept while a snapshot is built */
    uint64_t snapshot_timeout_ms;    /* a snapshot with no progress this long is
                                        re-requested (from the next aggregator when
                                        there are several) */
    uint64_t silence_ms;             /* aggregator silent this long: follow the next (0: never) */
    decider_follow_drop_fn *on_drop; /* a dropped frame; may be NULL */
    void *drop_arg;
} decider_follow_config_t;

typedef struct decider_follow decider_follow_t;

/* Makes the replica (decider_sync); no socket yet. NULL when out of memory. */
decider_follow_t *decider_follow_new(const decider_follow_config_t *config);
/* Closes the sockets and destroys the replica: readers must be done. */
void decider_follow_destroy(decider_follow_t **self_p);

/* Follows source 0: creates the SUB (and its monitor) and connects it. 0, or -1
 * when the socket cannot be made or connected (a bad endpoint). */
int decider_follow_start(decider_follow_t *self);

/* The replica and its counters (borrowed; see decider_sync.h for the threads).
 */
decider_sync_t *decider_follow_sync(decider_follow_t *self);

/* Age of the newest state the replica applied (a delta, a heartbeat or a
 * snapshot): its lag behind the aggregator, in ms now (0 before the first). Any
 * thread. */
uint64_t decider_follow_lag_ms(const decider_sync_stats_t *st);

/* Periodic (every loop pass): requests the first snapshot, re-requests one that
 * timed out, moves to the next aggregator when the one followed went silent
 * (decider_sync_tick). */
void decider_follow_tick(decider_follow_t *self);

/* Socket `which` (DECIDER_FOLLOW_*) as a raw libzmq socket to poll for
 * ZMQ_POLLIN, or NULL when it does not exist now. *quiet: its last receive
 * found nothing and it was not used since, so its ZMQ_FD becomes readable when
 * anything arrives (the loop may poll that fd instead of the socket); false
 * after the socket was replaced. */
void *decider_follow_socket(const decider_follow_t *self, int which, bool *quiet);

/* After a poll: `ready[k]` says socket k (as decider_follow_socket gave it) was
 * readable. Drains the monitor, the SUB and the DEALER, in that order, acting
 * on what decider_sync asks (resync, switch). Any socket may be replaced
 * meanwhile: the next pass asks again. A DEALER that was not quiet (or is new)
 * is asked for input whatever `ready` says. */
void decider_follow_serve(decider_follow_t *self, const bool ready[DECIDER_FOLLOW_NSOCKETS]);

/* The SUB is connected now (for /debug/state). */
bool decider_follow_connected(const decider_follow_t *self);

#endif
