/*
 * aggregator_state — the cluster state the aggregator owns: the prefix index (which worker
 * holds which block), each worker's last load sample, and the state sequence number.
 *
 * Every change applied gets the next sequence number (1, 2, 3, ...), written into the
 * message's `seq` field, so the very message that changed the state is the delta to publish
 * (the ZeroMQ Guide's Clone pattern). A snapshot reflects every change up to and including
 * aggregator_state_seq() at the time it is taken; a subscriber applies deltas with a larger
 * seq on top of it.
 *
 *   collectors ──KV_EVENT/LOAD──► apply() ──► index + load table, seq++ ──► caller publishes
 *   decider ──SNAPSHOT_REQ──► snapshot() ──► per worker: KV_EVENT STORED chunks, LOAD; END
 *   every second ──► heartbeat() ──► a LOAD per worker with a fresh seq (liveness)
 *
 * Not thread-safe: the aggregator's receive loop is the only writer; readers on other threads
 * (admin HTTP) take the server's lock around every call.
 */
#ifndef AGGREGATOR_STATE_H
#define AGGREGATOR_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_index.h"
#include "ipl_proto.h"

#define AGGREGATOR_SNAPSHOT_CHUNK 65536u /* hashes per snapshot KV_EVENT */

typedef struct aggregator_state aggregator_state_t;

/* What the state knows about one worker (a copy; `name` is borrowed from the state). */
typedef struct {
    const char *name;
    bool has_load;       /* a LOAD was received from a collector */
    ipl_load_t load;     /* last LOAD (load.worker is NULL; load.seq = its state seq) */
    uint64_t epoch;      /* of the last KV_EVENT */
    uint64_t src_seq;    /* of the last KV_EVENT */
    uint64_t kv_events;  /* KV_EVENTs applied */
    size_t blocks;       /* blocks held in the index */
    uint64_t updated_ms; /* monotonic ms of the last message applied for it */
    uint64_t load_ms;    /* monotonic ms of the last LOAD from a collector (0: never) */
} aggregator_worker_info_t;

aggregator_state_t *aggregator_state_new(void);
void aggregator_state_destroy(aggregator_state_t **self_p);

/* Applies a decoded KV_EVENT or LOAD received from a collector and, on success, stamps the
 * message's seq field with the new state sequence number (the message stays the caller's).
 * `now_ms` is monotonic time. Returns 0, or without changing anything:
 *   IPL_E_UNKNOWN  not a KV_EVENT or LOAD
 *   IPL_E_INVAL    empty worker name, or an unknown op
 *   IPL_E_RANGE    a new worker beyond IPL_INDEX_MAX_WORKERS
 *   IPL_E_NOMEM    (the index may then hold part of a STORED event's blocks)
 * A KV_EVENT op=CLEARED forgets every block of the worker; STORED/REMOVED are idempotent. */
int aggregator_state_apply(aggregator_state_t *self, ipl_msg_t *msg, uint64_t now_ms);

/* Receives each message a snapshot or heartbeat produces: `type` is IPL_MSG_KV_EVENT or
 * IPL_MSG_LOAD, `body` the borrowed ipl_kv_event_t / ipl_load_t. Return 0 to go on; non-zero
 * stops the walk and is returned. */
typedef int(aggregator_emit_fn)(void *arg, int type, const void *body);

/* Walks the whole state for a snapshot: for every worker (in id order), one or more
 * KV_EVENT op=STORED carrying its block hashes, at most `chunk` per message (at least one
 * message, possibly empty), then its LOAD; every message carries seq = the current state
 * sequence. Fills *end (seq, workers, block memberships sent) for the SNAPSHOT_END the caller
 * sends last. Does not change the state. Returns 0 or the emitter's non-zero value. */
int aggregator_state_snapshot(aggregator_state_t *self, size_t chunk, aggregator_emit_fn *fn,
                              void *arg, ipl_snapshot_end_t *end);

/* Liveness for subscribers: emits a LOAD for every worker, each with a new state sequence
 * number (so the stream's seq keeps advancing even when nothing changes). A worker whose last
 * LOAD from a collector is older than `stale_ms` (or that never had one) is reported with
 * health UNKNOWN and kv_state DEGRADED: nobody vouches for it any more. Returns 0 or the
 * emitter's non-zero value (the sequence numbers of LOADs not emitted are not consumed). */
int aggregator_state_heartbeat(aggregator_state_t *self, uint64_t now_ms, uint64_t stale_ms,
                               aggregator_emit_fn *fn, void *arg);

/* Workers with a LOAD, by its kv_state: counts[IPL_KV_EXACT], [_SYNCING], [_DEGRADED] (a
 * stale worker counts as DEGRADED once a heartbeat marked it so). */
void aggregator_state_kv_counts(const aggregator_state_t *self, size_t counts[3]);

uint64_t aggregator_state_seq(const aggregator_state_t *self);
const ipl_index_t *aggregator_state_index(const aggregator_state_t *self);
int aggregator_state_nworkers(const aggregator_state_t *self);
/* Fills *out for worker id 0 .. nworkers-1. Returns 0 or IPL_E_RANGE. */
int aggregator_state_worker(const aggregator_state_t *self, int id, aggregator_worker_info_t *out);

#endif
