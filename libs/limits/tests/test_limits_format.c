/*
 * Unit tests of limits_format: OpenAI's reset durations ("0s", "250ms", "1s", "6m0s") and
 * Retry-After seconds rounded up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "limits_format.h"

static void test_reset_durations(void **state)
{
    (void)state;
    char buf[32];
    assert_string_equal(limits_format_reset(buf, sizeof buf, -5), "0s");
    assert_string_equal(limits_format_reset(buf, sizeof buf, 0), "0s");
    assert_string_equal(limits_format_reset(buf, sizeof buf, 12), "12ms");
    assert_string_equal(limits_format_reset(buf, sizeof buf, 999), "999ms");
    assert_string_equal(limits_format_reset(buf, sizeof buf, 1000), "1s");
    assert_string_equal(limits_format_reset(buf, sizeof buf, 1001), "2s");
    assert_string_equal(limits_format_reset(buf, sizeof buf, 59000), "59s");
    assert_string_equal(limits_format_reset(buf, sizeof buf, 360000), "6m0s");
    assert_string_equal(limits_format_reset(buf, sizeof buf, 61500), "1m2s");
    assert_string_equal(limits_format_reset(buf, sizeof buf, 3723000), "1h2m3s");
}

static void test_retry_after_rounds_up(void **state)
{
    (void)state;
    assert_int_equal(limits_format_retry_after_s(0), 0);
    assert_int_equal(limits_format_retry_after_s(1), 1);
    assert_int_equal(limits_format_retry_after_s(1000), 1);
    assert_int_equal(limits_format_retry_after_s(1001), 2);
    assert_int_equal(limits_format_retry_after_s(86400000), 86400);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reset_durations),
        cmocka_unit_test(test_retry_after_rounds_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
