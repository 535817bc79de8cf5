/*
 * Unit tests of ipl_idcache: get/put round trips, the `room` contract, replacement, both
 * bounds (entries, bytes) with least-recently-used eviction, keys (bytes and seed), stats,
 * and concurrent use from a few threads (bounded).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_idcache.h"

static ipl_idcache_key_t s_key(int i)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "text %d", i);
    return ipl_idcache_key(buf, (size_t)n, 7);
}

static void test_round_trip_and_room(void **state)
{
    (void)state;
    assert_null(ipl_idcache_new(0, 100));
    assert_null(ipl_idcache_new(10, 0));
    ipl_idcache_t *c = ipl_idcache_new(8, 1024);
    const uint32_t ids[] = {5, 6, 7, 8};
    uint32_t out[8] = {0};
    assert_int_equal(ipl_idcache_get(c, s_key(1), out, 8), IPL_IDCACHE_MISS);
    ipl_idcache_put(c, s_key(1), ids, 4);
    assert_int_equal(ipl_idcache_get(c, s_key(1), out, 2), 4); /* too little room: count only */
    assert_int_equal(out[0], 0);
    assert_int_equal(ipl_idcache_get(c, s_key(1), out, 4), 4);
    assert_memory_equal(out, ids, sizeof ids);
    ipl_idcache_put(c, s_key(1), ids + 2, 2); /* replaces */
    assert_int_equal(ipl_idcache_get(c, s_key(1), out, 8), 2);
    assert_int_equal(out[0], 7);
    ipl_idcache_put(c, s_key(2), NULL, 0); /* an empty array is a value too */
    assert_int_equal(ipl_idcache_get(c, s_key(2), NULL, 0), 0);
    ipl_idcache_stats_t st;
    ipl_idcache_stats(c, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.bytes, 2 * sizeof(uint32_t));
    assert_int_equal(st.hits, 4);
    assert_int_equal(st.misses, 1);
    ipl_idcache_destroy(&c);
    assert_null(c);
}

static void test_keys(void **state)
{
    (void)state;
    ipl_idcache_key_t a = ipl_idcache_key("abc", 3, 1), b = ipl_idcache_key("abc", 3, 1);
    ipl_idcache_key_t c = ipl_idcache_key("abc", 3, 2), d = ipl_idcache_key("abd", 3, 1);
    assert_true(a.lo == b.lo && a.hi == b.hi);
    assert_false(a.lo == c.lo && a.hi == c.hi); /* the seed: another tokenizer */
    assert_false(a.lo == d.lo && a.hi == d.hi);
}

static void test_bounds_evict_least_recently_used(void **state)
{
    (void)state;
    uint32_t ids[16], out[16];
    for (int i = 0; i < 16; i++)
        ids[i] = (uint32_t)i;
    // entries: 3 at most
    ipl_idcache_t *c = ipl_idcache_new(3, 1 << 20);
    for (int i = 0; i < 3; i++)
        ipl_idcache_put(c, s_key(i), ids, 1);
    assert_int_equal(ipl_idcache_get(c, s_key(0), out, 16), 1); /* 0 is now the most recent */
    ipl_idcache_put(c, s_key(3), ids, 1);                       /* evicts 1 */
    assert_int_equal(ipl_idcache_get(c, s_key(1), out, 16), IPL_IDCACHE_MISS);
    assert_int_equal(ipl_idcache_get(c, s_key(0), out, 16), 1);
    assert_int_equal(ipl_idcache_get(c, s_key(2), out, 16), 1);
    assert_int_equal(ipl_idcache_get(c, s_key(3), out, 16), 1);
    ipl_idcache_stats_t st;
    ipl_idcache_stats(c, &st);
    assert_int_equal(st.evictions, 1);
    ipl_idcache_destroy(&c);
    // bytes: 10 ids at most
    c = ipl_idcache_new(100, 10 * sizeof(uint32_t));
    ipl_idcache_put(c, s_key(0), ids, 4);
    ipl_idcache_put(c, s_key(1), ids, 4);
    ipl_idcache_put(c, s_key(2), ids, 4); /* 12 > 10: evicts 0 */
    ipl_idcache_stats(c, &st);
    assert_int_equal(st.entries, 2);
    assert_true(st.bytes <= 10 * sizeof(uint32_t));
    assert_int_equal(ipl_idcache_get(c, s_key(0), out, 16), IPL_IDCACHE_MISS);
    ipl_idcache_put(c, s_key(3), ids, 11); /* above the whole bound: not kept, nothing evicted */
    assert_int_equal(ipl_idcache_get(c, s_key(3), out, 16), IPL_IDCACHE_MISS);
    assert_int_equal(ipl_idcache_get(c, s_key(1), out, 16), 4);
    ipl_idcache_put(c, s_key(4), ids, 10); /* exactly the bound: evicts both others */
    ipl_idcache_stats(c, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.bytes, 10 * sizeof(uint32_t));
    ipl_idcache_destroy(&c);
}

static void *s_worker(void *arg)
{
    ipl_idcache_t *c = arg;
    uint32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    for (int i = 0; i < 20000; i++) {
        int k = i % 50;
        size_t n = ipl_idcache_get(c, s_key(k), out, 8);
        if (n == IPL_IDCACHE_MISS)
            ipl_idcache_put(c, s_key(k), ids, (size_t)(k % 8) + 1);
        else if (n != (size_t)(k % 8) + 1 || memcmp(out, ids, n * sizeof *out))
            return (void *)1;
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    ipl_idcache_t *c = ipl_idcache_new(20, 1 << 20); /* fewer than the keys: evictions too */
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, s_worker, c), 0);
    for (int i = 0; i < 4; i++) {
        void *rc = NULL;
        pthread_join(t[i], &rc);
        assert_null(rc);
    }
    ipl_idcache_stats_t st;
    ipl_idcache_stats(c, &st);
    assert_true(st.entries <= 20);
    assert_int_equal(st.hits + st.misses, 80000);
    ipl_idcache_destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_and_room),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_bounds_evict_least_recently_used),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
