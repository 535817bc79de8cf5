/*
 * Unit tests of decider_history: the routing-history prefix tree over block hashes and its
 * two-generation eviction.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "decider_history.h"
#include "ipl_error.h"

static uint64_t s_h[64];

static void s_fill(void)
{
    for (int i = 0; i < 64; i++)
        s_h[i] = 0x1234000 + (uint64_t)i;
}

static void test_match_is_the_longest_routed_prefix(void **state)
{
    (void)state;
    s_fill();
    decider_history_t *h = decider_history_new(1000, 60000);
    int a = decider_history_worker(h, "a"), b = decider_history_worker(h, "b");
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(decider_history_worker(h, "a"), 0);
    uint32_t prefix[4];
    assert_int_equal(decider_history_match(h, s_h, 10, prefix, 4), 0);
    assert_int_equal(decider_history_insert(h, a, s_h, 10, 0), 0);
    assert_int_equal(decider_history_insert(h, b, s_h, 4, 0), 0);
    assert_int_equal(decider_history_match(h, s_h, 20, prefix, 4), 10);
    assert_int_equal(prefix[a], 10);
    assert_int_equal(prefix[b], 4);
    assert_int_equal(decider_history_worker_blocks(h, a), 10);
    assert_int_equal(decider_history_memberships(h), 14);
    // A prompt diverging after 2 blocks: chained hashes differ from there on.
    uint64_t other[3] = {s_h[0], s_h[1], 0x999};
    assert_int_equal(decider_history_match(h, other, 3, prefix, 4), 2);
    assert_int_equal(decider_history_insert(h, 7, s_h, 1, 0), IPL_E_RANGE);
    decider_history_destroy(&h);
    assert_null(h);
}

static void test_eviction_drops_what_was_not_routed_recently(void **state)
{
    (void)state;
    s_fill();
    // At most 20 memberships, checked every 100 ms.
    decider_history_t *h = decider_history_new(20, 100);
    int a = decider_history_worker(h, "a"), b = decider_history_worker(h, "b");
    decider_history_insert(h, a, s_h, 16, 0);       // old prompt on a
    decider_history_insert(h, b, s_h + 32, 16, 50); // b's prompt, not checked yet (50 < 100)
    assert_int_equal(decider_history_memberships(h), 32);
    assert_int_equal(decider_history_evictions(h), 0);
    // At 150 ms: over the limit → rotate; this insertion (b again) lands in the new generation.
    decider_history_insert(h, b, s_h + 32, 16, 150);
    assert_int_equal(decider_history_evictions(h), 1);
    uint32_t prefix[2];
    assert_int_equal(decider_history_match(h, s_h, 16, prefix, 2), 16); // still in gen 1
    // At 300 ms: still over (16 + 32) → rotate again: a's prompt, never touched since, is gone;
    // b's, touched at 150 ms, survives.
    decider_history_insert(h, b, s_h + 32, 16, 300);
    assert_int_equal(decider_history_evictions(h), 2);
    assert_int_equal(decider_history_match(h, s_h, 16, prefix, 2), 0);
    assert_int_equal(decider_history_match(h, s_h + 32, 16, prefix, 2), 16);
    assert_int_equal(prefix[b], 16);
    assert_int_equal(decider_history_worker_blocks(h, a), 0);
    // The same worker ids after rotations.
    assert_int_equal(decider_history_worker(h, "b"), b);
    decider_history_destroy(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_is_the_longest_routed_prefix),
        cmocka_unit_test(test_eviction_drops_what_was_not_routed_recently),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
