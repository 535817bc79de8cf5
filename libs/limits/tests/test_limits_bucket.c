/*
 * Unit tests of limits_bucket: starts full, refills limit/60 per second continuously up to
 * the capacity, goes into debt, says how long until a cost fits and until it is full, and a
 * clock that steps back refills nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "limits_bucket.h"

static void test_starts_full_and_refills_continuously(void **state)
{
    (void)state;
    limits_bucket_t b;
    limits_bucket_init(&b, 600, 1000); // 10 per second
    assert_int_equal(limits_bucket_remaining(&b), 600);
    assert_int_equal(limits_bucket_reset_ms(&b), 0);
    limits_bucket_charge(&b, 600);
    assert_int_equal(limits_bucket_remaining(&b), 0);
    assert_int_equal(limits_bucket_reset_ms(&b), 60000);
    limits_bucket_refill(&b, 1250); // 250 ms: 2.5
    assert_int_equal(limits_bucket_remaining(&b), 2);
    limits_bucket_refill(&b, 1000 + 120000); // capped at the capacity
    assert_int_equal(limits_bucket_remaining(&b), 600);
}

static void test_debt_delays_the_next_admission(void **state)
{
    (void)state;
    limits_bucket_t b;
    limits_bucket_init(&b, 60, 0); // 1 per second
    assert_true(limits_bucket_fits(&b, 60));
    limits_bucket_charge(&b, 70); // 10 in debt
    assert_int_equal(limits_bucket_remaining(&b), 0);
    assert_false(limits_bucket_fits(&b, 1));
    assert_int_equal(limits_bucket_wait_ms(&b, 1), 11000); // pay 10 back, then 1
    limits_bucket_refill(&b, 10999);
    assert_false(limits_bucket_fits(&b, 1));
    limits_bucket_refill(&b, 11000);
    assert_true(limits_bucket_fits(&b, 1));
    assert_int_equal(limits_bucket_wait_ms(&b, 1), 0);
}

static void test_a_cost_above_the_capacity_waits_for_a_full_bucket(void **state)
{
    (void)state;
    limits_bucket_t b;
    limits_bucket_init(&b, 100, 0);
    limits_bucket_charge(&b, 50);
    assert_false(limits_bucket_fits(&b, 500));
    assert_int_equal(limits_bucket_wait_ms(&b, 500), 30000); // 50 more at 100/min
    limits_bucket_refill(&b, 30000);
    assert_true(limits_bucket_fits(&b, 500));
    limits_bucket_charge(&b, 500);
    assert_true(b.level < -399.9 && b.level > -400.1);
    limits_bucket_charge(&b, 1e19); // a bogus charge: ten minutes of debt at most
    assert_true(b.level < -999.9 && b.level > -1000.1);
    assert_int_equal(limits_bucket_wait_ms(&b, 1), 600600); // 1001 at 100/min
}

static void test_refunds_are_capped_and_a_clock_step_back_refills_nothing(void **state)
{
    (void)state;
    limits_bucket_t b;
    limits_bucket_init(&b, 60, 5000);
    limits_bucket_charge(&b, 10);
    limits_bucket_charge(&b, -100); // a refund larger than what was taken
    assert_int_equal(limits_bucket_remaining(&b), 60);
    limits_bucket_charge(&b, 30);
    limits_bucket_refill(&b, 1000); // back in time
    assert_int_equal(limits_bucket_remaining(&b), 30);
    limits_bucket_refill(&b, 6000);
    assert_int_equal(limits_bucket_remaining(&b), 31);
}

static void test_resize_keeps_the_level_within_the_new_capacity(void **state)
{
    (void)state;
    limits_bucket_t b;
    limits_bucket_init(&b, 1000, 0);
    limits_bucket_charge(&b, 100); // 900
    limits_bucket_resize(&b, 500, 0);
    assert_int_equal(limits_bucket_remaining(&b), 500);
    limits_bucket_resize(&b, 2000, 0);
    assert_int_equal(limits_bucket_remaining(&b), 500);
    assert_int_equal(limits_bucket_reset_ms(&b), 45000); // 1500 at 2000/min
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_starts_full_and_refills_continuously),
        cmocka_unit_test(test_debt_delays_the_next_admission),
        cmocka_unit_test(test_a_cost_above_the_capacity_waits_for_a_full_bucket),
        cmocka_unit_test(test_refunds_are_capped_and_a_clock_step_back_refills_nothing),
        cmocka_unit_test(test_resize_keeps_the_level_within_the_new_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
