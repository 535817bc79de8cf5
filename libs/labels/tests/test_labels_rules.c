/*
 * Unit tests of labels_rules, table-driven: whole-word keywords and phrases (case, word
 * boundaries, Cyrillic and Czech case), substring keywords (inside words, white space runs,
 * overlapping keywords through the automaton's failure links), regexes (case, the byte
 * bound, refused back-references, errors), skipping regexes whose label is there already, and
 * feeding words in chunks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "labels_rules.h"
#include "labels_words.h"

enum { L_SECRET, L_CARD, L_DB, L_RU, L_CZ, L_SUB, L_OVER, L_WS, L_RX, L_RXI, L_FAR };

static labels_rules_t *s_rules(size_t regex_max)
{
    labels_rules_t *r = labels_rules_new();
    char err[256];
    static const struct {
        int label;
        const char *kw;
        bool substring;
    } kws[] = {
        {L_SECRET, "password", false},  {L_SECRET, "passphrase", false},
        {L_CARD, "credit card", false}, {L_DB, "drop table users now", false},
        {L_RU, "пароль", false},        {L_CZ, "rodné číslo", false},
        {L_SUB, "passw", true},         {L_OVER, "she", true},
        {L_OVER, "hers", true},         {L_WS, "top  secret", true},
        {L_SUB, "ЖУК", true},
    };
    for (size_t i = 0; i < sizeof kws / sizeof *kws; i++)
        assert_int_equal(
            labels_rules_add_keyword(r, kws[i].label, kws[i].kw, kws[i].substring, err, sizeof err),
            0);
    assert_int_equal(labels_rules_add_regex(r, L_RX, "ticket-[0-9]{4}", false, err, sizeof err), 0);
    assert_int_equal(labels_rules_add_regex(r, L_RXI, "^select .* from", true, err, sizeof err), 0);
    assert_int_equal(labels_rules_add_regex(r, L_FAR, "needle", false, err, sizeof err), 0);
    assert_int_equal(labels_rules_build(r, regex_max, err, sizeof err), 0);
    return r;
}

static void test_keywords_and_regexes(void **state)
{
    (void)state;
    labels_rules_t *r = s_rules(0);
    static const struct {
        const char *text;
        labels_mask_t want;
    } cases[] = {
        {"my Password: hunter2", LABELS_BIT(L_SECRET) | LABELS_BIT(L_SUB)},
        {"PASSPHRASE", LABELS_BIT(L_SECRET)},
        {"passwords", LABELS_BIT(L_SUB)}, // not the whole word, but the substring
        {"the credit card number", LABELS_BIT(L_CARD)},
        {"CREDIT-CARD", LABELS_BIT(L_CARD)},
        {"credit\n\ncard", LABELS_BIT(L_CARD)},
        {"credit cards", 0},
        {"card credit", 0},
        {"please DROP TABLE users now!", LABELS_BIT(L_DB)},
        {"drop table users later", 0},
        {"Мій ПАРОЛЬ тут", LABELS_BIT(L_RU)},
        {"паролі", 0},
        {"RODNÉ ČÍSLO: 7103192745", LABELS_BIT(L_CZ)},
        {"mypassw0rd", LABELS_BIT(L_SUB)},
        {"ushers", LABELS_BIT(L_OVER)}, // "she" and "hers" overlap
        {"TOP SECRET", LABELS_BIT(L_WS)},
        {"top \t\n secret", LABELS_BIT(L_WS)},
        {"topsecret", 0},
        {"жук і Жук", LABELS_BIT(L_SUB)},
        {"see ticket-1234 and", LABELS_BIT(L_RX)},
        {"see TICKET-1234", 0}, // that regex is case-sensitive
        {"SELECT name FROM t", LABELS_BIT(L_RXI)},
        {"we select nothing", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        labels_mask_t got = labels_rules_eval(r, cases[i].text, strlen(cases[i].text));
        if (got != cases[i].want)
            fail_msg("\"%s\": got %#llx, want %#llx", cases[i].text, (unsigned long long)got,
                     (unsigned long long)cases[i].want);
    }
    assert_true(labels_rules_wants_words(r));
    labels_rules_destroy(&r);
    assert_null(r);
    labels_rules_destroy(&r);
}

// A regex reads only the first regex_max bytes, cut at a character boundary.
static void test_regex_bound(void **state)
{
    (void)state;
    labels_rules_t *r = s_rules(100);
    char text[300];
    memset(text, 'x', sizeof text);
    memcpy(text + 50, "needle", 6);
    assert_true(labels_rules_eval(r, text, sizeof text) & LABELS_BIT(L_FAR));
    memset(text + 50, 'x', 6);
    memcpy(text + 94, "needle", 6); // ends at byte 100: inside the bound
    assert_true(labels_rules_eval(r, text, sizeof text) & LABELS_BIT(L_FAR));
    memset(text + 94, 'x', 6);
    memcpy(text + 95, "needle", 6); // ends at 101: past it
    assert_false(labels_rules_eval(r, text, sizeof text) & LABELS_BIT(L_FAR));
    // The bound falls in the middle of "č" (bytes 99-100): the regex sees 99 bytes.
    labels_rules_destroy(&r);
    labels_rules_t *c = labels_rules_new();
    char err[256];
    assert_int_equal(labels_rules_add_regex(c, 0, "x$", false, err, sizeof err), 0);
    assert_int_equal(labels_rules_build(c, 100, err, sizeof err), 0);
    memset(text, 'x', sizeof text);
    memcpy(text + 99, "\xc4\x8d", 2);
    assert_true(labels_rules_eval(c, text, sizeof text) & 1); // "…x" ends at 99
    text[98] = 'y';
    assert_false(labels_rules_eval(c, text, sizeof text) & 1);
    labels_rules_destroy(&c);
}

// A regex whose label the text has already is not run; words fed in any chunking agree.
static void test_have_and_chunks(void **state)
{
    (void)state;
    labels_rules_t *r = s_rules(0);
    const char *t = "Drop table users now, see ticket-1234, password";
    labels_rules_acc_t acc;
    labels_words_t it;
    uint64_t w[64];
    labels_rules_start(r, &acc);
    labels_words_init(&it, t, strlen(t));
    for (size_t n; (n = labels_words_next(&it, w, 1)) > 0;)
        labels_rules_feed(r, &acc, w, n);
    labels_mask_t all = labels_rules_finish(r, &acc, t, strlen(t), 0);
    assert_true(all ==
                (LABELS_BIT(L_DB) | LABELS_BIT(L_RX) | LABELS_BIT(L_SECRET) | LABELS_BIT(L_SUB)));
    assert_true(all == labels_rules_eval(r, t, strlen(t)));
    labels_mask_t skipped = labels_rules_finish(r, &acc, t, strlen(t), LABELS_BIT(L_RX));
    assert_true(skipped == (all & ~LABELS_BIT(L_RX))); // not run: the caller has the label
    labels_rules_destroy(&r);
}

static void test_errors(void **state)
{
    (void)state;
    labels_rules_t *r = labels_rules_new();
    char err[256] = "";
    assert_int_equal(labels_rules_add_keyword(r, 0, "!!!", false, err, sizeof err), IPL_E_INVAL);
    assert_non_null(strstr(err, "has no word"));
    assert_int_equal(labels_rules_add_keyword(r, 0, "a b c d e", false, err, sizeof err),
                     IPL_E_INVAL);
    assert_non_null(strstr(err, "more than 4 words"));
    assert_int_equal(labels_rules_add_keyword(r, 0, "  \t ", true, err, sizeof err), IPL_E_INVAL);
    assert_non_null(strstr(err, "is empty"));
    assert_int_equal(labels_rules_add_regex(r, 0, "a(b", false, err, sizeof err), IPL_E_INVAL);
    assert_non_null(strstr(err, "regex \"a(b\": "));
    assert_int_equal(labels_rules_add_regex(r, 0, "(a)\\1", false, err, sizeof err), IPL_E_INVAL);
    assert_non_null(strstr(err, "back-references"));
    assert_int_equal(labels_rules_add_regex(r, 0, "a\\\\1", false, err, sizeof err), 0); // "\\" "1"
    assert_int_equal(labels_rules_add_keyword(r, LABELS_MAX, "x", false, err, sizeof err),
                     IPL_E_INVAL);
    assert_int_equal(labels_rules_build(r, 0, err, sizeof err), 0);
    assert_false(labels_rules_wants_words(r)); // only a regex
    assert_int_equal(labels_rules_add_keyword(r, 0, "late", false, err, sizeof err), IPL_E_INVAL);
    assert_int_equal(labels_rules_build(r, 0, err, sizeof err), IPL_E_INVAL);
    labels_rules_destroy(&r);
    // Too many characters for the automaton.
    r = labels_rules_new();
    char kw[1001];
    memset(kw, 'k', 1000), kw[1000] = '\0';
    for (int i = 0; i < 9; i++)
        assert_int_equal(labels_rules_add_keyword(r, 0, kw, true, err, sizeof err), 0);
    assert_int_equal(labels_rules_build(r, 0, err, sizeof err), IPL_E_RANGE);
    assert_non_null(strstr(err, "substring keywords"));
    labels_rules_destroy(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keywords_and_regexes),
        cmocka_unit_test(test_regex_bound),
        cmocka_unit_test(test_have_and_chunks),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
