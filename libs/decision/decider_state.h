/*
 * decider_state — one replica of the aggregator's cluster state: the prefix index (which
 * worker holds which block) and each worker's last load sample, plus the state sequence
 * number the replica reflects.
 *
 * Plain data: applying messages in order and keeping them consistent with the aggregator's
 * stream is decider_sync's job; locking is the owner's (decider_sync holds the rwlock).
 * Not thread-safe.
 */
#ifndef DECIDER_STATE_H
#define DECIDER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_index.h"
#include "ipl_proto.h"

/* What the replica knows about one worker. */
typedef struct {
    bool has_load;  /* a LOAD arrived */
    uint64_t ts_ms; /* wall time of the sample */
    uint64_t running, waiting;
    double kv_usage;
    uint64_t block_size, num_blocks;
    uint64_t health;     /* IPL_HEALTH_* */
    uint64_t kv_state;   /* IPL_KV_* */
    uint64_t kv_events;  /* KV_EVENTs applied */
    uint64_t updated_ms; /* monotonic ms of the last message for it */
} decider_worker_t;

typedef struct decider_state decider_state_t;

decider_state_t *decider_state_new(void);
void decider_state_destroy(decider_state_t **self_p);

/* Applies a decoded KV_EVENT or LOAD (its seq is not checked here). `now_ms` is monotonic.
 * Returns 0, or without a change: IPL_E_UNKNOWN (another type), IPL_E_INVAL (empty worker
 * name, unknown op), IPL_E_RANGE (more than IPL_INDEX_MAX_WORKERS workers), IPL_E_NOMEM. */
int decider_state_apply(decider_state_t *self, const ipl_msg_t *msg, uint64_t now_ms);

uint64_t decider_state_seq(const decider_state_t *self);
void decider_state_set_seq(decider_state_t *self, uint64_t seq);

const ipl_index_t *decider_state_index(const decider_state_t *self);
/* A number no other state of this process has (worker ids of two states never mix). */
uint64_t decider_state_space(const decider_state_t *self);
/* The worker id of `name` in the index, or -1 when the state knows nothing of it. */
int decider_state_find(const decider_state_t *self, const char *name);
/* The worker with id `id` (0 .. ipl_index_nworkers - 1), or NULL. Borrowed. */
const decider_worker_t *decider_state_worker(const decider_state_t *self, int id);
/* Every worker, by id (decider_state_worker of each, in one call): *n gets their number
 * (ipl_index_nworkers). Borrowed, for the state's life. */
const decider_worker_t *decider_state_workers(const decider_state_t *self, int *n);

#endif
