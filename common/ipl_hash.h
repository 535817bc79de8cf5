/*
 * ipl_hash — our chained 64-bit block hashes (XXH3) and small hashing helpers.
 *
 * A prompt of token ids is cut into full blocks of `block_size` tokens (a partial last block
 * is never hashed, as vLLM never caches it). Block i's hash is
 *
 *     h[i] = XXH3_64bits_withSeed(tokens[i*bs .. (i+1)*bs) as little-endian u32, parent)
 *     parent of block 0 = IPL_HASH_ROOT ^ key,   parent of block i = h[i-1]
 *
 * where `key` separates hash spaces that must never match each other: 0 for the base model,
 * ipl_hash_key(lora_name, cache_salt) otherwise (vLLM adds the LoRA name to every block's
 * extra keys and the cache salt to the first block's; both change the whole chain).
 * The gateway computes these from the request's tokens and the collector recomputes them from
 * BlockStored token ids, so both sides agree whatever hash the engine itself uses.
 */
#ifndef IPL_HASH_H
#define IPL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define IPL_HASH_ROOT 0x69706c2d726f6f74ULL /* "ipl-root" */

/* A 64-bit mixer for in-memory hash tables keyed by integers or pointers: splitmix64's step
 * (the golden-ratio increment, then its finaliser), a bijection with full avalanche, so keys
 * like 1, 2, 3 or pointers of one allocation run spread over every bit. Not a stable format:
 * nothing stored or sent may depend on it. */
static inline uint64_t ipl_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Hash of one block given its parent hash. */
uint64_t ipl_block_hash(uint64_t parent, const uint32_t *tokens, size_t block_size);
/* Hashes the full blocks of `tokens` into `out` (capacity `max`); returns the number of full
 * blocks hashed (min(ntokens / block_size, max)). `parent` is the hash before the first block:
 * ipl_hash_chain_start(key) for a prompt from the beginning. */
size_t ipl_block_hashes(uint64_t parent, const uint32_t *tokens, size_t ntokens,
                        size_t block_size, uint64_t *out, size_t max);
uint64_t ipl_hash_chain_start(uint64_t key);
/* The key for a LoRA adapter and/or a cache salt; either may be NULL; both NULL gives 0. */
uint64_t ipl_hash_key(const char *lora_name, const char *cache_salt);
/* XXH3-64 of bytes (seed 0). */
uint64_t ipl_hash_bytes(const void *data, size_t len);

#endif
