/*
 * sim_cache — block pool, LRU free list and hash map.
 *
 * The free list is intrusive (prev/next indices per block); the map is open addressing with
 * linear probing on the low 64 bits of the hash, holding block index + 1 (0 = empty), sized to
 * at least twice the pool so probes stay short, with backward-shift deletion (no tombstones).
 */
#include "sim_cache.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_NONE (-1)

typedef struct {
    sim_hash_t hash;
    uint32_t ref;
    bool hashed;  /* registered in the map */
    bool in_free; /* on the free list */
    int32_t prev, next;
} s_block_t;

struct sim_cache {
    uint32_t num_blocks;
    uint32_t block_size;
    s_block_t *blocks;
    int32_t free_head, free_tail;
    uint32_t num_free;
    uint32_t *map; /* block index + 1, 0 = empty */
    uint32_t map_mask;
    uint32_t num_cached;
};

/* --- free list ----------------------------------------------------------------------------- */

static void s_free_push_tail(sim_cache_t *self, uint32_t b)
{
    s_block_t *blk = &self->blocks[b];
    assert(!blk->in_free);
    blk->prev = self->free_tail;
    blk->next = S_NONE;
    if (self->free_tail != S_NONE)
        self->blocks[self->free_tail].next = (int32_t)b;
    else
        self->free_head = (int32_t)b;
    self->free_tail = (int32_t)b;
    blk->in_free = true;
    self->num_free++;
}

static void s_free_remove(sim_cache_t *self, uint32_t b)
{
    s_block_t *blk = &self->blocks[b];
    assert(blk->in_free);
    if (blk->prev != S_NONE)
        self->blocks[blk->prev].next = blk->next;
    else
        self->free_head = blk->next;
    if (blk->next != S_NONE)
        self->blocks[blk->next].prev = blk->prev;
    else
        self->free_tail = blk->prev;
    blk->prev = blk->next = S_NONE;
    blk->in_free = false;
    self->num_free--;
}

/* --- hash map ------------------------------------------------------------------------------ */

/* The slot holding `hash`, or the empty slot where it would go. */
static uint32_t s_map_slot(const sim_cache_t *self, const sim_hash_t *hash)
{
    uint32_t i = (uint32_t)(hash->lo ^ (hash->lo >> 32)) & self->map_mask;
    while (self->map[i] && !sim_hash_eq(&self->blocks[self->map[i] - 1].hash, hash))
        i = (i + 1) & self->map_mask;
    return i;
}

static int32_t s_map_get(const sim_cache_t *self, const sim_hash_t *hash)
{
    uint32_t i = s_map_slot(self, hash);
    return self->map[i] ? (int32_t)(self->map[i] - 1) : S_NONE;
}

static void s_map_del(sim_cache_t *self, const sim_hash_t *hash)
{
    uint32_t i = s_map_slot(self, hash);
    if (!self->map[i]) return;
    /* Backward-shift deletion: move later entries of the probe run into the hole when their
     * home slot is at or before it (cyclically). */
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & self->map_mask;
        if (!self->map[j]) break;
        uint64_t lo = self->blocks[self->map[j] - 1].hash.lo;
        uint32_t home = (uint32_t)(lo ^ (lo >> 32)) & self->map_mask;
        bool move = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (move) {
            self->map[i] = self->map[j];
            i = j;
        }
    }
    self->map[i] = 0;
}

/* Drops block b's hash from the map. Returns true when it was cached (an eviction). */
static bool s_uncache(sim_cache_t *self, uint32_t b)
{
    s_block_t *blk = &self->blocks[b];
    if (!blk->hashed) return false;
    s_map_del(self, &blk->hash);
    blk->hashed = false;
    self->num_cached--;
    return true;
}

/* --- life cycle ---------------------------------------------------------------------------- */

sim_cache_t *sim_cache_new(uint32_t num_blocks, uint32_t block_size)
{
    assert(num_blocks > 0 && block_size > 0);
    sim_cache_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->num_blocks = num_blocks;
    self->block_size = block_size;
    uint32_t cap = 16;
    while (cap < 2 * num_blocks)
        cap *= 2;
    self->map_mask = cap - 1;
    self->blocks = calloc(num_blocks, sizeof *self->blocks);
    self->map = calloc(cap, sizeof *self->map);
    if (!self->blocks || !self->map) {
        sim_cache_destroy(&self);
        return NULL;
    }
    sim_cache_wipe(self);
    return self;
}

void sim_cache_destroy(sim_cache_t **self_p)
{
    assert(self_p);
    sim_cache_t *self = *self_p;
    if (!self) return;
    free(self->blocks);
    free(self->map);
    free(self);
    *self_p = NULL;
}

uint32_t sim_cache_block_size(const sim_cache_t *self)
{
    return self->block_size;
}

uint32_t sim_cache_num_blocks(const sim_cache_t *self)
{
    return self->num_blocks;
}

uint32_t sim_cache_num_free(const sim_cache_t *self)
{
    return self->num_free;
}

uint32_t sim_cache_num_cached(const sim_cache_t *self)
{
    return self->num_cached;
}

double sim_cache_usage(const sim_cache_t *self)
{
    return 1.0 - (double)self->num_free / (double)self->num_blocks;
}

/* --- allocation ---------------------------------------------------------------------------- */

uint32_t sim_cache_lookup(const sim_cache_t *self, const sim_hash_t *hashes, uint32_t n,
                          uint32_t *out)
{
    uint32_t i = 0;
    for (; i < n; i++) {
        int32_t b = s_map_get(self, &hashes[i]);
        if (b == S_NONE) break;
        out[i] = (uint32_t)b;
    }
    return i;
}

static uint64_t s_blocks_for(const sim_cache_t *self, uint64_t ntokens)
{
    return (ntokens + self->block_size - 1) / self->block_size;
}

uint32_t sim_cache_blocks_needed(const sim_cache_t *self, const sim_seq_t *seq,
                                 const uint32_t *hits, uint32_t nhits, uint64_t ntokens)
{
    uint64_t have = seq->nblocks;
    uint64_t from_free = 0;
    if (seq->nblocks == 0) {
        for (uint32_t i = 0; i < nhits; i++)
            if (self->blocks[hits[i]].ref == 0) from_free++;
        have = nhits;
    }
    uint64_t want = s_blocks_for(self, ntokens);
    if (want > have) from_free += want - have;
    return from_free > UINT32_MAX ? UINT32_MAX : (uint32_t)from_free;
}

static int s_seq_reserve(sim_seq_t *seq, uint64_t n)
{
    if (n <= seq->cap) return 0;
    if (n > UINT32_MAX / 2) return IPL_E_NOMEM;
    uint32_t ncap = seq->cap ? seq->cap : 8;
    while (ncap < n)
        ncap *= 2;
    uint32_t *p = realloc(seq->blocks, ncap * sizeof *p);
    if (!p) return IPL_E_NOMEM;
    seq->blocks = p;
    seq->cap = ncap;
    return 0;
}

int sim_cache_allocate(sim_cache_t *self, sim_seq_t *seq, const uint32_t *hits, uint32_t nhits,
                       uint64_t ntokens, sim_kvbatch_t *events)
{
    if (seq->nblocks != 0) nhits = 0;
    uint32_t needed = sim_cache_blocks_needed(self, seq, hits, nhits, ntokens);
    if (needed > self->num_free) return IPL_E_AGAIN;
    uint64_t want = s_blocks_for(self, ntokens);
    if (want < (uint64_t)seq->nblocks + nhits) want = (uint64_t)seq->nblocks + nhits;
    if (s_seq_reserve(seq, want) != 0) return IPL_E_NOMEM;
    for (uint32_t i = 0; i < nhits; i++) {
        s_block_t *blk = &self->blocks[hits[i]];
        if (blk->ref++ == 0) s_free_remove(self, hits[i]);
        seq->blocks[seq->nblocks++] = hits[i];
    }
    if (nhits) seq->ncommitted = nhits;
    while (seq->nblocks < want) {
        assert(self->free_head != S_NONE);
        uint32_t b = (uint32_t)self->free_head;
        s_free_remove(self, b);
        sim_hash_t h = self->blocks[b].hash;
        if (s_uncache(self, b) && events) (void)sim_kvbatch_removed(events, &h);
        self->blocks[b].ref = 1;
        seq->blocks[seq->nblocks++] = b;
    }
    return 0;
}

/* Emits one BlockStored for the committed run [from, to) of seq's blocks. */
static void s_emit_stored(sim_cache_t *self, const sim_seq_t *seq, const sim_hash_t *hashes,
                          const uint32_t *tokens, uint32_t from, uint32_t to, sim_kvbatch_t *events)
{
    if (!events || from >= to) return;
    (void)sim_kvbatch_stored(events, hashes + from, to - from, from > 0 ? &hashes[from - 1] : NULL,
                             tokens + (uint64_t)from * self->block_size, self->block_size,
                             seq->keys);
}

void sim_cache_commit(sim_cache_t *self, sim_seq_t *seq, const sim_hash_t *hashes,
                      const uint32_t *tokens, uint32_t nfull, sim_kvbatch_t *events)
{
    assert(nfull <= seq->nblocks);
    uint32_t run = seq->ncommitted; /* start of the current run of registered blocks */
    for (uint32_t i = seq->ncommitted; i < nfull; i++) {
        uint32_t slot = s_map_slot(self, &hashes[i]);
        s_block_t *blk = &self->blocks[seq->blocks[i]];
        if (self->map[slot] || blk->hashed) {
            /* Already cached elsewhere (a concurrent identical prefix): not announced. */
            s_emit_stored(self, seq, hashes, tokens, run, i, events);
            run = i + 1;
            continue;
        }
        blk->hash = hashes[i];
        blk->hashed = true;
        self->map[slot] = seq->blocks[i] + 1;
        self->num_cached++;
    }
    s_emit_stored(self, seq, hashes, tokens, run, nfull, events);
    if (nfull > seq->ncommitted) seq->ncommitted = nfull;
}

void sim_cache_free(sim_cache_t *self, sim_seq_t *seq)
{
    for (uint32_t i = seq->nblocks; i-- > 0;) {
        uint32_t b = seq->blocks[i];
        assert(self->blocks[b].ref > 0);
        if (--self->blocks[b].ref == 0) s_free_push_tail(self, b);
    }
    seq->nblocks = 0;
    seq->ncommitted = 0;
}

void sim_seq_release(sim_seq_t *seq)
{
    free(seq->blocks);
    *seq = (sim_seq_t){0};
}

void sim_cache_reset(sim_cache_t *self, sim_kvbatch_t *events)
{
    memset(self->map, 0, ((size_t)self->map_mask + 1) * sizeof *self->map);
    for (uint32_t b = 0; b < self->num_blocks; b++)
        self->blocks[b].hashed = false;
    self->num_cached = 0;
    if (events) (void)sim_kvbatch_cleared(events);
}

void sim_cache_wipe(sim_cache_t *self)
{
    memset(self->map, 0, ((size_t)self->map_mask + 1) * sizeof *self->map);
    memset(self->blocks, 0, (size_t)self->num_blocks * sizeof *self->blocks);
    self->num_cached = 0;
    self->num_free = 0;
    self->free_head = self->free_tail = S_NONE;
    for (uint32_t b = 0; b < self->num_blocks; b++) {
        self->blocks[b].prev = self->blocks[b].next = S_NONE;
        s_free_push_tail(self, b);
    }
}
