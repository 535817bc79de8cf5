/*
 * ipl_tokenizer — the tokenizer interface: a tokenizer.json (delegated to ipl_bpe) or the
 * built-in reversible tokenizer (see ipl_tokenizer.h), which the rest of this file is.
 *
 * Segmentation, precisely. NUL bytes are dropped first: encode(text) == encode(text without its
 * NUL bytes), since a piece cannot hold NUL and decode returns a C string. Then the special
 * tokens are cut out, leftmost first (none is a prefix of another, so leftmost is also
 * longest). The text between two special tokens is split into runs:
 *
 *   whitespace  = the bytes ' ' \t \n \v \f \r; every other byte (letters, digits, punctuation,
 *                 controls, and every byte >= 0x80, i.e. all of UTF-8) is a word byte;
 *   word run    = an optional single leading ' ' followed by a maximal run of word bytes; the
 *                 ' ' belongs to the word only when it is immediately followed by a word byte;
 *   space run   = a maximal run of whitespace bytes not taken as a word's leading space.
 *
 * Each run is cut from its start into pieces of 3 bytes, the last one 1–3 bytes. So a piece
 * never spans a whitespace→word-byte transition except for a word's one leading space, never
 * a word-byte→whitespace transition, and never a special token; a UTF-8 character may be cut
 * between two pieces (byte-level, like GPT-2). Examples:
 *
 *   "Hello world"   → "Hel" "lo" " wo" "rld"
 *   "a  b\n\nc "    → "a" " " " b" "\n\n" "c" " "
 *   "<|im_start|>user\nHi" → <|im_start|> "use" "r" "\n" "Hi"
 *
 * Appending text changes at most the pieces of the last run, which keeps the token ids (and
 * block hashes) of a growing conversation stable, as a real tokenizer does. Decoding is the
 * concatenation of the pieces, so encode/decode is exact for any NUL-free bytes.
 */
#include "ipl_tokenizer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ipl_bpe.h"

#define S_PIECE_MAX 3
#define S_ID_MAX    (1u + 0xffffffu) /* the id of the piece ff ff ff */

struct ipl_tokenizer {
    char *name;     /* malloc'd */
    ipl_bpe_t *bpe; /* NULL: the built-in tokenizer */
};

static const struct {
    const char *text;
    size_t len;
} s_specials[] = {
    /* index k has the id IPL_TOK_SPECIAL_BASE + k */
    {"<|im_start|>", 12},
    {"<|im_end|>", 10},
    {"<|endoftext|>", 13},
};
#define S_NSPECIALS      (sizeof s_specials / sizeof s_specials[0])
#define S_SPECIAL_MAXLEN 13

ipl_tokenizer_t *ipl_tokenizer_new_builtin(void)
{
    ipl_tokenizer_t *self = calloc(1, sizeof *self);
    if (self && !(self->name = strdup("builtin"))) ipl_tokenizer_destroy(&self);
    return self;
}

ipl_tokenizer_t *ipl_tokenizer_open(const char *spec, char *err, size_t errlen)
{
    if (!spec || !*spec || !strcmp(spec, "builtin")) return ipl_tokenizer_new_builtin();
    struct stat st;
    if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/tokenizer.json", spec) >= (int)sizeof path) {
            if (err && errlen) snprintf(err, errlen, "%s: path too long", spec);
            return NULL;
        }
        return ipl_tokenizer_new_from_file(path, err, errlen);
    }
    return ipl_tokenizer_new_from_file(spec, err, errlen);
}

ipl_tokenizer_t *ipl_tokenizer_new_from_file(const char *tokenizer_json_path, char *err,
                                             size_t errlen)
{
    ipl_tokenizer_t *self = calloc(1, sizeof *self);
    size_t namelen = strlen(tokenizer_json_path) + 4;
    if (!self || !(self->name = malloc(namelen))) {
        ipl_tokenizer_destroy(&self);
        if (err && errlen) snprintf(err, errlen, "%s: out of memory", tokenizer_json_path);
        return NULL;
    }
    snprintf(self->name, namelen, "hf:%s", tokenizer_json_path);
    if (!(self->bpe = ipl_bpe_new_from_file(tokenizer_json_path, err, errlen)))
        ipl_tokenizer_destroy(&self);
    return self;
}

void ipl_tokenizer_destroy(ipl_tokenizer_t **self_p)
{
    if (self_p && *self_p) {
        ipl_bpe_destroy(&(*self_p)->bpe);
        free((*self_p)->name);
        free(*self_p);
        *self_p = NULL;
    }
}

const char *ipl_tokenizer_name(const ipl_tokenizer_t *self)
{
    return self->name;
}

static bool s_is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Cuts one run into pieces of at most S_PIECE_MAX bytes. */
static void s_emit_run(const unsigned char *p, size_t n, uint32_t *out, size_t *count)
{
    while (n > 0) {
        size_t k = n < S_PIECE_MAX ? n : S_PIECE_MAX;
        uint32_t id = 1;
        for (size_t b = 0; b < k; b++)
            id += (uint32_t)p[b] << (8 * b);
        out[(*count)++] = id;
        p += k;
        n -= k;
    }
}

/* True when a word run starts at p[i]: a word byte, or a ' ' directly followed by one. */
static bool s_word_starts(const unsigned char *p, size_t n, size_t i)
{
    return !s_is_space(p[i]) || (p[i] == ' ' && i + 1 < n && !s_is_space(p[i + 1]));
}

/* Text without special tokens (and without NUL) → pieces. */
static void s_encode_plain(const unsigned char *p, size_t n, uint32_t *out, size_t *count)
{
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        if (s_word_starts(p, n, i)) {
            i += p[i] == ' ';
            while (i < n && !s_is_space(p[i]))
                i++;
        } else {
            while (i < n && !s_word_starts(p, n, i))
                i++;
        }
        s_emit_run(p + start, i - start, out, count);
    }
}

/* The leftmost special token in p[0..n): its offset (n when none) and index in *k. */
static size_t s_find_special(const unsigned char *p, size_t n, size_t *k)
{
    const unsigned char *q = p;
    while ((q = memchr(q, '<', n - (size_t)(q - p))) != NULL) {
        size_t left = n - (size_t)(q - p);
        for (size_t s = 0; s < S_NSPECIALS; s++) {
            if (s_specials[s].len <= left &&
                memcmp(q, s_specials[s].text, s_specials[s].len) == 0) {
                *k = s;
                return (size_t)(q - p);
            }
        }
        q++;
    }
    return n;
}

/* The built-in encoding. */
static uint32_t *s_encode_builtin(const char *text, size_t len, size_t *n)
{
    *n = 0;
    unsigned char *copy = NULL;
    const unsigned char *p = (const unsigned char *)text;
    if (len > 0 && memchr(p, 0, len)) {
        copy = malloc(len);
        if (!copy) return NULL;
        size_t m = 0;
        for (size_t i = 0; i < len; i++)
            if (p[i] != 0) copy[m++] = p[i];
        p = copy;
        len = m;
    }
    /* Every piece holds at least one byte and every special token ten: len ids at most. */
    uint32_t *out = malloc((len > 0 ? len : 1) * sizeof *out);
    if (!out) {
        free(copy);
        return NULL;
    }
    size_t count = 0, pos = 0;
    while (pos < len) {
        size_t k = 0;
        size_t at = pos + s_find_special(p + pos, len - pos, &k);
        s_encode_plain(p + pos, at - pos, out, &count);
        if (at == len) break;
        out[count++] = IPL_TOK_SPECIAL_BASE + (uint32_t)k;
        pos = at + s_specials[k].len;
    }
    free(copy);
    if (count < len / 2) { /* give back most of a large over-allocation */
        uint32_t *shrunk = realloc(out, (count > 0 ? count : 1) * sizeof *out);
        if (shrunk) out = shrunk;
    }
    *n = count;
    return out;
}

/* The bytes of one id into buf (room for S_SPECIAL_MAXLEN); returns their number, 0 for an
 * unknown id (one that encode never produces). */
static size_t s_id_bytes(uint32_t id, char *buf)
{
    if (id >= IPL_TOK_SPECIAL_BASE && id - IPL_TOK_SPECIAL_BASE < S_NSPECIALS) {
        size_t k = id - IPL_TOK_SPECIAL_BASE;
        memcpy(buf, s_specials[k].text, s_specials[k].len);
        return s_specials[k].len;
    }
    if (id < 2 || id > S_ID_MAX) return 0;
    uint32_t v = id - 1;
    unsigned char b[S_PIECE_MAX] = {(unsigned char)v, (unsigned char)(v >> 8),
                                    (unsigned char)(v >> 16)};
    if (b[0] == 0 || (b[1] == 0 && b[2] != 0)) return 0;
    size_t n = b[2] ? 3 : b[1] ? 2 : 1;
    memcpy(buf, b, n);
    return n;
}

uint32_t *ipl_tokenizer_encode(const ipl_tokenizer_t *self, const char *text, size_t len, size_t *n)
{
    if (self->bpe) return ipl_bpe_encode(self->bpe, text, len, false, n);
    return s_encode_builtin(text, len, n);
}

uint32_t *ipl_tokenizer_encode_with_special(const ipl_tokenizer_t *self, const char *text,
                                            size_t len, size_t *n)
{
    if (self->bpe) return ipl_bpe_encode(self->bpe, text, len, true, n);
    return s_encode_builtin(text, len, n);
}

int ipl_tokenizer_set_cache(ipl_tokenizer_t *self, size_t max_entries, size_t max_bytes)
{
    return self->bpe ? ipl_bpe_set_cache(self->bpe, max_entries, max_bytes) : 0;
}

char *ipl_tokenizer_decode(const ipl_tokenizer_t *self, const uint32_t *ids, size_t n)
{
    if (self->bpe) return ipl_bpe_decode(self->bpe, ids, n, NULL);
    char piece[S_SPECIAL_MAXLEN];
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += s_id_bytes(ids[i], piece);
    char *text = malloc(total + 1);
    if (!text) return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = s_id_bytes(ids[i], piece);
        memcpy(text + at, piece, k);
        at += k;
    }
    text[at] = '\0';
    return text;
}
