/*
 * clustersim_kvmap — engine block hash → our block hash, with a count of workers holding it.
 *
 * The collector's job in one table. A worker's BlockStored event names blocks by the engine's
 * hash (vLLM's wire value) and carries their token ids; the decider's index wants our chained
 * hashes (ipl_hash), so the collector recomputes them from the tokens — starting from the
 * parent's *our* hash, found here — and a later BlockRemoved, which carries only the engine's
 * hash, is translated back through this table. Every simulated engine hashes with the same
 * seed, so one shared table serves all of them: an entry lives while at least one worker
 * holds the block.
 *
 * Open addressing with linear probing and backward-shift deletion (no tombstones); grows at
 * half load. Not thread-safe.
 */
#ifndef CLUSTERSIM_KVMAP_H
#define CLUSTERSIM_KVMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct clustersim_kvmap clustersim_kvmap_t;

clustersim_kvmap_t *clustersim_kvmap_new(void);
void clustersim_kvmap_destroy(clustersim_kvmap_t **self_p);

/* One more worker holds engine block `engine`, whose hash is `ours` (kept from the first
 * holder). 0 or IPL_E_NOMEM (nothing changed). */
int clustersim_kvmap_hold(clustersim_kvmap_t *self, uint64_t engine, uint64_t ours);
/* Our hash of engine block `engine`, if any worker holds it. */
bool clustersim_kvmap_get(const clustersim_kvmap_t *self, uint64_t engine, uint64_t *ours);
/* One worker fewer holds it: writes our hash, forgets the entry at zero holders. False (and
 * nothing written) for an unknown block. */
bool clustersim_kvmap_release(clustersim_kvmap_t *self, uint64_t engine, uint64_t *ours);
/* Distinct blocks held by anyone. */
size_t clustersim_kvmap_size(const clustersim_kvmap_t *self);

#endif
