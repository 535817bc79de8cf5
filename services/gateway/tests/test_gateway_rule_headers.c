/* Unit tests of gateway_rule_headers: the names rules list, and a request's values of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway_rule_headers.h"
#include "ipl_error.h"

/* A request's headers: "name: value" pairs, looked up case-insensitively (as MHD does). */
static const char *s_lookup(void *arg, const char *name)
{
    const char *const *h = arg;
    for (size_t i = 0; h[i]; i += 2)
        if (!strcasecmp(h[i], name)) return h[i + 1];
    return NULL;
}

static ipl_policy_t s_policy(ipl_rule_t *rules, uint32_t n)
{
    ipl_policy_t p = {0};
    p.version = 7;
    p.rules = rules;
    p.rules_len = n;
    return p;
}

static void test_names(void **state)
{
    (void)state;
    char *r0[] = {"x-inferplane-class=batch", "X-Team"};
    char *r1[] = {"x-team=a", "x-region=eu=west", "bad name", "=nameless", "x-inferplane-CLASS"};
    ipl_rule_t rules[3] = {{0}};
    rules[0].headers = r0;
    rules[0].headers_len = 2;
    rules[2].headers = r1;
    rules[2].headers_len = 5;
    ipl_policy_t p = s_policy(rules, 3);
    gateway_rule_headers_t *set = gateway_rule_headers_new(&p);
    assert_non_null(set);
    assert_int_equal(gateway_rule_headers_count(set), 3);
    assert_string_equal(gateway_rule_headers_name(set, 0), "x-inferplane-class");
    assert_string_equal(gateway_rule_headers_name(set, 1), "x-team");
    assert_string_equal(gateway_rule_headers_name(set, 2), "x-region");
    assert_null(gateway_rule_headers_name(set, 3));

    const char *req[] = {"X-Team",        "blue",      "x-region", "eu=west",
                         "authorization", "Bearer sk", NULL};
    char **out = NULL;
    uint32_t len = 0;
    assert_int_equal(gateway_rule_headers_collect(set, s_lookup, (void *)req, &out, &len), 0);
    assert_int_equal(len, 2);
    assert_string_equal(out[0], "x-team=blue");
    assert_string_equal(out[1], "x-region=eu=west");
    free(out);

    const char *none[] = {"authorization", "Bearer sk", NULL};
    out = (char **)0x1;
    assert_int_equal(gateway_rule_headers_collect(set, s_lookup, (void *)none, &out, &len), 0);
    assert_null(out);
    assert_int_equal(len, 0);

    const char *empty[] = {"x-inferplane-class", "", NULL}; /* present, empty value */
    assert_int_equal(gateway_rule_headers_collect(set, s_lookup, (void *)empty, &out, &len), 0);
    assert_int_equal(len, 1);
    assert_string_equal(out[0], "x-inferplane-class=");
    free(out);
    gateway_rule_headers_destroy(&set);
    assert_null(set);
}

static void test_no_rules(void **state)
{
    (void)state;
    ipl_policy_t p = s_policy(NULL, 0);
    gateway_rule_headers_t *set = gateway_rule_headers_new(&p);
    assert_int_equal(gateway_rule_headers_count(set), 0);
    const char *req[] = {"x-team", "blue", NULL};
    char **out = (char **)0x1;
    uint32_t len = 9;
    assert_int_equal(gateway_rule_headers_collect(set, s_lookup, (void *)req, &out, &len), 0);
    assert_null(out);
    assert_int_equal(len, 0);
    assert_int_equal(gateway_rule_headers_collect(NULL, s_lookup, (void *)req, &out, &len), 0);
    assert_null(out);
    gateway_rule_headers_destroy(&set);
}

static void test_bounded(void **state)
{
    (void)state;
    enum { N = GATEWAY_RULE_HEADERS_MAX + 10 };
    char **names = calloc(N, sizeof(char *));
    for (int i = 0; i < N; i++) {
        names[i] = malloc(16);
        snprintf(names[i], 16, "h%d", i);
    }
    ipl_rule_t rule = {0};
    rule.headers = names;
    rule.headers_len = N;
    ipl_policy_t p = s_policy(&rule, 1);
    gateway_rule_headers_t *set = gateway_rule_headers_new(&p);
    assert_int_equal(gateway_rule_headers_count(set), GATEWAY_RULE_HEADERS_MAX);
    gateway_rule_headers_destroy(&set);
    for (int i = 0; i < N; i++)
        free(names[i]);
    free(names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_no_rules),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
