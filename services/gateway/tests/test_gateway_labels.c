/* Unit tests of gateway_labels: the trusted label header's comma-separated list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_labels.h"
#include "ipl_error.h"

#define H "x-inferplane-labels"

/* Parses `value`; expects success with the labels `want` joined by '|'. */
static void s_ok(const char *value, const char *want)
{
    gateway_labels_t l = {0};
    gateway_api_error_t err = {0};
    assert_int_equal(gateway_labels_parse(H, value, &l, &err), 0);
    char got[4096] = "";
    for (uint32_t i = 0; i < l.len; i++) {
        if (i) strcat(got, "|");
        strcat(got, l.labels[i]);
    }
    if (strcmp(got, want)) fail_msg("%s: got \"%s\", want \"%s\"", value, got, want);
    if (!want[0]) assert_null(l.labels);
    gateway_labels_clear(&l);
    assert_null(l.labels);
    assert_int_equal(l.len, 0);
}

static void s_bad(const char *value, const char *needle)
{
    gateway_labels_t l = {(char **)0x1, 9};
    gateway_api_error_t err = {0};
    assert_int_equal(gateway_labels_parse(H, value, &l, &err), IPL_E_INVAL);
    assert_null(l.labels);
    assert_int_equal(l.len, 0);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.type, "invalid_request_error");
    assert_string_equal(err.code, "invalid_labels");
    if (!strstr(err.message, H) || !strstr(err.message, needle))
        fail_msg("message lacks the header or \"%s\": %s", needle, err.message);
}

static void test_lists(void **state)
{
    (void)state;
    s_ok(NULL, "");
    s_ok("", "");
    s_ok(" , ,,\t", "");
    s_ok("pii", "pii");
    s_ok("pii, finance ,,batch", "pii|finance|batch");
    s_ok("\tpii\t,pii, pii ", "pii"); /* repeats dropped */
    s_ok("a b, c", "a b|c");          /* inner spaces are part of the label */
    s_ok("PII,pii", "PII|pii");       /* labels are case-sensitive */
}

static void test_limits(void **state)
{
    (void)state;
    char v[4096] = "";
    for (int i = 0; i < GATEWAY_LABELS_MAX; i++)
        snprintf(v + strlen(v), sizeof(v) - strlen(v), "%sl%d", i ? "," : "", i);
    gateway_labels_t l = {0};
    gateway_api_error_t err = {0};
    assert_int_equal(gateway_labels_parse(H, v, &l, &err), 0);
    assert_int_equal(l.len, GATEWAY_LABELS_MAX);
    assert_string_equal(l.labels[GATEWAY_LABELS_MAX - 1], "l31");
    gateway_labels_clear(&l);
    strcat(v, ",l0,,l1"); /* repeats do not count */
    assert_int_equal(gateway_labels_parse(H, v, &l, &err), 0);
    assert_int_equal(l.len, GATEWAY_LABELS_MAX);
    gateway_labels_clear(&l);
    strcat(v, ",one-more");
    s_bad(v, "more than 32");

    char label[GATEWAY_LABEL_MAX_BYTES + 2];
    memset(label, 'x', GATEWAY_LABEL_MAX_BYTES);
    label[GATEWAY_LABEL_MAX_BYTES] = '\0';
    snprintf(v, sizeof(v), "a, %s ", label);
    assert_int_equal(gateway_labels_parse(H, v, &l, &err), 0);
    assert_int_equal(strlen(l.labels[1]), GATEWAY_LABEL_MAX_BYTES);
    gateway_labels_clear(&l);
    label[GATEWAY_LABEL_MAX_BYTES] = 'y';
    label[GATEWAY_LABEL_MAX_BYTES + 1] = '\0';
    snprintf(v, sizeof(v), "a,%s", label);
    s_bad(v, "65 bytes");
    s_bad("a,b\001c", "control character");
}

/* The trusted header's labels and the computed ones together: repeats dropped, the header's
 * first, at most GATEWAY_LABELS_MAX in all. */
static void test_add(void **state)
{
    (void)state;
    gateway_labels_t l = {0};
    gateway_api_error_t err = {0};
    const char *found[] = {"pii", "pii:email"};
    assert_int_equal(gateway_labels_add(&l, found, 2), 0); // onto nothing
    assert_int_equal(l.len, 2);
    assert_string_equal(l.labels[1], "pii:email");
    gateway_labels_clear(&l);
    assert_int_equal(gateway_labels_parse(H, "finance, pii", &l, &err), 0);
    assert_int_equal(gateway_labels_add(&l, found, 2), 0);
    assert_int_equal(l.len, 3);
    assert_string_equal(l.labels[0], "finance");
    assert_string_equal(l.labels[1], "pii");
    assert_string_equal(l.labels[2], "pii:email");
    assert_int_equal(gateway_labels_add(&l, found, 0), 0); // nothing new: unchanged
    assert_int_equal(l.len, 3);
    const char *many[GATEWAY_LABELS_MAX + 5];
    char names[GATEWAY_LABELS_MAX + 5][8];
    for (int i = 0; i < GATEWAY_LABELS_MAX + 5; i++) {
        snprintf(names[i], sizeof names[i], "l%d", i);
        many[i] = names[i];
    }
    assert_int_equal(gateway_labels_add(&l, many, GATEWAY_LABELS_MAX + 5), 0);
    assert_int_equal(l.len, GATEWAY_LABELS_MAX); // the rest left out
    assert_string_equal(l.labels[0], "finance");
    gateway_labels_clear(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_add),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
