/*
 * Unit tests of ipl_pretok: each pattern's pieces on hand-picked texts, written as the pieces
 * joined with "|". The expected splits follow from the regexes (worked out in the comments
 * of ipl_pretok.c) and agree with Hugging Face tokenizers 0.23.2 (the Rust crate): the parity
 * test (integration/test_tokenizer_parity.py) checks the same on the real files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_pretok.h"

typedef struct {
    char out[4096];
    size_t len, pieces, stop_after; /* stop_after: return false after that many (0: never) */
} s_join_t;

static bool s_join_cb(void *ctx, const unsigned char *piece, size_t len)
{
    s_join_t *j = ctx;
    assert_true(len > 0);
    assert_true(j->len + len + 1 < sizeof j->out);
    if (j->pieces++) j->out[j->len++] = '|';
    memcpy(j->out + j->len, piece, len);
    j->len += len;
    j->out[j->len] = '\0';
    return j->stop_after == 0 || j->pieces < j->stop_after;
}

static void s_expect(const ipl_pretok_t *pt, const char *text, const char *want)
{
    s_join_t j = {.out = ""};
    assert_true(ipl_pretok_split(pt, (const unsigned char *)text, strlen(text), s_join_cb, &j));
    if (strcmp(j.out, want) != 0)
        fprintf(stderr, "text \"%s\":\n  got  \"%s\"\n  want \"%s\"\n", text, j.out, want);
    assert_string_equal(j.out, want);
}

static ipl_pretok_t s_one(ipl_pretok_pattern_t pattern)
{
    ipl_pretok_t pt = {0};
    assert_true(ipl_pretok_add_regex(&pt, pattern));
    return pt;
}

static void test_cl100k(void **state)
{
    (void)state;
    ipl_pretok_t llama = s_one(IPL_PRETOK_LLAMA3), qwen = s_one(IPL_PRETOK_QWEN2);
    s_expect(&llama, "Hello world, it's 12345!", "Hello| world|,| it|'s| |123|45|!");
    s_expect(&qwen, "Hello world, it's 12345!", "Hello| world|,| it|'s| |1|2|3|4|5|!");
    s_expect(&llama, "a  b\n\n c   ", "a| | b|\n\n| c|   ");
    s_expect(&llama, "x!!\n\ny //z", "x|!!\n\n|y| //|z");
    s_expect(&llama, "'S'LL'x", "'S|'LL|'x");
}

static void test_o200k(void **state)
{
    (void)state;
    ipl_pretok_t pt = s_one(IPL_PRETOK_O200K);
    /* cased runs: an upper-case run keeps the lower-case letters after it */
    s_expect(&pt, "HelloWorld camelCase XMLHttpRequest",
             "Hello|World| camel|Case| XMLHttp|Request");
    s_expect(&pt, "DON'T don't I'M", "DON'T| don't| I'M");
    /* ǅ (Lt) is upper-case, ʰ (Lm) both: "ǅx" one piece, "ʰA" then "A" */
    s_expect(&pt,
             "\xc7\x85x A\xca\xb0"
             "B",
             "\xc7\x85x| A\xca\xb0|B");
    /* a mark is the optional prefix first, then the start of the letters */
    s_expect(&pt,
             "\xcc\x81"
             "ABC",
             "\xcc\x81|ABC");
    s_expect(&pt, " \xcc\x81's x", " \xcc\x81's| x");
    s_expect(&pt, "a/\n/b !!/ 12345", "a|/\n/|b| !!/| |123|45");
    s_expect(&pt, "x  \n y ", "x|  \n| y| ");
}

static void test_deepseek(void **state)
{
    (void)state;
    ipl_pretok_t pt = {0};
    assert_true(ipl_pretok_add_regex(&pt, IPL_PRETOK_DS_DIGITS));
    assert_true(ipl_pretok_add_regex(&pt, IPL_PRETOK_DS_CJK));
    assert_true(ipl_pretok_add_regex(&pt, IPL_PRETOK_DS_WORDS));
    s_expect(&pt, "abc1234def", "abc|123|4|def");
    /* 中文 (CJK set) and かな are cut out; 한 (Hangul) is not in the set */
    s_expect(&pt, "x中文English混合かな한국", "x|中文|English|混合かな|한국");
    s_expect(&pt, "#include ...abc 'tis", "#include| ...|abc| '|tis");
    s_expect(&pt, "a.b,c\n\nd  e", "a|.b|,c|\n\n|d| | e");
    /* a control character before a letter is the optional prefix; alone it is left over */
    s_expect(&pt, "\x01x \x02", "\x01x| |\x02");
    /* the stages see pieces: the space before 12 is at the end of "a " */
    s_expect(&pt, "a  12", "a|  |12");
}

static void test_literal(void **state)
{
    (void)state;
    ipl_pretok_t merged = {0}, removed = {0}, isolated = {0};
    assert_true(ipl_pretok_add_literal(&merged, " ", 1, IPL_PRETOK_MERGED_WITH_PREVIOUS));
    assert_true(ipl_pretok_add_literal(&removed, "--", 2, IPL_PRETOK_REMOVED));
    assert_true(ipl_pretok_add_literal(&isolated, "ab", 2, IPL_PRETOK_ISOLATED));
    /* HF: the-final--countdown on '-' gives "the-", "final-", "-", "countdown" */
    s_expect(&merged, "the final  countdown ", "the |final | |countdown ");
    s_expect(&merged, " x", " |x");
    s_expect(&removed, "a--b----c--", "a|b|c");
    s_expect(&isolated, "xabyabab", "x|ab|y|ab|ab");
    ipl_pretok_t none = {0};
    s_expect(&none, "the whole text", "the whole text");
    assert_false(ipl_pretok_add_literal(&none, "", 0, IPL_PRETOK_ISOLATED));
    assert_false(ipl_pretok_add_literal(&none, "0123456789abcdefg", 17, IPL_PRETOK_ISOLATED));
}

static void test_stop_and_limits(void **state)
{
    (void)state;
    ipl_pretok_t pt = s_one(IPL_PRETOK_LLAMA3);
    s_join_t j = {.out = "", .stop_after = 2};
    assert_false(ipl_pretok_split(&pt, (const unsigned char *)"a b c d", 7, s_join_cb, &j));
    assert_int_equal(j.pieces, 2);
    for (int i = 1; i < IPL_PRETOK_MAX_STAGES; i++)
        assert_true(ipl_pretok_add_regex(&pt, IPL_PRETOK_DS_CJK));
    assert_false(ipl_pretok_add_regex(&pt, IPL_PRETOK_DS_CJK)); /* full */
    assert_false(ipl_pretok_add_regex(&pt, IPL_PRETOK_NPATTERNS));
    assert_int_equal(ipl_pretok_match(IPL_PRETOK_DS_WORDS, (const unsigned char *)"7", 1, 0), 0);
    /* invalid UTF-8: one character of no class each, never a letter */
    ipl_pretok_t o = s_one(IPL_PRETOK_O200K);
    s_expect(&o,
             "a\xff\xfe"
             "b",
             "a|\xff\xfe|b");
}

static void test_pattern_find(void **state)
{
    (void)state;
    assert_int_equal(ipl_pretok_pattern_find("\\p{N}{1,3}"), IPL_PRETOK_DS_DIGITS);
    assert_int_equal(ipl_pretok_pattern_find("\\p{N}{1,4}"), -1);
    assert_int_equal(ipl_pretok_pattern_find(""), -1);
    assert_int_equal(ipl_pretok_pattern_find("[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f"
                                             "\xe3\x82\xa0-\xe3\x83\xbf]+"),
                     IPL_PRETOK_DS_CJK);
    assert_string_equal(ipl_pretok_pattern_name(IPL_PRETOK_O200K), "o200k");
    assert_string_equal(ipl_pretok_pattern_name(IPL_PRETOK_NPATTERNS), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cl100k),          cmocka_unit_test(test_o200k),
        cmocka_unit_test(test_deepseek),        cmocka_unit_test(test_literal),
        cmocka_unit_test(test_stop_and_limits), cmocka_unit_test(test_pattern_find),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
