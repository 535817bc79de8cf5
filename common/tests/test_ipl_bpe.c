/*
 * Unit tests of ipl_bpe (and of ipl_tokenizer_new_from_file): two hand-made tokenizer.json
 * files in common/tests/data/ (see its README.md) with a 51-entry byte-level vocabulary —
 *   bpe_qwen2_tiny.json   Qwen2 regex, NFC, merges as ["a","b"] pairs, ignore_merges false
 *   bpe_llama3_tiny.json  Llama-3 regex, no normalizer, merges as "a b" strings,
 *                         ignore_merges true, TemplateProcessing that prepends id 200
 * — a SentencePiece-style one (BPE on characters, Gemma-3's shape) —
 *   bpe_spm_tiny.json     normalizer Replace(" " → "▁"), Split(" ", MergedWithPrevious),
 *                         byte_fallback with a few <0xNN> tokens, fuse_unk, the merged token
 *                         ">▁</", decoder Replace/ByteFallback/Fuse/Strip, BOS template
 * — and variants of them edited in memory (added-token options, unk, load errors). The
 * expected ids were cross-checked with the transformers.js reference
 * (tools/node/hf_tokenize.js) wherever the text only uses characters of the vocabulary;
 * bpe_spm_tiny.json's ids and decoded texts with Hugging Face tokenizers 0.23.2 (the Rust
 * crate, through its Node.js binding).
 * Run from the repository root (tools/run-tests does): the fixtures are found through
 * __FILE__.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "ipl_bpe.h"
#include "ipl_tokenizer.h"

/* Ids of the fixture vocabulary used below. */
enum {
    T_BANG = 0,
    T_APOS = 1,
    T_1 = 3,
    T_2 = 4,
    T_A = 5,
    T_B = 6,
    T_E = 9,
    T_H = 10,
    T_I = 44,
    T_T = 15,
    T_W = 16,
    T_SPACE = 17, /* Ġ */
    T_NL = 18,    /* Ċ */
    T_NUL = 19,   /* Ā: byte 0x00 */
    T_DEL = 20,   /* ġ: byte 0x7F */
    T_SHY = 21,   /* Ń: byte 0xAD */
    T_CC = 24,    /* Ì: byte 0xCC */
    T_81 = 25,    /* ģ: byte 0x81 */
    T_HELLO = 29,
    T_OR = 31,
    T_LD = 33,
    T_SP_WORLD = 34,
    T_BC = 35,
    T_AB = 36,
    T_AA = 37,
    T_E_ACUTE = 38, /* Ã© */
    T_SP_SP = 39,
    T_APOS_S = 40,
    T_ABC = 41, /* only reachable through ignore_merges */
    T_TAB = 42,
    T_12 = 43,
    T_APOS_CAP_S = 45,
    T_SP_B = 46,
    T_SP_BANG = 47,
    T_BANG_NL = 48,
    T_C2 = 49,
    T_FF = 50,
    T_ENDOFTEXT = 100,
    T_IM_START = 101,
    T_IM_END = 102,
    T_THINK = 103,
    T_IM = 104,
    T_IM_START_X = 105,
    T_BOS = 200,
    T_EOT = 202,
};

static char s_dir[512];

static const char *s_path(const char *name)
{
    static char path[640];
    snprintf(path, sizeof path, "%s/data/%s", s_dir, name);
    return path;
}

static char *s_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

typedef struct {
    ipl_bpe_t *qwen, *llama, *spm;
} s_fixtures_t;

static int s_setup(void **state)
{
    snprintf(s_dir, sizeof s_dir, "%s", __FILE__);
    char *slash = strrchr(s_dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(s_dir, sizeof s_dir, ".");
    s_fixtures_t *f = calloc(1, sizeof *f);
    char err[256];
    f->qwen = ipl_bpe_new_from_file(s_path("bpe_qwen2_tiny.json"), err, sizeof err);
    if (!f->qwen) fprintf(stderr, "%s\n", err);
    f->llama = ipl_bpe_new_from_file(s_path("bpe_llama3_tiny.json"), err, sizeof err);
    if (!f->llama) fprintf(stderr, "%s\n", err);
    f->spm = ipl_bpe_new_from_file(s_path("bpe_spm_tiny.json"), err, sizeof err);
    if (!f->spm) fprintf(stderr, "%s\n", err);
    *state = f;
    return f->qwen && f->llama && f->spm ? 0 : -1;
}

static int s_teardown(void **state)
{
    s_fixtures_t *f = *state;
    ipl_bpe_destroy(&f->qwen);
    ipl_bpe_destroy(&f->llama);
    ipl_bpe_destroy(&f->spm);
    assert_null(f->qwen);
    ipl_bpe_destroy(&f->qwen); /* destroying twice is harmless */
    free(f);
    return 0;
}

static void s_expect(const ipl_bpe_t *bpe, const char *text, size_t len, bool special,
                     const uint32_t *want, size_t nwant)
{
    size_t n = 12345;
    uint32_t *ids = ipl_bpe_encode(bpe, text, len, special, &n);
    assert_non_null(ids);
    if (n != nwant) {
        fprintf(stderr, "text \"%.*s\": got %zu ids:", (int)len, text, n);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %u", ids[i]);
        fprintf(stderr, "\n");
    }
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
    free(ids);
}

/* EXPECT(bpe, "text", ids...): text as a literal (it may hold NUL bytes). */
#define EXPECT_X(bpe, special, text, ...)                                                          \
    do {                                                                                           \
        static const uint32_t want_[] = {__VA_ARGS__};                                             \
        s_expect(bpe, text, sizeof(text) - 1, special, want_, sizeof want_ / sizeof want_[0]);     \
    } while (0)
#define EXPECT(bpe, text, ...) EXPECT_X(bpe, false, text, __VA_ARGS__)
#define EXPECT_NONE(bpe, text) s_expect(bpe, text, sizeof(text) - 1, false, NULL, 0)

/* Loads a fixture after `edit` changed its JSON; err receives the message on failure. */
static ipl_bpe_t *s_load_edited(const char *fixture, void (*edit)(cJSON *root), char *err,
                                size_t errlen)
{
    char *text = s_read(s_path(fixture));
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    free(text);
    edit(root);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    ipl_bpe_t *bpe = ipl_bpe_new_from_json(json, strlen(json), "edited.json", err, errlen);
    free(json);
    return bpe;
}

static cJSON *s_at(cJSON *root, const char *a, const char *b)
{
    cJSON *x = cJSON_GetObjectItemCaseSensitive(root, a);
    return b ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

/* The added token whose content is `content`. */
static cJSON *s_added(cJSON *root, const char *content)
{
    cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"))
    {
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring, content))
            return it;
    }
    fail_msg("no added token %s", content);
    return NULL;
}

static void s_set_bool(cJSON *obj, const char *key, bool v)
{
    cJSON_ReplaceItemInObjectCaseSensitive(obj, key, cJSON_CreateBool(v));
}

/* ---- model ------------------------------------------------------------------------------ */

static void test_merges_by_rank(void **state)
{
    const ipl_bpe_t *q = ((s_fixtures_t *)*state)->qwen;
    EXPECT(q, "hello world", T_HELLO, T_SP_WORLD);
    /* "b c" (rank 0) before "a b" (rank 1): a + bc, not ab + c */
    EXPECT(q, "abc", T_A, T_BC);
    /* equal ranks: the leftmost pair first */
    EXPECT(q, "aaa", T_AA, T_A);
    EXPECT(q, "aaaa", T_AA, T_AA);
    EXPECT(q, "a", T_A);
    EXPECT_NONE(q, "");
}

static void test_merge_formats(void **state)
{
    /* The Llama fixture spells merges "a b"; "aaaa" is not in its vocabulary, so the merges
     * (parsed from strings) decide. */
    const ipl_bpe_t *l = ((s_fixtures_t *)*state)->llama;
    EXPECT(l, "aaaa", T_AA, T_AA);
    EXPECT(l, "aaa", T_AA, T_A);
}

static void test_ignore_merges(void **state)
{
    s_fixtures_t *f = *state;
    EXPECT(f->qwen, "abc", T_A, T_BC); /* merges cannot build "abc" */
    EXPECT(f->llama, "abc", T_ABC);    /* but it is in the vocabulary */
}

static void test_long_word(void **state)
{
    s_fixtures_t *f = *state;
    size_t n = 20001, k;
    char *text = malloc(n);
    memset(text, 'a', n);
    uint32_t *ids = ipl_bpe_encode(f->qwen, text, n, false, &k);
    assert_int_equal(k, n / 2 + 1);
    for (size_t i = 0; i + 1 < k; i++)
        assert_int_equal(ids[i], T_AA);
    assert_int_equal(ids[k - 1], T_A);
    free(ids);
    for (size_t i = 0; i + 5 <= n; i += 5)
        memcpy(text + i, "hello", 5);
    ids = ipl_bpe_encode(f->qwen, text, 20000, false, &k); /* one letter run of 4000 "hello" */
    assert_int_equal(k, 4000);
    for (size_t i = 0; i < k; i++)
        assert_int_equal(ids[i], T_HELLO);
    free(ids);
    free(text);
}

static void s_edit_unk(cJSON *root)
{
    cJSON_ReplaceItemInObjectCaseSensitive(s_at(root, "model", NULL), "unk_token",
                                           cJSON_CreateString("!"));
}

static void s_edit_unk_fused(cJSON *root)
{
    s_edit_unk(root);
    s_set_bool(s_at(root, "model", NULL), "fuse_unk", true);
}

static void test_unknown_bytes(void **state)
{
    s_fixtures_t *f = *state;
    /* 'S' and 'x' are not in the vocabulary: dropped without unk_token, as HF does, which
     * makes "a" and "b" neighbours that merge */
    EXPECT(f->qwen, "aSxb", T_AB);
    char err[256];
    ipl_bpe_t *unk = s_load_edited("bpe_qwen2_tiny.json", s_edit_unk, err, sizeof err);
    assert_non_null(unk);
    EXPECT(unk, "aSxb", T_A, T_BANG, T_BANG, T_B);
    ipl_bpe_destroy(&unk);
    unk = s_load_edited("bpe_qwen2_tiny.json", s_edit_unk_fused, err, sizeof err);
    assert_non_null(unk);
    EXPECT(unk, "aSxb", T_A, T_BANG, T_B);
    ipl_bpe_destroy(&unk);
}

/* ---- ByteLevel map, NFC, invalid UTF-8 ------------------------------------------------------ */

static void test_byte_map(void **state)
{
    s_fixtures_t *f = *state;
    /* NUL → Ā, DEL → ġ, U+00AD = C2 AD → Â Ń, TAB → ĉ: bytes outside the printable ranges
     * map to U+0100 + k in order */
    EXPECT(f->qwen, "\0\x7f\xc2\xad\t", T_NUL, T_DEL, T_C2, T_SHY, T_TAB);
    EXPECT(f->llama, "\0\x7f\xc2\xad\t", T_NUL, T_DEL, T_C2, T_SHY, T_TAB);
    /* é = C3 A9 → Ã © merged */
    EXPECT(f->llama, "\xc3\xa9", T_E_ACUTE);
    static const uint32_t ids[] = {T_NUL, T_DEL, T_C2, T_SHY, T_TAB, T_E_ACUTE};
    size_t len;
    char *text = ipl_bpe_decode(f->qwen, ids, 6, &len);
    assert_int_equal(len, 7);
    assert_memory_equal(text, "\0\x7f\xc2\xad\t\xc3\xa9", 7);
    free(text);
}

static void test_nfc(void **state)
{
    s_fixtures_t *f = *state;
    /* e + U+0301 is normalized to é by Qwen's NFC, kept as three bytes by Llama (no
     * normalizer) */
    EXPECT(f->qwen, "e\xcc\x81", T_E_ACUTE);
    EXPECT(f->llama, "e\xcc\x81", T_E, T_CC, T_81);
    EXPECT(f->qwen, "\xc3\xa9", T_E_ACUTE);
}

static void test_invalid_utf8(void **state)
{
    s_fixtures_t *f = *state;
    /* an invalid byte is one character of its own, neither letter nor space: here it is the
     * optional prefix of the letter run "b" */
    EXPECT(f->qwen,
           "a\xff"
           "b",
           T_A, T_FF, T_B);
    static const char text[] = "\xff\xff\xc3 \xe9\x80";
    size_t n, len;
    uint32_t *ids = ipl_bpe_encode(f->llama, text, sizeof text - 1, false, &n);
    assert_non_null(ids);
    char *back = ipl_bpe_decode(f->llama, ids, n, &len);
    /* bytes the vocabulary has survive; 0xE9 and 0x80 are not in it */
    assert_int_equal(len, 4);
    assert_memory_equal(back, "\xff\xff\xc3 ", 4);
    free(back);
    free(ids);
}

/* ---- pre-tokenizer ------------------------------------------------------------------------- */

static void test_whitespace(void **state)
{
    s_fixtures_t *f = *state;
    const ipl_bpe_t *q = f->qwen;
    /* "a" "  " " b" would not merge the spaces: \s+(?!\S) leaves the last space to " b" */
    EXPECT(q, "a  b", T_A, T_SPACE, T_SP_B);
    EXPECT(q, "a   b", T_A, T_SP_SP, T_SP_B);
    EXPECT(q, "a   ", T_A, T_SP_SP, T_SPACE); /* at the end, the whole run */
    /* \s*[\r\n]+ ends at the last newline, then " b" */
    EXPECT(q, "a  \n\n b", T_A, T_SP_SP, T_NL, T_NL, T_SP_B);
    /* ' '?[^\s\p{L}\p{N}]+[\r\n]* is one pre-token: Ġ! and !Ċ merge inside it */
    EXPECT(q, " !!\n", T_SP_BANG, T_BANG_NL);
    EXPECT(f->llama, " !!\n", T_SP_BANG, T_BANG_NL);
}

static void test_digits(void **state)
{
    s_fixtures_t *f = *state;
    EXPECT(f->qwen, "1212", T_1, T_2, T_1, T_2); /* \p{N}: one digit per pre-token */
    EXPECT(f->llama, "1212", T_12, T_1, T_2);    /* \p{N}{1,3}: "121" "2" */
}

static void test_contractions(void **state)
{
    s_fixtures_t *f = *state;
    EXPECT(f->qwen, "it's", T_I, T_T, T_APOS_S);
    EXPECT(f->qwen, "'sa", T_APOS_S, T_A);
    /* case-insensitive: "'S" is a pre-token of its own (in the Llama vocabulary) */
    EXPECT(f->llama, "'Sa", T_APOS_CAP_S, T_A);
    /* not a contraction: "'" joins the letter run ("'a" is not in the vocabulary) */
    EXPECT(f->llama, "'a", T_APOS, T_A);
}

/* ---- added tokens and the post-processor ----------------------------------------------------- */

static void test_special_tokens(void **state)
{
    s_fixtures_t *f = *state;
    EXPECT(f->qwen, "<|im_start|>hello<|im_end|>", T_IM_START, T_HELLO, T_IM_END);
    /* leftmost-longest: "<|im_start|>x" and "<|im" are tokens too */
    EXPECT(f->qwen, "<|im_start|>x", T_IM_START_X);
    EXPECT(f->qwen, "<|im_start|>a", T_IM_START, T_A);
    EXPECT(f->qwen, "<|im", T_IM);
    /* non-special added tokens are split out as well */
    EXPECT(f->qwen, "hello<think>world", T_HELLO, T_THINK, T_W, T_OR, T_LD);
    /* the text between two tokens is pre-tokenized alone: " " ends its text */
    EXPECT(f->qwen, "<|endoftext|> <|endoftext|>", T_ENDOFTEXT, T_SPACE, T_ENDOFTEXT);
    EXPECT(f->llama, "<|begin_of_text|>hello<|eot_id|>", T_BOS, T_HELLO, T_EOT);
}

static void test_post_processor(void **state)
{
    s_fixtures_t *f = *state;
    EXPECT_X(f->llama, true, "hello world", T_BOS, T_HELLO, T_SP_WORLD);
    EXPECT_X(f->llama, true, "", T_BOS);
    EXPECT_X(f->qwen, true, "hello world", T_HELLO, T_SP_WORLD); /* ByteLevel adds nothing */
}

static void s_edit_strip(cJSON *root)
{
    s_set_bool(s_added(root, "<think>"), "lstrip", true);
    s_set_bool(s_added(root, "<think>"), "rstrip", true);
}

static void s_edit_single_word(cJSON *root)
{
    s_set_bool(s_added(root, "<think>"), "single_word", true);
}

/* A normalized added token "é" (id 106): matched after NFC. */
static void s_edit_normalized(cJSON *root)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "id", 106);
    cJSON_AddStringToObject(t, "content", "\xc3\xa9");
    cJSON_AddBoolToObject(t, "normalized", true);
    cJSON_AddBoolToObject(t, "special", false);
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), t);
}

static void test_added_token_options(void **state)
{
    s_fixtures_t *f = *state;
    char err[256];
    EXPECT(f->qwen, "a <think> b", T_A, T_SPACE, T_THINK, T_SP_B);
    ipl_bpe_t *b = s_load_edited("bpe_qwen2_tiny.json", s_edit_strip, err, sizeof err);
    assert_non_null(b);
    EXPECT(b, "a \t<think>\n b", T_A, T_THINK, T_B); /* the blanks around it are dropped */
    ipl_bpe_destroy(&b);

    b = s_load_edited("bpe_qwen2_tiny.json", s_edit_single_word, err, sizeof err);
    assert_non_null(b);
    EXPECT(b, "a <think> b", T_A, T_SPACE, T_THINK, T_SP_B);
    EXPECT(b, "<think>!", T_THINK, T_BANG);
    /* inside a word: not a match, so plain text: "a" "<think" ">" where only t, h and i are
     * in the vocabulary */
    EXPECT(b, "a<think>", T_A, T_T, T_H, T_I);
    ipl_bpe_destroy(&b);

    b = s_load_edited("bpe_qwen2_tiny.json", s_edit_normalized, err, sizeof err);
    assert_non_null(b);
    EXPECT(b, "e\xcc\x81", 106);      /* NFC makes it "é" */
    EXPECT(b, "a\xc3\xa9", T_A, 106); /* normalized tokens split the normalized text too */
    ipl_bpe_destroy(&b);
}

/* ---- decoding, lookups, the tokenizer interface ------------------------------------------------
 */

static void test_decode(void **state)
{
    s_fixtures_t *f = *state;
    static const uint32_t ids[] = {T_IM_START, T_HELLO, 9999, T_SP_WORLD, 77, T_IM_END};
    size_t len;
    char *text = ipl_bpe_decode(f->qwen, ids, 6, &len); /* 9999 and 77 are unknown */
    assert_string_equal(text, "<|im_start|>hello world<|im_end|>");
    assert_int_equal(len, strlen(text));
    free(text);
    text = ipl_bpe_decode(f->qwen, NULL, 0, NULL);
    assert_string_equal(text, "");
    free(text);
}

static void test_token_id(void **state)
{
    s_fixtures_t *f = *state;
    assert_int_equal(ipl_bpe_token_id(f->qwen, "\xc4\xa0world"), T_SP_WORLD); /* "Ġworld" */
    assert_int_equal(ipl_bpe_token_id(f->qwen, "<|im_end|>"), T_IM_END);
    assert_int_equal(ipl_bpe_token_id(f->qwen, "zzz"), -1);
    assert_int_equal(ipl_bpe_token_id(f->qwen, " world"), -1); /* spelled with Ġ in the file */
    assert_int_equal(ipl_bpe_vocab_size(f->qwen), 106);
    assert_int_equal(ipl_bpe_vocab_size(f->llama), 203);
}

static void test_tokenizer_interface(void **state)
{
    (void)state;
    char err[256], path[700];
    snprintf(path, sizeof path, "%s", s_path("bpe_llama3_tiny.json"));
    ipl_tokenizer_t *tok = ipl_tokenizer_new_from_file(path, err, sizeof err);
    assert_non_null(tok);
    char name[720];
    snprintf(name, sizeof name, "hf:%s", path);
    assert_string_equal(ipl_tokenizer_name(tok), name);
    size_t n;
    uint32_t *ids = ipl_tokenizer_encode(tok, "hello world", 11, &n);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], T_HELLO);
    free(ids);
    ids = ipl_tokenizer_encode_with_special(tok, "hello world", 11, &n);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], T_BOS);
    char *text = ipl_tokenizer_decode(tok, ids, n);
    assert_string_equal(text, "<|begin_of_text|>hello world");
    free(text);
    free(ids);
    ipl_tokenizer_destroy(&tok);
    assert_null(tok);

    /* the built-in one adds nothing either way */
    tok = ipl_tokenizer_new_builtin();
    ids = ipl_tokenizer_encode_with_special(tok, "ab", 2, &n);
    assert_int_equal(n, 1);
    free(ids);
    ipl_tokenizer_destroy(&tok);

    tok = ipl_tokenizer_new_from_file("/nonexistent/tokenizer.json", err, sizeof err);
    assert_null(tok);
    assert_non_null(strstr(err, "/nonexistent/tokenizer.json: cannot open"));
}

/* ---- SentencePiece-style BPE on characters (bpe_spm_tiny.json) ------------------------------ */

enum {
    S_UNK = 0,
    S_BOS = 1,
    S_MARK = 2, /* ▁ */
    S_A = 3,
    S_B = 4,
    S_C = 5,
    S_MARK_AB = 8,
    S_AB = 7,
    S_GT = 9,
    S_MARK_LT_SLASH = 13,
    S_GT_MARK_LT_SLASH = 14, /* >▁</ */
    S_XC3 = 15,
    S_XA9 = 16,
    S_XE2 = 17,
    S_X82 = 18,
    S_X = 19,
    S_X0A = 20,
    S_EOT = 21,
};

static void test_spm_encode(void **state)
{
    s_fixtures_t *f = *state;
    EXPECT(f->spm, " ab", S_MARK_AB);
    EXPECT(f->spm, "ab ab", S_AB, S_MARK_AB);
    EXPECT(f->spm, "c c", S_C, S_MARK, S_C);
    EXPECT(f->spm, "  a", S_MARK, 6);
    /* ">▁</" spans a ">" / "▁" boundary: the piece is not cut there */
    EXPECT(f->spm, "a> </", S_A, S_GT_MARK_LT_SLASH);
    EXPECT(f->spm, "a>  </", S_A, S_GT, S_MARK, S_MARK_LT_SLASH);
    /* characters outside the vocabulary: byte fallback when every byte has its <0xNN>, else
     * unk (fused); a pending unk is emitted after the byte tokens that follow it, as in HF */
    EXPECT(f->spm, "é", S_XC3, S_XA9);
    EXPECT(f->spm, "x\n", S_X, S_X0A);
    EXPECT(f->spm, "€", S_UNK);
    EXPECT(f->spm, "€€", S_UNK);
    EXPECT(f->spm, "€é€", S_XC3, S_XA9, S_UNK);
    EXPECT(f->spm, "a<eot>b", S_A, S_EOT, S_B);
    EXPECT_NONE(f->spm, "");
    EXPECT_X(f->spm, true, "ab ab", S_BOS, S_AB, S_MARK_AB);
    EXPECT_X(f->spm, true, "", S_BOS);
    /* a long text cut at its word marks gives what one BPE over all of it gives: the same
     * ids for every repetition */
    char text[3000];
    for (size_t i = 0; i < 1000; i++)
        memcpy(text + 3 * i, "ab ", 3);
    size_t n;
    uint32_t *ids = ipl_bpe_encode(f->spm, text, sizeof text, false, &n);
    assert_int_equal(n, 1001); /* "ab", then "▁ab" 999 times, then "▁" */
    assert_int_equal(ids[0], S_AB);
    for (size_t i = 1; i < 1000; i++)
        assert_int_equal(ids[i], S_MARK_AB);
    assert_int_equal(ids[1000], S_MARK);
    free(ids);
}

static void s_edit_no_fuse(cJSON *root)
{
    s_set_bool(s_at(root, "model", NULL), "fuse_unk", false);
}

static void s_edit_no_fallback(cJSON *root)
{
    s_set_bool(s_at(root, "model", NULL), "byte_fallback", false);
}

/* A merge of a byte-fallback symbol with "▁": "<0xA9>▁" (id 22), ranked first. */
static void s_edit_fallback_merge(cJSON *root)
{
    cJSON_AddItemToObject(s_at(root, "model", "vocab"), "<0xA9>\xe2\x96\x81",
                          cJSON_CreateNumber(22));
    cJSON_InsertItemInArray(s_at(root, "model", "merges"), 0,
                            cJSON_Parse("[\"<0xA9>\", \"\xe2\x96\x81\"]"));
}

static void test_spm_no_cut_after_fallback(void **state)
{
    (void)state;
    char err[256];
    ipl_bpe_t *b = s_load_edited("bpe_spm_tiny.json", s_edit_fallback_merge, err, sizeof err);
    assert_non_null(b);
    /* é is not in the vocabulary: its byte tokens merge with the "▁" after it, so the piece
     * must not be cut before that "▁" (HF: 15, 22, 3) */
    EXPECT(b, "é a", S_XC3, 22, S_A);
    EXPECT(b, "xé a", S_X, S_XC3, 22, S_A);
    EXPECT(b, "ab ab", S_AB, S_MARK_AB); /* a cut after a known character still happens */
    ipl_bpe_destroy(&b);
}

static void test_spm_unk(void **state)
{
    (void)state;
    char err[256];
    ipl_bpe_t *b = s_load_edited("bpe_spm_tiny.json", s_edit_no_fuse, err, sizeof err);
    assert_non_null(b);
    EXPECT(b, "€€", S_UNK, S_UNK);
    EXPECT(b, "€é€", S_XC3, S_XA9, S_UNK, S_UNK);
    ipl_bpe_destroy(&b);
    b = s_load_edited("bpe_spm_tiny.json", s_edit_no_fallback, err, sizeof err);
    assert_non_null(b);
    EXPECT(b, "é€a", S_UNK, S_A);
    ipl_bpe_destroy(&b);
}

static void s_expect_decode(const ipl_bpe_t *bpe, const uint32_t *ids, size_t n, const char *want)
{
    size_t len;
    char *text = ipl_bpe_decode(bpe, ids, n, &len);
    assert_non_null(text);
    if (len != strlen(want) || strcmp(text, want) != 0)
        fprintf(stderr, "decoded \"%s\" (%zu bytes), wanted \"%s\"\n", text, len, want);
    assert_int_equal(len, strlen(want));
    assert_string_equal(text, want);
    free(text);
}

#define EXPECT_DECODE(bpe, want, ...)                                                              \
    do {                                                                                           \
        static const uint32_t ids_[] = {__VA_ARGS__};                                              \
        s_expect_decode(bpe, ids_, sizeof ids_ / sizeof ids_[0], want);                            \
    } while (0)

static void test_spm_decode(void **state)
{
    s_fixtures_t *f = *state;
    EXPECT_DECODE(f->spm, "ab", S_MARK_AB); /* Strip takes one leading space */
    EXPECT_DECODE(f->spm, " a", S_MARK, S_MARK, S_A);
    EXPECT_DECODE(f->spm, "é", S_XC3, S_XA9);
    EXPECT_DECODE(f->spm, "\xEF\xBF\xBD", S_XC3); /* not UTF-8: U+FFFD per byte token */
    EXPECT_DECODE(f->spm,
                  "\xEF\xBF\xBD\xEF\xBF\xBD"
                  "a",
                  S_XE2, S_X82, S_A);
    EXPECT_DECODE(f->spm, "a\xEF\xBF\xBD", 6, S_XC3);
    EXPECT_DECODE(f->spm, "<eot> ab", S_EOT, S_MARK_AB); /* added tokens go through Replace */
    EXPECT_DECODE(f->spm, "x\n", S_X, S_X0A, 999999);    /* unknown ids are skipped */
    s_expect_decode(f->spm, NULL, 0, "");
    assert_int_equal(ipl_bpe_token_id(f->spm, "▁ab"), S_MARK_AB);
    assert_int_equal(ipl_bpe_token_id(f->spm, "<0xC3>"), S_XC3);
    assert_int_equal(ipl_bpe_token_id(f->spm, "Ġ"), -1);
}

/* ---- load errors ------------------------------------------------------------------------------
 */

static void s_edit_bad_merge(cJSON *root)
{
    cJSON_ReplaceItemInArray(s_at(root, "model", "merges"), 1, cJSON_CreateString("a zz"));
}

static void s_edit_two_spaces(cJSON *root)
{
    cJSON_ReplaceItemInArray(s_at(root, "model", "merges"), 0, cJSON_CreateString("b c d"));
}

static void s_edit_regex(cJSON *root)
{
    cJSON *split = cJSON_GetArrayItem(s_at(root, "pre_tokenizer", "pretokenizers"), 0);
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(split, "pattern"),
                                           "Regex", cJSON_CreateString("\\s+"));
}

static void s_edit_normalizer(cJSON *root)
{
    cJSON_ReplaceItemInObjectCaseSensitive(root, "normalizer", cJSON_Parse("{\"type\":\"NFKC\"}"));
}

static void s_edit_model_type(cJSON *root)
{
    cJSON_ReplaceItemInObjectCaseSensitive(s_at(root, "model", NULL), "type",
                                           cJSON_CreateString("WordPiece"));
}

static void s_edit_byte_fallback(cJSON *root)
{
    s_set_bool(s_at(root, "model", NULL), "byte_fallback", true);
}

static void s_edit_vocab_id(cJSON *root)
{
    cJSON_ReplaceItemInObjectCaseSensitive(s_at(root, "model", "vocab"), "a",
                                           cJSON_CreateNumber(-3));
}

static void s_edit_no_decoder(cJSON *root)
{
    cJSON_DeleteItemFromObjectCaseSensitive(root, "decoder");
}

static void s_set_json(cJSON *obj, const char *key, const char *json)
{
    cJSON *v = cJSON_Parse(json);
    assert_non_null(v);
    if (!cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v)) cJSON_AddItemToObject(obj, key, v);
}

static void s_edit_byte_level_first(cJSON *root)
{
    cJSON *list = s_at(root, "pre_tokenizer", "pretokenizers");
    cJSON *bl = cJSON_DetachItemFromArray(list, 1);
    cJSON_InsertItemInArray(list, 0, bl);
}

static void s_edit_normalizer_regex(cJSON *root)
{
    s_set_json(root, "normalizer",
               "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":"
               "\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"x\"}]}");
}

static void s_edit_replace_content(cJSON *root)
{
    cJSON_DeleteItemFromObjectCaseSensitive(s_at(root, "normalizer", NULL), "content");
}

static void s_edit_metaspace(cJSON *root)
{
    s_set_json(root, "pre_tokenizer", "{\"type\":\"Metaspace\",\"replacement\":\"x\"}");
}

static void s_edit_contiguous(cJSON *root)
{
    s_set_json(s_at(root, "pre_tokenizer", NULL), "behavior", "\"Contiguous\"");
}

static void s_edit_split_regex_merged(cJSON *root)
{
    s_set_json(s_at(root, "pre_tokenizer", NULL), "pattern", "{\"Regex\":\"\\\\p{N}{1,3}\"}");
}

static void s_edit_strip_first(cJSON *root)
{
    cJSON *list = s_at(root, "decoder", "decoders");
    cJSON *strip = cJSON_DetachItemFromArray(list, 3);
    cJSON_InsertItemInArray(list, 0, strip);
}

static void s_edit_spm_byte_level_decoder(cJSON *root)
{
    s_set_json(root, "decoder", "{\"type\":\"ByteLevel\"}");
}

static void s_edit_strip_content(cJSON *root)
{
    s_set_json(cJSON_GetArrayItem(s_at(root, "decoder", "decoders"), 3), "content", "\"ab\"");
}

static void s_expect_error_in(const char *fixture, void (*edit)(cJSON *), const char *want)
{
    char err[256] = "untouched";
    ipl_bpe_t *b = s_load_edited(fixture, edit, err, sizeof err);
    if (b || !strstr(err, want)) fprintf(stderr, "error \"%s\", wanted \"%s\"\n", err, want);
    assert_null(b);
    assert_non_null(strstr(err, want));
}

static void s_expect_error(void (*edit)(cJSON *), const char *want)
{
    s_expect_error_in("bpe_llama3_tiny.json", edit, want);
}

static void test_load_errors(void **state)
{
    (void)state;
    s_expect_error(s_edit_bad_merge, "edited.json: model.merges[1]: token \"zz\" is not in");
    s_expect_error(s_edit_two_spaces, "model.merges[0]: \"b c d\" is not two tokens");
    s_expect_error(s_edit_regex, "pre_tokenizer.pretokenizers[0].pattern.Regex: unknown pattern");
    s_expect_error(s_edit_normalizer, "normalizer: type \"NFKC\" is not supported");
    s_expect_error(s_edit_model_type, "model.type: \"WordPiece\" is not supported");
    s_expect_error(s_edit_byte_fallback, "model.byte_fallback");
    s_expect_error(s_edit_vocab_id, "model.vocab[\"a\"]: the id is not an integer");
    s_expect_error(s_edit_no_decoder,
                   "decoder: type \"\" is not supported with the ByteLevel pre-tokenizer");
    s_expect_error(s_edit_byte_level_first,
                   "pre_tokenizer.pretokenizers[0]: type \"ByteLevel\" is not supported here");
    s_expect_error(s_edit_normalizer_regex,
                   "normalizer.normalizers[1].pattern: only a non-empty {\"String\": ...}");
    const char *spm = "bpe_spm_tiny.json";
    s_expect_error_in(spm, s_edit_replace_content, "normalizer.content: missing");
    s_expect_error_in(spm, s_edit_metaspace, "pre_tokenizer: type \"Metaspace\" is not supported");
    s_expect_error_in(spm, s_edit_contiguous, "pre_tokenizer.behavior: \"Contiguous\" is not");
    s_expect_error_in(spm, s_edit_split_regex_merged,
                      "pre_tokenizer.behavior: \"MergedWithPrevious\" is not supported with a "
                      "Regex");
    s_expect_error_in(spm, s_edit_strip_first, "decoder.decoders[0]: \"Strip\" is not supported");
    s_expect_error_in(spm, s_edit_spm_byte_level_decoder,
                      "decoder: type \"ByteLevel\" is not supported without a ByteLevel");
    s_expect_error_in(spm, s_edit_strip_content,
                      "decoder.decoders[3]: Strip needs a one-character");

    char err[128];
    assert_null(ipl_bpe_new_from_json("{\"model\": [", 11, "x.json", err, sizeof err));
    assert_non_null(strstr(err, "x.json: invalid JSON"));
    assert_null(ipl_bpe_new_from_json("[]", 2, "y.json", err, sizeof err));
    assert_string_equal(err, "y.json: not a JSON object");
    assert_null(ipl_bpe_new_from_json("{}", 2, "z.json", NULL, 0)); /* err may be NULL */
    char tiny[8];
    assert_null(ipl_bpe_new_from_json("[]", 2, "a-long-name.json", tiny, sizeof tiny));
    assert_int_equal(strlen(tiny), sizeof tiny - 1); /* truncated, still terminated */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merges_by_rank),
        cmocka_unit_test(test_merge_formats),
        cmocka_unit_test(test_ignore_merges),
        cmocka_unit_test(test_long_word),
        cmocka_unit_test(test_unknown_bytes),
        cmocka_unit_test(test_byte_map),
        cmocka_unit_test(test_nfc),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_whitespace),
        cmocka_unit_test(test_digits),
        cmocka_unit_test(test_contractions),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_post_processor),
        cmocka_unit_test(test_added_token_options),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_token_id),
        cmocka_unit_test(test_tokenizer_interface),
        cmocka_unit_test(test_spm_encode),
        cmocka_unit_test(test_spm_unk),
        cmocka_unit_test(test_spm_no_cut_after_fallback),
        cmocka_unit_test(test_spm_decode),
        cmocka_unit_test(test_load_errors),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
