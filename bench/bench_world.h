/*
 * bench_world.h — the prompt population bench_index and bench_decision fill indexes with
 * (header-only, as bench.h):
 *
 *   - `nfamilies` prompt families (system prompts, shared documents), family f with a shared
 *     prefix of 32-256 blocks and 4 affine workers (where a cache-aware router sends it);
 *   - prompts of BENCH_PROMPT (512) blocks: their family's prefix, then blocks of their own;
 *     each is cached on one of its family's affine workers, and on a second one with
 *     probability 1/4 (bench_world_holders), so prefixes sit on up to 4 workers, suffixes on
 *     1-2;
 *   - block hashes are distinct random 64-bit values (as our XXH3 chain hashes are), derived
 *     from (family, position) and (prompt, position), so no big array holds them.
 */
#ifndef BENCH_WORLD_H
#define BENCH_WORLD_H

#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "ipl_proto.h"

#define BENCH_WORLD_MAX_FAMILIES 4096u
#define BENCH_PROMPT             512u /* blocks per prompt */
#define BENCH_AFFINE             4u   /* affine workers per family */
#define BENCH_MIN_PREFIX         32u
#define BENCH_MAX_PREFIX         256u

typedef struct {
    uint32_t nfamilies;
    uint32_t prefix[BENCH_WORLD_MAX_FAMILIES];
    uint16_t affine[BENCH_WORLD_MAX_FAMILIES][BENCH_AFFINE];
    uint64_t salt;
} bench_world_t;

/* Draws the families' prefix lengths and affine workers (distinct when there are enough). */
static inline void bench_world_init(bench_world_t *wd, uint32_t nfamilies, int nworkers,
                                    bench_rng_t *rng)
{
    if (nfamilies == 0 || nfamilies > BENCH_WORLD_MAX_FAMILIES || nworkers < 1)
        BENCH_DIE("bench_world_init: 1..%u families, >= 1 worker", BENCH_WORLD_MAX_FAMILIES);
    wd->nfamilies = nfamilies;
    wd->salt = bench_rand(rng);
    for (uint32_t f = 0; f < nfamilies; f++) {
        wd->prefix[f] = (uint32_t)bench_range(rng, BENCH_MIN_PREFIX, BENCH_MAX_PREFIX);
        for (uint32_t j = 0; j < BENCH_AFFINE; j++) {
            uint16_t w;
            bool dup;
            do {
                w = (uint16_t)(bench_rand(rng) % (uint64_t)nworkers);
                dup = false;
                for (uint32_t k = 0; k < j; k++)
                    dup |= wd->affine[f][k] == w;
            } while (dup && (uint32_t)nworkers > j);
            wd->affine[f][j] = w;
        }
    }
}

/* A random family. */
static inline uint32_t bench_world_family(const bench_world_t *wd, bench_rng_t *rng)
{
    return (uint32_t)(bench_rand(rng) % wd->nfamilies);
}

/* The BENCH_PROMPT block hashes of prompt p of family f (its prefix shared by the family);
 * prompt ids never used before give prompts nobody holds. */
static inline void bench_world_prompt(const bench_world_t *wd, uint32_t f, uint64_t p,
                                      uint64_t *out)
{
    uint32_t lf = wd->prefix[f];
    for (uint32_t i = 0; i < lf; i++)
        out[i] = bench_mix(wd->salt ^ ((uint64_t)f << 20 | i));
    for (uint32_t i = lf; i < BENCH_PROMPT; i++)
        out[i] = bench_mix(wd->salt ^ (0x8000000000000000ull | p << 12 | i));
}

/* The holders of a new prompt of family f: one affine worker, and a second one 1 time in 4
 * (*second = -1 when none). */
static inline void bench_world_holders(const bench_world_t *wd, uint32_t f, bench_rng_t *rng,
                                       int *primary, int *second)
{
    *primary = wd->affine[f][bench_rand(rng) % BENCH_AFFINE];
    *second = -1;
    if (bench_rand(rng) % 4 == 0) {
        int w = wd->affine[f][bench_rand(rng) % BENCH_AFFINE];
        if (w != *primary) *second = w;
    }
}

/* The ROUTE_REQ a gateway sends for prompt p of family f (req_id k, `block` tokens per block,
 * brief as the gateway asks), its BENCH_PROMPT block hashes written to `hashes`. */
static inline ipl_route_req_t bench_world_request(const bench_world_t *wd, uint32_t f, uint64_t p,
                                                  uint64_t k, const char *model, uint64_t block,
                                                  uint64_t *hashes)
{
    bench_world_prompt(wd, f, p, hashes);
    return (ipl_route_req_t){.req_id = k,
                             .model = (char *)model,
                             .tenant = "",
                             .prompt_tokens = BENCH_PROMPT * block,
                             .block_size = block,
                             .hashes = hashes,
                             .hashes_len = BENCH_PROMPT,
                             .strategy = "",
                             .brief = 1};
}

/* The KV_EVENT STORED of blocks i .. i + n of prompt `prompt` (`hashes`: all its blocks) that
 * a collector sends for `worker`: the parent hint is the block before, as collectors give it. */
static inline ipl_kv_event_t bench_world_stored(const char *worker, uint64_t prompt,
                                                const uint64_t *hashes, uint32_t i, uint32_t n,
                                                uint64_t block)
{
    return (ipl_kv_event_t){.worker = (char *)worker,
                            .epoch = 1,
                            .src_seq = prompt,
                            .op = IPL_KV_OP_STORED,
                            .parent = i ? hashes[i - 1] : 0,
                            .hashes = (uint64_t *)hashes + i,
                            .hashes_len = n,
                            .block_size = block};
}

/* One piece of a prompt a worker stores (a BlockStored event): blocks i .. i + n of prompt
 * `prompt`, whose hashes are `hashes` (all BENCH_PROMPT of them). */
typedef void bench_world_piece_fn(void *arg, int worker, uint64_t prompt, const uint64_t *hashes,
                                  uint32_t i, uint32_t n);

/* Fills the population: prompts of random families, each stored by its holders
 * (bench_world_holders) in pieces of 1-32 blocks (the size of vLLM's BlockStored events)
 * handed to `piece`, until `count(arg)` (the memberships so far) reaches `target` or `cap`
 * prompts exist. family[p] gets prompt p's family (`cap` entries). Returns the prompts. */
static inline uint64_t bench_world_fill(const bench_world_t *wd, bench_rng_t *rng, uint64_t target,
                                        uint64_t cap, uint32_t *family, bench_world_piece_fn *piece,
                                        uint64_t (*count)(void *), void *arg)
{
    uint64_t hashes[BENCH_PROMPT];
    uint64_t np = 0;
    while (count(arg) < target && np < cap) {
        uint32_t f = bench_world_family(wd, rng);
        family[np] = f;
        bench_world_prompt(wd, f, np, hashes);
        int holder[2];
        bench_world_holders(wd, f, rng, &holder[0], &holder[1]);
        for (int h = 0; h < 2 && holder[h] >= 0; h++)
            for (uint32_t i = 0; i < BENCH_PROMPT;) {
                uint32_t n = (uint32_t)bench_range(rng, 1, 32);
                if (n > BENCH_PROMPT - i) n = BENCH_PROMPT - i;
                piece(arg, holder[h], np, hashes, i, n);
                i += n;
            }
        np++;
    }
    return np;
}

#endif
