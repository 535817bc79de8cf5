/*
 * collector_blockmap — blocks of one worker as the collector knows them, keyed by the engine's
 * block hash: our chained hash of the block (ipl_hash.h) and the engine hash of its parent.
 *
 *   engine hash ──► { ours, parent }        parent == engine: the first block of a chain
 *
 * The parent link lets a chain be walked towards its root by engine hashes alone
 * (collector_stream promotes a whole chain of blocks it only knew by translation). An engine
 * hash's translation never changes within one worker process: ours is a function of the
 * block's tokens and its ancestors', and so is the engine's hash.
 *
 * Layout: an open-addressing table (linear probing, backward-shift delete, no tombstones) of
 * 24-byte slots, key and values side by side so that a probe touches one cache line; key 0 is
 * kept aside so that 0 can mark an empty slot while still being a legal engine hash. The table
 * doubles at 3/4 load and never shrinks (a cleared map keeps its memory: the next process of
 * the worker fills it again).
 *
 * Not thread-safe; owned by one collector_stream.
 */
#ifndef COLLECTOR_BLOCKMAP_H
#define COLLECTOR_BLOCKMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t engine; /* the worker's hash of the block (the key) */
    uint64_t ours;   /* our chained hash of it */
    uint64_t parent; /* the engine hash of the block before it; == engine: none (a root) */
} collector_block_t;

typedef struct collector_blockmap collector_blockmap_t;

/* NULL when out of memory. */
collector_blockmap_t *collector_blockmap_new(void);
void collector_blockmap_destroy(collector_blockmap_t **self_p);

size_t collector_blockmap_size(const collector_blockmap_t *self);
/* Forgets every block (the memory is kept). */
void collector_blockmap_clear(collector_blockmap_t *self);

/* Looks `engine` up; fills *out (may be NULL) when found. */
bool collector_blockmap_get(const collector_blockmap_t *self, uint64_t engine,
                            collector_block_t *out);
/* Inserts or replaces the block keyed by b->engine. 0, or IPL_E_NOMEM (nothing changed). */
int collector_blockmap_put(collector_blockmap_t *self, const collector_block_t *b);
/* Removes `engine`; fills *out (may be NULL) with what it held. False when absent. */
bool collector_blockmap_take(collector_blockmap_t *self, uint64_t engine, collector_block_t *out);
/* Grows the table so that `n` blocks fit without another resize. 0 or IPL_E_NOMEM. */
int collector_blockmap_reserve(collector_blockmap_t *self, size_t n);
/* Starts loading the home slot of `engine` (a prefetch never faults). */
void collector_blockmap_prefetch(const collector_blockmap_t *self, uint64_t engine);

/* Moves every block of `from` into `self` (a block of `from` replaces one of `self` with the
 * same key); `from` is left empty. On IPL_E_NOMEM both keep what they hold at that point
 * (every block is in exactly one of them). */
int collector_blockmap_merge(collector_blockmap_t *self, collector_blockmap_t *from);
/* Exchanges the contents of two maps (O(1)). */
void collector_blockmap_swap(collector_blockmap_t *a, collector_blockmap_t *b);

/* Calls fn for every block, in no particular order; the map must not change meanwhile. `fn`
 * returns 0 to go on; non-zero stops the walk and is returned. */
int collector_blockmap_foreach(const collector_blockmap_t *self,
                               int (*fn)(void *arg, const collector_block_t *b), void *arg);

#endif
