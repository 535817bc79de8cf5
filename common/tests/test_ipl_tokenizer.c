/*
 * Unit tests of ipl_tokenizer: the exact pieces of the segmentation rule, special tokens,
 * exact round trips of random bytes and UTF-8, NUL handling, unknown ids, and prefix stability.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_tokenizer.h"

static int s_setup(void **state)
{
    *state = ipl_tokenizer_new_builtin();
    return *state ? 0 : -1;
}

static int s_teardown(void **state)
{
    ipl_tokenizer_t *tok = *state;
    ipl_tokenizer_destroy(&tok);
    assert_null(tok);
    return 0;
}

/* The id of a literal piece (1-3 bytes). */
static uint32_t s_piece(const char *piece)
{
    uint32_t id = 1;
    for (size_t k = 0; piece[k]; k++)
        id += (uint32_t)(unsigned char)piece[k] << (8 * k);
    return id;
}

/* Encodes text and checks the ids; `want` is a list of pieces where NULL entries stand for the
 * special ids in `specials`, in order. */
static void s_expect(const ipl_tokenizer_t *tok, const char *text, size_t len,
                     const char *const *want, size_t nwant, const uint32_t *specials)
{
    size_t n = 99;
    uint32_t *ids = ipl_tokenizer_encode(tok, text, len, &n);
    assert_non_null(ids);
    assert_int_equal(n, nwant);
    size_t sp = 0;
    for (size_t k = 0; k < n; k++)
        assert_int_equal(ids[k], want[k] ? s_piece(want[k]) : specials[sp++]);
    free(ids);
}

#define EXPECT(tok, text, specials, ...)                                                           \
    do {                                                                                           \
        static const char *const want_[] = {__VA_ARGS__};                                          \
        s_expect(tok, text, sizeof(text) - 1, want_, sizeof want_ / sizeof want_[0], specials);    \
    } while (0)

static void test_name(void **state)
{
    assert_string_equal(ipl_tokenizer_name(*state), "builtin");
}

static void test_pieces(void **state)
{
    const ipl_tokenizer_t *tok = *state;
    EXPECT(tok, "Hello world", NULL, "Hel", "lo", " wo", "rld");
    EXPECT(tok, "a  b\n\nc ", NULL, "a", " ", " b", "\n\n", "c", " ");
    EXPECT(tok, " a", NULL, " a");
    EXPECT(tok, "   ", NULL, "   ");
    EXPECT(tok, "    x", NULL, "   ", " x");
    EXPECT(tok, "a \n b", NULL, "a", " \n", " b");
    EXPECT(tok, "a\tb", NULL, "a", "\t", "b");
    EXPECT(tok, "x\n y", NULL, "x", "\n", " y");
    EXPECT(tok, "1234567,89!", NULL, "123", "456", "7,8", "9!");
    EXPECT(tok, " abcdef", NULL, " ab", "cde", "f");
    /* UTF-8 is word bytes, cut anywhere: "héllo" is 68 c3 a9 6c 6c 6f */
    EXPECT(tok, "h\xc3\xa9llo w", NULL, "h\xc3\xa9", "llo", " w");
}

static void test_specials(void **state)
{
    const ipl_tokenizer_t *tok = *state;
    static const uint32_t chat[] = {IPL_TOK_IM_START, IPL_TOK_IM_END, IPL_TOK_IM_START};
    EXPECT(tok, "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", chat, NULL, "use",
           "r", "\n", "Hi", " th", "ere", NULL, "\n", NULL, "ass", "ist", "ant", "\n");
    /* specials split words, a space before one stays a space run */
    static const uint32_t eot[] = {IPL_TOK_ENDOFTEXT, IPL_TOK_IM_END};
    EXPECT(tok, "ab<|endoftext|>cd <|im_end|>", eot, "ab", NULL, "cd", " ", NULL);
    /* near misses are plain text */
    EXPECT(tok, "<|im_sta", NULL, "<|i", "m_s", "ta");
    static const uint32_t one[] = {IPL_TOK_IM_END};
    EXPECT(tok, "<<|im_end|>", one, "<", NULL);
    EXPECT(tok, "<|<|im_end|>|>", one, "<|", NULL, "|>");
    assert_int_equal(IPL_TOK_IM_START, IPL_TOK_SPECIAL_BASE);
    assert_true(IPL_TOK_SPECIAL_BASE > 0x1000000u); /* above every piece id */
}

static void s_round_trip(const ipl_tokenizer_t *tok, const char *text, size_t len)
{
    size_t n = 0;
    uint32_t *ids = ipl_tokenizer_encode(tok, text, len, &n);
    assert_non_null(ids);
    assert_true(n <= len);
    char *back = ipl_tokenizer_decode(tok, ids, n);
    assert_non_null(back);
    assert_int_equal(strlen(back), len);
    assert_memory_equal(back, text, len);
    /* decoding id by id gives the pieces; check the boundary rule on each */
    for (size_t k = 0; k < n; k++) {
        if (ids[k] >= IPL_TOK_SPECIAL_BASE) continue;
        char *piece = ipl_tokenizer_decode(tok, ids + k, 1);
        size_t plen = strlen(piece);
        assert_true(plen >= 1 && plen <= 3);
        for (size_t b = 1; b < plen; b++) {
            bool prev_ws = strchr(" \t\n\v\f\r", piece[b - 1]) != NULL;
            bool cur_ws = strchr(" \t\n\v\f\r", piece[b]) != NULL;
            assert_false(!prev_ws && cur_ws); /* never word → whitespace */
            if (prev_ws && !cur_ws)           /* whitespace → word: only a leading ' ' */
                assert_true(b == 1 && piece[0] == ' ');
        }
        free(piece);
    }
    free(back);
    free(ids);
}

static void test_round_trip_random(void **state)
{
    const ipl_tokenizer_t *tok = *state;
    static const char alphabet[] = " \t\n\r<|>_aeimnrstdx0\x80\xc3\xa9\xff";
    uint32_t seed = 12345;
    char text[300];
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = (size_t)(iter % 300);
        for (size_t k = 0; k < len; k++) {
            seed = seed * 1103515245u + 12345u;
            uint32_t r = seed >> 8;
            /* half the texts from a small alphabet (many boundaries and specials), the other
             * half any non-zero byte */
            text[k] = iter & 1 ? alphabet[r % (sizeof alphabet - 1)] : (char)(1 + r % 255);
        }
        if (iter % 7 == 0 && len >= 12) memcpy(text + len / 2 - 6, "<|im_start|>", 12);
        s_round_trip(tok, text, len);
    }
    static const char utf8[] = "Grüße, 世界! Привет мир 🙂\n\tdone";
    s_round_trip(tok, utf8, sizeof utf8 - 1);
    s_round_trip(tok, "<|im_end|><|im_end|>", 20);
}

static void test_empty(void **state)
{
    const ipl_tokenizer_t *tok = *state;
    size_t n = 99;
    uint32_t *ids = ipl_tokenizer_encode(tok, "", 0, &n);
    assert_non_null(ids);
    assert_int_equal(n, 0);
    free(ids);
    char *text = ipl_tokenizer_decode(tok, NULL, 0);
    assert_string_equal(text, "");
    free(text);
}

static void test_nul_dropped(void **state)
{
    const ipl_tokenizer_t *tok = *state;
    size_t n1 = 0, n2 = 0;
    uint32_t *with = ipl_tokenizer_encode(tok, "ab\0cd e\0", 8, &n1);
    uint32_t *without = ipl_tokenizer_encode(tok, "abcd e", 6, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(with, without, n1 * sizeof *with);
    char *back = ipl_tokenizer_decode(tok, with, n1);
    assert_string_equal(back, "abcd e");
    free(back);
    free(with);
    free(without);
    uint32_t *only = ipl_tokenizer_encode(tok, "\0\0\0", 3, &n1);
    assert_non_null(only);
    assert_int_equal(n1, 0);
    free(only);
}

static void test_unknown_ids_skipped(void **state)
{
    const ipl_tokenizer_t *tok = *state;
    uint32_t ids[] = {
        0, /* never produced */
        1, /* the empty piece */
        s_piece("O"),
        1 + 0x00 + (0x41 << 8),  /* NUL first byte */
        1 + 0x41 + (0x42 << 16), /* a hole in the middle */
        s_piece("K!"),
        IPL_TOK_SPECIAL_BASE + 3, /* past the specials */
        IPL_TOK_SPECIAL_BASE,     /* <|im_start|> */
        0xffffffffu,
    };
    char *text = ipl_tokenizer_decode(tok, ids, sizeof ids / sizeof ids[0]);
    assert_string_equal(text, "OK!<|im_start|>");
    free(text);
}

/* Appending text after a complete word never changes the ids already produced. */
static void test_prefix_stable(void **state)
{
    const ipl_tokenizer_t *tok = *state;
    static const char turn1[] = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                                "<|im_start|>assistant\n";
    static const char turn2[] = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                                "<|im_start|>assistant\nParis.<|im_end|>\n<|im_start|>user\n"
                                "And of Spain?<|im_end|>\n<|im_start|>assistant\n";
    size_t n1, n2;
    uint32_t *a = ipl_tokenizer_encode(tok, turn1, sizeof turn1 - 1, &n1);
    uint32_t *b = ipl_tokenizer_encode(tok, turn2, sizeof turn2 - 1, &n2);
    assert_true(n2 > n1);
    assert_memory_equal(a, b, n1 * sizeof *a);
    free(a);
    free(b);
    static const char words[] = "the quick brown fox jumps over the lazy dog";
    a = ipl_tokenizer_encode(tok, words, 19, &n1); /* "the quick brown fox" */
    b = ipl_tokenizer_encode(tok, words, sizeof words - 1, &n2);
    assert_memory_equal(a, b, n1 * sizeof *a);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name),
        cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_specials),
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_nul_dropped),
        cmocka_unit_test(test_unknown_ids_skipped),
        cmocka_unit_test(test_prefix_stable),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
