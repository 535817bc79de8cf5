/*
 * labels_simd — the byte classification the scans of the labels library share: 64 bytes at a
 * time to a bit mask (bit i for byte i), so that a scan branches per hit, not per byte.
 *
 * SSE2 (every x86-64) when the compiler has it, 8-byte SWAR arithmetic elsewhere; both give
 * the same masks. Header-only (static inline): the scans inline it into their loops.
 *
 *   uint64_t m = labels_simd_block(text, len, pos, labels_simd_words);
 *   for (; m; m &= m - 1) ... byte pos + ctz(m) ...
 */
#ifndef LABELS_SIMD_H
#define LABELS_SIMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define LABELS_SIMD_ONES 0x0101010101010101ull
#define LABELS_SIMD_HIGH 0x8080808080808080ull

/* The 8 bytes at p, first byte in the lowest bits. */
static inline uint64_t labels_simd_load8(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* High bit of each byte of x (all < 0x80) that lies in [lo, hi]: no carry crosses a byte. */
static inline uint64_t labels_simd_between(uint64_t x, unsigned lo, unsigned hi)
{
    return (x + LABELS_SIMD_ONES * (0x80 - lo)) & ~(x + LABELS_SIMD_ONES * (0x7f - hi)) &
           LABELS_SIMD_HIGH;
}

/* The high bits of 8 bytes gathered into the low 8 bits. */
static inline uint64_t labels_simd_gather(uint64_t high)
{
    return ((high >> 7) * 0x0102040810204080ull) >> 56;
}

/* Bytes that may belong to a word: ASCII letters, digits, '_', and every byte >= 0x80. */
static inline uint64_t labels_simd_words(const unsigned char *p)
{
    uint64_t mask = 0;
#if defined(__SSE2__)
    const __m128i x20 = _mm_set1_epi8(0x20), a = _mm_set1_epi8('a' - 1), z = _mm_set1_epi8('z' + 1);
    const __m128i d0 = _mm_set1_epi8('0' - 1), d9 = _mm_set1_epi8('9' + 1), us = _mm_set1_epi8('_');
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
        __m128i f = _mm_or_si128(v, x20); /* bytes >= 0x80 stay negative: no letter */
        __m128i w = _mm_and_si128(_mm_cmpgt_epi8(f, a), _mm_cmplt_epi8(f, z));
        w = _mm_or_si128(w, _mm_and_si128(_mm_cmpgt_epi8(v, d0), _mm_cmplt_epi8(v, d9)));
        w = _mm_or_si128(w, _mm_cmpeq_epi8(v, us));
        uint32_t m = (uint32_t)_mm_movemask_epi8(w) | (uint32_t)_mm_movemask_epi8(v);
        mask |= (uint64_t)m << (16 * k);
    }
#else
    for (int k = 0; k < 8; k++) {
        uint64_t w = labels_simd_load8(p + 8 * k), x = w & ~LABELS_SIMD_HIGH;
        uint64_t m = labels_simd_between(x | LABELS_SIMD_ONES * 0x20, 'a', 'z') |
                     labels_simd_between(x, '0', '9') | labels_simd_between(x, '_', '_');
        mask |= labels_simd_gather((m & ~w) | (w & LABELS_SIMD_HIGH)) << (8 * k);
    }
#endif
    return mask;
}

/* Bytes where a personal-data detector may begin: digits and '@'. */
static inline uint64_t labels_simd_digits_at(const unsigned char *p)
{
    uint64_t mask = 0;
#if defined(__SSE2__)
    const __m128i d0 = _mm_set1_epi8('0' - 1), d9 = _mm_set1_epi8('9' + 1), at = _mm_set1_epi8('@');
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
        __m128i w = _mm_and_si128(_mm_cmpgt_epi8(v, d0), _mm_cmplt_epi8(v, d9));
        w = _mm_or_si128(w, _mm_cmpeq_epi8(v, at));
        mask |= (uint64_t)(uint32_t)_mm_movemask_epi8(w) << (16 * k);
    }
#else
    for (int k = 0; k < 8; k++) {
        uint64_t w = labels_simd_load8(p + 8 * k), x = w & ~LABELS_SIMD_HIGH;
        uint64_t m = labels_simd_between(x, '0', '9') | labels_simd_between(x, '@', '@');
        mask |= labels_simd_gather(m & ~w) << (8 * k);
    }
#endif
    return mask;
}

/* The mask `fn` gives for text[pos .. pos + 64), the bytes past len read as NUL (which no
 * mask has). */
static inline uint64_t labels_simd_block(const unsigned char *text, size_t len, size_t pos,
                                         uint64_t (*fn)(const unsigned char *))
{
    if (len - pos >= 64) return fn(text + pos);
    unsigned char tail[64] = {0};
    memcpy(tail, text + pos, len - pos);
    return fn(tail);
}

#endif
