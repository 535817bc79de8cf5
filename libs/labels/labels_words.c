/*
 * labels_words — see labels_words.h.
 *
 * The scan, 64 bytes a step: labels_simd_words() sets bit i for every byte i that may belong
 * to a word (an ASCII word character, or any byte >= 0x80), and the transitions between word
 * and non-word bytes are walked with count-trailing-zeros, so the loop branches per word, not
 * per byte. A run of word bytes that is pure ASCII is one word, hashed straight from the text; a
 * run holding a byte >= 0x80 is decoded (s_slow_next) and may be several words or none (a
 * run of “” is no word).
 *
 * The hash folds the word's case-folded UTF-8 8 bytes at a time, the last chunk zero-padded
 * (s_step, a bijection of each chunk given the state), and a word longer than 8 bytes its
 * length last; both paths feed it the same bytes, so a word hashes alike whichever path reads
 * it. A word of at most 8 bytes is one step: its bytes (never NUL) determine its length.
 */
#include "labels_words.h"

#include <stdbool.h>
#include <string.h>

#include "ipl_unicode.h"
#include "labels_simd.h"

#define S_HIGH LABELS_SIMD_HIGH
#define S_SEED 0x6c6162656c732d77ull /* "labels-w" */

/* The n (1..8) bytes at p, zero-padded, first byte in the lowest bits; `avail` bytes may be
 * read from p. */
static inline uint64_t s_load(const unsigned char *p, size_t n, size_t avail)
{
    if (avail >= 8) return labels_simd_load8(p) & (~0ull >> (64 - 8 * n));
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
}

/* An ASCII chunk in lower case. */
static inline uint64_t s_fold8(uint64_t c)
{
    return c | (labels_simd_between(c, 'A', 'Z') >> 2);
}

static inline uint64_t s_step(uint64_t h, uint64_t chunk)
{
    h = (h ^ chunk) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

/* The hash of the ASCII word p[0 .. n) (avail bytes readable from p), or false when the word
 * holds a byte >= 0x80 (then *out is unset). */
static bool s_hash_ascii(const unsigned char *p, size_t n, size_t avail, uint64_t *out)
{
    uint64_t h = S_SEED, high = 0;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t c = s_load(p + i, n - i < 8 ? n - i : 8, avail - i);
        high |= c;
        h = s_step(h, s_fold8(c & ~S_HIGH));
    }
    if (high & S_HIGH) return false;
    *out = n > 8 ? s_step(h, n) : h;
    return true;
}

uint32_t labels_words_fold(uint32_t cp)
{
    if (cp < 0x80) return cp - 'A' < 26 ? cp + 32 : cp;
    if (cp < 0x100) return cp >= 0xC0 && cp <= 0xDE && cp != 0xD7 ? cp + 32 : cp;
    if (cp < 0x180) { /* Latin Extended-A: pairs, the upper case first */
        if (cp == 0x130) return 'i';
        if (cp == 0x178) return 0xFF;
        if (cp <= 0x137 || (cp >= 0x14A && cp <= 0x177)) return cp | 1;
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E))
            return cp & 1 ? cp + 1 : cp;
        return cp;
    }
    if (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2) return cp + 0x20; /* Greek */
    if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;                /* Cyrillic Ѐ..Џ */
    if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;                /* А..Я */
    if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF)) return cp | 1; /* Ґ.. */
    if (cp == 0x1E9E) return 0xDF;
    return cp;
}

static bool s_is_word_cp(uint32_t cp)
{
    if (cp == IPL_UNICODE_INVALID || cp < 0x80) return true; /* ASCII here is a word byte */
    return ipl_unicode_is_letter(cp) || ipl_unicode_is_number(cp) || (cp >= 0x300 && cp <= 0x36F);
}

/* The next word of the run p[*pos .. end) that holds non-ASCII bytes: its hash into *out and
 * true, or false when the run has no word left. */
static bool s_slow_next(const unsigned char *p, size_t *pos, size_t end, uint64_t *out)
{
    size_t i = *pos, n = 0;
    uint32_t cp;
    while (i < end) { /* skip what is not a word character */
        n = ipl_utf8_next(p + i, end - i, &cp);
        if (s_is_word_cp(cp)) break;
        i += n;
    }
    if (i >= end) {
        *pos = end;
        return false;
    }
    uint64_t h = S_SEED;
    unsigned char chunk[8];
    size_t k = 0, len = 0;
    while (i < end) {
        n = ipl_utf8_next(p + i, end - i, &cp);
        if (!s_is_word_cp(cp)) break;
        unsigned char u[4];
        size_t m = 1;
        if (cp == IPL_UNICODE_INVALID)
            u[0] = p[i];
        else
            m = ipl_utf8_put(labels_words_fold(cp), u);
        for (size_t j = 0; j < m; j++) {
            chunk[k++] = u[j];
            if (k == 8) {
                h = s_step(h, s_load(chunk, 8, 8));
                k = 0;
            }
        }
        len += m;
        i += n;
    }
    if (k) h = s_step(h, s_load(chunk, k, k));
    *pos = i;
    *out = len > 8 ? s_step(h, len) : h;
    return true;
}

void labels_words_init(labels_words_t *it, const char *text, size_t len)
{
    *it = (labels_words_t){.text = (const unsigned char *)text, .len = text ? len : 0};
}

/* Stores the words of the decoded run [start, end) from out[0] (room for max >= 1), the rest
 * left in it->slow_* when out fills up. Returns how many it stored. */
static size_t s_slow_run(labels_words_t *it, size_t start, size_t end, uint64_t *out, size_t max)
{
    it->slow_pos = start, it->slow_end = end;
    size_t k = 0;
    while (k < max && s_slow_next(it->text, &it->slow_pos, it->slow_end, out + k))
        k++;
    return k;
}

/* The words of the run t[start .. end) that is no short ASCII word (a long one, or one to
 * decode), from out[0] (room for max >= 1). Out of line: the hot loop keeps its registers. */
__attribute__((noinline)) static size_t s_other(labels_words_t *it, size_t start, size_t end,
                                                uint64_t *out, size_t max)
{
    if (s_hash_ascii(it->text + start, end - start, it->len - start, out)) return 1;
    return s_slow_run(it, start, end, out, max);
}

size_t labels_words_next(labels_words_t *it, uint64_t *out, size_t max)
{
    size_t n = 0;
    while (n < max && it->slow_pos < it->slow_end &&
           s_slow_next(it->text, &it->slow_pos, it->slow_end, out + n))
        n++;
    if (it->slow_pos < it->slow_end) return n;
    /* The state in locals: the stores to out[] could alias *it as far as the compiler knows. */
    const unsigned char *const t = it->text;
    const size_t len = it->len;
    size_t pos = it->pos, start = it->word_start;
    uint64_t pending = it->pending;
    int in_word = it->in_word;
    while (n < max) {
        /* Transitions alternate: the end of the word in progress, then start, end pairs. */
        while (pending && n < max) {
            size_t at = pos - 64 + (size_t)__builtin_ctzll(pending);
            pending &= pending - 1;
            if (!in_word) {
                start = at, in_word = 1;
                if (!pending) break;
                at = pos - 64 + (size_t)__builtin_ctzll(pending);
                pending &= pending - 1;
            }
            in_word = 0;
            size_t wl = at - start;
            if (wl <= 8 && start + 8 <= len) { /* short ASCII: one load, one step */
                uint64_t c = labels_simd_load8(t + start) & (~0ull >> (64 - 8 * wl));
                if (!(c & S_HIGH)) {
                    out[n++] = s_step(S_SEED, s_fold8(c));
                    continue;
                }
            } else if (wl <= 16 && start + 16 <= len) { /* two loads, three steps */
                uint64_t c0 = labels_simd_load8(t + start);
                uint64_t c1 = labels_simd_load8(t + start + 8) & (~0ull >> (128 - 8 * wl));
                if (!((c0 | c1) & S_HIGH)) {
                    uint64_t h = s_step(s_step(S_SEED, s_fold8(c0)), s_fold8(c1));
                    out[n++] = s_step(h, wl);
                    continue;
                }
            }
            n += s_other(it, start, at, out + n, max - n);
            if (it->slow_pos < it->slow_end) goto out; /* out is full */
        }
        if (n >= max) break;
        if (pos >= len) {
            if (in_word) { /* the text ends inside a word */
                in_word = 0;
                n += s_other(it, start, len, out + n, max - n);
            }
            break;
        }
        uint64_t m = labels_simd_block(t, len, pos, labels_simd_words);
        pending = m ^ ((m << 1) | (uint64_t)in_word);
        pos += 64;
    }
out:
    it->pos = pos, it->word_start = start, it->pending = pending, it->in_word = in_word;
    return n;
}

uint64_t labels_words_hash(const char *word, size_t len)
{
    uint64_t h = 0;
    labels_words_t it;
    labels_words_init(&it, word, len);
    labels_words_next(&it, &h, 1);
    return h;
}
