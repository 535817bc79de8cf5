/*
 * Unit tests of ipl_jinja_str: Python str semantics on UTF-8 (expected values are Python 3's):
 * case mapping and its refusals, strip with and without chars, split / rsplit with maxsplit,
 * splitlines, find / rfind / count in code points, replace, startswith, character classes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_jinja_str.h"
#include "ipl_jinja_value.h"
#include "ipl_unicode.h"

static ipl_jarena_t s_a;

static int s_setup(void **state)
{
    (void)state;
    ipl_jarena_init(&s_a, 0, NULL, NULL);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    ipl_jarena_free(&s_a);
    return 0;
}

static void s_eq(ipl_jv_t v, const char *want)
{
    assert_int_equal(v.type, IPL_JV_STR);
    if (v.u.s.n != strlen(want) || memcmp(v.u.s.p, want, v.u.s.n) != 0)
        fail_msg("got [%.*s], want [%s]", (int)v.u.s.n, v.u.s.p, want);
}

static void s_case(const char *in, ipl_jcase_t mode, const char *want)
{
    ipl_jv_t out;
    uint32_t bad = 0;
    assert_int_equal(ipl_jstr_case(&s_a, ipl_jv_cstr(in), mode, &out, &bad), 0);
    s_eq(out, want);
}

/* The list's items joined with "|". */
static void s_list(ipl_jv_t l, const char *want)
{
    char got[512] = "";
    size_t o = 0;
    for (size_t i = 0; i < l.u.l->n; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%.*s", i ? "|" : "",
                              (int)l.u.l->v[i].u.s.n, l.u.l->v[i].u.s.p);
    if (strcmp(got, want) != 0) fail_msg("got [%s], want [%s]", got, want);
}

static void test_case(void **state)
{
    (void)state;
    s_case("h\xc3\xa9llo W\xc3\x96RLD \xc3\x9f stra\xc3\x9f" "e", IPL_JCASE_UPPER,
           "H\xc3\x89LLO W\xc3\x96RLD SS STRASSE");
    s_case("\xc3\x80\xc3\x89\xc3\x8e \xce\x91\xce\x92\xce\x93 \xd0\x90\xd0\x91\xd0\x92 \xd0\x81\xd0\xb6",
           IPL_JCASE_LOWER, "\xc3\xa0\xc3\xa9\xc3\xae \xce\xb1\xce\xb2\xce\xb3 \xd0\xb0\xd0\xb1\xd0\xb2 \xd1\x91\xd0\xb6");
    s_case("they're bill's 3rd", IPL_JCASE_TITLE, "They'Re Bill'S 3Rd");
    s_case("they're bill's 3rd", IPL_JCASE_JTITLE, "They're Bill's 3rd");
    s_case("hello-world foo(bar) <x", IPL_JCASE_JTITLE, "Hello-World Foo(Bar) <X");
    s_case("hELLO wORLD", IPL_JCASE_CAPITALIZE, "Hello world");
    /* caseless scripts pass through */
    s_case("\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 \xd9\x85", IPL_JCASE_UPPER,
           "\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 \xd9\x85");
    s_case("", IPL_JCASE_UPPER, "");
    /* cased letters outside the tables are refused, naming the code point */
    ipl_jv_t out;
    uint32_t bad = 0;
    assert_int_equal(ipl_jstr_case(&s_a, ipl_jv_cstr("ok \xc7\x85"), IPL_JCASE_LOWER, &out, &bad), -1);
    assert_int_equal(bad, 0x1c5);
    assert_int_equal(ipl_jstr_case(&s_a, ipl_jv_cstr("\xce\xa3"), IPL_JCASE_LOWER, &out, &bad), -1);
    assert_int_equal(bad, 0x3a3); /* Σ: final sigma depends on context */
    bool r;
    assert_int_equal(ipl_jstr_is_case(ipl_jv_cstr("abc 1"), false, &r, &bad), 0);
    assert_true(r);
    assert_int_equal(ipl_jstr_is_case(ipl_jv_cstr("123"), false, &r, &bad), 0);
    assert_false(r); /* no cased character */
    assert_int_equal(ipl_jstr_is_case(ipl_jv_cstr("ABc"), true, &r, &bad), 0);
    assert_false(r);
}

static void test_strip(void **state)
{
    (void)state;
    ipl_jv_t xy = ipl_jv_cstr("xy"), dash = ipl_jv_cstr("-");
    s_eq(ipl_jstr_strip(ipl_jv_cstr("xyhiyx"), &xy, 'b'), "hi");
    s_eq(ipl_jstr_strip(ipl_jv_cstr("\xe3\x80\x80 hi \xe3\x80\x80"), NULL, 'b'), "hi");
    s_eq(ipl_jstr_strip(ipl_jv_cstr("--a--"), &dash, 'l'), "a--");
    s_eq(ipl_jstr_strip(ipl_jv_cstr("--a--"), &dash, 'r'), "--a");
    s_eq(ipl_jstr_strip(ipl_jv_cstr(" \n\t "), NULL, 'b'), "");
    ipl_jv_t nl = ipl_jv_cstr("\n");
    s_eq(ipl_jstr_strip(ipl_jv_cstr("\n\n x \n"), &nl, 'b'), " x ");
    s_eq(ipl_jstr_strip(ipl_jv_cstr("a \x80 "), NULL, 'r'), "a \x80"); /* a lone byte stays */
    s_eq(ipl_jstr_strip(ipl_jv_cstr("a\xe3\x80"), NULL, 'r'), "a\xe3\x80");
}

/* rstrip walks back from the end; the forward walk it replaced, as the reference, on random
 * byte strings of spaces (ASCII, U+3000, U+00A0, U+2028), letters and stray UTF-8 bytes. */
static size_t s_rstrip_forward(const unsigned char *p, size_t n)
{
    size_t i = 0, run = n;
    while (i < n) {
        uint32_t cp;
        size_t len = ipl_utf8_next(p + i, n - i, &cp);
        if (cp != IPL_UNICODE_INVALID && ipl_jv_is_space(cp)) {
            if (run == n) run = i;
        } else {
            run = n;
        }
        i += len;
    }
    return run;
}

static void test_rstrip_matches_forward_walk(void **state)
{
    (void)state;
    static const char *bits[] = {" ", "\t", "\n", "\xe3\x80\x80", "\xc2\xa0", "\xe2\x80\xa8",
                                 "a", "\xc3\xa9", "\x80", "\xe3", "\xe3\x80", "\xf0\x9f\x99\x82",
                                 "\xbf", "\xf0"};
    unsigned seed = 7;
    char buf[256];
    for (int round = 0; round < 20000; round++) {
        buf[0] = '\0';
        int k = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 9;
        for (int j = 0; j < k; j++) {
            seed = seed * 1103515245u + 12345u;
            strcat(buf, bits[(seed >> 16) % (sizeof bits / sizeof *bits)]);
        }
        size_t n = strlen(buf);
        ipl_jv_t out = ipl_jstr_strip(ipl_jv_str(buf, n), NULL, 'r');
        assert_int_equal(out.u.s.n, s_rstrip_forward((const unsigned char *)buf, n));
    }
}

static void test_split(void **state)
{
    (void)state;
    ipl_jv_t out, comma = ipl_jv_cstr(","), sp = ipl_jv_cstr(" "), empty = ipl_jv_cstr("");
    assert_int_equal(ipl_jstr_split(&s_a, ipl_jv_cstr("a b  c "), NULL, 1, false, 100, &out), 0);
    s_list(out, "a|b  c ");
    assert_int_equal(ipl_jstr_split(&s_a, ipl_jv_cstr(" a b c"), NULL, 1, true, 100, &out), 0);
    s_list(out, " a b|c");
    assert_int_equal(ipl_jstr_split(&s_a, ipl_jv_cstr("a,b,,c"), &comma, 2, true, 100, &out), 0);
    s_list(out, "a,b||c");
    assert_int_equal(ipl_jstr_split(&s_a, ipl_jv_cstr("a,b,,c"), &comma, -1, false, 100, &out), 0);
    s_list(out, "a|b||c");
    assert_int_equal(ipl_jstr_split(&s_a, ipl_jv_cstr("x\xe3\x80\x80y\xc2\xa0z"), NULL, -1, false, 100, &out), 0);
    s_list(out, "x|y|z");
    assert_int_equal(ipl_jstr_split(&s_a, ipl_jv_cstr("a b c"), &sp, 1, false, 100, &out), 0);
    s_list(out, "a|b c");
    assert_int_equal(ipl_jstr_split(&s_a, ipl_jv_cstr("   "), NULL, -1, false, 100, &out), 0);
    assert_int_equal(out.u.l->n, 0);
    assert_int_equal(ipl_jstr_split(&s_a, ipl_jv_cstr("a"), &empty, -1, false, 100, &out), -1);
    assert_int_equal(ipl_jstr_split(&s_a, ipl_jv_cstr("a,a,a"), &comma, -1, false, 2, &out), -1);
    s_list(ipl_jstr_splitlines(&s_a, ipl_jv_cstr("a\nb\r\nc\rd\ve\xe2\x80\xa8" "f"), false), "a|b|c|d|e|f");
    s_list(ipl_jstr_splitlines(&s_a, ipl_jv_cstr("a\nb\n"), true), "a\n|b\n");
}

static void test_search_and_replace(void **state)
{
    (void)state;
    ipl_jv_t s = ipl_jv_cstr("h\xc3\xa9llo w\xc3\xb6rld");
    assert_int_equal(ipl_jstr_find(s, ipl_jv_cstr("w"), false), 6);
    assert_int_equal(ipl_jstr_find(s, ipl_jv_cstr("l"), true), 9);
    assert_int_equal(ipl_jstr_find(s, ipl_jv_cstr("zz"), false), -1);
    assert_int_equal(ipl_jstr_find(s, ipl_jv_cstr(""), true), 11);
    assert_int_equal(ipl_jstr_count(ipl_jv_cstr("aaaa"), ipl_jv_cstr("aa")), 2);
    assert_int_equal(ipl_jstr_count(ipl_jv_cstr("abc"), ipl_jv_cstr("")), 4);
    ipl_jv_t out;
    assert_int_equal(ipl_jstr_replace(&s_a, ipl_jv_cstr("abc"), ipl_jv_cstr(""), ipl_jv_cstr("-"), 2, 1000, &out), 0);
    s_eq(out, "-a-bc");
    assert_int_equal(ipl_jstr_replace(&s_a, ipl_jv_cstr("aXbXc"), ipl_jv_cstr("X"), ipl_jv_cstr("yy"), 1, 1000, &out), 0);
    s_eq(out, "ayybXc");
    assert_int_equal(ipl_jstr_replace(&s_a, ipl_jv_cstr("aXbXc"), ipl_jv_cstr("X"), ipl_jv_cstr(""), -1, 1000, &out), 0);
    s_eq(out, "abc");
    assert_int_equal(ipl_jstr_replace(&s_a, ipl_jv_cstr("xxxx"), ipl_jv_cstr("x"), ipl_jv_cstr("0123456789"), -1, 20, &out), -1);
    assert_true(ipl_jstr_starts(ipl_jv_cstr("Hello"), ipl_jv_cstr("He"), false));
    assert_true(ipl_jstr_starts(ipl_jv_cstr("Hello"), ipl_jv_cstr("llo"), true));
    assert_false(ipl_jstr_starts(ipl_jv_cstr("He"), ipl_jv_cstr("Hello"), false));
    assert_true(ipl_jstr_starts(ipl_jv_cstr("x"), ipl_jv_cstr(""), true));
    assert_true(ipl_jstr_is_class(ipl_jv_cstr("0123"), 0));
    assert_false(ipl_jstr_is_class(ipl_jv_cstr(""), 0));
    assert_true(ipl_jstr_is_class(ipl_jv_cstr("ab\xc3\xa9"), 1));
    assert_false(ipl_jstr_is_class(ipl_jv_cstr("ab1"), 1));
    assert_true(ipl_jstr_is_class(ipl_jv_cstr("ab1"), 2));
    assert_true(ipl_jstr_is_class(ipl_jv_cstr(" \t\n"), 3));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case),
        cmocka_unit_test(test_strip),
        cmocka_unit_test(test_rstrip_matches_forward_walk),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_search_and_replace),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
