/* Unit tests of exporter_values: a label's distinct values, capped, escaped, stable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "exporter_values.h"
#include "ipl_log.h"

static void test_values_are_kept_until_the_cap(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    exporter_values_t *v = exporter_values_new(m, "tenant", 2);
    assert_non_null(v);
    const char *a = exporter_values_get(v, "a");
    assert_string_equal(a, "a");
    assert_ptr_equal(exporter_values_get(v, "a"), a);      /* the same kept copy */
    assert_string_equal(exporter_values_get(v, NULL), ""); /* NULL reads as "", a value */
    assert_string_equal(exporter_values_get(v, "b"), EXPORTER_VALUES_OVERFLOW);
    assert_string_equal(exporter_values_get(v, "c"), EXPORTER_VALUES_OVERFLOW);
    assert_string_equal(exporter_values_get(v, "a"), "a"); /* kept values stay */
    assert_string_equal(exporter_values_get(v, ""), "");
    assert_int_equal(exporter_values_size(v), 2);
    assert_true(exporter_values_overflowed(v) == 2);
    assert_true(
        ipl_metric_value(ipl_metrics_counter(m, "inferplane_exporter_label_values_overflow_total",
                                             "", "dimension=\"tenant\"")) == 2);
    exporter_values_destroy(&v);
    assert_null(v);
    exporter_values_destroy(&v); /* twice is harmless */
    ipl_metrics_destroy(&m);
}

static void test_values_are_escaped_and_cut(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    exporter_values_t *v = exporter_values_new(m, "model", 10);
    assert_string_equal(exporter_values_get(v, "a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    char big[4 * EXPORTER_VALUES_MAX_LEN], big2[sizeof big];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big2, big, sizeof big);
    big2[sizeof big - 2] = 'y'; /* differs only past the cut: the same value */
    const char *cut = exporter_values_get(v, big);
    assert_true(strlen(cut) < EXPORTER_VALUES_MAX_LEN);
    assert_ptr_equal(exporter_values_get(v, big2), cut);
    assert_int_equal(exporter_values_size(v), 2);
    exporter_values_destroy(&v);
    ipl_metrics_destroy(&m);
}

int main(void)
{
    ipl_log_init("test", IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_are_kept_until_the_cap),
        cmocka_unit_test(test_values_are_escaped_and_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
