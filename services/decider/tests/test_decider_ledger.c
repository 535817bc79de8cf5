/*
 * Unit tests of decider_ledger: in-flight counting against load-sample times, and optimistic
 * blocks that last between TTL and 1.5 × TTL and are never extended by later routings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../decider_ledger.h"

static const uint64_t s_h[8] = {1, 2, 3, 4, 5, 6, 7, 8};

static uint32_t s_prefix(decider_ledger_t *l, int w, size_t n, uint64_t mono)
{
    uint32_t prefix[8] = {0};
    decider_ledger_match(l, s_h, n, prefix, 8, mono);
    return prefix[w];
}

static void test_ids_and_inflight(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000);
    int a = decider_ledger_worker(l, "a"), b = decider_ledger_worker(l, "b");
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(decider_ledger_worker(l, "a"), 0);
    decider_ledger_routed(l, a, NULL, 0, 100, 0);
    decider_ledger_routed(l, a, NULL, 0, 200, 0);
    decider_ledger_routed(l, a, NULL, 0, 300, 0);
    assert_int_equal(decider_ledger_inflight(l, a, 0, 400), 3);
    assert_int_equal(decider_ledger_inflight(l, a, 150, 400), 2); // a sample at 150 saw one
    assert_int_equal(decider_ledger_inflight(l, a, 300, 400), 0);
    assert_int_equal(decider_ledger_inflight(l, b, 0, 400), 0);
    // Beyond the horizon nothing counts, whatever the sample time.
    assert_int_equal(decider_ledger_inflight(l, a, 0, 300 + DECIDER_LEDGER_INFLIGHT_HORIZON_MS), 0);
    // The ring keeps the newest DECIDER_LEDGER_RING routings.
    for (int i = 0; i < DECIDER_LEDGER_RING + 10; i++)
        decider_ledger_routed(l, b, NULL, 0, 1000 + (uint64_t)i, 0);
    assert_int_equal(decider_ledger_inflight(l, b, 0, 2000), DECIDER_LEDGER_RING);
    assert_int_equal(decider_ledger_inflight(l, -1, 0, 2000), 0);
    decider_ledger_destroy(&l);
    assert_null(l);
}

static void test_optimistic_lifetime_without_extension(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000); // rotation every 1000 ms, 3 generations
    int a = decider_ledger_worker(l, "a"), b = decider_ledger_worker(l, "b");
    assert_int_equal(s_prefix(l, a, 8, 0), 0);
    decider_ledger_routed(l, a, s_h, 4, 0, 0);
    assert_int_equal(s_prefix(l, a, 8, 0), 4);
    assert_int_equal(s_prefix(l, b, 8, 0), 0);
    // Routed again with a longer prompt: only the 4 new blocks are added (to the newest gen).
    decider_ledger_routed(l, a, s_h, 8, 0, 1500);
    assert_int_equal(s_prefix(l, a, 8, 1500), 8);
    assert_int_equal(decider_ledger_memberships(l), 8);
    decider_ledger_routed(l, a, s_h, 4, 0, 1600); // already assumed: not extended
    assert_int_equal(decider_ledger_memberships(l), 8);
    assert_int_equal(s_prefix(l, a, 8, 2999), 8);
    // The first 4 blocks, assumed at 0, expire at 3000 (between TTL and 1.5 × TTL): the prefix
    // is broken even though blocks 5..8 (assumed at 1500) are still there.
    assert_int_equal(s_prefix(l, a, 8, 3000), 0);
    assert_int_equal(decider_ledger_memberships(l), 4);
    // After a long idle time every generation is gone at once.
    assert_int_equal(s_prefix(l, a, 8, 100000), 0);
    assert_int_equal(decider_ledger_memberships(l), 0);
    // Ids survive rotations.
    assert_int_equal(decider_ledger_worker(l, "b"), b);
    decider_ledger_routed(l, b, s_h, 2, 0, 100001);
    assert_int_equal(s_prefix(l, b, 8, 100001), 2);
    decider_ledger_destroy(&l);
}

static void test_ttl_zero_disables(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(0);
    int a = decider_ledger_worker(l, "a");
    decider_ledger_routed(l, a, s_h, 8, 10, 0);
    assert_int_equal(s_prefix(l, a, 8, 0), 0);
    assert_int_equal(decider_ledger_inflight(l, a, 0, 20), 1);
    decider_ledger_destroy(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_and_inflight),
        cmocka_unit_test(test_optimistic_lifetime_without_extension),
        cmocka_unit_test(test_ttl_zero_disables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
