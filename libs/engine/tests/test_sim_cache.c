/*
 * Unit tests of sim_cache (blocks keyed by vLLM's sha256 digests from sim_hasher): hits on
 * committed prefixes, LRU eviction order (least recently
 * freed first, a sequence's tail blocks before its head), touched hits are not evicted,
 * the events (BlockStored chains with parents and tokens, BlockRemoved on reuse,
 * AllBlocksCleared on reset), duplicates not announced, and allocation refusal when full.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim_cache.h"
#include "sim_hasher.h"
#include "ipl_error.h"

#define BS 4

/* A sequence of `nblocks` full blocks whose tokens start at `base`, with its hash chain. */
typedef struct {
    uint32_t tokens[64];
    sim_hash_t hashes[16];
    uint32_t nblocks;
    sim_seq_t seq;
} s_prompt_t;

static sim_hasher_t *s_hasher;

static int s_setup(void **state)
{
    (void)state;
    s_hasher = sim_hasher_new(SIM_HASH_SHA256, "0", 0);
    return s_hasher ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    sim_hasher_destroy(&s_hasher);
    return 0;
}

static sim_hash_t s_block(const sim_hash_t *parent, const uint32_t *tokens)
{
    return sim_hasher_block(s_hasher, parent, tokens, BS, NULL);
}

static void s_prompt(sim_cache_t *c, s_prompt_t *p, uint32_t base, uint32_t nblocks)
{
    (void)c;
    memset(p, 0, sizeof *p);
    p->nblocks = nblocks;
    for (uint32_t i = 0; i < nblocks * BS; i++)
        p->tokens[i] = base + i;
    for (uint32_t b = 0; b < nblocks; b++)
        p->hashes[b] = s_block(b ? &p->hashes[b - 1] : NULL, p->tokens + b * BS);
}

/* Looks up, allocates and commits the whole prompt; returns the number of hit blocks. */
static uint32_t s_run(sim_cache_t *c, s_prompt_t *p, sim_kvbatch_t *ev)
{
    uint32_t hits[16];
    uint32_t n = sim_cache_lookup(c, p->hashes, p->nblocks, hits);
    assert_int_equal(sim_cache_allocate(c, &p->seq, hits, n, (uint64_t)p->nblocks * BS, ev), 0);
    sim_cache_commit(c, &p->seq, p->hashes, p->tokens, p->nblocks, ev);
    return n;
}

static uint32_t s_hits(sim_cache_t *c, const s_prompt_t *p)
{
    uint32_t hits[16];
    return sim_cache_lookup(c, p->hashes, p->nblocks, hits);
}

static void test_hits_and_events(void **state)
{
    (void)state;
    sim_cache_t *c = sim_cache_new(16, BS);
    sim_kvbatch_t *ev = sim_kvbatch_new();
    s_prompt_t a, b;
    s_prompt(c, &a, 100, 3);
    assert_int_equal(s_run(c, &a, ev), 0);
    /* One BlockStored for the 3 blocks, from the root, tokens concatenated. */
    assert_int_equal(sim_kvbatch_count(ev), 1);
    sim_kv_event_t e;
    sim_kvbatch_get(ev, 0, &e);
    assert_int_equal(e.kind, SIM_KV_STORED);
    assert_int_equal(e.nhashes, 3);
    assert_false(e.has_parent);
    assert_true(sim_hash_eq(&e.hashes[2], &a.hashes[2]));
    assert_int_equal(e.ntokens, 12);
    assert_int_equal(e.tokens[11], 111);
    assert_int_equal(e.block_size, BS);
    assert_int_equal(sim_cache_num_cached(c), 3);
    /* b shares the first two blocks, then differs: 2 hits, one new block stored with parent. */
    s_prompt(c, &b, 100, 3);
    b.tokens[2 * BS] = 999;
    b.hashes[2] = s_block(&b.hashes[1], b.tokens + 2 * BS);
    sim_kvbatch_reset(ev);
    assert_int_equal(s_run(c, &b, ev), 2);
    assert_int_equal(sim_kvbatch_count(ev), 1);
    sim_kvbatch_get(ev, 0, &e);
    assert_int_equal(e.nhashes, 1);
    assert_true(e.has_parent && sim_hash_eq(&e.parent, &a.hashes[1]));
    assert_int_equal(e.tokens[0], 999);
    /* Shared blocks are reference counted: 3 + 1 blocks in use. */
    assert_int_equal(sim_cache_num_free(c), 12);
    sim_cache_free(c, &a.seq);
    assert_int_equal(sim_cache_num_free(c), 13); /* a's blocks 0,1 still held by b */
    sim_cache_free(c, &b.seq);
    assert_int_equal(sim_cache_num_free(c), 16);
    assert_true(sim_cache_usage(c) == 0.0);
    /* Freed blocks stay hittable. */
    assert_int_equal(s_hits(c, &a), 3);
    sim_seq_release(&a.seq);
    sim_seq_release(&b.seq);
    sim_kvbatch_destroy(&ev);
    sim_cache_destroy(&c);
}

static void test_lru_eviction_order(void **state)
{
    (void)state;
    sim_cache_t *c = sim_cache_new(6, BS);
    sim_kvbatch_t *ev = sim_kvbatch_new();
    s_prompt_t a, b, x;
    s_prompt(c, &a, 100, 3);
    s_prompt(c, &b, 200, 3);
    s_run(c, &a, ev);
    s_run(c, &b, ev);
    sim_cache_free(c, &a.seq); /* freed first: evicted first, tail block before head */
    sim_cache_free(c, &b.seq);
    /* x needs 2 blocks: a's last two go (a2, then a1); a0 and all of b stay. */
    s_prompt(c, &x, 300, 2);
    sim_kvbatch_reset(ev);
    s_run(c, &x, ev);
    assert_int_equal(sim_kvbatch_count(ev), 3); /* 2 BlockRemoved, then x's BlockStored */
    sim_kv_event_t e;
    sim_kvbatch_get(ev, 0, &e);
    assert_int_equal(e.kind, SIM_KV_REMOVED);
    assert_true(sim_hash_eq(&e.hashes[0], &a.hashes[2]));
    sim_kvbatch_get(ev, 1, &e);
    assert_int_equal(e.kind, SIM_KV_REMOVED);
    assert_true(sim_hash_eq(&e.hashes[0], &a.hashes[1]));
    sim_kvbatch_get(ev, 2, &e);
    assert_int_equal(e.kind, SIM_KV_STORED);
    assert_int_equal(s_hits(c, &a), 1);
    assert_int_equal(s_hits(c, &b), 3);
    /* A hit refreshes: touch b (hits take b's blocks off the free list), free it again, and
     * it becomes the most recently used; the next eviction takes a0 and then x's blocks. */
    sim_cache_free(c, &x.seq);
    s_prompt_t b2 = b;
    memset(&b2.seq, 0, sizeof b2.seq);
    assert_int_equal(s_run(c, &b2, ev), 3);
    sim_cache_free(c, &b2.seq);
    s_prompt_t y;
    s_prompt(c, &y, 400, 3);
    sim_kvbatch_reset(ev);
    s_run(c, &y, ev);
    assert_int_equal(s_hits(c, &a), 0);
    assert_int_equal(s_hits(c, &x), 0);
    assert_int_equal(s_hits(c, &b), 3);
    sim_seq_release(&a.seq);
    sim_seq_release(&b.seq);
    sim_seq_release(&b2.seq);
    sim_seq_release(&x.seq);
    sim_seq_release(&y.seq);
    sim_kvbatch_destroy(&ev);
    sim_cache_destroy(&c);
}

static void test_full_cache_refuses(void **state)
{
    (void)state;
    sim_cache_t *c = sim_cache_new(4, BS);
    sim_kvbatch_t *ev = sim_kvbatch_new();
    s_prompt_t a, b;
    s_prompt(c, &a, 100, 3);
    s_run(c, &a, ev);
    s_prompt(c, &b, 200, 2);
    assert_int_equal(sim_cache_blocks_needed(c, &b.seq, NULL, 0, 2 * BS), 2);
    assert_int_equal(sim_cache_allocate(c, &b.seq, NULL, 0, 2 * BS, ev), IPL_E_AGAIN);
    assert_int_equal(b.seq.nblocks, 0); /* nothing changed */
    assert_int_equal(sim_cache_num_free(c), 1);
    /* Growing a sequence block by block (decode) */
    assert_int_equal(sim_cache_allocate(c, &a.seq, NULL, 0, 3 * BS + 1, ev), 0);
    assert_int_equal(a.seq.nblocks, 4);
    assert_int_equal(sim_cache_allocate(c, &a.seq, NULL, 0, 4 * BS + 1, ev), IPL_E_AGAIN);
    sim_cache_free(c, &a.seq);
    sim_seq_release(&a.seq);
    sim_seq_release(&b.seq);
    sim_kvbatch_destroy(&ev);
    sim_cache_destroy(&c);
}

static void test_duplicate_not_announced(void **state)
{
    (void)state;
    sim_cache_t *c = sim_cache_new(8, BS);
    sim_kvbatch_t *ev = sim_kvbatch_new();
    s_prompt_t a, b;
    s_prompt(c, &a, 100, 2);
    s_prompt(c, &b, 100, 2);
    /* Both allocated before either commits (two identical prompts in one step). */
    assert_int_equal(sim_cache_allocate(c, &a.seq, NULL, 0, 2 * BS, ev), 0);
    assert_int_equal(sim_cache_allocate(c, &b.seq, NULL, 0, 2 * BS, ev), 0);
    sim_cache_commit(c, &a.seq, a.hashes, a.tokens, 2, ev);
    sim_cache_commit(c, &b.seq, b.hashes, b.tokens, 2, ev);
    assert_int_equal(sim_kvbatch_count(ev), 1);
    assert_int_equal(sim_cache_num_cached(c), 2);
    assert_int_equal(b.seq.ncommitted, 2);
    sim_cache_free(c, &a.seq);
    sim_cache_free(c, &b.seq);
    sim_seq_release(&a.seq);
    sim_seq_release(&b.seq);
    sim_kvbatch_destroy(&ev);
    sim_cache_destroy(&c);
}

static void test_reset(void **state)
{
    (void)state;
    sim_cache_t *c = sim_cache_new(8, BS);
    sim_kvbatch_t *ev = sim_kvbatch_new();
    s_prompt_t a;
    s_prompt(c, &a, 100, 3);
    s_run(c, &a, ev);
    sim_kvbatch_reset(ev);
    sim_cache_reset(c, ev);
    assert_int_equal(sim_kvbatch_count(ev), 1);
    sim_kv_event_t e;
    sim_kvbatch_get(ev, 0, &e);
    assert_int_equal(e.kind, SIM_KV_CLEARED);
    assert_int_equal(s_hits(c, &a), 0);
    assert_int_equal(sim_cache_num_cached(c), 0);
    /* In-use blocks stay allocated; freeing and reusing them announces no removal. */
    sim_cache_free(c, &a.seq);
    sim_kvbatch_reset(ev);
    s_prompt_t b;
    s_prompt(c, &b, 500, 8);
    s_run(c, &b, ev);
    for (size_t i = 0; i < sim_kvbatch_count(ev); i++) {
        sim_kvbatch_get(ev, i, &e);
        assert_int_equal(e.kind, SIM_KV_STORED);
    }
    sim_cache_free(c, &b.seq);
    sim_seq_release(&a.seq);
    sim_seq_release(&b.seq);
    sim_kvbatch_destroy(&ev);
    sim_cache_destroy(&c);
}

/* Many prompts through a small pool: the map stays consistent with the events (every stored
 * hash is hittable until it is announced removed), exercising backward-shift deletion. */
static void test_events_track_contents(void **state)
{
    (void)state;
    sim_cache_t *c = sim_cache_new(32, BS);
    sim_kvbatch_t *ev = sim_kvbatch_new();
    uint64_t announced[4096];
    size_t nann = 0;
    for (uint32_t round = 0; round < 300; round++) {
        s_prompt_t p;
        s_prompt(c, &p, (round * 7919u) % 97u * 1000u, 1 + round % 5);
        sim_kvbatch_reset(ev);
        s_run(c, &p, ev);
        for (size_t i = 0; i < sim_kvbatch_count(ev); i++) {
            sim_kv_event_t e;
            sim_kvbatch_get(ev, i, &e);
            for (uint32_t h = 0; h < e.nhashes; h++) {
                if (e.kind == SIM_KV_STORED) {
                    assert_true(nann < 4096);
                    announced[nann++] = e.hashes[h].lo;
                } else {
                    size_t k = 0;
                    while (k < nann && announced[k] != e.hashes[h].lo)
                        k++;
                    assert_true(k < nann); /* removing only what was announced */
                    announced[k] = announced[--nann];
                }
            }
        }
        assert_int_equal(nann, sim_cache_num_cached(c));
        sim_cache_free(c, &p.seq);
        sim_seq_release(&p.seq);
    }
    sim_kvbatch_destroy(&ev);
    sim_cache_destroy(&c);
}

/* Two digests with the same wire value (last 8 bytes) are different blocks: the map compares
 * whole digests, as vLLM's dict of bytes does. The sequence's keys reach its events. */
static void test_full_digest_keys_and_wipe(void **state)
{
    (void)state;
    sim_cache_t *c = sim_cache_new(8, BS);
    sim_kvbatch_t *ev = sim_kvbatch_new();
    s_prompt_t a, b;
    s_prompt(c, &a, 100, 1);
    s_prompt(c, &b, 100, 1);
    a.hashes[0] = sim_hash_from_u64(7);
    b.hashes[0] = sim_hash_from_u64(7);
    b.hashes[0].bytes[0] = 1; /* same lo, other digest */
    sim_block_keys_t keys = {.lora_id = 3, .lora_name = "x", .cache_salt = "y"};
    a.seq.keys = &keys;
    assert_int_equal(s_run(c, &a, ev), 0);
    assert_int_equal(s_hits(c, &b), 0);
    assert_int_equal(s_run(c, &b, ev), 0);
    assert_int_equal(sim_cache_num_cached(c), 2);
    sim_kv_event_t e;
    sim_kvbatch_get(ev, 0, &e);
    assert_int_equal(e.keys.lora_id, 3);
    assert_string_equal(e.keys.lora_name, "x");
    assert_string_equal(e.keys.cache_salt, "y");
    sim_kvbatch_get(ev, 1, &e);
    assert_null(e.keys.lora_name);
    /* A wipe (restart) frees and forgets everything, announcing nothing. */
    sim_cache_free(c, &a.seq);
    sim_cache_free(c, &b.seq);
    sim_kvbatch_reset(ev);
    sim_cache_wipe(c);
    assert_int_equal(sim_cache_num_free(c), 8);
    assert_int_equal(sim_cache_num_cached(c), 0);
    assert_int_equal(s_hits(c, &a), 0);
    assert_int_equal(sim_kvbatch_count(ev), 0);
    sim_seq_release(&a.seq);
    sim_seq_release(&b.seq);
    sim_kvbatch_destroy(&ev);
    sim_cache_destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hits_and_events),
        cmocka_unit_test(test_lru_eviction_order),
        cmocka_unit_test(test_full_cache_refuses),
        cmocka_unit_test(test_duplicate_not_announced),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_events_track_contents),
        cmocka_unit_test(test_full_digest_keys_and_wipe),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
