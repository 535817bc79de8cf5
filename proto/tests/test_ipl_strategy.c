/*
 * Unit tests of ipl_strategy: the list's order (the default first), lookups, the joined list,
 * the measurement flag and the ends of the index range.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_strategy.h"

static void test_names_and_order(void **state)
{
    (void)state;
    assert_int_equal(ipl_strategy_count(), 9);
    assert_string_equal(ipl_strategy_name(0), "ttft"); /* the default */
    assert_string_equal(ipl_strategy_name(8), "prefix-hash");
    assert_null(ipl_strategy_name(9));
    assert_string_equal(ipl_strategy_list(),
                        "ttft, oracle, random, round-robin, least-loaded, gie-default, "
                        "dynamo-cost, sglang-cache-aware, prefix-hash");
}

static void test_known(void **state)
{
    (void)state;
    for (size_t i = 0; i < ipl_strategy_count(); i++)
        assert_true(ipl_strategy_known(ipl_strategy_name(i)));
    assert_true(ipl_strategy_known("least-loaded"));
    assert_false(ipl_strategy_known("TTFT"));
    assert_false(ipl_strategy_known("gie"));
    assert_false(ipl_strategy_known(""));
    assert_false(ipl_strategy_known(NULL));
}

static void test_measurement(void **state)
{
    (void)state;
    size_t n = 0;
    for (size_t i = 0; i < ipl_strategy_count(); i++)
        if (ipl_strategy_measurement(i)) {
            assert_string_equal(ipl_strategy_name(i), "oracle");
            n++;
        }
    assert_int_equal(n, 1);
    assert_false(ipl_strategy_measurement(ipl_strategy_count()));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_order),
        cmocka_unit_test(test_known),
        cmocka_unit_test(test_measurement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
