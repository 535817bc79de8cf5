/*
 * Unit tests of decider_memory: the prefill backlog (drain, FIFO of routings), the decay of
 * recent routings and placements, pending prefixes, and the per-pool memory (LRU past
 * DECIDER_MEMORY_MAX_POOLS).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "decider_memory.h"
#include "ipl_index.h"

// Backlog, recent routings, pending prefixes.
static void test_backlog_recent_pending(void **state)
{
    (void)state;
    decider_memory_t *m = decider_memory_new();
    assert_non_null(m);
    decider_pool_memory_t *pm = decider_memory_pool(m, "p"); // how the strategies read it
    // Backlog: 3,000 tokens at t = 1 s draining at 1,000 tokens/s.
    assert_float_equal(decider_memory_backlog(m, 0, 1000, 1000), 0, 1e-9);
    decider_memory_backlog_add(m, 0, 3000, 1000);
    assert_float_equal(decider_memory_backlog(m, 0, 2000, 1000), 2000, 1e-9);
    assert_float_equal(decider_memory_backlog(m, 0, 5000, 1000), 0, 1e-9); // never below 0
    decider_memory_backlog_add(m, 0, 500, 5000);
    assert_float_equal(decider_memory_backlog(m, 0, 5000, 0), 500, 1e-9); // 0: speed kept
    assert_float_equal(decider_memory_backlog(m, 0, 5250, 0), 250, 1e-9);
    // Two routings, 4 s apart, read 0.25 s after the second: (e^(−4/60) + 1) × e^(−0.25/60).
    double recent = (exp(-4.0 / 60.0) + 1) * exp(-0.25 / 60.0);
    assert_float_equal(decider_pool_recent(pm, 0, 5250), recent, 1e-9);
    assert_float_equal(decider_pool_recent(pm, 0, 5000), recent, 1e-9); // no time travel
    assert_float_equal(decider_pool_recent(pm, 0, 65250), recent * exp(-1.0), 1e-9);
    assert_float_equal(decider_memory_backlog(m, 1, 5250, 1000), 0, 1e-9);
    assert_float_equal(decider_memory_backlog(m, -1, 5250, 1000), 0, 1e-9);
    assert_float_equal(decider_memory_backlog(m, IPL_INDEX_MAX_WORKERS, 5250, 1000), 0, 1e-9);

    // Pending: blocks 3..7 of a prompt routed to worker 2 (it held 0..2), until t = 10 s.
    uint64_t h[10], other[10];
    for (int i = 0; i < 10; i++)
        h[i] = other[i] = 0x9000 + (uint64_t)i;
    decider_memory_pending_add(m, 2, h, 3, 8, 10000);
    assert_int_equal(decider_memory_pending_match(m, 2, h, 10, 3, 9000), 8);
    assert_int_equal(decider_memory_pending_match(m, 2, h, 10, 9, 9000), 9);  // holds more
    assert_int_equal(decider_memory_pending_match(m, 2, h, 6, 3, 9000), 6);   // shorter prompt
    assert_int_equal(decider_memory_pending_match(m, 2, h, 10, 2, 9000), 2);  // lost block 2
    assert_int_equal(decider_memory_pending_match(m, 1, h, 10, 3, 9000), 3);  // other worker
    assert_int_equal(decider_memory_pending_match(m, 2, h, 10, 3, 10000), 3); // expired
    other[5] = 0xdead; // diverges at block 5 (chained hashes: every later block differs too)
    for (int i = 6; i < 10; i++)
        other[i] = 0xdead + (uint64_t)i;
    assert_int_equal(decider_memory_pending_match(m, 2, other, 10, 3, 9000), 5);
    other[3] = 0xbeef; // another prompt from block 3 on
    assert_int_equal(decider_memory_pending_match(m, 2, other, 10, 3, 9000), 3);
    decider_memory_pending_add(m, 2, h, 8, 8, 20000); // nothing to compute: nothing pending
    assert_int_equal(decider_memory_pending_match(m, 2, h, 10, 3, 12000), 3);
    // Entries count from their add to their expiry, each its own, whatever the order in which
    // the clock is read (decisions read it before they queue for the router).
    decider_memory_pending_add(m, 3, h, 3, 8, 30000);
    assert_int_equal(decider_memory_pending_match(m, 3, h, 10, 3, 25000), 8);
    assert_int_equal(decider_memory_pending_match(m, 3, other, 10, 0, 25000), 0);
    decider_memory_pending_add(m, 3, other, 0, 10, 26000);
    assert_int_equal(decider_memory_pending_match(m, 3, other, 10, 0, 25000), 10);
    assert_int_equal(decider_memory_pending_match(m, 3, other, 10, 0, 26000), 0);  // expired
    assert_int_equal(decider_memory_pending_match(m, 3, h, 10, 3, 26000), 8);      // still live
    assert_int_equal(decider_memory_pending_match(m, 3, other, 10, 0, 25999), 10); // read earlier
    assert_int_equal(decider_memory_pending_match(m, 3, h, 10, 3, 30000), 3);
    assert_int_equal(decider_memory_pending_match(m, 3, h, 10, 3, 29999), 8);
    decider_memory_destroy(&m);
    assert_null(m);
}

// Placements decay over DECIDER_MEMORY_PLACED_TAU_S, per worker, never back in time; they are
// not backlog routings.
static void test_placed(void **state)
{
    (void)state;
    decider_memory_t *m = decider_memory_new();
    assert_non_null(m);
    decider_pool_memory_t *pm = decider_memory_pool(m, "p"); // how the strategies read it
    assert_float_equal(decider_memory_placed(m, 4, 1000), 0, 1e-12);
    decider_memory_place(m, 4, 1000);
    decider_memory_place(m, 4, 1000);
    assert_float_equal(decider_memory_placed(m, 4, 1000), 2, 1e-12);
    assert_float_equal(decider_memory_placed(m, 4, 601000), 2 * exp(-1.0), 1e-9);
    assert_float_equal(decider_memory_placed(m, 4, 1000), 2 * exp(-1.0), 1e-9); // no time travel
    assert_float_equal(decider_memory_placed(m, 5, 601000), 0, 1e-12);
    assert_float_equal(decider_pool_recent(pm, 4, 601000), 0, 1e-12);
    assert_float_equal(decider_pool_backlog_requests(pm, 4, 601000), 0, 1e-12);
    decider_memory_place(m, -1, 1000); // ignored
    decider_memory_place(m, IPL_INDEX_MAX_WORKERS, 1000);
    assert_float_equal(decider_memory_placed(m, -1, 1000), 0, 1e-12);
    assert_float_equal(decider_memory_placed(m, IPL_INDEX_MAX_WORKERS, 1000), 0, 1e-12);
    decider_memory_destroy(&m);
}

// Routings with tokens drain first come, first served: the count falls as each is prefilled;
// past 64 at once the newest takes the tokens of the others.
static void test_backlog_requests(void **state)
{
    (void)state;
    decider_memory_t *m = decider_memory_new();
    assert_non_null(m);
    decider_pool_memory_t *pm = decider_memory_pool(m, "p"); // how the strategies read it
    assert_float_equal(decider_memory_backlog(m, 1, 0, 100), 0, 1e-12); // 100 tokens/s
    decider_memory_backlog_add(m, 1, 100, 0);
    decider_memory_backlog_add(m, 1, 200, 0);
    decider_memory_backlog_add(m, 1, 300, 0);
    decider_memory_backlog_add(m, 1, 0, 0); // no tokens: a recent routing, not a backlog one
    assert_float_equal(decider_pool_backlog_requests(pm, 1, 0), 3, 1e-12);
    assert_float_equal(decider_pool_recent(pm, 1, 0), 4, 1e-12);
    assert_float_equal(decider_pool_backlog_requests(pm, 1, 1000), 2, 1e-12); // 100 done
    assert_float_equal(decider_pool_backlog_requests(pm, 1, 2500), 2, 1e-12); // 50 left of 200
    assert_float_equal(decider_pool_backlog_requests(pm, 1, 3000), 1, 1e-12);
    assert_float_equal(decider_memory_backlog(m, 1, 3000, 0), 300, 1e-9);
    assert_float_equal(decider_pool_backlog_requests(pm, 1, 6000), 0, 1e-12);
    // Worker 2 at 10 tokens/s: 70 routings of 10 tokens at once.
    assert_float_equal(decider_memory_backlog(m, 2, 0, 10), 0, 1e-12);
    for (int i = 0; i < 70; i++)
        decider_memory_backlog_add(m, 2, 10, 0);
    assert_float_equal(decider_pool_backlog_requests(pm, 2, 0), 64, 1e-12);
    assert_float_equal(decider_memory_backlog(m, 2, 0, 0), 700, 1e-9);
    // 630 tokens later (63 s) only the newest, holding the last 7 routings' 70, is left.
    assert_float_equal(decider_pool_backlog_requests(pm, 2, 63000), 1, 1e-12);
    assert_float_equal(decider_memory_backlog(m, 2, 63000, 0), 70, 1e-9);
    decider_memory_destroy(&m);
}

// A pool's memory is found again by name, keeps what a strategy wrote, shares the scratch,
// and the least recently used pool is forgotten past DECIDER_MEMORY_MAX_POOLS.
static void test_pools(void **state)
{
    (void)state;
    decider_memory_t *m = decider_memory_new();
    assert_non_null(m);
    decider_pool_memory_t *a = decider_memory_pool(m, "p0");
    assert_non_null(a);
    assert_ptr_equal(a->owner, m);
    assert_non_null(a->scratch);
    assert_null(a->sglang);
    a->next = 7;
    a->prefix = decider_history_new(16, 1000); // destroyed with the memory
    assert_non_null(a->prefix);
    decider_pool_memory_t *b = decider_memory_pool(m, "p1");
    b->next = 9;
    assert_ptr_equal(b->scratch, a->scratch);
    assert_ptr_equal(decider_memory_pool(m, "p0"), a);
    char name[16];
    for (int i = 2; i < DECIDER_MEMORY_MAX_POOLS; i++) {
        snprintf(name, sizeof name, "p%d", i);
        assert_non_null(decider_memory_pool(m, name));
    }
    assert_int_equal(decider_memory_pool(m, "p0")->next, 7); // p0 used last: p1 is the oldest
    assert_non_null(decider_memory_pool(m, "new"));          // forgets p1
    assert_int_equal(decider_memory_pool(m, "p0")->next, 7);
    assert_int_equal(decider_memory_pool(m, "p1")->next, 0); // anew
    decider_memory_destroy(&m);
    assert_null(m);
    decider_memory_destroy(&m); // NULL: nothing
}

/* Heat: the decisions before this one, decayed over DECIDER_MEMORY_HEAT_TAU_S; a read at an
 * earlier clock counts as of the last; rebalancing grants at most one per interval; a newcomer
 * is a worker found empty after being warm, or first seen empty in a warm pool. */
static void test_heat_rebalance_newcomer(void **state)
{
    (void)state;
    decider_memory_t *m = decider_memory_new();
    assert_non_null(m);
    assert_true(decider_memory_heat(m, 42, 1000) == 0);
    assert_true(fabs(decider_memory_heat(m, 42, 1000) - 1) < 1e-12);
    double h = decider_memory_heat(m, 42, 11000); // two, 10 s old: 2/e
    assert_true(fabs(h - 2 * exp(-1)) < 1e-9);
    assert_true(decider_memory_heat(m, 42, 5000) > h); // earlier clock: no decay, one more
    assert_true(decider_memory_heat(m, 43, 11000) == 0); // another key
    uint64_t key = 7; // a key sharing no slot with 42 still counts its own
    for (int i = 0; i < 3; i++)
        decider_memory_heat(m, key, 20000);
    assert_true(fabs(decider_memory_heat(m, key, 20000) - 3) < 1e-12);

    assert_true(decider_memory_rebalance(m, 1, 1000, 100));
    assert_false(decider_memory_rebalance(m, 1, 1099, 100));
    assert_true(decider_memory_rebalance(m, 1, 1100, 100));
    assert_true(decider_memory_rebalance(m, 2, 1100, 100)); // per worker
    assert_false(decider_memory_rebalance(m, -1, 1100, 100));

    // worker 3: seen in a cold pool, then warm, then empty: a newcomer until no longer cold
    assert_false(decider_memory_newcomer(m, 3, false, false, false));
    assert_false(decider_memory_newcomer(m, 3, true, false, true)); // never warm: not one
    assert_false(decider_memory_newcomer(m, 3, false, false, true)); // warm
    assert_false(decider_memory_newcomer(m, 3, true, false, true));  // cold, not empty: evicted
    assert_true(decider_memory_newcomer(m, 3, true, true, true));    // empty: restarted
    assert_true(decider_memory_newcomer(m, 3, true, false, true));   // still cold
    assert_false(decider_memory_newcomer(m, 3, false, false, true)); // caught up
    // worker 4: first seen empty in a warm pool (added)
    assert_true(decider_memory_newcomer(m, 4, true, true, true));
    assert_false(decider_memory_newcomer(m, IPL_INDEX_MAX_WORKERS, true, true, true));
    decider_memory_destroy(&m);
    assert_null(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backlog_recent_pending),
        cmocka_unit_test(test_placed),
        cmocka_unit_test(test_backlog_requests),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_heat_rebalance_newcomer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
