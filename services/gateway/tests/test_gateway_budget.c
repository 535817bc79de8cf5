/*
 * gateway_budget: the floor alone allows min_retries per window; requests add percent of
 * themselves; the window slides (old requests and retries leave it); a peek counts nothing.
 * Time is the test's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gateway_budget.h"

static void test_floor_and_percent(void **state)
{
    (void)state;
    gateway_budget_config_t cfg = {.percent = 20, .min_retries = 2, .window_ms = 10000};
    gateway_budget_t *b = gateway_budget_new(&cfg);
    uint64_t t = 100000;
    assert_true(gateway_budget_would(b, t));
    assert_true(gateway_budget_try(b, t));
    assert_true(gateway_budget_try(b, t));
    assert_false(gateway_budget_would(b, t));
    assert_false(gateway_budget_try(b, t)); /* the floor is spent */
    for (int i = 0; i < 10; i++)            /* 10 requests: 2 more */
        gateway_budget_request(b, t + 10);
    assert_true(gateway_budget_try(b, t + 20));
    assert_true(gateway_budget_try(b, t + 20));
    assert_false(gateway_budget_try(b, t + 20));
    uint64_t rq, rt;
    gateway_budget_counts(b, t + 20, &rq, &rt);
    assert_int_equal(rq, 10);
    assert_int_equal(rt, 4);
    gateway_budget_destroy(&b);
    assert_null(b);
}

static void test_the_window_slides(void **state)
{
    (void)state;
    gateway_budget_config_t cfg = {.percent = 0, .min_retries = 1, .window_ms = 1000};
    gateway_budget_t *b = gateway_budget_new(&cfg);
    assert_true(gateway_budget_try(b, 5000));
    assert_false(gateway_budget_try(b, 5500));
    assert_false(gateway_budget_try(b, 5999)); /* still inside 1 s */
    assert_true(gateway_budget_try(b, 6100));  /* the retry at 5000 has left */
    uint64_t rq, rt;
    gateway_budget_counts(b, 60000, &rq, &rt); /* long after: empty */
    assert_int_equal(rq, 0);
    assert_int_equal(rt, 0);
    gateway_budget_destroy(&b);
}

static void test_zero_allows_nothing(void **state)
{
    (void)state;
    gateway_budget_config_t cfg = {.percent = 0, .min_retries = 0};
    gateway_budget_t *b = gateway_budget_new(&cfg);
    for (int i = 0; i < 100; i++)
        gateway_budget_request(b, 1000);
    assert_false(gateway_budget_try(b, 1000));
    gateway_budget_destroy(&b);
    b = gateway_budget_new(NULL); /* defaults: 20%, no floor, 10 s */
    for (int i = 0; i < 5; i++)
        gateway_budget_request(b, 1000);
    assert_true(gateway_budget_try(b, 1000));
    assert_false(gateway_budget_try(b, 1000));
    gateway_budget_destroy(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floor_and_percent),
        cmocka_unit_test(test_the_window_slides),
        cmocka_unit_test(test_zero_allows_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
