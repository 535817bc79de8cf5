/*
 * Unit tests of clustersim_kvmap: holders counted per engine block, the entry forgotten at
 * zero, unknown blocks refused, and backward-shift deletion checked against a reference
 * array through growth and long probe runs (keys chosen to collide).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "clustersim_kvmap.h"

static void test_holders(void **state)
{
    (void)state;
    clustersim_kvmap_t *m = clustersim_kvmap_new();
    uint64_t ours = 0;
    assert_false(clustersim_kvmap_get(m, 7, &ours));
    assert_false(clustersim_kvmap_release(m, 7, &ours));
    assert_int_equal(clustersim_kvmap_hold(m, 7, 700), 0);
    assert_int_equal(clustersim_kvmap_hold(m, 7, 999), 0); // second worker: value kept
    assert_int_equal(clustersim_kvmap_hold(m, 0, 5), 0);   // key 0 is a key like any other
    assert_int_equal(clustersim_kvmap_size(m), 2);
    assert_true(clustersim_kvmap_get(m, 7, &ours));
    assert_int_equal(ours, 700);
    assert_true(clustersim_kvmap_release(m, 7, &ours));
    assert_int_equal(ours, 700);
    assert_true(clustersim_kvmap_get(m, 7, &ours)); // one holder left
    assert_true(clustersim_kvmap_release(m, 7, &ours));
    assert_false(clustersim_kvmap_get(m, 7, &ours));
    assert_false(clustersim_kvmap_release(m, 7, &ours));
    assert_true(clustersim_kvmap_get(m, 0, &ours));
    assert_int_equal(ours, 5);
    assert_int_equal(clustersim_kvmap_size(m), 1);
    clustersim_kvmap_destroy(&m);
    assert_null(m);
}

typedef struct {
    uint64_t key, ours;
    uint32_t holders;
} s_ref_t;

static void test_random_against_reference(void **state)
{
    (void)state;
    clustersim_kvmap_t *m = clustersim_kvmap_new();
    enum { KEYS = 3000 };
    s_ref_t *ref = calloc(KEYS, sizeof *ref);
    for (uint32_t i = 0; i < KEYS; i++) // multiples of 2^40 make the low bits collide
        ref[i].key = (uint64_t)i << 40 | (i % 7);
    uint64_t x = 99;
    for (int round = 0; round < 200000; round++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s_ref_t *r = &ref[x % KEYS];
        uint64_t ours = 0;
        if ((x >> 20) % 2) {
            assert_int_equal(clustersim_kvmap_hold(m, r->key, r->key ^ 0xabcdef), 0);
            r->holders++;
        } else {
            bool known = clustersim_kvmap_release(m, r->key, &ours);
            assert_int_equal(known, r->holders > 0);
            if (known) {
                assert_int_equal(ours, r->key ^ 0xabcdef);
                r->holders--;
            }
        }
        if (round % 5000 == 0) {
            size_t live = 0;
            for (uint32_t i = 0; i < KEYS; i++) {
                bool has = clustersim_kvmap_get(m, ref[i].key, &ours);
                assert_int_equal(has, ref[i].holders > 0);
                live += ref[i].holders > 0;
            }
            assert_int_equal(clustersim_kvmap_size(m), live);
        }
    }
    free(ref);
    clustersim_kvmap_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holders),
        cmocka_unit_test(test_random_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
