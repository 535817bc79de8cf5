/*
 * Unit tests of ipl_error: every code has its own stable, label-safe name (the names end up
 * in the `reason` label of dropped-input counters), and unknown codes still get a string.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_error.h"

static const int s_codes[] = {IPL_OK,        IPL_E_TRUNCATED, IPL_E_TYPE,     IPL_E_RANGE,
                              IPL_E_VERSION, IPL_E_UNKNOWN,   IPL_E_NOMEM,    IPL_E_INVAL,
                              IPL_E_IO,      IPL_E_TRAILING,  IPL_E_NOTFOUND, IPL_E_AGAIN,
                              IPL_E_TIMEOUT};
#define S_NCODES (sizeof s_codes / sizeof s_codes[0])

static void test_names_are_label_safe_and_distinct(void **state)
{
    (void)state;
    for (size_t i = 0; i < S_NCODES; i++) {
        const char *name = ipl_strerror(s_codes[i]);
        assert_non_null(name);
        assert_true(strlen(name) > 0);
        for (const char *p = name; *p; p++)
            assert_true((*p >= 'a' && *p <= 'z') || *p == '_');
        assert_string_not_equal(name, ipl_strerror(-1000));
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(name, ipl_strerror(s_codes[j]));
    }
}

static void test_pinned_names(void **state)
{
    (void)state;
    // Dashboards and alerts match on these: changing one is a breaking change.
    assert_string_equal(ipl_strerror(IPL_OK), "ok");
    assert_string_equal(ipl_strerror(IPL_E_TRUNCATED), "truncated");
    assert_string_equal(ipl_strerror(IPL_E_TYPE), "wrong_type");
    assert_string_equal(ipl_strerror(IPL_E_RANGE), "out_of_range");
    assert_string_equal(ipl_strerror(IPL_E_VERSION), "bad_version");
    assert_string_equal(ipl_strerror(IPL_E_UNKNOWN), "unknown_type");
    assert_string_equal(ipl_strerror(IPL_E_NOMEM), "no_memory");
    assert_string_equal(ipl_strerror(IPL_E_INVAL), "invalid");
    assert_string_equal(ipl_strerror(IPL_E_IO), "io_error");
    assert_string_equal(ipl_strerror(IPL_E_TRAILING), "trailing_bytes");
    assert_string_equal(ipl_strerror(IPL_E_NOTFOUND), "not_found");
    assert_string_equal(ipl_strerror(IPL_E_AGAIN), "again");
    assert_string_equal(ipl_strerror(IPL_E_TIMEOUT), "timeout");
}

static void test_unknown_codes(void **state)
{
    (void)state;
    assert_string_equal(ipl_strerror(-13), "unknown_error");
    assert_string_equal(ipl_strerror(1), "unknown_error");
    assert_string_equal(ipl_strerror(-2147483647 - 1), "unknown_error");
}

static void test_errf(void **state)
{
    (void)state;
    char err[16] = "untouched";
    ipl_errf(err, sizeof err, "%s:%d: %s", "f.yaml", 7, "too long to fit here");
    assert_string_equal(err, "f.yaml:7: too l"); // cut, terminated
    ipl_errf(NULL, 0, "%d", 1);                // no buffer: nothing
    ipl_errf(err, 0, "x");                      // no room: unchanged
    assert_string_equal(err, "f.yaml:7: too l");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errf),
        cmocka_unit_test(test_names_are_label_safe_and_distinct),
        cmocka_unit_test(test_pinned_names),
        cmocka_unit_test(test_unknown_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
