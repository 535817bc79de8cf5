/*
 * Unit tests of tenants_keys: parsing (every error names file:line:col and never a key),
 * lookups (clear and digest entries, disabled, unknown, missing), and the key in headers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_sha256.h"
#include "tenants_keys.h"

#define B_KEY "ipk-test-team-b-0123456789"

static const char *s_file = "tenants:\n"
                            "  - name: team-a\n"
                            "    keys: [\"ipk-test-team-a-0123456789\", \"ipk-test-team-a-second-key\"]\n"
                            "  - name: team-c\n"
                            "    disabled: true\n"
                            "    keys:\n"
                            "      - ipk-test-team-c-0123456789\n";

static tenants_keys_t *s_parse(const char *text, char *err, size_t errlen)
{
    return tenants_keys_parse("t.yaml", text, strlen(text), err, errlen);
}

static void test_lookup(void **state)
{
    (void)state;
    char err[256];
    tenants_keys_t *k = s_parse(s_file, err, sizeof err);
    assert_non_null(k);
    assert_int_equal(tenants_keys_tenants(k), 2);
    assert_int_equal(tenants_keys_count(k), 3);
    const char *who = "x";
    const char *a = "ipk-test-team-a-0123456789";
    assert_int_equal(tenants_keys_lookup(k, a, strlen(a), &who), TENANTS_OK);
    assert_string_equal(who, "team-a");
    a = "ipk-test-team-a-second-key";
    assert_int_equal(tenants_keys_lookup(k, a, strlen(a), &who), TENANTS_OK);
    assert_string_equal(who, "team-a");
    a = "ipk-test-team-c-0123456789";
    assert_int_equal(tenants_keys_lookup(k, a, strlen(a), &who), TENANTS_DISABLED);
    assert_string_equal(who, "team-c");
    a = "ipk-test-team-a-012345678"; // one byte short
    assert_int_equal(tenants_keys_lookup(k, a, strlen(a), &who), TENANTS_UNKNOWN);
    assert_null(who);
    assert_int_equal(tenants_keys_lookup(k, NULL, 0, &who), TENANTS_MISSING);
    assert_int_equal(tenants_keys_lookup(k, "", 0, &who), TENANTS_MISSING);
    assert_int_equal(tenants_keys_lookup(NULL, "abc", 3, &who), TENANTS_UNKNOWN);
    assert_string_equal(tenants_result_name(TENANTS_DISABLED), "disabled");
    tenants_keys_destroy(&k);
    assert_null(k);
}

/* A digest entry matches the key whose SHA-256 it is (computed here, not assumed). */
static void test_digest_entries(void **state)
{
    (void)state;
    uint8_t d[IPL_SHA256_LEN];
    ipl_sha256(B_KEY, strlen(B_KEY), d);
    char text[256] = "tenants:\n  - name: team-b\n    keys: [\"sha256:";
    size_t off = strlen(text);
    for (int i = 0; i < 32; i++)
        off += (size_t)snprintf(text + off, sizeof text - off, "%02x", d[i]);
    snprintf(text + off, sizeof text - off, "\"]\n");
    char err[256];
    tenants_keys_t *k = s_parse(text, err, sizeof err);
    assert_non_null(k);
    const char *who;
    assert_int_equal(tenants_keys_lookup(k, B_KEY, strlen(B_KEY), &who), TENANTS_OK);
    assert_string_equal(who, "team-b");
    tenants_keys_destroy(&k);
}

typedef struct {
    const char *text;
    const char *want; /* in the message */
} s_bad_t;

static void test_errors(void **state)
{
    (void)state;
    static const s_bad_t rows[] = {
        {"", "t.yaml:1:1: the file is empty"},
        {"tenants: [", "t.yaml:2:1: not valid YAML"},
        {"- a\n", "must be a mapping"},
        {"tenant: []\n", "t.yaml:1:1: unknown key \"tenant\""},
        {"tenants: {}\n", "must be a list"},
        {"tenants: [3]\n", "tenants[0] must be a mapping"},
        {"tenants:\n  - {name: a, keys: [ipk-test-0123456789], colour: red}\n",
         "t.yaml:2:44: tenants[0]: unknown field \"colour\""},
        {"tenants:\n  - {keys: [ipk-test-0123456789]}\n", "tenants[0].name must be"},
        {"tenants:\n  - {name: \"a b\", keys: [ipk-test-0123456789]}\n", "tenants[0].name"},
        {"tenants:\n  - {name: a}\n", "tenants[0].keys must be a list"},
        {"tenants:\n  - {name: a, keys: [short]}\n", "t.yaml:2:22: a key must be 16 to 512"},
        {"tenants:\n  - {name: a, keys: [\"ipk with blanks 0123\"]}\n", "blanks"},
        {"tenants:\n  - {name: a, keys: [\"sha256:abc\"]}\n", "64 hex digits"},
        {"tenants:\n  - {name: a, keys: [\"sha256:zz000000000000000000000000000000"
         "00000000000000000000000000000000\"]}\n",
         "hex digits (0-9, a-f)"},
        {"tenants:\n  - {name: a, keys: [ipk-test-0123456789]}\n"
         "  - {name: b, keys: [ipk-test-0123456789]}\n",
         "t.yaml:3:22: this key is listed already (tenant \"a\")"},
        {"tenants:\n  - {name: a, keys: [ipk-test-0123456789]}\n  - {name: a, keys: []}\n",
         "tenant \"a\" is listed twice"},
        {"tenants:\n  - {name: a, disabled: maybe, keys: []}\n", "disabled must be true or false"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char err[512] = "";
        tenants_keys_t *k = s_parse(rows[i].text, err, sizeof err);
        if (k || !strstr(err, rows[i].want))
            fail_msg("row %zu: got \"%s\", want \"%s\"", i, err, rows[i].want);
        assert_null(strstr(err, "ipk-test")); // never a key in a message
    }
    char err[256];
    assert_null(tenants_keys_load("/nonexistent/keys.yaml", err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/keys.yaml: cannot open"));
}

static void test_key_from_headers(void **state)
{
    (void)state;
    size_t n;
    const char *k = tenants_keys_from_headers("Bearer  abc-def \r\n", NULL, &n);
    assert_int_equal(n, 7);
    assert_memory_equal(k, "abc-def", 7);
    k = tenants_keys_from_headers("bEaReR\txyz", "other", &n);
    assert_int_equal(n, 3);
    assert_memory_equal(k, "xyz", 3);
    k = tenants_keys_from_headers("Basic Zm9vOmJhcg==", " from-x-api-key ", &n);
    assert_int_equal(n, 14);
    assert_memory_equal(k, "from-x-api-key", 14);
    assert_null(tenants_keys_from_headers("Bearer   ", NULL, &n));
    assert_int_equal(n, 0);
    assert_null(tenants_keys_from_headers("Bearerabc", NULL, &n));
    assert_null(tenants_keys_from_headers(NULL, NULL, &n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_digest_entries),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_key_from_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
