/*
 * ipl_hash — chained XXH3 block hashes (see ipl_hash.h for the chain definition).
 *
 * Tokens are hashed as little-endian u32 bytes so that every host computes the same value. On
 * a little-endian host that is the array's own memory; a big-endian host byte-swaps through a
 * small stack buffer into XXH3's streaming state, which gives the same digest as one call.
 */
#include "ipl_hash.h"

#include <string.h>
/* XXH3 compiled into this file rather than called in libxxhash: a block of our usual 16
 * tokens is 64 bytes, and with the length a constant the compiler keeps only XXH3's 17..128
 * byte path, inlined (xxHash README: "+200%" on small keys). Same digests as the library. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define S_LITTLE_ENDIAN 1
#else
#define S_LITTLE_ENDIAN 0
#endif

#define S_USUAL_BLOCK 16 /* tokens: vLLM's default block size, the one worth specialising */

uint64_t ipl_block_hash(uint64_t parent, const uint32_t *tokens, size_t block_size)
{
#if S_LITTLE_ENDIAN
    if (block_size == S_USUAL_BLOCK)
        return XXH3_64bits_withSeed(tokens, S_USUAL_BLOCK * sizeof(uint32_t), parent);
    return XXH3_64bits_withSeed(tokens, block_size * sizeof(uint32_t), parent);
#else
    XXH3_state_t state;
    uint8_t buf[256 * 4];
    XXH3_64bits_reset_withSeed(&state, parent);
    for (size_t k = 0; k < block_size;) {
        size_t n = 0;
        for (; n < sizeof buf / 4 && k < block_size; n++, k++) {
            buf[4 * n + 0] = (uint8_t)tokens[k];
            buf[4 * n + 1] = (uint8_t)(tokens[k] >> 8);
            buf[4 * n + 2] = (uint8_t)(tokens[k] >> 16);
            buf[4 * n + 3] = (uint8_t)(tokens[k] >> 24);
        }
        XXH3_64bits_update(&state, buf, 4 * n);
    }
    return XXH3_64bits_digest(&state);
#endif
}

size_t ipl_block_hashes(uint64_t parent, const uint32_t *tokens, size_t ntokens, size_t block_size,
                        uint64_t *out, size_t max)
{
    if (block_size == 0) return 0;
    size_t nblocks = ntokens / block_size;
    if (nblocks > max) nblocks = max;
#if S_LITTLE_ENDIAN
    if (block_size == S_USUAL_BLOCK) {
        for (size_t i = 0; i < nblocks; i++) {
            parent = XXH3_64bits_withSeed(tokens + i * S_USUAL_BLOCK,
                                          S_USUAL_BLOCK * sizeof(uint32_t), parent);
            out[i] = parent;
        }
        return nblocks;
    }
#endif
    for (size_t i = 0; i < nblocks; i++) {
        parent = ipl_block_hash(parent, tokens + i * block_size, block_size);
        out[i] = parent;
    }
    return nblocks;
}

uint64_t ipl_hash_chain_start(uint64_t key)
{
    return IPL_HASH_ROOT ^ key;
}

/* Adds a tagged, length-prefixed field, so that ("ab", NULL) and (NULL, "ab") — or a name that
 * merely ends where the salt begins — can never produce the same input. */
static void s_field(XXH3_state_t *state, char tag, const char *text)
{
    uint8_t head[9];
    uint64_t len = strlen(text);
    head[0] = (uint8_t)tag;
    for (int k = 0; k < 8; k++)
        head[1 + k] = (uint8_t)(len >> (8 * k));
    XXH3_64bits_update(state, head, sizeof head);
    XXH3_64bits_update(state, text, (size_t)len);
}

uint64_t ipl_hash_key(const char *lora_name, const char *cache_salt)
{
    if (!lora_name && !cache_salt) return 0;
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    if (lora_name) s_field(&state, 'L', lora_name);
    if (cache_salt) s_field(&state, 'S', cache_salt);
    uint64_t key = XXH3_64bits_digest(&state);
    return key ? key : 1; /* 0 is reserved for the base model */
}

uint64_t ipl_hash_bytes(const void *data, size_t len)
{
    return XXH3_64bits(data, len);
}
