/*
 * bench_index — the prefix index (common/ipl_index) at scale: lookup latency and memory.
 *
 * The index is filled, through ipl_index_add, with the KV caches of `--workers` workers until
 * it holds `--memberships` (block, worker) pairs of the prompt population of bench_world.h
 * (4,096 families).
 *
 * Figures (one core, one thread):
 *   bytes_per_membership   RSS growth (/proc/self/statm, before ipl_index_new vs after the
 *                          last add) / memberships
 *   lookup_p50_us, _p99_us ipl_index_match of a cached 512-block prompt drawn at random from
 *                          the whole population (every block is found: the longest walk);
 *                          "cold-ish": the population spans the whole table (far larger than
 *                          L2; see docs/benchmarks.md for the L3 caveat)
 *   lookup_partial_*       a new prompt of a random family: its prefix hits, then a miss
 *   (p50 over every lookup; p99 = the median of 5 rounds' p99, see s_report)
 *
 * Arrival order (--segment S): by default each prompt's blocks are added in one call, as if
 * each prompt were prefilled alone. With --segment S the blocks arrive as vLLM reports them
 * under load: 32 prompts in flight at once, each call adding the next 1..S blocks of one of
 * them (chosen at random), with the parent hint (ipl_index_add_chain) the collector sends —
 * chunked prefill interleaves segments, decoding adds one block at a time (S = 1: the worst
 * case, every block its own call, interleaved with 31 other chains).
 *
 *   build/bench/bench_index [--workers 64] [--memberships 10000000] [--lookups 200000]
 *                           [--segment 0] [--seed 1] [--suffix NAME]
 *                           (NAME appended to figure names)
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_world.h"
#include "ipl_index.h"

#define S_FAMILIES 4096u

typedef struct {
    uint32_t family;
} s_prompt_t;

/* Times `n` lookups; writes per-lookup ns into `lat`. `hit`: prompts from the population. */
static void s_lookups(const ipl_index_t *ix, const bench_world_t *wd, const s_prompt_t *prompts,
                      uint64_t nprompts, uint64_t fresh_base, bool hit, uint64_t *lat, size_t n,
                      bench_rng_t *rng, uint64_t *depth_sum)
{
    uint64_t hashes[BENCH_PROMPT];
    uint32_t prefix[IPL_INDEX_MAX_WORKERS];
    *depth_sum = 0;
    for (size_t q = 0; q < n; q++) {
        if (hit) {
            uint64_t p = bench_rand(rng) % nprompts;
            bench_world_prompt(wd, prompts[p].family, p, hashes);
        } else {
            uint32_t f = bench_world_family(wd, rng);
            bench_world_prompt(wd, f, fresh_base + q, hashes);
        }
        uint64_t t0 = bench_now_ns();
        size_t depth = ipl_index_match(ix, hashes, BENCH_PROMPT, prefix, IPL_INDEX_MAX_WORKERS);
        uint64_t t1 = bench_now_ns();
        lat[q] = t1 - t0;
        *depth_sum += depth;
    }
}

/* Fills the index one whole prompt per call; returns the number of prompts. */
static uint64_t s_fill(ipl_index_t *ix, const bench_world_t *wd, s_prompt_t *prompts, uint64_t cap,
                       uint64_t target, bench_rng_t *rng)
{
    uint64_t hashes[BENCH_PROMPT];
    uint64_t np = 0;
    while (ipl_index_memberships(ix) < target && np < cap) {
        uint32_t f = bench_world_family(wd, rng);
        prompts[np].family = f;
        bench_world_prompt(wd, f, np, hashes);
        int primary, second;
        bench_world_holders(wd, f, rng, &primary, &second);
        if (ipl_index_add(ix, primary, hashes, BENCH_PROMPT) != 0) BENCH_DIE("ipl_index_add");
        if (second >= 0 && ipl_index_add(ix, second, hashes, BENCH_PROMPT) != 0)
            BENCH_DIE("ipl_index_add");
        np++;
    }
    return np;
}

#define S_INFLIGHT 32u

typedef struct {
    uint64_t hashes[BENCH_PROMPT];
    uint32_t done; /* blocks added so far */
    int primary, second;
} s_flight_t;

/* Fills the index as vLLM reports blocks under load: S_INFLIGHT prompts at once, each call
 * the next 1..segment blocks of a random one, with the parent hint. Returns the prompts. */
static uint64_t s_fill_interleaved(ipl_index_t *ix, const bench_world_t *wd, s_prompt_t *prompts,
                                   uint64_t cap, uint64_t target, uint32_t segment,
                                   bench_rng_t *rng)
{
    s_flight_t *fl = calloc(S_INFLIGHT, sizeof *fl);
    if (!fl) BENCH_DIE("out of memory");
    uint64_t np = 0;
    for (uint32_t j = 0; j < S_INFLIGHT; j++)
        fl[j].done = BENCH_PROMPT; /* empty: starts a prompt on first use */
    while (ipl_index_memberships(ix) < target) {
        s_flight_t *f = &fl[bench_rand(rng) % S_INFLIGHT];
        if (f->done == BENCH_PROMPT) {
            if (np == cap) break;
            uint32_t fam = bench_world_family(wd, rng);
            prompts[np].family = fam;
            bench_world_prompt(wd, fam, np, f->hashes);
            bench_world_holders(wd, fam, rng, &f->primary, &f->second);
            f->done = 0;
            np++;
        }
        uint32_t n = (uint32_t)bench_range(rng, 1, segment);
        if (n > BENCH_PROMPT - f->done) n = BENCH_PROMPT - f->done;
        uint64_t parent = f->done ? f->hashes[f->done - 1] : 0;
        if (ipl_index_add_chain(ix, f->primary, parent, f->hashes + f->done, n) != 0 ||
            (f->second >= 0 &&
             ipl_index_add_chain(ix, f->second, parent, f->hashes + f->done, n) != 0))
            BENCH_DIE("ipl_index_add_chain");
        f->done += n;
    }
    /* prompts still in flight are only partly cached: finish them so every lookup hits fully */
    for (uint32_t j = 0; j < S_INFLIGHT; j++) {
        s_flight_t *f = &fl[j];
        if (f->done == BENCH_PROMPT) continue;
        uint64_t parent = f->done ? f->hashes[f->done - 1] : 0;
        uint32_t n = BENCH_PROMPT - f->done;
        if (ipl_index_add_chain(ix, f->primary, parent, f->hashes + f->done, n) != 0 ||
            (f->second >= 0 &&
             ipl_index_add_chain(ix, f->second, parent, f->hashes + f->done, n) != 0))
            BENCH_DIE("ipl_index_add_chain");
    }
    free(fl);
    return np;
}

/* p50 over every sample; p99 as the median of BENCH_ROUNDS consecutive rounds' p99, so that one
 * burst of another process on a shared machine does not decide the figure alone. */
static void s_report(const char *what, const char *suffix, uint64_t *lat, size_t n,
                     const char *note)
{
    char name[128];
    uint64_t p99r[BENCH_ROUNDS];
    double p99 = (double)bench_p99_of_rounds(lat, n, p99r) / 1e3;
    double p50 = (double)bench_quantile(lat, n, 0.50) / 1e3;
    double p99all = (double)bench_quantile(lat, n, 0.99) / 1e3;
    double p999 = (double)bench_quantile(lat, n, 0.999) / 1e3;
    snprintf(name, sizeof name, "%s_p50_us%s", what, suffix);
    bench_figure(name, p50, "us", note);
    snprintf(name, sizeof name, "%s_p99_us%s", what, suffix);
    bench_figure(name, p99, "us", note);
    BENCH_LOG("%s: p50 %.2f us; p99 per round %.2f .. %.2f us (median %.2f), over all %.2f us; "
              "p99.9 %.2f us, max %.2f us",
              what, p50, (double)p99r[0] / 1e3, (double)p99r[BENCH_ROUNDS - 1] / 1e3, p99, p99all, p999,
              (double)lat[n - 1] / 1e3);
}

int main(int argc, char **argv)
{
    int nworkers = (int)bench_arg_int(argc, argv, "workers", 64);
    uint64_t target = (uint64_t)bench_arg_int(argc, argv, "memberships", 10000000);
    size_t nlookups = (size_t)bench_arg_int(argc, argv, "lookups", 200000);
    uint64_t seed = (uint64_t)bench_arg_int(argc, argv, "seed", 1);
    const char *suffix = bench_arg(argc, argv, "suffix", "");
    uint32_t segment = (uint32_t)bench_arg_int(argc, argv, "segment", 0);
    if (nworkers < 1 || nworkers > IPL_INDEX_MAX_WORKERS || target < 10000 || nlookups < 100 ||
        segment > BENCH_PROMPT)
        BENCH_DIE("usage: bench_index [--workers 1..%d] [--memberships >= 10000] "
                  "[--lookups >= 100] [--segment 0..%u] [--seed N] [--suffix NAME]",
                  IPL_INDEX_MAX_WORKERS, BENCH_PROMPT);

    bench_rng_t rng = bench_rng(seed);
    bench_world_t *wd = calloc(1, sizeof *wd);
    uint64_t cap_prompts = target / (BENCH_PROMPT - BENCH_MAX_PREFIX) + S_FAMILIES + 16;
    s_prompt_t *prompts = malloc(cap_prompts * sizeof *prompts);
    uint64_t *lat = malloc(nlookups * sizeof *lat);
    uint64_t *hashes = malloc(BENCH_PROMPT * sizeof *hashes);
    if (!wd || !prompts || !lat || !hashes) BENCH_DIE("out of memory");
    bench_world_init(wd, S_FAMILIES, nworkers, &rng);
    /* touch everything allocated so far: only the index may grow the RSS from here */
    memset(prompts, 0, cap_prompts * sizeof *prompts);
    memset(lat, 0, nlookups * sizeof *lat);

    size_t rss0 = bench_rss_bytes();
    ipl_index_t *ix = ipl_index_new();
    if (!ix) BENCH_DIE("out of memory");
    char name[32];
    for (int w = 0; w < nworkers; w++) {
        snprintf(name, sizeof name, "worker-%d", w);
        if (ipl_index_worker(ix, name) != w) BENCH_DIE("worker ids");
    }
    uint64_t t0 = bench_now_ns();
    uint64_t np = segment ? s_fill_interleaved(ix, wd, prompts, cap_prompts, target, segment, &rng)
                          : s_fill(ix, wd, prompts, cap_prompts, target, &rng);
    uint64_t t1 = bench_now_ns();
    size_t rss1 = bench_rss_bytes();
    size_t members = ipl_index_memberships(ix);
    if (members < target) BENCH_DIE("population too small for %" PRIu64 " memberships", target);
    BENCH_LOG("%d workers, %" PRIu64 " prompts: %zu blocks, %zu memberships (%.2f per block) "
              "in %.2f s (%.1f M adds/s); RSS +%.1f MB, index says %.1f MB",
              nworkers, np, ipl_index_blocks(ix), members,
              (double)members / (double)ipl_index_blocks(ix), (double)(t1 - t0) / 1e9,
              (double)np * BENCH_PROMPT * 1.25 / ((double)(t1 - t0) / 1e9) / 1e6,
              (double)(rss1 - rss0) / 1e6, (double)ipl_index_memory_bytes(ix) / 1e6);

    char fig[128], note[256];
    snprintf(note, sizeof note, "%zu memberships, %zu blocks, %d workers", members,
             ipl_index_blocks(ix), nworkers);
    snprintf(fig, sizeof fig, "bytes_per_membership%s", suffix);
    bench_figure(fig, (double)(rss1 - rss0) / (double)members, "B", note);
    snprintf(fig, sizeof fig, "index_bytes_per_membership%s", suffix);
    bench_figure(fig, (double)ipl_index_memory_bytes(ix) / (double)members, "B",
                 "the index's own accounting (ipl_index_memory_bytes)");

    uint64_t depth;
    snprintf(note, sizeof note,
             "512-block cached prompt, %zu memberships, %d workers; p99: median of %d rounds",
             members, nworkers, BENCH_ROUNDS);
    s_lookups(ix, wd, prompts, np, 0, true, lat, nlookups / 10, &rng, &depth); /* warm-up */
    s_lookups(ix, wd, prompts, np, 0, true, lat, nlookups, &rng, &depth);
    if (depth != (uint64_t)nlookups * BENCH_PROMPT)
        BENCH_DIE("a cached prompt was not fully matched (%" PRIu64 " blocks)", depth);
    s_report("lookup", suffix, lat, nlookups, note);
    s_lookups(ix, wd, prompts, np, 1ull << 40, false, lat, nlookups, &rng, &depth);
    BENCH_LOG("partial: mean depth %.1f blocks", (double)depth / (double)nlookups);
    s_report("lookup_partial", suffix, lat, nlookups,
             "new prompt of a known family: prefix hit, then a miss; p99: median of 5 rounds");

    ipl_index_destroy(&ix);
    free(hashes);
    free(lat);
    free(prompts);
    free(wd);
    return 0;
}
