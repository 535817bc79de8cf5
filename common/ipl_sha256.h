/*
 * ipl_sha256 — SHA-256 (FIPS 180-4), for reproducing vLLM's prefix-cache block hashes
 * (`--prefix-caching-hash-algo sha256` / `sha256_cbor`, vllm-project/vllm: vllm/utils/hashing.py)
 * without a crypto library dependency.
 *
 *     uint8_t digest[IPL_SHA256_LEN];
 *     ipl_sha256(data, len, digest);                  one shot
 *
 *     ipl_sha256_t h;                                 streaming: init, update*, final
 *     ipl_sha256_init(&h);
 *     ipl_sha256_update(&h, part1, n1);
 *     ipl_sha256_update(&h, part2, n2);
 *     ipl_sha256_final(&h, digest);
 *
 * The context is a plain value (not an opaque handle) so that hashing on a hot path allocates
 * nothing, as with XXH3_state_t: put it on the stack. Not for secrets: no constant-time
 * guarantees beyond what the algorithm gives, no zeroing of state.
 */
#ifndef IPL_SHA256_H
#define IPL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define IPL_SHA256_LEN 32 /* digest bytes */

typedef struct {
    uint32_t state[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t block[64];
    size_t nblock; /* bytes waiting in `block` (< 64) */
} ipl_sha256_t;

void ipl_sha256_init(ipl_sha256_t *ctx);
/* `data` may be NULL when `len` is 0. */
void ipl_sha256_update(ipl_sha256_t *ctx, const void *data, size_t len);
/* Writes the digest; the context must be initialised again before reuse. */
void ipl_sha256_final(ipl_sha256_t *ctx, uint8_t out[IPL_SHA256_LEN]);
void ipl_sha256(const void *data, size_t len, uint8_t out[IPL_SHA256_LEN]);

#endif
