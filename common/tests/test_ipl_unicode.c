/*
 * Unit tests of ipl_unicode: strict UTF-8 decoding, the L / N / White_Space classes at their
 * edges, and NFC on the cases UAX #15 singles out (composition, Hangul, singletons,
 * exclusions, reordering, blocking). The tables were also checked exhaustively against
 * Python 3.13's unicodedata when generated (every code point's class; NFC of every code point
 * and of a million random strings).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_unicode.h"

static void s_next(const char *s, size_t len, uint32_t want_cp, size_t want_len)
{
    uint32_t cp = 0;
    assert_int_equal(ipl_utf8_next((const unsigned char *)s, len, &cp), want_len);
    assert_int_equal(cp, want_cp);
}

static void test_utf8(void **state)
{
    (void)state;
    s_next("A", 1, 'A', 1);
    s_next("\xc3\xa9", 2, 0xE9, 2);
    s_next("\xe4\xbd\xa0", 3, 0x4F60, 3);
    s_next("\xf0\x9f\x98\x80", 4, 0x1F600, 4);
    s_next("\xf4\x8f\xbf\xbf", 4, 0x10FFFF, 4);
    s_next("\xc0\x80", 2, IPL_UNICODE_INVALID, 1);         /* overlong NUL */
    s_next("\xe0\x80\xaf", 3, IPL_UNICODE_INVALID, 1);     /* overlong '/' */
    s_next("\xed\xa0\x80", 3, IPL_UNICODE_INVALID, 1);     /* surrogate D800 */
    s_next("\xf4\x90\x80\x80", 4, IPL_UNICODE_INVALID, 1); /* past U+10FFFF */
    s_next("\xe4\xbd", 2, IPL_UNICODE_INVALID, 1);         /* truncated */
    s_next("\xe4\xbd"
           "A",
           3, IPL_UNICODE_INVALID, 1); /* bad continuation */
    s_next("\x80", 1, IPL_UNICODE_INVALID, 1);
    s_next("\xff", 1, IPL_UNICODE_INVALID, 1);
    unsigned char out[4];
    assert_int_equal(ipl_utf8_put(0x7F, out), 1);
    assert_int_equal(ipl_utf8_put(0x7FF, out), 2);
    assert_int_equal(ipl_utf8_put(0xFFFF, out), 3);
    assert_int_equal(ipl_utf8_put(0x1F600, out), 4);
    assert_memory_equal(out, "\xf0\x9f\x98\x80", 4);
}

static void test_classes(void **state)
{
    (void)state;
    static const uint32_t letters[] = {'a',    'Z',    0xAA,    0xB5,    0xC0,
                                       0x2C1,  0x3A3,  0x5D0,   0x4E00,  0x9FFF,
                                       0xAC00, 0x3042, 0x1D400, 0x20000, 0x2B739};
    static const uint32_t numbers[] = {'0', '9', 0xB2, 0xBD, 0x663, 0x216B, 0x2460, 0x1D7D9};
    static const uint32_t spaces[] = {'\t',   '\n',   0x0B,   0x0C,   '\r',   ' ',
                                      0x85,   0xA0,   0x1680, 0x2000, 0x200A, 0x2028,
                                      0x2029, 0x202F, 0x205F, 0x3000};
    static const uint32_t others[] = {'_',  '\'', '@',    '[',    0xD7,    0xF7,     0x300,
                                      0x1C, 0x1F, 0x200B, 0xFEFF, 0x1F600, 0x10FFFF, 0x110000};
    for (size_t i = 0; i < sizeof letters / sizeof *letters; i++) {
        assert_true(ipl_unicode_is_letter(letters[i]));
        assert_false(ipl_unicode_is_number(letters[i]));
    }
    for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++) {
        assert_true(ipl_unicode_is_number(numbers[i]));
        assert_false(ipl_unicode_is_letter(numbers[i]));
    }
    for (size_t i = 0; i < sizeof spaces / sizeof *spaces; i++)
        assert_true(ipl_unicode_is_space(spaces[i]));
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        assert_false(ipl_unicode_is_letter(others[i]));
        assert_false(ipl_unicode_is_number(others[i]));
        assert_false(ipl_unicode_is_space(others[i]));
    }
    assert_string_equal(ipl_unicode_version(), "15.1.0");
    assert_string_equal(ipl_unicode_nfc_version(), "9.0.0");
}

static void s_nfc(const char *in, const char *want)
{
    size_t n = 0;
    char *out = ipl_unicode_nfc(in, strlen(in), &n);
    assert_non_null(out);
    assert_int_equal(n, strlen(want));
    assert_string_equal(out, want);
    free(out);
}

static void test_categories(void **state)
{
    (void)state;
    static const struct {
        uint32_t cp;
        ipl_unicode_gc_t gc;
    } cases[] = {
        {'A', IPL_GC_LU},      {'z', IPL_GC_LL},      {0x01C5, IPL_GC_LT}, /* ǅ */
        {0x02B0, IPL_GC_LM},   {0x4E00, IPL_GC_LO},   {0x0301, IPL_GC_MN},
        {0x0903, IPL_GC_MC},   {0x20DD, IPL_GC_ME},   {'7', IPL_GC_ND},
        {0x2167, IPL_GC_NL},   {0x00BD, IPL_GC_NO},   {'_', IPL_GC_PC},
        {'-', IPL_GC_PD},      {'(', IPL_GC_PS},      {')', IPL_GC_PE},
        {0x00AB, IPL_GC_PI},   {0x00BB, IPL_GC_PF},   {'!', IPL_GC_PO},
        {'+', IPL_GC_SM},      {'$', IPL_GC_SC},      {'^', IPL_GC_SK},
        {0x1F600, IPL_GC_SO},  {' ', IPL_GC_ZS},      {0x2028, IPL_GC_ZL},
        {0x2029, IPL_GC_ZP},   {'\n', IPL_GC_CC},     {0x200D, IPL_GC_CF},
        {0xE000, IPL_GC_CO},   {0xD800, IPL_GC_CS},   {0x0378, IPL_GC_CN},
        {0x2EBF0, IPL_GC_LO}, /* CJK Extension I: new in Unicode 15.1 */
        {0x1FAE9, IPL_GC_CN}, /* assigned in Unicode 16.0: unassigned in 15.1 */
        {0x10FFFF, IPL_GC_CN}, {0x110000, IPL_GC_CN}, {0xFFFFFFFF, IPL_GC_CN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (ipl_unicode_category(cases[i].cp) != cases[i].gc)
            fprintf(stderr, "U+%04X: category %d, wanted %d\n", cases[i].cp,
                    ipl_unicode_category(cases[i].cp), cases[i].gc);
        assert_int_equal(ipl_unicode_category(cases[i].cp), cases[i].gc);
    }
    /* the letter and number predicates agree with the table everywhere */
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        ipl_unicode_gc_t gc = ipl_unicode_category(cp);
        assert_int_equal(ipl_unicode_is_letter(cp), gc >= IPL_GC_LU && gc <= IPL_GC_LO);
        assert_int_equal(ipl_unicode_is_number(cp), gc >= IPL_GC_ND && gc <= IPL_GC_NO);
    }
}

static void test_nfc(void **state)
{
    (void)state;
    s_nfc("", "");
    s_nfc("plain ascii", "plain ascii");
    s_nfc("e\xcc\x81", "\xc3\xa9");               /* e + U+0301 → é */
    s_nfc("\xc3\xa9", "\xc3\xa9");                /* already composed */
    s_nfc("\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab", /* Hangul L V T → 한 */
          "\xed\x95\x9c");
    s_nfc("\xe1\x84\x92\xe1\x85\xa1", "\xed\x95\x98"); /* L V → 하 */
    s_nfc("\xe2\x84\xab", "\xc3\x85");                 /* U+212B ANGSTROM SIGN → Å (singleton) */
    s_nfc("\xe2\x84\xa6", "\xce\xa9");                 /* U+2126 OHM SIGN → Ω */
    s_nfc("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc"); /* U+0958 is excluded from composition */
    /* marks are reordered by class: q + dot above (230) + dot below (220) */
    s_nfc("q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87");
    /* ... and compose across a mark of another class: s + dot below + dot above → ṩ */
    s_nfc("s\xcc\x87\xcc\xa3", "\xe1\xb9\xa9");
    /* a second acute is blocked by the first (same class) and stays */
    s_nfc("a\xcc\x81\xcc\x81", "\xc3\xa1\xcc\x81");
    /* a starter in between blocks: e + x + acute */
    s_nfc("ex\xcc\x81", "ex\xcc\x81");
    /* invalid bytes pass through and never compose */
    s_nfc("e\xff\xcc\x81", "e\xff\xcc\x81");
    /* a long run of marks takes the sorting path: a + 20 × (acute 230, dot below 220)
     * orders as 20 dots below then 20 acutes; a + the first dot below composes to U+1EA1,
     * the other marks stay (U+1EA1 + acute is not a primary composite) */
    char in[128] = "a", want[128] = "\xe1\xba\xa1";
    for (int i = 0; i < 20; i++)
        memcpy(in + 1 + 4 * i, "\xcc\x81\xcc\xa3", 4);
    in[81] = '\0';
    for (int i = 0; i < 19; i++)
        memcpy(want + 3 + 2 * i, "\xcc\xa3", 2);
    for (int i = 0; i < 20; i++)
        memcpy(want + 41 + 2 * i, "\xcc\x81", 2);
    want[81] = '\0';
    s_nfc(in, want);
}

/* NFC with HF's Unicode 9.0 data: marks assigned later are starters that stay in place. */
static void test_nfc_unicode_9(void **state)
{
    (void)state;
    static const char *const same[] = {
        "\xe0\xa3\x8c\xf0\x9d\x85\xa6", /* U+08CC (14.0, class 230 since) U+1D166 (216) */
        "a\xdf\xbd\xcc\x96",            /* U+07FD (11.0) U+0316 (220) */
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        size_t n;
        char *out = ipl_unicode_nfc(same[i], strlen(same[i]), &n);
        assert_non_null(out);
        assert_int_equal(n, strlen(same[i]));
        assert_memory_equal(out, same[i], n);
        free(out);
    }
    /* marks known in 9.0 are still ordered: U+0301 (230) U+0327 (202) → U+0327 U+0301 */
    size_t n;
    char *out = ipl_unicode_nfc("\xcc\x81\xcc\xa7", 4, &n);
    assert_non_null(out);
    assert_int_equal(n, 4);
    assert_memory_equal(out, "\xcc\xa7\xcc\x81", 4);
    free(out);
}

static void test_nfc_quick(void **state)
{
    (void)state;
    assert_true(ipl_unicode_nfc_quick("", 0));
    assert_true(ipl_unicode_nfc_quick("caf\xc3\xa9", 5));
    assert_true(ipl_unicode_nfc_quick("\xe4\xbd\xa0\xe5\xa5\xbd \xed\x95\x9c", 10));
    assert_true(ipl_unicode_nfc_quick("\xf0\x9f\x98\x80", 4));
    assert_true(ipl_unicode_nfc_quick("\xff\xfe", 2));
    assert_false(ipl_unicode_nfc_quick("e\xcc\x81", 3));    /* a combining mark */
    assert_false(ipl_unicode_nfc_quick("\xe2\x84\xab", 3)); /* a singleton (QC=No) */
    assert_false(ipl_unicode_nfc_quick("\xe1\x85\xa1", 3)); /* Hangul V (QC=Maybe) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),          cmocka_unit_test(test_classes),
        cmocka_unit_test(test_categories),    cmocka_unit_test(test_nfc),
        cmocka_unit_test(test_nfc_unicode_9), cmocka_unit_test(test_nfc_quick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
