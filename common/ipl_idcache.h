/*
 * ipl_idcache — a bounded, thread-safe LRU map from a 128-bit key (XXH3-128 of some bytes) to
 * an array of token ids: the memory of "these bytes encode to these ids".
 *
 *   ipl_idcache_t *c = ipl_idcache_new(4096, 32u << 20);   // entries, bytes of ids
 *   ipl_idcache_key_t k = ipl_idcache_key(text, len);
 *   size_t n = ipl_idcache_get(c, k, out, room);           // IPL_IDCACHE_MISS when absent
 *   ipl_idcache_put(c, k, ids, n);
 *
 * Used by ipl_bpe (the ids of a section of text between added tokens: the tokenizer encodes
 * each section on its own, so a section seen before is exact from the cache) and by the
 * gateway's worker /tokenize fallback (gateway_tokenize: the answers, keyed by the request
 * body). Both bounds hold at all times: a put evicts the least recently used entries first;
 * an array larger than the byte bound is not kept. A 128-bit hash makes a collision (two
 * texts, one key) a 2^-64-per-pair event; the cache does not compare the bytes.
 *
 *   buckets[key.lo & mask] ─► entry ─hnext─► entry ...
 *   lru: head ⇄ entry ⇄ ... ⇄ tail (evicted first)
 *
 * Thread-safety: every call may run concurrently (one mutex, held for a lookup and a copy).
 */
#ifndef IPL_IDCACHE_H
#define IPL_IDCACHE_H

#include <stddef.h>
#include <stdint.h>

#define IPL_IDCACHE_MISS SIZE_MAX

typedef struct ipl_idcache ipl_idcache_t;

typedef struct {
    uint64_t lo, hi;
} ipl_idcache_key_t;

typedef struct {
    size_t entries, bytes; /* held now */
    uint64_t hits, misses; /* ipl_idcache_get since creation */
    uint64_t evictions;    /* entries dropped to keep within the bounds */
} ipl_idcache_stats_t;

/* At most max_entries entries and max_bytes bytes of ids (both > 0). NULL on allocation
 * failure or a zero bound. */
ipl_idcache_t *ipl_idcache_new(size_t max_entries, size_t max_bytes);
void ipl_idcache_destroy(ipl_idcache_t **self_p);

/* XXH3-128 of len bytes, mixed with `seed` (e.g. what else determines the ids). */
ipl_idcache_key_t ipl_idcache_key(const void *bytes, size_t len, uint64_t seed);

/* The count of key's ids, copied into out[0..room) when they fit (a count above `room`
 * copies nothing: ask again with room for them; the entry counts as used either way), or
 * IPL_IDCACHE_MISS. */
size_t ipl_idcache_get(ipl_idcache_t *self, ipl_idcache_key_t key, uint32_t *out, size_t room);

/* Keeps a copy of ids[0..n) under key (replacing an entry of the same key), evicting least
 * recently used entries to stay within the bounds. Silently keeps nothing when n ids exceed
 * the byte bound or memory runs out. */
void ipl_idcache_put(ipl_idcache_t *self, ipl_idcache_key_t key, const uint32_t *ids, size_t n);

void ipl_idcache_stats(ipl_idcache_t *self, ipl_idcache_stats_t *out);

#endif
