/*
 * Unit tests of labels_set: the labels a full configuration gives and their order, "pii"
 * implied by every pii:* label (built-in or the operator's), the output bound and count, the
 * configuration copied (freed after new), errors naming the rule or class, and two threads
 * evaluating one set at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels_checksum.h"
#include "labels_set.h"

static const char *const s_secret_kw[] = {"password", "api key"};
static const char *const s_passport_kw[] = {"passport number", "číslo pasu"};
static const char *const s_code_ex[] = {"fix this python function", "write a c program",
                                        "my javascript code throws an error"};
static const char *const s_chat_ex[] = {"tell me a joke", "what is the capital of france",
                                        "write a poem about spring"};

static labels_set_t *s_set(void)
{
    labels_rule_config_t rules[] = {
        {.label = "secret", .keywords = s_secret_kw, .nkeywords = 2},
        {.label = "pii:passport", .keywords = s_passport_kw, .nkeywords = 2},
        {.label = "ticket", .regex = "TICKET-[0-9]+", .icase = true},
        {.label = "secret", .regex = "sk-[A-Za-z0-9]{20}"},
    };
    labels_class_config_t classes[] = {
        {.label = "code", .examples = s_code_ex, .nexamples = 3},
        {.label = NULL, .examples = s_chat_ex, .nexamples = 3},
    };
    labels_config_t c = {.detectors = LABELS_PII_ALL,
                         .rules = rules,
                         .nrules = 4,
                         .classes = classes,
                         .nclasses = 2,
                         .threshold = 0.6,
                         .today = labels_checksum_days(2025, 6, 1)};
    char err[256] = "";
    labels_set_t *s = labels_set_new(&c, err, sizeof err);
    if (!s) fail_msg("labels_set_new: %s", err);
    return s; // c and its arrays go out of scope here: the set holds copies
}

static const char *s_joined(const labels_set_t *s, const char *text)
{
    static char out[512];
    const char *names[LABELS_MAX];
    size_t n = labels_eval(s, text, strlen(text), names, LABELS_MAX);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(out);
        snprintf(out + l, sizeof out - l, "%s%s", i ? "," : "", names[i]);
    }
    return out;
}

static void test_labels_of_texts(void **state)
{
    (void)state;
    labels_set_t *s = s_set();
    assert_int_equal(labels_set_nlabels(s), 12);
    assert_string_equal(labels_set_label(s, 0), "pii");
    assert_string_equal(labels_set_label(s, 1), "pii:email");
    assert_string_equal(labels_set_label(s, 7), "pii:ua_tax_id");
    assert_string_equal(labels_set_label(s, 8), "secret");
    assert_string_equal(labels_set_label(s, 9), "pii:passport");
    assert_string_equal(labels_set_label(s, 10), "ticket");
    assert_string_equal(labels_set_label(s, 11), "code");
    assert_null(labels_set_label(s, 12));
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"tell me a joke about the weather", ""},
        {"mail jan@example.cz", "pii,pii:email"},
        {"card 4111 1111 1111 1111 and +420 777 123 456", "pii,pii:phone,pii:card"},
        {"my Password is hunter2", "secret"},
        {"use sk-abcdefghijklmnopqrst0 here", "secret"},
        {"Číslo pasu 12345678", "pii,pii:passport"}, // the operator's pii:* label gives pii
        {"see ticket-42", "ticket"},
        {"fix this python function please, the javascript code throws", "code"},
        {"IBAN DE89 3704 0044 0532 0130 00, API key in my python code", "pii,pii:iban,secret,code"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (strcmp(s_joined(s, cases[i].text), cases[i].want) != 0)
            fail_msg("\"%s\": {%s}, want {%s}", cases[i].text, s_joined(s, cases[i].text),
                     cases[i].want);
    // The count beyond max, the first max stored.
    const char *t = "jan@example.cz, password, ticket-1";
    const char *one[1] = {NULL};
    assert_int_equal(labels_eval(s, t, strlen(t), one, 1), 4);
    assert_string_equal(one[0], "pii");
    assert_int_equal(labels_eval(s, t, strlen(t), NULL, 0), 4);
    assert_int_equal(labels_eval(s, NULL, 0, one, 1), 0);
    assert_true(labels_set_eval_mask(s, t, strlen(t)) ==
                (LABELS_BIT(0) | LABELS_BIT(1) | LABELS_BIT(8) | LABELS_BIT(10)));
    labels_set_destroy(&s);
    assert_null(s);
    labels_set_destroy(&s);
}

static void test_detectors_only_and_none(void **state)
{
    (void)state;
    char err[128];
    labels_config_t c = {.detectors = 1u << LABELS_PII_EMAIL};
    labels_set_t *s = labels_set_new(&c, err, sizeof err);
    assert_non_null(s);
    assert_string_equal(s_joined(s, "a@example.com 4111 1111 1111 1111"), "pii,pii:email");
    labels_set_destroy(&s);
    labels_config_t none = {0};
    s = labels_set_new(&none, err, sizeof err);
    assert_string_equal(s_joined(s, "a@example.com 4111 1111 1111 1111"), "");
    assert_int_equal(labels_set_nlabels(s), 8); // the built-in names exist all the same
    labels_set_destroy(&s);
}

static void s_expect_error(labels_config_t *c, const char *want)
{
    char err[512] = "";
    labels_set_t *s = labels_set_new(c, err, sizeof err);
    if (s || !strstr(err, want)) fail_msg("error \"%s\", want one with \"%s\"", err, want);
}

static void test_errors_name_the_place(void **state)
{
    (void)state;
    labels_rule_config_t bad_name[] = {
        {.label = "has space", .keywords = s_secret_kw, .nkeywords = 1}};
    labels_config_t c = {.rules = bad_name, .nrules = 1};
    s_expect_error(&c, "rules[0] (label \"has space\"): label \"has space\" is not a label name");
    labels_rule_config_t empty[] = {{.label = "x"}};
    c.rules = empty;
    s_expect_error(&c, "rules[0] (label \"x\"): has neither keywords nor a regex");
    labels_rule_config_t bad_rx[] = {{.label = "ok", .keywords = s_secret_kw, .nkeywords = 1},
                                     {.label = "x", .regex = "a(b"}};
    c.rules = bad_rx, c.nrules = 2;
    s_expect_error(&c, "rules[1] (label \"x\"): regex \"a(b\": ");
    static const char *const nowords[] = {"password", "***"};
    labels_rule_config_t bad_kw[] = {{.label = "x", .keywords = nowords, .nkeywords = 2}};
    c.rules = bad_kw, c.nrules = 1;
    s_expect_error(&c, "rules[0] (label \"x\"): keywords[1]: keyword \"***\" has no word");
    labels_class_config_t one[] = {{.label = "code", .examples = s_code_ex, .nexamples = 3}};
    labels_config_t k = {.classes = one, .nclasses = 1};
    s_expect_error(&k, "at least two distinct classes");
    labels_class_config_t noex[] = {{.label = "code", .examples = s_code_ex, .nexamples = 3},
                                    {.label = "chat"}};
    k.classes = noex, k.nclasses = 2;
    s_expect_error(&k, "classes[1] (label \"chat\"): has no examples");
    labels_class_config_t two[] = {{.label = "code", .examples = s_code_ex, .nexamples = 3},
                                   {.examples = s_chat_ex, .nexamples = 3}};
    k.classes = two, k.threshold = 1.5;
    s_expect_error(&k, "threshold 1.5: must lie between 0 and 1");
    // Too many labels: 8 built in + 56 of the operator's fit, one more does not.
    static char names[60][16];
    labels_rule_config_t many[60];
    for (int i = 0; i < 60; i++) {
        snprintf(names[i], sizeof names[i], "l%d", i);
        many[i] =
            (labels_rule_config_t){.label = names[i], .keywords = s_secret_kw, .nkeywords = 1};
    }
    labels_config_t m = {.rules = many, .nrules = 56};
    char err[256];
    labels_set_t *s = labels_set_new(&m, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(labels_set_nlabels(s), 64);
    labels_set_destroy(&s);
    m.nrules = 57;
    s_expect_error(&m, "rules[56] (label \"l56\"): label \"l56\" is one too many");
}

// The classifier reads the end of the text; the keywords all of it, across the cut too.
static void test_classifier_reads_the_end(void **state)
{
    (void)state;
    static const char *const kw[] = {"credit card"};
    labels_rule_config_t rules[] = {{.label = "cc", .keywords = kw, .nkeywords = 1}};
    labels_class_config_t classes[] = {
        {.label = "code", .examples = s_code_ex, .nexamples = 3},
        {.label = NULL, .examples = s_chat_ex, .nexamples = 3},
    };
    char text[512];
    const char *head = "fix this python function, my javascript code throws an error, write a c "
                       "program, fix this python function please ";
    const char *tail = " card: tell me a joke, what is the capital of france, a poem";
    snprintf(text, sizeof text, "%scredit%s", head, tail);
    size_t len = strlen(text), window = strlen(tail) + 3; // the cut falls inside "credit"
    char err[256];
    for (int all = 0; all <= 1; all++) {
        labels_config_t c = {.rules = rules,
                             .nrules = 1,
                             .classes = classes,
                             .nclasses = 2,
                             .threshold = 0.5,
                             .classifier_bytes = all ? SIZE_MAX : window};
        labels_set_t *s = labels_set_new(&c, err, sizeof err);
        assert_non_null(s);
        assert_string_equal(s_joined(s, text), all ? "cc,code" : "cc");
        assert_int_equal(labels_eval(s, text, len, NULL, 0), all ? 2 : 1);
        labels_set_destroy(&s);
    }
}

static void *s_worker(void *arg)
{
    const labels_set_t *s = arg;
    const char *t = "IBAN DE89 3704 0044 0532 0130 00, API key in my python code, jan@example.cz";
    labels_mask_t first = labels_set_eval_mask(s, t, strlen(t));
    for (int i = 0; i < 2000; i++)
        if (labels_set_eval_mask(s, t, strlen(t)) != first) return (void *)1;
    return NULL;
}

static void test_threads_share_a_set(void **state)
{
    (void)state;
    labels_set_t *s = s_set();
    pthread_t a, b;
    void *ra, *rb;
    assert_int_equal(pthread_create(&a, NULL, s_worker, s), 0);
    assert_int_equal(pthread_create(&b, NULL, s_worker, s), 0);
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    assert_null(ra);
    assert_null(rb);
    labels_set_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_of_texts),
        cmocka_unit_test(test_detectors_only_and_none),
        cmocka_unit_test(test_errors_name_the_place),
        cmocka_unit_test(test_classifier_reads_the_end),
        cmocka_unit_test(test_threads_share_a_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
