/*
 * Unit tests of ipl_normalizer: Replace's left-to-right, non-overlapping matches (HF's
 * NormalizedString::replace with a String pattern), NFC, sequences, and the load errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "ipl_normalizer.h"

static ipl_normalizer_t *s_new(const char *json, char *err, size_t errlen)
{
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    assert_true(!json || j);
    ipl_normalizer_t *n = ipl_normalizer_new_from_json(j, err, errlen);
    cJSON_Delete(j);
    return n;
}

/* apply(text) == want; want NULL: unchanged (no copy). */
static void s_expect(const ipl_normalizer_t *n, const char *text, const char *want)
{
    char *out = (char *)"untouched";
    size_t len = 12345;
    assert_true(ipl_normalizer_apply(n, text, strlen(text), &out, &len));
    if (!want) {
        assert_null(out);
        assert_int_equal(len, strlen(text));
        return;
    }
    assert_non_null(out);
    assert_int_equal(len, strlen(want));
    assert_string_equal(out, want);
    free(out);
}

static void test_replace(void **state)
{
    (void)state;
    char err[256];
    ipl_normalizer_t *n =
        s_new("{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}",
              err, sizeof err);
    assert_non_null(n);
    assert_false(ipl_normalizer_is_identity(n));
    s_expect(n, "a b  c ",
             "a\xe2\x96\x81"
             "b\xe2\x96\x81\xe2\x96\x81"
             "c\xe2\x96\x81");
    s_expect(n, "nospace", NULL);
    s_expect(n, "", NULL);
    ipl_normalizer_destroy(&n);
    assert_null(n);
    ipl_normalizer_destroy(&n); /* harmless twice */

    /* left to right, non-overlapping: "aaa" with "aa" → "X" + "a" */
    n = s_new("{\"type\":\"Replace\",\"pattern\":{\"String\":\"aa\"},\"content\":\"X\"}", err,
              sizeof err);
    s_expect(n, "aaa", "Xa");
    s_expect(n, "aaaa", "XX");
    ipl_normalizer_destroy(&n);

    /* the building block on its own, with an empty content */
    char *out;
    size_t len;
    assert_true(ipl_normalizer_replace("x--y--", 6, "--", 2, "", 0, &out, &len));
    assert_int_equal(len, 2);
    assert_string_equal(out, "xy");
    free(out);
}

static void test_sequence(void **state)
{
    (void)state;
    char err[256];
    /* NFC first (e + U+0301 → é), then é → E: the order of the steps matters */
    ipl_normalizer_t *n = s_new("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},"
                                "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xc3\xa9\"},"
                                "\"content\":\"E\"}]}",
                                err, sizeof err);
    assert_non_null(n);
    s_expect(n, "e\xcc\x81t\xc3\xa9", "EtE");
    s_expect(n, "plain", NULL);
    ipl_normalizer_destroy(&n);
    n = s_new(NULL, err, sizeof err); /* no normalizer */
    assert_true(ipl_normalizer_is_identity(n));
    s_expect(n, "e\xcc\x81", NULL);
    ipl_normalizer_destroy(&n);
    n = s_new("null", err, sizeof err);
    assert_true(ipl_normalizer_is_identity(n));
    ipl_normalizer_destroy(&n);
    n = s_new("{\"type\":\"Sequence\",\"normalizers\":[]}", err, sizeof err);
    assert_true(ipl_normalizer_is_identity(n));
    ipl_normalizer_destroy(&n);
}

static void s_expect_error(const char *json, const char *want)
{
    char err[256] = "untouched";
    ipl_normalizer_t *n = s_new(json, err, sizeof err);
    if (n || strcmp(err, want) != 0) fprintf(stderr, "error \"%s\", wanted \"%s\"\n", err, want);
    assert_null(n);
    assert_string_equal(err, want);
}

static void test_errors(void **state)
{
    (void)state;
    s_expect_error("{\"type\":\"NFKC\"}",
                   "normalizer: type \"NFKC\" is not supported (null, NFC, Replace with a String "
                   "pattern, or a Sequence of them)");
    s_expect_error(
        "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Replace\","
        "\"pattern\":{\"Regex\":\" +\"},\"content\":\"x\"}]}",
        "normalizer.normalizers[1].pattern: only a non-empty {\"String\": ...} is "
        "supported");
    s_expect_error("{\"type\":\"Replace\",\"pattern\":{\"String\":\"\"},\"content\":\"x\"}",
                   "normalizer.pattern: only a non-empty {\"String\": ...} is supported");
    s_expect_error("{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"}}",
                   "normalizer.content: missing or not a string");
    s_expect_error("{\"type\":\"Sequence\"}", "normalizer.normalizers: missing or not an array");
    s_expect_error("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"NFC\"},"
                   "{\"type\":\"NFC\"},{\"type\":\"NFC\"},{\"type\":\"NFC\"},{\"type\":\"NFC\"},"
                   "{\"type\":\"NFC\"},{\"type\":\"NFC\"},{\"type\":\"NFC\"}]}",
                   "normalizer.normalizers[8]: more than 8 steps");
    cJSON *empty = cJSON_Parse("{}");
    assert_null(ipl_normalizer_new_from_json(empty, NULL, 0)); /* err may be NULL */
    cJSON_Delete(empty);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace),
        cmocka_unit_test(test_sequence),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
