/*
 * ipl_index — the prefix index: which workers hold which KV blocks.
 *
 * Keys are our chained 64-bit block hashes (ipl_hash.h); because a block's hash covers its
 * whole prefix, "worker W holds the first k blocks of this prompt" is exactly "W holds blocks
 * 0..k-1" — no tree walk is needed, only k hash probes that stop at the first miss.
 *
 * Workers are small integer ids (0 .. IPL_INDEX_MAX_WORKERS-1) handed out by name.
 * Memory: designed for tens of millions of (block, worker) memberships with no allocation per
 * block (open addressing, contiguous storage); see the .c file for the layout.
 *
 * Not thread-safe: one writer at a time and no reads during a write. Callers that read from
 * several threads (the decider's HTTP handlers) guard it with a pthread_rwlock.
 */
#ifndef IPL_INDEX_H
#define IPL_INDEX_H

#include <stddef.h>
#include <stdint.h>

#define IPL_INDEX_MAX_WORKERS 1024

typedef struct ipl_index ipl_index_t;

ipl_index_t *ipl_index_new(void);
void ipl_index_destroy(ipl_index_t **self_p);
/* Makes room for `blocks` blocks at once, so that adding them does not grow the index in
 * steps (each a copy). A sizing hint only: it never changes what the index answers, and the
 * index grows past it as ever. Returns 0, or IPL_E_NOMEM (the index is intact). */
int ipl_index_reserve(ipl_index_t *self, size_t blocks);

/* The id of worker `name`, creating it (name copied). -1 (IPL_E_RANGE) when full. */
int ipl_index_worker(ipl_index_t *self, const char *name);
/* The id of an existing worker, or -1. */
int ipl_index_find_worker(const ipl_index_t *self, const char *name);
const char *ipl_index_worker_name(const ipl_index_t *self, int worker); /* borrowed, or NULL */
int ipl_index_nworkers(const ipl_index_t *self); /* ids are 0 .. nworkers-1 */

/* Records that `worker` holds / no longer holds each block. Idempotent per (block, worker).
 * Return 0 or IPL_E_NOMEM / IPL_E_RANGE. */
int ipl_index_add(ipl_index_t *self, int worker, const uint64_t *hashes, size_t n);
/* ipl_index_add for blocks that continue a chain: `parent` is our hash of the block before
 * hashes[0] in its chain (0: unknown, or hashes[0] starts the chain). A placement hint only —
 * the index stores a chain's blocks next to each other, which is what makes ipl_index_match
 * fast — it never changes what the index answers. */
int ipl_index_add_chain(ipl_index_t *self, int worker, uint64_t parent, const uint64_t *hashes,
                        size_t n);
int ipl_index_remove(ipl_index_t *self, int worker, const uint64_t *hashes, size_t n);
/* Forgets every block of `worker` (AllBlocksCleared, restart, degraded). */
void ipl_index_clear_worker(ipl_index_t *self, int worker);

/* For a prompt's chain of block hashes, writes into prefix[w] (for w < nworkers, capacity
 * `max`) how many leading blocks worker w holds, and returns the largest such count. */
size_t ipl_index_match(const ipl_index_t *self, const uint64_t *hashes, size_t n,
                       uint32_t *prefix, size_t max);

size_t ipl_index_worker_blocks(const ipl_index_t *self, int worker); /* blocks held by w */
size_t ipl_index_blocks(const ipl_index_t *self);      /* distinct blocks held by anyone */
size_t ipl_index_memberships(const ipl_index_t *self); /* (block, worker) pairs */
size_t ipl_index_memory_bytes(const ipl_index_t *self);
/* Arena entries in use, blocks and holes (layout diagnostics and tests). */
size_t ipl_index_arena_entries(const ipl_index_t *self);

/* Calls fn for every block `worker` holds (order unspecified), to build snapshots. Stops early
 * and returns fn's value when it returns non-zero. The index must not change during the walk. */
typedef int(ipl_index_block_fn)(void *arg, uint64_t hash);
int ipl_index_foreach(const ipl_index_t *self, int worker, ipl_index_block_fn *fn, void *arg);

#endif
