/*
 * Unit tests of labels_classifier: what a small training set predicts, posteriors (they sum to
 * 1, follow the evidence), the threshold, the background class, determinism across chunkings,
 * the hand-computed posterior of a two-class model, and the errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "ipl_error.h"
#include "labels_classifier.h"
#include "labels_words.h"

enum { L_CODE = 3, L_SIMPLE = 5 };

static const char *const s_code[] = {
    "fix this python function def parse(x): return int(x)",
    "write a c function that returns the length of a string",
    "why does my javascript code throw undefined is not a function",
    "refactor this java class to use an interface",
    "sql query to select users where the id is null",
    "compile error in my rust code: borrowed value does not live long enough",
};
static const char *const s_simple[] = {
    "what is the capital of france",
    "how many days are in a week",
    "translate good morning to german",
    "what time is it in tokyo",
    "who wrote hamlet",
    "is a tomato a fruit",
};
static const char *const s_other[] = {
    "tell me a joke about cats",
    "write a poem about the sea",
    "recommend a good book for the summer",
};

static labels_classifier_t *s_trained(double threshold, bool background)
{
    labels_classifier_t *c = labels_classifier_new();
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(labels_classifier_add(c, L_CODE, s_code[i], strlen(s_code[i])), 0);
        assert_int_equal(labels_classifier_add(c, L_SIMPLE, s_simple[i], strlen(s_simple[i])), 0);
    }
    for (size_t i = 0; background && i < 3; i++)
        assert_int_equal(labels_classifier_add(c, -1, s_other[i], strlen(s_other[i])), 0);
    assert_int_equal(labels_classifier_train(c, threshold), 0);
    return c;
}

static void test_predicts_and_posteriors(void **state)
{
    (void)state;
    labels_classifier_t *c = s_trained(0.5, true);
    assert_int_equal(labels_classifier_nclasses(c), 3);
    assert_int_equal(labels_classifier_label(c, 0), L_CODE);
    assert_int_equal(labels_classifier_label(c, 1), L_SIMPLE);
    assert_int_equal(labels_classifier_label(c, 2), -1);
    assert_int_equal(labels_classifier_label(c, 3), -1);
    static const struct {
        const char *text;
        labels_mask_t want;
    } cases[] = {
        {"my python function throws an error, fix the code", LABELS_BIT(L_CODE)},
        {"Write a SQL query that returns the users", LABELS_BIT(L_CODE)},
        {"What is the capital of Germany?", LABELS_BIT(L_SIMPLE)},
        {"how many days are in a year", LABELS_BIT(L_SIMPLE)},
        {"write a poem about the sea and a joke about cats", 0}, // the background
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double post[3];
        labels_mask_t got = labels_classifier_eval(c, cases[i].text, strlen(cases[i].text), post);
        assert_true(fabs(post[0] + post[1] + post[2] - 1.0) < 1e-9);
        if (got != cases[i].want)
            fail_msg("\"%s\": got %#llx (posteriors %.3f %.3f %.3f)", cases[i].text,
                     (unsigned long long)got, post[0], post[1], post[2]);
    }
    // More evidence, more confidence.
    double one[3], more[3];
    const char *a = "python function", *b = "python function python function code compile error";
    labels_classifier_eval(c, a, strlen(a), one);
    labels_classifier_eval(c, b, strlen(b), more);
    assert_true(more[0] > one[0]);
    // A text with no known feature: the priors.
    double prior[3];
    assert_int_equal(labels_classifier_eval(c, "zzz qqq", 7, prior), 0);
    assert_true(fabs(prior[0] - 6.0 / 15) < 1e-9 && fabs(prior[2] - 3.0 / 15) < 1e-9);
    labels_classifier_destroy(&c);
    assert_null(c);
}

// The threshold: a low one gives every class above it, a high one only confident answers.
static void test_threshold(void **state)
{
    (void)state;
    const char *t = "python capital";
    labels_classifier_t *low = s_trained(0.01, false), *high = s_trained(0.99, false);
    double p[2];
    labels_mask_t m = labels_classifier_eval(low, t, strlen(t), p);
    assert_true(p[0] > 0.01 && p[1] > 0.01);
    assert_true(m == (LABELS_BIT(L_CODE) | LABELS_BIT(L_SIMPLE)));
    assert_true(labels_classifier_eval(high, t, strlen(t), NULL) == 0);
    const char *sure = "fix this python function, the javascript code throws, compile error";
    assert_true(labels_classifier_eval(high, sure, strlen(sure), NULL) == LABELS_BIT(L_CODE));
    labels_classifier_destroy(&low);
    labels_classifier_destroy(&high);
}

// Two one-word classes: the posterior computed by hand. Training "a" (class 0) and "b"
// (class 1): V = 2 buckets, N = 1 each; P(a|0) = 2/3, P(a|1) = 1/3, priors 1/2: P(0|"a") = 2/3.
static void test_hand_computed(void **state)
{
    (void)state;
    labels_classifier_t *c = labels_classifier_new();
    assert_int_equal(labels_classifier_add(c, 0, "a", 1), 0);
    assert_int_equal(labels_classifier_add(c, 1, "b", 1), 0);
    assert_int_equal(labels_classifier_train(c, 0.6), 0);
    double p[2];
    assert_true(labels_classifier_eval(c, "a", 1, p) == LABELS_BIT(0));
    assert_true(fabs(p[0] - 2.0 / 3) < 1e-3);
    // "a a": (2/3)^2 / ((2/3)^2 + (1/3)^2) = 4/5; bigram "a a" is unknown and ignored.
    assert_true(labels_classifier_eval(c, "a A", 3, p) == LABELS_BIT(0));
    assert_true(fabs(p[0] - 0.8) < 1e-3);
    labels_classifier_destroy(&c);
}

static void test_chunked_feeding_is_the_same(void **state)
{
    (void)state;
    labels_classifier_t *c = s_trained(0.5, true);
    const char *t = "Please fix this Python function: it should return the length of a string, "
                    "and tell me the capital of France while you are at it.";
    labels_classifier_acc_t acc;
    labels_words_t it;
    uint64_t w[3];
    double whole[3], chunked[3];
    labels_mask_t m1 = labels_classifier_eval(c, t, strlen(t), whole);
    labels_classifier_start(c, &acc);
    labels_words_init(&it, t, strlen(t));
    for (size_t n; (n = labels_words_next(&it, w, 3)) > 0;)
        labels_classifier_feed(c, &acc, w, n);
    labels_mask_t m2 = labels_classifier_finish(c, &acc, chunked);
    assert_true(m1 == m2);
    assert_memory_equal(whole, chunked, sizeof whole);
    labels_classifier_destroy(&c);
}

static void test_errors(void **state)
{
    (void)state;
    labels_classifier_t *c = labels_classifier_new();
    assert_int_equal(labels_classifier_add(c, LABELS_MAX, "x", 1), IPL_E_RANGE);
    assert_int_equal(labels_classifier_add(c, -2, "x", 1), IPL_E_RANGE);
    assert_int_equal(labels_classifier_add(c, 0, "x", 1), 0);
    assert_int_equal(labels_classifier_train(c, 0.5), IPL_E_INVAL); // one class
    assert_int_equal(labels_classifier_add(c, 1, "y", 1), 0);
    assert_int_equal(labels_classifier_train(c, 0.0), IPL_E_INVAL);
    assert_int_equal(labels_classifier_train(c, 1.0), IPL_E_INVAL);
    assert_int_equal(labels_classifier_train(c, NAN), IPL_E_INVAL);
    assert_int_equal(labels_classifier_train(c, 0.5), 0);
    assert_int_equal(labels_classifier_train(c, 0.5), IPL_E_INVAL);
    assert_int_equal(labels_classifier_add(c, 0, "z", 1), IPL_E_INVAL);
    labels_classifier_destroy(&c);
    c = labels_classifier_new(); // classes whose examples have no word
    assert_int_equal(labels_classifier_add(c, 0, "!!", 2), 0);
    assert_int_equal(labels_classifier_add(c, 1, "??", 2), 0);
    assert_int_equal(labels_classifier_train(c, 0.5), IPL_E_INVAL);
    labels_classifier_destroy(&c);
    c = labels_classifier_new();
    for (int k = 0; k < LABELS_CLASSIFIER_MAX_CLASSES; k++)
        assert_int_equal(labels_classifier_add(c, k, "w", 1), 0);
    assert_int_equal(labels_classifier_add(c, LABELS_CLASSIFIER_MAX_CLASSES, "w", 1), IPL_E_RANGE);
    labels_classifier_acc_t acc;
    labels_classifier_start(c, &acc); // untrained: nothing
    assert_true(labels_classifier_finish(c, &acc, NULL) == 0);
    labels_classifier_destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_predicts_and_posteriors),
        cmocka_unit_test(test_threshold),
        cmocka_unit_test(test_hand_computed),
        cmocka_unit_test(test_chunked_feeding_is_the_same),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
