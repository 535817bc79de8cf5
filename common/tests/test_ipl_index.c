/*
 * Unit tests for ipl_index: membership, prefix matching, clearing, growth, foreach, many
 * workers, and a randomised comparison against a brute-force model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_error.h"
#include "ipl_index.h"

static ipl_index_t *s_new(void)
{
    ipl_index_t *idx = ipl_index_new();
    assert_non_null(idx);
    return idx;
}

static void test_workers(void **state)
{
    (void)state;
    ipl_index_t *idx = s_new();
    assert_int_equal(ipl_index_nworkers(idx), 0);
    assert_int_equal(ipl_index_find_worker(idx, "w0"), -1);
    assert_int_equal(ipl_index_worker(idx, "w0"), 0);
    assert_int_equal(ipl_index_worker(idx, "w1"), 1);
    assert_int_equal(ipl_index_worker(idx, "w0"), 0);
    assert_int_equal(ipl_index_find_worker(idx, "w1"), 1);
    assert_string_equal(ipl_index_worker_name(idx, 1), "w1");
    assert_null(ipl_index_worker_name(idx, 2));
    assert_null(ipl_index_worker_name(idx, -1));
    assert_int_equal(ipl_index_nworkers(idx), 2);
    /* bad ids are rejected, not asserted */
    uint64_t h = 1;
    assert_int_equal(ipl_index_add(idx, 5, &h, 1), IPL_E_RANGE);
    assert_int_equal(ipl_index_remove(idx, -1, &h, 1), IPL_E_RANGE);
    ipl_index_destroy(&idx);
    assert_null(idx);
    ipl_index_destroy(&idx); /* NULL is fine */
}

static void test_worker_limit(void **state)
{
    (void)state;
    ipl_index_t *idx = s_new();
    char name[32];
    for (int i = 0; i < IPL_INDEX_MAX_WORKERS; i++) {
        snprintf(name, sizeof name, "worker-%d", i);
        assert_int_equal(ipl_index_worker(idx, name), i);
    }
    assert_int_equal(ipl_index_worker(idx, "one-too-many"), IPL_E_RANGE);
    assert_int_equal(ipl_index_worker(idx, "worker-1023"), 1023);
    assert_int_equal(ipl_index_find_worker(idx, "worker-517"), 517);
    uint64_t h[2] = {7, 8};
    assert_int_equal(ipl_index_add(idx, 1023, h, 2), 0);
    uint32_t prefix[IPL_INDEX_MAX_WORKERS];
    assert_int_equal(ipl_index_match(idx, h, 2, prefix, IPL_INDEX_MAX_WORKERS), 2);
    assert_int_equal(prefix[1023], 2);
    assert_int_equal(prefix[0], 0);
    ipl_index_destroy(&idx);
}

static void test_add_remove_idempotent(void **state)
{
    (void)state;
    ipl_index_t *idx = s_new();
    int a = ipl_index_worker(idx, "a"), b = ipl_index_worker(idx, "b");
    uint64_t h[3] = {0, 0x1111, 0xffffffffffffffffULL}; /* 0 is a valid hash */
    assert_int_equal(ipl_index_add(idx, a, h, 3), 0);
    assert_int_equal(ipl_index_add(idx, a, h, 3), 0);
    assert_int_equal(ipl_index_blocks(idx), 3);
    assert_int_equal(ipl_index_memberships(idx), 3);
    assert_int_equal(ipl_index_worker_blocks(idx, a), 3);
    assert_int_equal(ipl_index_add(idx, b, h + 1, 2), 0);
    assert_int_equal(ipl_index_blocks(idx), 3);
    assert_int_equal(ipl_index_memberships(idx), 5);
    assert_int_equal(ipl_index_worker_blocks(idx, b), 2);

    assert_int_equal(ipl_index_remove(idx, a, h, 2), 0);
    assert_int_equal(ipl_index_remove(idx, a, h, 2), 0); /* idempotent */
    assert_int_equal(ipl_index_blocks(idx), 2);          /* block 0 gone, 0x1111 kept by b */
    assert_int_equal(ipl_index_memberships(idx), 3);
    assert_int_equal(ipl_index_worker_blocks(idx, a), 1);
    uint64_t unknown = 42;
    assert_int_equal(ipl_index_remove(idx, b, &unknown, 1), 0);
    assert_int_equal(ipl_index_remove(idx, b, h + 1, 2), 0);
    assert_int_equal(ipl_index_remove(idx, a, h + 2, 1), 0);
    assert_int_equal(ipl_index_blocks(idx), 0);
    assert_int_equal(ipl_index_memberships(idx), 0);
    assert_int_equal(ipl_index_add(idx, a, NULL, 0), 0);
    assert_true(ipl_index_memory_bytes(idx) > 0);
    ipl_index_destroy(&idx);
}

static void test_match_prefix(void **state)
{
    (void)state;
    ipl_index_t *idx = s_new();
    int a = ipl_index_worker(idx, "a"), b = ipl_index_worker(idx, "b");
    int c = ipl_index_worker(idx, "c");
    uint64_t chain[6] = {101, 102, 103, 104, 105, 106};
    uint32_t prefix[3];
    assert_int_equal(ipl_index_match(idx, chain, 6, prefix, 3), 0);

    ipl_index_add(idx, a, chain, 4);     /* a: 0..3 */
    ipl_index_add(idx, b, chain, 2);     /* b: 0..1 */
    ipl_index_add(idx, b, chain + 3, 3); /* b: 3..5 too, but not 2: prefix stops at 2 */
    ipl_index_add(idx, c, chain + 1, 5); /* c: not block 0 → prefix 0 */
    memset(prefix, 0xff, sizeof prefix);
    assert_int_equal(ipl_index_match(idx, chain, 6, prefix, 3), 4);
    assert_int_equal(prefix[a], 4);
    assert_int_equal(prefix[b], 2);
    assert_int_equal(prefix[c], 0);

    /* shorter prompts, and a max smaller than nworkers */
    assert_int_equal(ipl_index_match(idx, chain, 1, prefix, 3), 1);
    assert_int_equal(prefix[a], 1);
    assert_int_equal(prefix[b], 1);
    prefix[1] = 77;
    assert_int_equal(ipl_index_match(idx, chain, 6, prefix, 1), 4);
    assert_int_equal(prefix[0], 4);
    assert_int_equal(prefix[1], 77); /* not written past max */

    /* a miss in the middle stops everyone */
    ipl_index_remove(idx, a, chain + 1, 1);
    ipl_index_remove(idx, b, chain + 1, 1);
    ipl_index_remove(idx, c, chain + 1, 1);
    assert_int_equal(ipl_index_match(idx, chain, 6, prefix, 3), 1);
    assert_int_equal(prefix[a], 1);
    assert_int_equal(prefix[b], 1);
    assert_int_equal(prefix[c], 0);
    ipl_index_destroy(&idx);
}

static void test_clear_worker(void **state)
{
    (void)state;
    ipl_index_t *idx = s_new();
    int a = ipl_index_worker(idx, "a"), b = ipl_index_worker(idx, "b");
    uint64_t h[5000];
    for (size_t i = 0; i < 5000; i++)
        h[i] = 0xabc000 + i * 7919;
    ipl_index_add(idx, a, h, 5000);
    ipl_index_add(idx, b, h, 2500);
    assert_int_equal(ipl_index_memberships(idx), 7500);
    ipl_index_clear_worker(idx, a);
    assert_int_equal(ipl_index_worker_blocks(idx, a), 0);
    assert_int_equal(ipl_index_worker_blocks(idx, b), 2500);
    assert_int_equal(ipl_index_blocks(idx), 2500);
    assert_int_equal(ipl_index_memberships(idx), 2500);
    uint32_t prefix[2];
    assert_int_equal(ipl_index_match(idx, h, 5000, prefix, 2), 2500);
    assert_int_equal(prefix[a], 0);
    assert_int_equal(prefix[b], 2500);
    ipl_index_clear_worker(idx, a); /* nothing left: no-op */
    ipl_index_clear_worker(idx, 99);
    ipl_index_clear_worker(idx, b);
    assert_int_equal(ipl_index_blocks(idx), 0);
    assert_int_equal(ipl_index_memberships(idx), 0);
    /* re-adding after a clear works */
    ipl_index_add(idx, a, h, 10);
    assert_int_equal(ipl_index_match(idx, h, 10, prefix, 2), 10);
    ipl_index_destroy(&idx);
}

static void test_growth(void **state)
{
    (void)state;
    ipl_index_t *idx = s_new();
    int a = ipl_index_worker(idx, "a");
    size_t before = ipl_index_memory_bytes(idx);
    enum { N = 200000 };
    uint64_t *h = malloc(N * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < N; i++)
        h[i] = i; /* sequential keys: the worst case for a weak home function */
    assert_int_equal(ipl_index_add(idx, a, h, N), 0);
    assert_int_equal(ipl_index_blocks(idx), N);
    assert_true(ipl_index_memory_bytes(idx) > before);
    /* ≤ 40 B per membership even at one worker per block */
    assert_true(ipl_index_memory_bytes(idx) / N <= 40);
    uint32_t prefix[1];
    assert_int_equal(ipl_index_match(idx, h, N, prefix, 1), N);
    assert_int_equal(ipl_index_remove(idx, a, h, N / 2), 0);
    assert_int_equal(ipl_index_blocks(idx), N - N / 2);
    assert_int_equal(ipl_index_match(idx, h + N / 2, N - N / 2, prefix, 1), N - N / 2);
    free(h);
    ipl_index_destroy(&idx);
}

/* ipl_index_reserve: room at once (adding that many blocks grows nothing), content kept, and
 * the same answers as an index that grew in steps. */
static void test_reserve(void **state)
{
    (void)state;
    enum { N = 20000 };
    uint64_t *h = malloc(N * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < N; i++)
        h[i] = 0x5eed0000 + i;
    ipl_index_t *grown = s_new(), *reserved = s_new();
    int a = ipl_index_worker(grown, "a"), b = ipl_index_worker(grown, "b");
    assert_int_equal(ipl_index_worker(reserved, "a"), a);
    assert_int_equal(ipl_index_worker(reserved, "b"), b);
    assert_int_equal(ipl_index_add(reserved, a, h, 100), 0); /* not empty: kept */
    assert_int_equal(ipl_index_reserve(reserved, N), 0);
    size_t room = ipl_index_memory_bytes(reserved);
    assert_int_equal(ipl_index_match(reserved, h, 100, (uint32_t[2]){0}, 2), 100);
    for (ipl_index_t *ix = grown; ix; ix = ix == grown ? reserved : NULL) {
        assert_int_equal(ipl_index_add(ix, a, h, N / 2), 0);
        assert_int_equal(ipl_index_add_chain(ix, b, h[N / 4 - 1], h + N / 4, N - N / 4), 0);
    }
    /* neither the table nor the arena grew (only the holder sets' lists, a few bytes) */
    assert_true(ipl_index_memory_bytes(reserved) - room < 1024);
    ipl_index_t *fresh = s_new();
    assert_true(room > 4 * ipl_index_memory_bytes(fresh)); /* room it did make */
    ipl_index_destroy(&fresh);
    uint32_t pg[2], pr[2];
    for (size_t from = 0; from < N; from += N / 8) {
        assert_int_equal(ipl_index_match(reserved, h + from, N - from, pr, 2),
                         ipl_index_match(grown, h + from, N - from, pg, 2));
        assert_memory_equal(pr, pg, sizeof pg);
    }
    assert_int_equal(ipl_index_memberships(reserved), ipl_index_memberships(grown));
    size_t used = ipl_index_memory_bytes(reserved);
    assert_int_equal(ipl_index_reserve(reserved, 0), 0); /* never shrinks */
    assert_int_equal(ipl_index_memory_bytes(reserved), used);
    free(h);
    ipl_index_destroy(&grown);
    ipl_index_destroy(&reserved);
}

typedef struct {
    uint64_t sum;
    size_t count;
    size_t stop_after;
} s_walk_t;

static int s_walk(void *arg, uint64_t hash)
{
    s_walk_t *walk = arg;
    walk->sum += hash;
    walk->count++;
    return (walk->stop_after && walk->count == walk->stop_after) ? 7 : 0;
}

static void test_foreach(void **state)
{
    (void)state;
    ipl_index_t *idx = s_new();
    int a = ipl_index_worker(idx, "a"), b = ipl_index_worker(idx, "b");
    uint64_t h[100];
    uint64_t sum_a = 0;
    for (size_t i = 0; i < 100; i++) {
        h[i] = 1000 + i;
        if (i % 3) sum_a += h[i];
    }
    for (size_t i = 0; i < 100; i++)
        if (i % 3) ipl_index_add(idx, a, &h[i], 1);
    ipl_index_add(idx, b, h, 100);
    s_walk_t walk = {0};
    assert_int_equal(ipl_index_foreach(idx, a, s_walk, &walk), 0);
    assert_int_equal(walk.count, ipl_index_worker_blocks(idx, a));
    assert_true(walk.sum == sum_a);
    walk = (s_walk_t){.stop_after = 5};
    assert_int_equal(ipl_index_foreach(idx, b, s_walk, &walk), 7);
    assert_int_equal(walk.count, 5);
    walk = (s_walk_t){0};
    assert_int_equal(ipl_index_foreach(idx, 42, s_walk, &walk), 0);
    assert_int_equal(walk.count, 0);
    ipl_index_destroy(&idx);
}

/* 200 workers, each holding a different-length prefix of one shared chain plus a private
 * tail; many distinct sets along the chain. */
static void test_200_workers(void **state)
{
    (void)state;
    enum { W = 200, L = 300 };
    ipl_index_t *idx = s_new();
    uint64_t chain[L];
    for (size_t i = 0; i < L; i++)
        chain[i] = 0x5000000000ULL + i * 0x9e3779b9ULL;
    char name[16];
    for (int w = 0; w < W; w++) {
        snprintf(name, sizeof name, "w%03d", w);
        int id = ipl_index_worker(idx, name);
        assert_int_equal(id, w);
        size_t len = 1 + (size_t)(w * 7) % L;
        assert_int_equal(ipl_index_add(idx, id, chain, len), 0);
        uint64_t tail[3] = {0x7000000000ULL + (uint64_t)w * 4, 0x7000000001ULL + (uint64_t)w * 4,
                            0x7000000002ULL + (uint64_t)w * 4};
        assert_int_equal(ipl_index_add(idx, id, tail, 3), 0);
    }
    uint32_t prefix[W];
    size_t best = ipl_index_match(idx, chain, L, prefix, W);
    size_t expect_best = 0;
    for (int w = 0; w < W; w++) {
        size_t len = 1 + (size_t)(w * 7) % L;
        assert_int_equal(prefix[w], len);
        if (len > expect_best) expect_best = len;
    }
    assert_int_equal(best, expect_best);
    /* clearing every other worker leaves the rest intact */
    for (int w = 0; w < W; w += 2)
        ipl_index_clear_worker(idx, w);
    ipl_index_match(idx, chain, L, prefix, W);
    for (int w = 0; w < W; w++) {
        size_t len = (w % 2) ? 1 + (size_t)(w * 7) % L : 0;
        assert_int_equal(prefix[w], len);
        assert_int_equal(ipl_index_worker_blocks(idx, w), len ? len + 3 : 0);
    }
    ipl_index_destroy(&idx);
}

/* Random adds, removes and clears over a small key space, checked against a bitmap model. */
/* Compares the index with a brute-force model (model[w * K + k]: worker w holds key k). */
static void s_model_check(ipl_index_t *idx, const uint8_t *model, int W, size_t K)
{
    size_t memberships = 0, blocks = 0;
    for (size_t k = 0; k < K; k++) {
        int any = 0;
        for (int w = 0; w < W; w++) {
            memberships += model[(size_t)w * K + k];
            any |= model[(size_t)w * K + k];
        }
        blocks += any;
    }
    assert_int_equal(ipl_index_memberships(idx), memberships);
    assert_int_equal(ipl_index_blocks(idx), blocks);
    for (int w = 0; w < W; w++) {
        size_t n = 0;
        for (size_t k = 0; k < K; k++)
            n += model[(size_t)w * K + k];
        assert_int_equal(ipl_index_worker_blocks(idx, w), n);
        s_walk_t walk = {0};
        ipl_index_foreach(idx, w, s_walk, &walk);
        assert_int_equal(walk.count, n);
    }
    /* prefix matches over chains of consecutive keys */
    uint32_t prefix[IPL_INDEX_MAX_WORKERS];
    for (size_t start = 0; start < K; start += 1 + K / 40) {
        uint64_t h[40];
        for (size_t i = 0; i < 40; i++)
            h[i] = (start + i) % K;
        size_t best = ipl_index_match(idx, h, 40, prefix, (size_t)W);
        size_t expect_best = 0;
        for (int w = 0; w < W; w++) {
            size_t p = 0;
            while (p < 40 && model[(size_t)w * K + h[p]])
                p++;
            assert_int_equal(prefix[w], p);
            if (p > expect_best) expect_best = p;
        }
        assert_int_equal(best, expect_best);
    }
}

/* `ops` random adds (60%), removes (39%) and clears (1%) of runs of 1-16 consecutive keys out
 * of K, by W workers; with `hints`, adds pass the key before the run as the parent. Checks
 * against the model every `every` operations and at the end; returns the largest arena seen. */
static size_t s_random_run(int W, size_t K, int ops, bool hints, int every, unsigned seed)
{
    ipl_index_t *idx = s_new();
    uint8_t *model = calloc((size_t)W * K, 1);
    assert_non_null(model);
    char name[16];
    for (int w = 0; w < W; w++) {
        snprintf(name, sizeof name, "m%d", w);
        ipl_index_worker(idx, name);
    }
    size_t arena_max = 0;
    for (int op = 0; op < ops; op++) {
        seed = seed * 1103515245u + 12345u;
        int w = (int)((seed >> 8) % (unsigned)W);
        seed = seed * 1103515245u + 12345u;
        size_t k = (seed >> 4) % K;
        size_t run = 1 + (seed % 16);
        int kind = (int)((seed >> 24) % 100);
        uint64_t h[16];
        for (size_t i = 0; i < run; i++)
            h[i] = (k + i) % K;
        if (kind < 60) {
            uint64_t parent = hints ? (k + K - 1) % K : 0;
            assert_int_equal(ipl_index_add_chain(idx, w, parent, h, run), 0);
            for (size_t i = 0; i < run; i++)
                model[(size_t)w * K + h[i]] = 1;
        } else if (kind < 99) {
            assert_int_equal(ipl_index_remove(idx, w, h, run), 0);
            for (size_t i = 0; i < run; i++)
                model[(size_t)w * K + h[i]] = 0;
        } else {
            ipl_index_clear_worker(idx, w);
            memset(model + (size_t)w * K, 0, K);
        }
        size_t a = ipl_index_arena_entries(idx);
        if (a > arena_max) arena_max = a;
        if (every > 0 && op % every == every - 1) s_model_check(idx, model, W, K);
    }
    s_model_check(idx, model, W, K);
    free(model);
    ipl_index_destroy(&idx);
    return arena_max;
}

static void test_random_model(void **state)
{
    (void)state;
    s_random_run(70, 3000, 20000, false, 0, 12345);
    s_random_run(70, 3000, 20000, true, 5000, 777);
}

/* Enough churn to trigger the arena's compaction many times: answers stay exact (checked
 * while compactions are under way), and the arena stays bounded although far more blocks are
 * added over the run than it could hold without reusing space. */
static void test_compaction_model(void **state)
{
    (void)state;
    enum { W = 12, K = 40000, OPS = 120000 };
    size_t arena_max = s_random_run(W, K, OPS, true, 7919, 4242);
    /* ~430k block adds; live blocks <= K; compaction starts past count/2 + 16384 holes */
    assert_true(arena_max < 2 * (size_t)K + 16384 + 4096);
    arena_max = s_random_run(W, K, OPS / 2, false, 0, 99);
    assert_true(arena_max < 2 * (size_t)K + 16384 + 4096);
}

/* Runs of consecutive chain blocks in the order ipl_index_foreach yields them (arena order):
 * key k is block k - 1 of the chains laid end to end, chains L blocks long. */
typedef struct {
    uint64_t prev, inverse;
    size_t runs, chain_len;
} s_runs_t;

static int s_count_runs(void *arg, uint64_t hash)
{
    s_runs_t *r = arg;
    uint64_t k = hash * r->inverse, pk = r->prev * r->inverse; /* the keys' indices */
    if (!r->prev || k != pk + 1 || (k - 1) % r->chain_len == 0) r->runs++;
    r->prev = hash;
    return 0;
}

/* Chains that grow one block at a time, interleaved with each other (vLLM's decode), with
 * parent hints: matches are exact and, with the slack kept after each run, every chain's
 * blocks sit in a few runs (without the hints, each block would be a run of its own). */
static void test_interleaved_chains(void **state)
{
    (void)state;
    enum { C = 50, L = 300 };
    ipl_index_t *idx = s_new();
    int w0 = ipl_index_worker(idx, "a"), w1 = ipl_index_worker(idx, "b");
    static uint64_t h[C][L];
    for (int c = 0; c < C; c++)
        for (int i = 0; i < L; i++)
            h[c][i] = 0x9e3779b97f4a7c15ULL * (uint64_t)(c * L + i + 1);
    for (int i = 0; i < L; i++)
        for (int c = 0; c < C; c++) {
            uint64_t parent = i ? h[c][i - 1] : 0;
            assert_int_equal(ipl_index_add_chain(idx, c % 2 ? w1 : w0, parent, &h[c][i], 1), 0);
        }
    assert_int_equal(ipl_index_blocks(idx), (size_t)C * L);
    s_runs_t runs = {.inverse = 0x9e3779b97f4a7c15ULL, .chain_len = L};
    for (int i = 0; i < 6; i++) /* Newton: the multiplicative inverse of the key step mod 2^64 */
        runs.inverse *= 2 - 0x9e3779b97f4a7c15ULL * runs.inverse;
    assert_int_equal(ipl_index_foreach(idx, w0, s_count_runs, &runs), 0);
    assert_true(runs.runs >= C / 2);     /* at least one per chain of w0 */
    assert_true(runs.runs <= C / 2 * 5); /* measured: 4 per 300-block chain */
    uint32_t prefix[2];
    for (int c = 0; c < C; c++) {
        assert_int_equal(ipl_index_match(idx, h[c], L, prefix, 2), L);
        assert_int_equal(prefix[c % 2], L);
        assert_int_equal(prefix[1 - c % 2], 0);
        assert_int_equal(ipl_index_match(idx, h[c] + 1, L - 1, prefix, 2), L - 1);
    }
    /* a wrong parent hint changes nothing but the layout */
    uint64_t extra[3] = {1, 2, 3};
    assert_int_equal(ipl_index_add_chain(idx, w0, h[7][5], extra, 3), 0);
    assert_int_equal(ipl_index_match(idx, extra, 3, prefix, 2), 3);
    assert_int_equal(ipl_index_match(idx, h[7], L, prefix, 2), L);
    ipl_index_destroy(&idx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workers),
        cmocka_unit_test(test_worker_limit),
        cmocka_unit_test(test_add_remove_idempotent),
        cmocka_unit_test(test_match_prefix),
        cmocka_unit_test(test_clear_worker),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_reserve),
        cmocka_unit_test(test_foreach),
        cmocka_unit_test(test_200_workers),
        cmocka_unit_test(test_random_model),
        cmocka_unit_test(test_compaction_model),
        cmocka_unit_test(test_interleaved_chains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
