/*
 * Unit tests of labels_words: where words start and end (ASCII, UTF-8, invalid bytes), case
 * folding, the hash (case-insensitive, the same on the fast and the decoding path, no
 * collisions among short words), chunking, and a random comparison with a reference
 * tokenizer written the slow way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_unicode.h"
#include "labels_words.h"

#define S_MAX 4096

// Every word hash of text, with chunks of `chunk` words.
static size_t s_words(const char *text, size_t len, size_t chunk, uint64_t *out)
{
    labels_words_t it;
    labels_words_init(&it, text, len);
    size_t n = 0, k;
    while ((k = labels_words_next(&it, out + n, chunk)) > 0) {
        assert_true(k <= chunk);
        n += k;
        assert_true(n <= S_MAX);
    }
    assert_int_equal(labels_words_next(&it, out, chunk), 0); // stays at the end
    return n;
}

// The reference: decode, split and fold code point by code point; the words as folded UTF-8
// joined with '|'.
static bool s_ref_word_cp(uint32_t cp)
{
    if (cp == IPL_UNICODE_INVALID) return true;
    if (cp < 0x80)
        return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
               cp == '_';
    return ipl_unicode_is_letter(cp) || ipl_unicode_is_number(cp) || (cp >= 0x300 && cp <= 0x36F);
}

static size_t s_reference(const char *text, size_t len, char words[][256])
{
    size_t n = 0, w = 0;
    bool in = false;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = ipl_utf8_next((const unsigned char *)text + i, len - i, &cp);
        if (s_ref_word_cp(cp)) {
            if (!in) in = true, w = 0;
            if (cp == IPL_UNICODE_INVALID) {
                words[n][w++] = text[i];
            } else {
                w += ipl_utf8_put(labels_words_fold(cp), (unsigned char *)words[n] + w);
            }
            words[n][w] = '\0';
            assert_true(w < 250);
        } else if (in) {
            in = false, n++;
        }
        i += k;
    }
    return n + in;
}

static void s_expect(const char *text, const char *joined)
{
    uint64_t got[S_MAX];
    size_t n = s_words(text, strlen(text), 256, got);
    char want[64][256];
    size_t m = 0;
    const char *p = joined;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        memcpy(want[m], p, l);
        want[m++][l] = '\0';
        p += l + (bar ? 1 : 0);
    }
    if (n != m) fail_msg("\"%s\": %zu words, want %zu (%s)", text, n, m, joined);
    for (size_t i = 0; i < m; i++)
        if (got[i] != labels_words_hash(want[i], strlen(want[i])))
            fail_msg("\"%s\": word %zu is not \"%s\"", text, i, want[i]);
}

static void test_words_table(void **state)
{
    (void)state;
    static const struct {
        const char *text, *words; // the words, folded, joined with '|'
    } cases[] = {
        {"", ""},
        {"   ,.;  ", ""},
        {"hello", "hello"},
        {"Hello, World!", "hello|world"},
        {"e-mail snake_case x86_64 3.14", "e|mail|snake_case|x86_64|3|14"},
        {"PASSWORD password Password", "password|password|password"},
        {"don't", "don|t"},
        {"Příliš žluťoučký kůň", "příliš|žluťoučký|kůň"},
        {"ПАРОЛЬ Пароль пароль", "пароль|пароль|пароль"},
        {"Ґанок Їжак Єнот Іван", "ґанок|їжак|єнот|іван"},
        {"STRASSE Straße GRÜSSE", "strasse|straße|grüsse"},
        {"“quoted” — dash\xc2\xa0nbsp", "quoted|dash|nbsp"},
        {"a“b”c", "a|b|c"},
        {"“”", ""},
        {"mixed Kůň,ASCII", "mixed|kůň|ascii"},
        {"tab\tnew\nline\r\n", "tab|new|line"},
        {"Ab\xff"
         "cd",
         "ab\xff"
         "cd"},                                       // an invalid byte stays inside the word
        {"e\xcc\x81t\xc3\xa9", "e\xcc\x81t\xc3\xa9"}, // a combining mark joins its word
        {"verylongwordthatgoesonandon andmore", "verylongwordthatgoesonandon|andmore"},
        {"12345678 123456789 1234567890123456 12345678901234567",
         "12345678|123456789|1234567890123456|12345678901234567"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        s_expect(cases[i].text, cases[i].words);
}

static void test_fold(void **state)
{
    (void)state;
    static const uint32_t pairs[][2] = {
        {'A', 'a'},     {'Z', 'z'},     {'a', 'a'},     {'@', '@'},     {'[', '['},
        {0xC0, 0xE0},   {0xDE, 0xFE},   {0xD7, 0xD7},   {0xDF, 0xDF},   {0x10C, 0x10D},
        {0x10D, 0x10D}, {0x158, 0x159}, {0x160, 0x161}, {0x16E, 0x16F}, {0x17D, 0x17E},
        {0x147, 0x148}, {0x139, 0x13A}, {0x178, 0xFF},  {0x130, 'i'},   {0x391, 0x3B1},
        {0x3A2, 0x3A2}, {0x404, 0x454}, {0x406, 0x456}, {0x407, 0x457}, {0x410, 0x430},
        {0x42F, 0x44F}, {0x490, 0x491}, {0x491, 0x491}, {0x1E9E, 0xDF}, {0x4E2D, 0x4E2D},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++)
        if (labels_words_fold(pairs[i][0]) != pairs[i][1])
            fail_msg("fold(U+%04X) = U+%04X, want U+%04X", pairs[i][0],
                     labels_words_fold(pairs[i][0]), pairs[i][1]);
}

static void test_hash_is_case_insensitive_and_path_independent(void **state)
{
    (void)state;
    assert_true(labels_words_hash("Password", 8) == labels_words_hash("password", 8));
    assert_true(labels_words_hash("PASSWORDPASSWORD", 16) ==
                labels_words_hash("passwordpassword", 16));
    assert_true(labels_words_hash("pass", 4) != labels_words_hash("password", 8));
    assert_true(labels_words_hash("ab", 2) != labels_words_hash("ba", 2));
    // The same ASCII word read by the fast path and inside a run that must be decoded.
    uint64_t fast[4], slow[4];
    assert_int_equal(s_words("Hello", 5, 4, fast), 1);
    assert_int_equal(s_words("\xe2\x80\x9cHello\xe2\x80\x9d", 11, 4, slow), 1);
    assert_true(fast[0] == slow[0]);
    assert_int_equal(s_words("abcdefghijklmnopqrstuvwxyz", 26, 4, fast), 1);
    assert_int_equal(s_words("\xc2\xab"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ\xc2\xbb",
                             30, 4, slow),
                     1);
    assert_true(fast[0] == slow[0]);
}

static int s_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

// Words of at most 8 bytes hash without collisions: all of a, aa, …, zzz.
static void test_short_words_never_collide(void **state)
{
    (void)state;
    size_t n = 0;
    uint64_t *h = malloc(18278 * sizeof *h);
    char w[4];
    for (int len = 1; len <= 3; len++) {
        int total = len == 1 ? 26 : len == 2 ? 676 : 17576;
        for (int i = 0; i < total; i++) {
            int x = i;
            for (int k = len - 1; k >= 0; k--, x /= 26)
                w[k] = (char)('a' + x % 26);
            h[n++] = labels_words_hash(w, (size_t)len);
        }
    }
    qsort(h, n, sizeof *h, s_cmp);
    for (size_t i = 1; i < n; i++)
        assert_true(h[i] != h[i - 1]);
    free(h);
}

// Words across the 64-byte blocks of the scan, texts ending inside a word, and every chunking.
static void test_blocks_and_chunks(void **state)
{
    (void)state;
    char text[300];
    for (size_t len = 1; len < sizeof text; len++) {
        for (size_t i = 0; i < len; i++)
            text[i] = (i % 7 == 6) ? ' ' : (char)('a' + i % 26);
        uint64_t all[S_MAX], one[S_MAX];
        char ref[160][256];
        size_t n = s_words(text, len, 256, all);
        assert_int_equal(s_words(text, len, 1, one), n);
        assert_memory_equal(all, one, n * sizeof *all);
        assert_int_equal(s_reference(text, len, ref), n);
        for (size_t i = 0; i < n; i++)
            assert_true(all[i] == labels_words_hash(ref[i], strlen(ref[i])));
    }
}

// Random texts of ASCII, Czech, Cyrillic, punctuation and invalid bytes: the same words as the
// reference, in any chunking.
static void test_random_texts_match_the_reference(void **state)
{
    (void)state;
    static const char *const pieces[] = {
        "a",        "B",    "z",        "0",        "9",  "_",    " ",      "  ",
        ".",        ",",    "-",        "\n",       "\t", "č",    "Ř",      "ž",
        "Ж",        "я",    "Ї",        "ß",        "€",  "“",    "”",      "\xc2\xa0",
        "\xff",     "\xc3", "\xe2\x80", "\xcc\x81", "ab", "Word", "ПРИВІТ", "long_identifier_name",
        "12345678", "x"};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    char text[1200];
    static char ref[600][256];
    for (int round = 0; round < 400; round++) {
        size_t len = 0;
        int npieces = (int)(seed % 200);
        for (int k = 0; k < npieces; k++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            const char *p = pieces[seed % (sizeof pieces / sizeof *pieces)];
            size_t pl = strlen(p);
            if (len + pl >= sizeof text) break;
            memcpy(text + len, p, pl);
            len += pl;
        }
        uint64_t a[S_MAX], b[S_MAX];
        size_t n = s_words(text, len, 256, a);
        assert_int_equal(s_words(text, len, 3, b), n);
        assert_memory_equal(a, b, n * sizeof *a);
        size_t m = s_reference(text, len, ref);
        if (m != n) fail_msg("round %d: %zu words, the reference %zu", round, n, m);
        for (size_t i = 0; i < n; i++)
            if (a[i] != labels_words_hash(ref[i], strlen(ref[i])))
                fail_msg("round %d: word %zu differs from the reference \"%s\"", round, i, ref[i]);
    }
}

static void test_null_text(void **state)
{
    (void)state;
    uint64_t h[4];
    labels_words_t it;
    labels_words_init(&it, NULL, 5);
    assert_int_equal(labels_words_next(&it, h, 4), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words_table),
        cmocka_unit_test(test_fold),
        cmocka_unit_test(test_hash_is_case_insensitive_and_path_independent),
        cmocka_unit_test(test_short_words_never_collide),
        cmocka_unit_test(test_blocks_and_chunks),
        cmocka_unit_test(test_random_texts_match_the_reference),
        cmocka_unit_test(test_null_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
