/*
 * decider_history — an approximate prefix tree learned from routing history alone: which
 * prompts this router sent to which worker. It is what SGLang's cache_aware policy and
 * production-stack's prefixaware router keep (their tree and trie record routings, never the
 * engines' caches); the baselines of decider_strategies use it.
 *
 * Their trees run over prompt text (SGLang: characters; production-stack: 128-character
 * chunks hashed with xxh64). The decider never sees text: it receives the chained hashes of the
 * prompt's full blocks (ipl_hash), so here the block hashes are the "characters". Because a
 * block's hash covers its whole prefix, the set of (hash, worker) pairs *is* the radix tree —
 * the node at depth k of a prompt is its k-th hash, and a worker "holds a node" when it holds
 * that pair — so one prefix index (ipl_index) is the tree, and matching is ipl_index_match.
 *
 * Size bound (approximate LRU, SGLang's periodic eviction): two generations; every insertion
 * touches the whole prompt into the newest; at most every `check_ms`, when the memberships
 * exceed `max_blocks`, the oldest generation is dropped, so what was not routed since the
 * previous rotation goes first.
 *
 *     gen[0] newest ◄── every routed prompt (touch)       match(w) = max over generations
 *     gen[1] older  ──► dropped when over max_blocks      size(w)  = blocks(gen0) + blocks(gen1)
 *
 * (size(w) counts a prompt routed in both generations twice: SGLang's "smallest tree" is a
 * relative comparison, for which that is close enough.)
 *
 * Not thread-safe (the router calls it under its mutex).
 */
#ifndef DECIDER_HISTORY_H
#define DECIDER_HISTORY_H

#include <stddef.h>
#include <stdint.h>

typedef struct decider_history decider_history_t;

/* NULL on allocation failure. */
decider_history_t *decider_history_new(size_t max_blocks, uint64_t check_ms);
void decider_history_destroy(decider_history_t **self_p);

/* The id of worker `name` (created on first use), or -1 when IPL_INDEX_MAX_WORKERS are known. */
int decider_history_worker(decider_history_t *self, const char *name);

/* Records that the prompt with these block hashes was routed to `worker` at `now_ms`
 * (monotonic or simulated; only differences matter). 0 or IPL_E_NOMEM / IPL_E_RANGE. */
int decider_history_insert(decider_history_t *self, int worker, const uint64_t *hashes, size_t n,
                           uint64_t now_ms);

/* prefix[w] (history ids, capacity `max`) = the leading blocks of the prompt routed to w;
 * returns the largest. */
size_t decider_history_match(decider_history_t *self, const uint64_t *hashes, size_t n,
                             uint32_t *prefix, size_t max);

size_t decider_history_worker_blocks(const decider_history_t *self, int worker); /* size(w) */
size_t decider_history_memberships(const decider_history_t *self);
uint64_t decider_history_evictions(const decider_history_t *self); /* generations dropped */

#endif
