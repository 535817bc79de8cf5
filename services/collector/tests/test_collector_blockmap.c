/*
 * Unit tests for collector_blockmap: put/get/take (key 0 included, replacing a key), growth,
 * backward-shift deletion checked against a brute-force model under random operations on a
 * small key space (runs that wrap around the table's end), merge, swap, clear and foreach.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collector_blockmap.h"

static collector_block_t s_block(uint64_t engine)
{
    return (collector_block_t){engine, engine * 3 + 1, engine ^ 0x55};
}

static void test_basic_and_key_zero(void **state)
{
    (void)state;
    collector_blockmap_t *m = collector_blockmap_new();
    assert_non_null(m);
    assert_int_equal(collector_blockmap_size(m), 0);
    collector_block_t b;
    assert_false(collector_blockmap_get(m, 0, &b));
    for (uint64_t k = 0; k < 10; k++)
        assert_int_equal(collector_blockmap_put(m, &(collector_block_t){k, k + 100, k}), 0);
    assert_int_equal(collector_blockmap_size(m), 10);
    assert_true(collector_blockmap_get(m, 0, &b));
    assert_true(b.engine == 0 && b.ours == 100 && b.parent == 0); /* a root: parent == engine */
    /* replacing keeps the size */
    assert_int_equal(collector_blockmap_put(m, &(collector_block_t){7, 1, 2}), 0);
    assert_int_equal(collector_blockmap_size(m), 10);
    assert_true(collector_blockmap_get(m, 7, &b) && b.ours == 1 && b.parent == 2);
    assert_true(collector_blockmap_take(m, 0, &b) && b.ours == 100);
    assert_false(collector_blockmap_take(m, 0, NULL));
    assert_false(collector_blockmap_get(m, 0, NULL));
    assert_true(collector_blockmap_take(m, 7, NULL));
    assert_false(collector_blockmap_take(m, 7, NULL));
    assert_false(collector_blockmap_take(m, 12345, NULL));
    assert_int_equal(collector_blockmap_size(m), 8);
    collector_blockmap_clear(m);
    assert_int_equal(collector_blockmap_size(m), 0);
    assert_false(collector_blockmap_get(m, 1, NULL));
    collector_blockmap_destroy(&m);
    assert_null(m);
    collector_blockmap_destroy(&m); /* twice is harmless */
}

#define S_KEYS 4096u

/* Random put/take (the table grows to 4096 slots and stays loaded), checked against an array
 * model after every operation for the key touched, and fully at the end. */
static void test_against_model(void **state)
{
    (void)state;
    collector_blockmap_t *m = collector_blockmap_new();
    static bool in[S_KEYS];
    memset(in, 0, sizeof in);
    size_t count = 0;
    uint64_t x = 12345;
    for (int i = 0; i < 200000; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        /* a small key space held at up to 3/4 of the table: long probe runs, some wrapping
         * around the table's end */
        uint64_t k = (x >> 33) % S_KEYS;
        uint64_t key = k * 0x100000000ULL;
        bool put = ((x >> 20) & 3) != 0 && count < 3000;
        if (put) {
            collector_block_t b = s_block(key);
            assert_int_equal(collector_blockmap_put(m, &b), 0);
            if (!in[k]) count++;
            in[k] = true;
        } else {
            collector_block_t b;
            bool had = collector_blockmap_take(m, key, &b);
            assert_int_equal(had, in[k]);
            if (had) {
                assert_true(b.ours == s_block(key).ours && b.parent == s_block(key).parent);
                count--;
            }
            in[k] = false;
        }
        assert_int_equal(collector_blockmap_size(m), count);
        assert_int_equal(collector_blockmap_get(m, key, NULL), in[k]);
    }
    for (uint64_t k = 0; k < S_KEYS; k++) {
        collector_block_t b;
        bool got = collector_blockmap_get(m, k * 0x100000000ULL, &b);
        assert_int_equal(got, in[k]);
        if (got) assert_true(b.ours == s_block(k * 0x100000000ULL).ours);
    }
    collector_blockmap_destroy(&m);
}

static int s_sum(void *arg, const collector_block_t *b)
{
    uint64_t *sum = arg;
    *sum += b->ours;
    return 0;
}

static int s_stop_at_three(void *arg, const collector_block_t *b)
{
    (void)b;
    int *n = arg;
    return ++*n == 3 ? 42 : 0;
}

static void test_merge_swap_foreach(void **state)
{
    (void)state;
    collector_blockmap_t *a = collector_blockmap_new(), *b = collector_blockmap_new();
    uint64_t want = 0;
    for (uint64_t k = 0; k < 3000; k++) { /* b grows past its first table */
        collector_block_t blk = s_block(k);
        assert_int_equal(collector_blockmap_put(k % 2 ? a : b, &blk), 0);
        want += blk.ours;
    }
    /* a key in both: the one from `from` wins */
    assert_int_equal(collector_blockmap_put(a, &(collector_block_t){4, 999, 4}), 0);
    want += 999 - s_block(4).ours;
    assert_int_equal(collector_blockmap_merge(b, a), 0);
    assert_int_equal(collector_blockmap_size(a), 0);
    assert_int_equal(collector_blockmap_size(b), 3000);
    uint64_t sum = 0;
    assert_int_equal(collector_blockmap_foreach(b, s_sum, &sum), 0);
    assert_true(sum == want);
    collector_block_t got;
    assert_true(collector_blockmap_get(b, 4, &got) && got.ours == 999);
    assert_true(collector_blockmap_get(b, 0, &got)); /* key 0 moved too */
    int n = 0;
    assert_int_equal(collector_blockmap_foreach(b, s_stop_at_three, &n), 42);
    assert_int_equal(n, 3);
    collector_blockmap_swap(a, b);
    assert_int_equal(collector_blockmap_size(a), 3000);
    assert_int_equal(collector_blockmap_size(b), 0);
    assert_true(collector_blockmap_get(a, 2999, NULL));
    assert_false(collector_blockmap_get(b, 2999, NULL));
    assert_int_equal(collector_blockmap_reserve(b, 100000), 0);
    assert_int_equal(collector_blockmap_put(b, &got), 0);
    assert_int_equal(collector_blockmap_size(b), 1);
    collector_blockmap_destroy(&a);
    collector_blockmap_destroy(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_and_key_zero),
        cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_merge_swap_foreach),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
