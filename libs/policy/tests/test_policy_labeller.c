/*
 * Unit tests of policy_labeller: a POLICY's label_* fields to the labeller — every detector
 * by default, a chosen few, none, an operator's keyword rule, a classifier — and a policy that
 * names a detector the gateway lacks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy_labeller.h"

static size_t s_labels(const policy_labeller_t *s, const char *text, const char **out)
{
    return policy_labeller_eval(s, text, strlen(text), out, 32);
}

static bool s_has(const char **out, size_t n, const char *label)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(out[i], label)) return true;
    return false;
}

static void test_detectors(void **state)
{
    (void)state;
    char err[256];
    const char *out[32];
    ipl_policy_t p = {0}; // nothing set: every detector
    policy_labeller_t *s = policy_labeller_new(&p, err, sizeof err);
    assert_non_null(s);
    size_t n = s_labels(s, "write to jan.novak@example.cz or card 4111 1111 1111 1111", out);
    assert_true(s_has(out, n, "pii"));
    assert_true(s_has(out, n, "pii:email"));
    assert_true(s_has(out, n, "pii:card"));
    assert_int_equal(s_labels(s, "nothing personal here", out), 0);
    policy_labeller_destroy(&s);
    assert_null(s);
    p.label_detectors = "card"; // only cards
    s = policy_labeller_new(&p, err, sizeof err);
    n = s_labels(s, "write to jan.novak@example.cz or card 4111 1111 1111 1111", out);
    assert_true(s_has(out, n, "pii:card"));
    assert_false(s_has(out, n, "pii:email"));
    policy_labeller_destroy(&s);
    p.label_detectors = ""; // none
    s = policy_labeller_new(&p, err, sizeof err);
    assert_int_equal(s_labels(s, "jan.novak@example.cz", out), 0);
    policy_labeller_destroy(&s);
    p.label_detectors = "email,passport";
    assert_null(policy_labeller_new(&p, err, sizeof err));
    assert_non_null(strstr(err, "passport"));
    assert_int_equal(policy_labeller_eval(NULL, "x", 1, out, 32), 0);
}

static void test_operator_labels(void **state)
{
    (void)state;
    char *kw[] = {"bluebird"};
    ipl_label_rule_t rules[] = {{.policy = "p", .label = "project", .keywords = kw,
                                 .keywords_len = 1, .regex = ""},
                                {.policy = "p", .label = "finance", .regex = "invoice [0-9]+",
                                 .icase = true}};
    char *simple[] = {"what is two plus two", "what time is it", "capital of france"};
    char *complex[] = {"design a distributed database with multi region failover",
                       "analyse the trade offs of event sourcing for billing",
                       "plan a migration of our payment system with risks"};
    ipl_label_class_t classes[] = {
        {.policy = "p", .label = "simple", .examples = simple, .examples_len = 3},
        {.policy = "p", .label = "complex", .examples = complex, .examples_len = 3}};
    ipl_policy_t p = {.label_detectors = "",
                      .label_rules = rules,
                      .label_rules_len = 2,
                      .label_classes = classes,
                      .label_classes_len = 2,
                      .label_threshold_percent = 60};
    char err[256];
    const char *out[32];
    policy_labeller_t *s = policy_labeller_new(&p, err, sizeof err);
    assert_non_null(s);
    size_t n = s_labels(s, "Where is Bluebird? See INVOICE 2291.", out);
    assert_true(s_has(out, n, "project"));
    assert_true(s_has(out, n, "finance"));
    n = s_labels(s, "design a multi region database failover plan", out);
    assert_true(s_has(out, n, "complex"));
    assert_false(s_has(out, n, "simple"));
    policy_labeller_destroy(&s);
    rules[1].regex = "a(b"; // does not build: said, not guessed
    assert_null(policy_labeller_new(&p, err, sizeof err));
    assert_non_null(strstr(err, "regex"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detectors),
        cmocka_unit_test(test_operator_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
