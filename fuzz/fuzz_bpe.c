/* libFuzzer target: tokenizer.json loading and encoding (common/ipl_bpe, ipl_pretok,
 * ipl_normalizer). The first input byte picks the mode:
 *   even: the rest is a tokenizer.json (an untrusted file, as --tokenizer reads it): loading
 *         either fails with a message or gives a tokenizer whose encode of a few fixed texts
 *         returns ids below its vocabulary size and decodes without failing;
 *   odd:  the rest is text: every pre-tokenizer pattern (alone, and DeepSeek-V3's sequence)
 *         must cut it into non-empty pieces that tile it exactly, and the unit-test tokenizers
 *         (common/tests/data/, read from the working directory when present, as tools/run-fuzz
 *         runs from the repository root) must encode it to valid ids. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_bpe.h"
#include "ipl_pretok.h"

typedef struct {
    const unsigned char *p;
    size_t n, at;
} s_tile_t;

static bool s_tile_cb(void *ctx, const unsigned char *piece, size_t len)
{
    s_tile_t *t = ctx;
    if (len == 0 || piece != t->p + t->at || t->at + len > t->n) abort();
    t->at += len;
    return true;
}

static void s_check_split(const ipl_pretok_t *pt, const unsigned char *p, size_t n)
{
    s_tile_t t = {p, n, 0};
    if (!ipl_pretok_split(pt, p, n, s_tile_cb, &t) || t.at != n) abort();
}

static void s_check_encode(const ipl_bpe_t *b, const char *text, size_t len)
{
    for (int special = 0; special < 2; special++) {
        size_t n;
        uint32_t *ids = ipl_bpe_encode(b, text, len, special, &n);
        if (!ids) abort();
        for (size_t i = 0; i < n; i++)
            if (ids[i] >= ipl_bpe_vocab_size(b)) abort();
        size_t dlen;
        char *dec = ipl_bpe_decode(b, ids, n, &dlen);
        if (!dec || dec[dlen] != '\0') abort();
        free(dec);
        free(ids);
    }
}

static ipl_bpe_t *s_fixture[3];
static bool s_loaded;

static void s_load_fixtures(void)
{
    static const char *const names[] = {"bpe_qwen2_tiny.json", "bpe_llama3_tiny.json",
                                        "bpe_spm_tiny.json"};
    for (size_t i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, "common/tests/data/%s", names[i]);
        s_fixture[i] = ipl_bpe_new_from_file(path, NULL, 0);
    }
    s_loaded = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    if (data[0] % 2 == 0) {
        char err[512];
        err[0] = '\0';
        ipl_bpe_t *b = ipl_bpe_new_from_json(rest, n, "fuzz.json", err, sizeof err);
        if (!b) {
            if (!err[0]) abort(); /* a refusal always says why */
            return 0;
        }
        static const char *const texts[] = {"", "Hello world, it's 12345!", " a  b\n\n c ",
                                            "\xe4\xbd\xa0\xe5\xa5\xbd \xcc\x81x\xff"};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
            s_check_encode(b, texts[i], strlen(texts[i]));
        ipl_bpe_destroy(&b);
        return 0;
    }
    const unsigned char *p = (const unsigned char *)rest;
    for (int k = 0; k < IPL_PRETOK_NPATTERNS; k++) {
        ipl_pretok_t pt = {0};
        ipl_pretok_add_regex(&pt, (ipl_pretok_pattern_t)k);
        s_check_split(&pt, p, n);
    }
    ipl_pretok_t ds = {0};
    ipl_pretok_add_regex(&ds, IPL_PRETOK_DS_DIGITS);
    ipl_pretok_add_regex(&ds, IPL_PRETOK_DS_CJK);
    ipl_pretok_add_regex(&ds, IPL_PRETOK_DS_WORDS);
    s_check_split(&ds, p, n);
    ipl_pretok_t lit = {0};
    ipl_pretok_add_literal(&lit, " ", 1, IPL_PRETOK_MERGED_WITH_PREVIOUS);
    s_check_split(&lit, p, n);
    if (!s_loaded) s_load_fixtures();
    for (size_t i = 0; i < 3; i++)
        if (s_fixture[i]) s_check_encode(s_fixture[i], rest, n);
    return 0;
}
