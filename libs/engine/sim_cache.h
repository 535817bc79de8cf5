/*
 * sim_cache — vLLM's prefix cache (v1 BlockPool + KVCacheManager) for one simulated GPU.
 *
 * A pool of `num_blocks` blocks of `block_size` tokens. A sequence holds a block table; its
 * full blocks are hashed in a chain and *committed*: registered in the hash → block map, so
 * that later sequences with the same prefix reuse them (a cache hit). Freed blocks (reference
 * count 0) go to the tail of an LRU free list and stay hittable until the allocator takes them
 * from its head, which evicts them (BlockRemoved). A sequence frees its blocks tail first, so
 * a prompt's last blocks are evicted before its first ones, as vLLM does.
 *
 *     free list (head = next to evict)                         map: hash → block
 *     [b7 cached] ⇄ [b2] ⇄ [b9 cached] ⇄ ... ⇄ [b4 cached]      (only committed blocks)
 *
 * Blocks are keyed by the engine's full digests (sim_hasher: vLLM's own algorithms), which the
 * caller computes; the map probes on their wire value (the last 8 bytes) and compares whole
 * digests, as vLLM's dict of bytes does. A consumer of the events has to recompute its own
 * hashes from the token ids, exactly as it must with real vLLM.
 *
 * Events (BlockStored, BlockRemoved, AllBlocksCleared) are appended to the caller's batch.
 * One difference from vLLM: when a sequence fills a block whose hash another block already
 * holds (two identical prompts prefilled at once), vLLM keeps both and announces both; we keep
 * the first and announce nothing for the duplicate, so announced = hittable exactly.
 *
 * Not thread-safe: the engine's lock guards it.
 */
#ifndef SIM_CACHE_H
#define SIM_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_hasher.h"
#include "sim_kvbatch.h"

/* A sequence's block table. Owned by the caller; zero-initialise it. */
typedef struct {
    uint32_t *blocks;
    uint32_t nblocks;
    uint32_t cap;
    uint32_t ncommitted;          /* leading full blocks already committed (or duplicate) */
    const sim_block_keys_t *keys; /* LoRA / cache salt for its BlockStored events (borrowed,
                                     NULL = none); the hashes already cover them */
} sim_seq_t;

typedef struct sim_cache sim_cache_t;

/* NULL on allocation failure. */
sim_cache_t *sim_cache_new(uint32_t num_blocks, uint32_t block_size);
void sim_cache_destroy(sim_cache_t **self_p);

uint32_t sim_cache_block_size(const sim_cache_t *self);
uint32_t sim_cache_num_blocks(const sim_cache_t *self);
uint32_t sim_cache_num_free(const sim_cache_t *self);   /* reference count 0, cached or not */
uint32_t sim_cache_num_cached(const sim_cache_t *self); /* committed blocks in the map */
double sim_cache_usage(const sim_cache_t *self);        /* 1 - free/total, vLLM's definition */

/* The longest prefix of `hashes` (n blocks) whose blocks are cached: returns its length and
 * writes the block ids into `out` (capacity n). Changes nothing. */
uint32_t sim_cache_lookup(const sim_cache_t *self, const sim_hash_t *hashes, uint32_t n,
                          uint32_t *out);

/* Makes `seq` hold blocks for `ntokens` tokens. When the table is empty, the `nhits` blocks of
 * a lookup come first (reference counted, taken off the free list, counted as committed);
 * the rest are allocated from the free list's head, evicting cached blocks (BlockRemoved
 * into `events`). Returns 0, or IPL_E_AGAIN when too few blocks are free (nothing changed),
 * or IPL_E_NOMEM. */
int sim_cache_allocate(sim_cache_t *self, sim_seq_t *seq, const uint32_t *hits, uint32_t nhits,
                       uint64_t ntokens, sim_kvbatch_t *events);
/* How many free-list blocks sim_cache_allocate would take for these arguments. */
uint32_t sim_cache_blocks_needed(const sim_cache_t *self, const sim_seq_t *seq,
                                 const uint32_t *hits, uint32_t nhits, uint64_t ntokens);

/* Commits the sequence's full blocks [seq->ncommitted, nfull): `hashes` is the sequence's
 * hash chain (at least nfull entries), `tokens` its token ids (at least nfull * block_size).
 * Emits one BlockStored per run of newly registered blocks. nfull <= seq->nblocks. */
void sim_cache_commit(sim_cache_t *self, sim_seq_t *seq, const sim_hash_t *hashes,
                      const uint32_t *tokens, uint32_t nfull, sim_kvbatch_t *events);

/* Releases every block of `seq` (tail first) and empties its table (memory kept). */
void sim_cache_free(sim_cache_t *self, sim_seq_t *seq);
/* Frees the table's memory; call after sim_cache_free. */
void sim_seq_release(sim_seq_t *seq);

/* Forgets every cached hash (blocks in use stay allocated but are no longer hittable) and
 * emits AllBlocksCleared. */
void sim_cache_reset(sim_cache_t *self, sim_kvbatch_t *events);
/* A restarted GPU: every block free and uncached, the free list in its initial order, no
 * events. Only when no sequence holds blocks (their tables would dangle). */
void sim_cache_wipe(sim_cache_t *self);

#endif
