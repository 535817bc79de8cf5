/*
 * Unit tests of decider_pick: the router's generator as a pick function draws from it
 * (range, determinism, spread), whether a decision explains, and declaring the winner.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "decider_pick.h"

static void test_random_and_uniform(void **state)
{
    (void)state;
    uint64_t rng = 42, again = 42;
    decider_pick_t a = {.rng = &rng}, b = {.rng = &again};
    assert_int_equal(decider_pick_random(&a, 0), 0);
    assert_int_equal(rng, 42); // n 0: the generator does not advance
    int seen[4] = {0};
    for (int i = 0; i < 4000; i++) {
        uint32_t k = decider_pick_random(&a, 4);
        assert_true(k < 4);
        assert_int_equal(k, decider_pick_random(&b, 4)); // the same seed, the same draws
        seen[k]++;
    }
    for (int k = 0; k < 4; k++)
        assert_true(seen[k] > 850 && seen[k] < 1150);
    assert_int_not_equal(rng, 42);
    double sum = 0;
    for (int i = 0; i < 4000; i++) {
        double u = decider_pick_uniform(&a);
        assert_true(u >= 0 && u < 1);
        sum += u;
    }
    assert_true(sum / 4000 > 0.45 && sum / 4000 < 0.55);
}

static void test_win_explains_or_not(void **state)
{
    (void)state;
    decider_candidate_t cands[2];
    memset(cands, 0, sizeof cands);
    decider_decision_t out;
    decider_decision_init(&out);
    out.cands = cands;
    out.ncands = 2;
    decider_pick_t ctx = {.out = &out, .explain = true};
    assert_true(decider_pick_explains(&ctx));
    decider_pick_win(&ctx, 1, "random", "drawn from %d", 2);
    assert_int_equal(out.winner, 1);
    assert_int_equal(out.status, IPL_ROUTE_OK);
    assert_string_equal(out.reason, "random");
    assert_string_equal(out.detail, "drawn from 2");
    assert_true(cands[1].c.eligible);
    assert_false(cands[0].c.eligible);
    ctx.explain = false; // terse: the reason without the detail
    assert_false(decider_pick_explains(&ctx));
    decider_pick_win(&ctx, 0, "least_loaded", "queue %d", 3);
    assert_int_equal(out.winner, 0);
    assert_string_equal(out.reason, "least_loaded");
    assert_string_equal(out.detail, "");
    assert_true(cands[0].c.eligible);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_and_uniform),
        cmocka_unit_test(test_win_explains_or_not),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
