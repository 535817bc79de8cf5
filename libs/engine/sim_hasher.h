/*
 * sim_hasher — vLLM's prefix-cache block hashes, byte for byte (vllm-project/vllm, files below).
 *
 * vLLM (vllm/v1/core/kv_cache_utils.py, vllm/utils/hashing.py) hashes every full block as
 *
 *     hash_fn((parent_digest, tuple(block_token_ids), extra_keys))     -> bytes
 *
 * where parent_digest is NONE_HASH for a chain's first block, extra_keys is None or a tuple of
 * strings (the LoRA adapter's name on every block, then the request's cache_salt on block 0
 * only), and hash_fn is `--prefix-caching-hash-algo`:
 *
 *     sha256       SHA-256 of pickle.dumps(x, protocol=5)              32 bytes (vLLM default)
 *     sha256_cbor  SHA-256 of cbor2.dumps(x, canonical=True)           32 bytes
 *     xxhash       XXH3-128 (canonical big-endian) of the pickle form   16 bytes
 *     xxhash_cbor  XXH3-128 of the canonical CBOR form                 16 bytes
 *
 * NONE_HASH is hash_fn(PYTHONHASHSEED) — the seed *string* — when that variable is set; vLLM
 * draws os.urandom(32) otherwise, which nobody outside the process can reproduce: the
 * simulator takes 32 bytes derived from its --seed instead (sim_hasher_new), so a run stays
 * repeatable. The wire value of a digest (ExternalBlockHash as an int, the default) is its
 * last 8 bytes read big-endian (`lo`).
 *
 * The pickle form is CPython's protocol-5 output for exactly these types: PROTO 5, one FRAME,
 * SHORT_BINBYTES + MEMOIZE for the digest, BININT1/BININT2/BININT/LONG1 ints inside MARK ..
 * TUPLE (TUPLE1..3 for 1–3 items) + MEMOIZE, SHORT_BINUNICODE/BINUNICODE + MEMOIZE for
 * strings, NONE, TUPLE3 + MEMOIZE, STOP. It is only exact while the whole pickle fits one
 * frame (< 64 KiB): block sizes up to SIM_HASHER_MAX_BLOCK tokens and extra keys up to
 * SIM_HASHER_MAX_KEY bytes each keep it there. The unit tests compare both forms with bytes
 * produced by CPython 3.11's pickle and cbor2 5.4.
 *
 * Immutable after creation; the scratch buffer makes a hasher single-threaded (the engine's
 * lock guards it).
 */
#ifndef SIM_HASHER_H
#define SIM_HASHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_HASH_MAX         32   /* digest bytes at most */
#define SIM_HASHER_MAX_BLOCK 4096 /* tokens per block */
#define SIM_HASHER_MAX_KEY   4096 /* bytes per extra key (LoRA name, cache salt) */

typedef enum {
    SIM_HASH_SHA256 = 0, /* vLLM's default since 0.10.2 */
    SIM_HASH_SHA256_CBOR,
    SIM_HASH_XXHASH,
    SIM_HASH_XXHASH_CBOR,
} sim_hash_algo_t;

/* A block's digest (vLLM's BlockHash bytes). */
typedef struct {
    uint8_t bytes[SIM_HASH_MAX];
    uint8_t len; /* 32 (sha256*) or 16 (xxhash*); NONE_HASH may be 32 with xxhash */
    uint64_t lo; /* the last 8 bytes, big-endian: the wire value */
} sim_hash_t;

/* "sha256" | "sha256_cbor" | "xxhash" | "xxhash_cbor". 0 or IPL_E_INVAL. */
int sim_hash_algo_parse(const char *name, sim_hash_algo_t *out);
const char *sim_hash_algo_name(sim_hash_algo_t algo);

bool sim_hash_eq(const sim_hash_t *a, const sim_hash_t *b);
/* A 32-byte digest whose wire value is `v` (zeros, then v big-endian): tests and examples. */
sim_hash_t sim_hash_from_u64(uint64_t v);

typedef struct sim_hasher sim_hasher_t;

/* `pythonhashseed`: the PYTHONHASHSEED value (NONE_HASH = hash_fn(it)), or NULL for vLLM's
 * unset case, where NONE_HASH is 32 bytes derived from `fallback_seed` (vLLM: random).
 * NULL on allocation failure. */
sim_hasher_t *sim_hasher_new(sim_hash_algo_t algo, const char *pythonhashseed,
                             uint64_t fallback_seed);
void sim_hasher_destroy(sim_hasher_t **self_p);

sim_hash_algo_t sim_hasher_algo(const sim_hasher_t *self);
const sim_hash_t *sim_hasher_none_hash(const sim_hasher_t *self);

/* The extra keys of one block, in vLLM's order; nkeys 0 means None. Each key is a UTF-8
 * string of at most SIM_HASHER_MAX_KEY bytes. */
typedef struct {
    const char *keys[2];
    uint32_t nkeys;
} sim_extra_keys_t;

/* hash_fn((parent or NONE_HASH, tuple(tokens[0..n)), extra)); `parent` NULL for a chain's
 * first block, `extra` NULL for None. 1 <= n <= SIM_HASHER_MAX_BLOCK. */
sim_hash_t sim_hasher_block(sim_hasher_t *self, const sim_hash_t *parent, const uint32_t *tokens,
                            uint32_t n, const sim_extra_keys_t *extra);

/* The bytes hash_fn digests for that block (pickle or CBOR form), for tests and debugging.
 * Returns the length; writes at most `cap` bytes into `out`. */
size_t sim_hasher_serialize(const sim_hasher_t *self, const sim_hash_t *parent,
                            const uint32_t *tokens, uint32_t n, const sim_extra_keys_t *extra,
                            uint8_t *out, size_t cap);

#endif
